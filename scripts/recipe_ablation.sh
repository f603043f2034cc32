#!/usr/bin/env bash
# Notebook 04's recipe ablation: `mini` under rrlib's recipe and `mini_paper` under the paper's (Highway gate
# N(0, 0.02), weight decay on every tensor, its held-out cut and EOS handling), the same data, steps and 5 seeds,
# in outputs/recipe. Seed-major, so a run stopped part-way leaves both recipes at fewer seeds. Finished runs
# are skipped, so a second call resumes. Extra arguments go to every sweep.
#   OMP_NUM_THREADS=1 JOBS=2 bash scripts/recipe_ablation.sh --device cpu
set -uo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS-"0 1 2 3 4"}
for seed in $SEEDS; do
  for size in mini_paper mini; do echo "recipe-$size-seed$seed --size $size --seeds $seed --out outputs/recipe"; done
done | bash scripts/run_sweeps.sh "$@"
