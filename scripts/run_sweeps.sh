#!/usr/bin/env bash
# Runs `python3 -m rrlib sweep` once for each line "<name> <sweep arguments>" read from stdin, JOBS at a time
# (default 2). Each sweep writes its output to $LOGS/<name>.log (default outputs/logs) and one line says when it
# is done or that it FAILED; a failure does not stop the others, and the script's exit status is 1 when any
# failed. This script's own arguments go to every sweep.
#   echo "mini --size mini" | JOBS=2 bash scripts/run_sweeps.sh --device cpu
set -uo pipefail
source "$(dirname "$0")/jobs.sh"
LOGS=${LOGS:-outputs/logs}
mkdir -p "$LOGS"
failed=$(mktemp)
trap 'rm -f "$failed"' EXIT
while read -r name args; do
  [ -n "$name" ] || continue
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  # $args unquoted on purpose: the callers' lines are words without spaces. stdin is not the sweep's: it is
  # the list this loop reads.
  (if python3 -m rrlib sweep $args "$@" > "$LOGS/$name.log" 2>&1 < /dev/null; then
     echo "$(date +%T) $name done"
   else
     echo "$(date +%T) $name FAILED ($LOGS/$name.log)"
     echo "$name" >> "$failed"
   fi) &
done
wait
if [ -s "$failed" ]; then
  echo "$(date +%T) $(wc -l < "$failed") sweep(s) FAILED: $(sort "$failed" | tr '\n' ' ')(each log says why)" >&2
  exit 1
fi
