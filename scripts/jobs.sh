# Sourced by the study scripts: JOBS, how many processes run side by side (default 2), checked once. Anything but
# a positive whole number is one sentence and exit status 2 before any work: JOBS=0 would wait forever for a free
# slot, and a word would start every sweep at once.
JOBS=${JOBS:-2}
case "$JOBS" in
  '' | *[!0-9]* | 0*)
    echo "error: JOBS=$JOBS is not a positive whole number; set JOBS to how many processes run side by side, e.g. JOBS=2" >&2
    exit 2 ;;
esac
export JOBS
