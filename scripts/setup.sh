#!/usr/bin/env bash
# Installs what rrlib, its notebooks and its tests need. Idempotent: a second run installs nothing new.
#   bash scripts/setup.sh            Python packages (pinned in requirements.txt) and rrlib itself
#   bash scripts/setup.sh --browser  also Debian's Chromium, for the test that opens the report in a browser
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements.txt
echo "setup: installed requirements.txt into $(python3 -c 'import sys; print(sys.prefix)')"
# The report's notebooks run on the kernel "python3". It is registered inside this environment (--sys-prefix),
# never in the user's own kernel folder, where it would replace the python3 kernel of every other environment.
python3 -m ipykernel install --sys-prefix --name python3 >/dev/null
echo "setup: registered the Jupyter kernel python3 inside that environment (nothing outside it was changed)"
if [[ "${1:-}" == "--browser" ]] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: no apt-get here; install Chromium yourself for the browser test (it is skipped without it)" >&2
  fi
fi
