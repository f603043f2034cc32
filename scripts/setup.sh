#!/usr/bin/env bash
# Installs what rrlib, its notebooks and its tests need. Idempotent: a second run installs nothing new.
#   bash scripts/setup.sh            Python packages (pinned in requirements.txt) and rrlib itself
#   bash scripts/setup.sh --browser  also Debian's Chromium, for the test that opens the report in a browser
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements.txt
python3 -m ipykernel install --user --name python3 >/dev/null
if [[ "${1:-}" == "--browser" ]] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: no apt-get here; install Chromium yourself for the browser test (it is skipped without it)" >&2
  fi
fi
