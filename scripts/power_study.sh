#!/usr/bin/env bash
# The powered CPU studies (issue: designs sized from a pilot): Review against standard and Highway at two widths
# at 17 tokens per parameter (review_power_micro, review_power_mini), and Delta AttnRes, AttnRes and MGR against
# standard at 4x the family's steps (family_power). Each size is one sweep, JOBS at a time (default 2), each on
# one thread; finished runs are skipped, so a second call resumes. SEEDS picks the seeds (default: the pilot's).
#   SEEDS=0,1,2,3 JOBS=2 bash scripts/power_study.sh
# Run it from a checkout of one commit for the whole study (a `git worktree` at that commit), so every run
# records the same clean commit; copy its outputs/runs/<size> folders into the main checkout to commit them.
set -uo pipefail
cd "$(dirname "$0")/.."
export JOBS=${JOBS:-2} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
SEEDS=${SEEDS:-0,1,2,3}
SIZES=${SIZES:-"review_power_micro family_power review_power_mini"}
for size in $SIZES; do echo "$size --size $size --seeds $SEEDS"; done | bash scripts/run_sweeps.sh --device cpu "$@"
