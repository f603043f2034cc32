#!/usr/bin/env bash
# The powered CPU studies (issue: designs sized from a pilot): Review against standard and Highway at two widths
# at 17 tokens per parameter (review_power_micro, review_power_mini; at mini the budget holds Review against
# Highway alone, notebook 04 says why), and Delta AttnRes, AttnRes and MGR against
# standard at 4x the family's steps (family_power). Each size is one sweep, JOBS at a time (default 2), each on
# one thread; finished runs are skipped, so a second call resumes. SEEDS picks the seeds (default: the pilot's).
#   SEEDS=0,1,2,3 JOBS=2 bash scripts/power_study.sh
# The designs (notebooks 04 and 05 give their arithmetic from the pilot), through the compare engine, which reuses
# the pilot's runs, each in JOBS shards side by side and then once more for its verdict (outputs/power/<design>);
# run it from a one-commit checkout too, with the pilot's run folders copied in (a log per shard, outputs/logs):
#   JOBS=2 bash scripts/power_study.sh --design
# Run it from a checkout of one commit for the whole study (a `git worktree` at that commit), so every run
# records the same clean commit; copy its outputs/power folder into the main checkout to commit it.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/jobs.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
design() {  # design NAME COMPARE-FLAGS...: JOBS shards of one compare call side by side, then the verdict
  local name=$1 k
  shift
  for (( k = 0; k < JOBS; k++ )); do
    python3 -m rrlib compare --allow-slow "$@" --runs outputs/power/runs --out "outputs/power/$name" \
      --shard "$k/$JOBS" > "outputs/logs/power_${name}_$k.log" 2>&1 &
  done
  wait
  # every shard has finished its runs (where one failed, its log says why, and this call trains what it left)
  python3 -m rrlib compare --allow-slow "$@" --runs outputs/power/runs --out "outputs/power/$name" \
    > "outputs/logs/power_$name.log" 2>&1
}
if [ "${1:-}" = "--design" ]; then
  mkdir -p outputs/logs
  # --allow-slow: a design spans sittings (it resumes), so its whole cost may exceed the one-call CPU guard
  design review_power_micro --size review_power_micro --variants review --against standard,highway --seeds 37 &&
  design family_power_delta --size family_power --variants delta_attnres --against standard,attnres --seeds 47 &&
  design family_power_mgr --size family_power --variants mgr --against standard --seeds 47 &&
  design review_power_mini --size review_power_mini --variants review --against highway --seeds 10
  exit $?
fi
SEEDS=${SEEDS:-0,1,2,3}
SIZES=${SIZES:-"review_power_micro family_power review_power_mini"}
for size in $SIZES; do echo "$size --size $size --seeds $SEEDS"; done | bash scripts/run_sweeps.sh --device cpu --out outputs/power/runs "$@"
