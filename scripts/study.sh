#!/usr/bin/env bash
# The report's evidence (issue 8): the depth ablation (sizes depth2..depth24) and the CPU-scale study
# (micro, mini, midi), every size's sweep in its own process, JOBS at a time. Finished runs are skipped, so
# a second call resumes. Extra arguments go to every sweep (e.g. --device cuda --precision fp32).
#   JOBS=2 bash scripts/study.sh --device cpu
set -uo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"depth24 depth20 depth16 midi depth12 mini depth8 micro depth4 depth2"}
for size in $SIZES; do echo "$size --size $size"; done | bash scripts/run_sweeps.sh "$@"
