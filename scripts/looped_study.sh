#!/usr/bin/env bash
# The looped learning-rate transfer study (notebook 05; its grid and estimator: rrlib/studies/looped_study.py):
# scaled, scaled_loops and review at N = 1, 2, 4, 8, seven learning rates √2 apart per cell, five seeds,
# under outputs/looped_grid/lr<lr>/. Runs JOBS sweeps at a time (default 2), each on one thread, seed-major;
# then asks the study again for the cells whose optimum sits on a grid edge and runs their extension, until no
# cell asks for more. Finished runs are skipped, so a second call resumes. Extra arguments go to every sweep.
#   JOBS=2 bash scripts/looped_study.sh
# DESIGN=power trains the powered design instead (looped_study.POWER: scaled and scaled_loops, 1,000 steps, five
# rates per cell, eight seeds, under outputs/looped_power/); SEEDS=0,1,2,3 is its pilot.
# Run it from a checkout of one commit for the whole study (e.g. a `git worktree` at that commit), so every run
# records the same clean commit; copy its outputs/looped_grid into the main checkout to commit the results.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/jobs.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
DESIGN=${DESIGN:-grid}
SEEDS=${SEEDS:-}
previous=""
while :; do
  lines=$(python3 -m rrlib.studies.looped_study --design "$DESIGN" ${SEEDS:+--seeds "$SEEDS"}) || exit 1
  [ "$lines" = "$previous" ] && break
  echo "$lines" | bash scripts/run_sweeps.sh --device cpu "$@" || exit 1  # the failed sweeps' logs say why
  previous=$lines
done
echo "looped study ($DESIGN): every cell of the grid and its extension is done (seeds: ${SEEDS:-as designed})"
