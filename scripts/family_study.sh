#!/usr/bin/env bash
# Notebook 05's family comparison: every method of the family at SIZE (default `family`, micro's width, for a
# CPU; `family_mini` at mini's width) split into JOBS shards of one sweep. Finished runs are skipped, so a second
# call resumes. Extra arguments go to every sweep (e.g. --device cuda --precision fp32). The looped
# learning-rate study is scripts/looped_study.sh.
#   JOBS=2 bash scripts/family_study.sh --device cpu
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/jobs.sh
SIZE=${SIZE:-family}
for k in $(seq 0 $((JOBS - 1))); do echo "$SIZE-$k --size $SIZE --shard $k/$JOBS"; done | bash scripts/run_sweeps.sh "$@"
