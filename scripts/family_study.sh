#!/usr/bin/env bash
# Notebook 05's evidence: every method of the family at SIZE (default `family`, micro's width, for a CPU;
# `family_mini` on a GPU) split into JOBS shards, then the looped learning-rate sweep (sizes looped<N> for N in
# LOOPS, seeds in LOOP_SEEDS, lr in LRS; one run-folder root per learning rate, outputs/looped/lr<lr>, where
# the notebook reads them).
# Finished runs are skipped, so a second call resumes. SIZE= (empty) runs only the looped sweep, LRS= only
# the family. Extra arguments go to every sweep (e.g. --device cuda --precision fp32).
#   JOBS=2 bash scripts/family_study.sh --device cpu
set -uo pipefail
cd "$(dirname "$0")/.."
export JOBS=${JOBS:-2}
SIZE=${SIZE-family}
LRS=${LRS-"0.0005 0.001 0.002 0.004 0.008 0.016 0.032 0.064"}
LOOPS=${LOOPS-"8 4 2 1"}
LOOP_SEEDS=${LOOP_SEEDS-"0 1 2"}
{
  if [ -n "$SIZE" ]; then
    for k in $(seq 0 $((JOBS - 1))); do echo "$SIZE-$k --size $SIZE --shard $k/$JOBS"; done
  fi
  # seed-major, so a sweep stopped part-way leaves the whole lr × N grid at fewer seeds, not half of it
  for seed in $LOOP_SEEDS; do
    for lr in $LRS; do
      for n in $LOOPS; do
        echo "looped$n-lr$lr-seed$seed --size looped$n --seeds $seed --lr $lr --out outputs/looped/lr$lr"
      done
    done
  done
} | bash scripts/run_sweeps.sh "$@"
