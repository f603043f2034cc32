#!/usr/bin/env bash
# Installs what rrlib, its notebooks and its tests need into the environment scripts/py runs: the one already in
# use (an activated virtualenv or conda env), else the project's own .venv/, made here from the system's python3,
# which is never installed into. Idempotent: a second run installs nothing new.
#   bash scripts/setup.sh            Python packages (pinned in requirements.txt) and rrlib itself (editable);
#                                    on a machine without an NVIDIA GPU, torch's CPU build from PyTorch's CPU
#                                    index (about 0.2 GB, where PyPI's torch pulls 2.7 GB of CUDA wheels)
#   bash scripts/setup.sh --browser  also Debian's Chromium, for the test that opens the report in a browser
set -euo pipefail
cd "$(dirname "$0")/.."
CPU_INDEX="https://download.pytorch.org/whl/cpu"
python="$(bash scripts/py --which)"
if [[ "$python" == "$PWD/.venv/bin/python" && ! -x "$python" ]]; then
  echo "setup: making the project's virtual environment .venv/"
  # the project's own; where venv fails half-way, the folder it leaves has no pip and is removed
  if ! said=$(python3 -m venv .venv 2>&1); then
    rm -rf .venv
    # Debian and Ubuntu ship venv's pip bootstrap (ensurepip) apart from python3, in the package python3-venv
    if [[ "$said" != *ensurepip* ]]; then
      echo "$said" >&2
      exit 1
    elif [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
      echo "setup: python3 needs the package python3-venv to make a virtual environment; install it (sudo apt-get install python3-venv) and run this again" >&2
      exit 1
    fi
    echo "setup: installing python3-venv with apt-get, which python3 needs to make a virtual environment"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv .venv || { rm -rf .venv; exit 1; }
  fi
  echo "setup: made the project's virtual environment .venv/ with $(python3 --version)"
fi
prefix="$("$python" -c 'import sys; print(sys.prefix)')"
# pip's own lines for what it fetches and installs, without its "already satisfied" ones (pip's errors: stderr)
said() { { grep --line-buffered -E '^(Collecting|Installing collected packages)' || true; } | sed -u 's/^/setup:   /'; }
torch_pin="$(grep -E '^torch==' requirements.txt || true)"
if [[ -n "$torch_pin" ]] && ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  # PyPI's torch for Linux is the CUDA build; the CPU build of the same release is PyTorch's own index's "+cpu"
  echo "setup: no NVIDIA GPU here: installing torch's CPU build (${torch_pin}+cpu, from $CPU_INDEX)"
  "$python" -m pip install "${torch_pin}+cpu" --extra-index-url "$CPU_INDEX" | said
fi
echo "setup: installing requirements.txt (torch, the report's packages) into $prefix; the first time, a few minutes"
"$python" -m pip install -r requirements.txt | said
echo "setup: installed requirements.txt into $prefix"
# rrlib itself, editable, unless this checkout is installed so already (pip would install it again every time);
# -I: read what is installed, not the build's egg-info in this folder
name="$(sed -n 's/^name = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"
if "$python" -I -c '
import json, sys
from importlib import metadata
try:
    url = json.loads(metadata.distribution(sys.argv[1]).read_text("direct_url.json") or "{}")
except metadata.PackageNotFoundError:
    url = {}
sys.exit(0 if url.get("dir_info", {}).get("editable") and url.get("url") == "file://" + sys.argv[2] else 1)
' "$name" "$PWD"; then
  echo "setup: $name is installed from this checkout already (editable)"
else
  echo "setup: installing $name from this checkout (editable)"
  "$python" -m pip install --no-deps -e . | said
fi
# The report's notebooks run on the kernel "python3". It is registered inside this environment (--sys-prefix),
# never in the user's own kernel folder, where it would replace the python3 kernel of every other environment.
echo "setup: registering the Jupyter kernel python3"
"$python" -m ipykernel install --sys-prefix --name python3 >/dev/null
echo "setup: registered the Jupyter kernel python3 inside that environment (nothing outside it was changed)"
if [[ "${1:-}" == "--browser" ]] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Chromium with apt-get, for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: no apt-get here; install Chromium yourself for the browser test (it is skipped without it)" >&2
  fi
fi
