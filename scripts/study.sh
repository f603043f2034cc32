#!/usr/bin/env bash
# The report's evidence: the depth ablation (sizes depth2..depth24), the CPU-scale study (micro, mini, midi)
# and the size × tokens grid of notebook 06 (micro_steps<S>, mini_steps<S>), every size's sweep in its own
# process, JOBS at a time. Finished runs are skipped, so a second call resumes. Extra arguments go to every sweep (e.g. --device cuda --precision fp32).
#   JOBS=2 bash scripts/study.sh --device cpu
set -uo pipefail
cd "$(dirname "$0")/.."
# The size × tokens grid, longest sweep first; to run it alone on this CPU:
#   SIZES="$(bash scripts/study.sh --print-grid)" OMP_NUM_THREADS=1 JOBS=2 bash scripts/study.sh --device cpu
GRID="mini_steps1200 micro_steps1200 mini_steps300 micro_steps300 mini_steps100 micro_steps100"
if [ "${1:-}" = "--print-grid" ]; then echo "$GRID"; exit 0; fi
SIZES=${SIZES:-"depth24 depth20 depth16 midi depth12 mini depth8 micro depth4 depth2 $GRID"}
for size in $SIZES; do echo "$size --size $size"; done | bash scripts/run_sweeps.sh "$@"
