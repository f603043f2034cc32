#!/usr/bin/env bash
# The speed benchmark on one GPU: the paper's five sizes, bf16, in about BUDGET_S = 300 seconds.
#   bash scripts/gpu_bench.sh OUTDIR
# Writes into OUTDIR: gpu_bench.log (everything printed) and one <pass>-<size>.json/.md per pass and size,
# each written by its own process as soon as that size is done (a size's variants are timed interleaved, so
# their ratios share the machine's drift), so a stop at any point keeps every size finished before it.
#   1. eager: every size, smallest first, x review, highway, standard: the cheapest complete table, and the
#      paper sweep's GPU-hours at eager speed, which stand even if compiling fails.
#   2. compiled (--compile: per residual step, as `train --compile` runs it), review and standard only, smallest
#      first, until BUDGET_S seconds from the start. Compile time no longer grows with depth (one graph per
#      sublayer kind and rule), and each table reports it apart from the step time (compile_s). The sweep
#      prices a size not reached from the MFU measured at the nearest size that was.
# Needs nothing outside the repository except the paper's runs for the sweep's GPU-hours, PAPER_CSV (default
# ../shared/reference/scaling_v8.csv; skipped, with a message, when missing).
# A dry run without a GPU (tests/test_gpu_path.py runs it):
#   DEVICE=cpu PRECISION=fp32 SIZES=tiny COMPILE_BACKEND=eager bash scripts/gpu_bench.sh OUTDIR
set -uo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: bash scripts/gpu_bench.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" && OUT=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
# a size's models stay resident together; expandable segments keep the 1b ones from fragmenting memory
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
DEVICE=${DEVICE:-cuda}
PRECISION=${PRECISION:-bf16}
BUDGET_S=${BUDGET_S:-300}
COMPILE_BACKEND=${COMPILE_BACKEND:-inductor}
EAGER_S=${EAGER_S:-60}  # per size of the eager pass, so the compiled pass always gets a share of the budget
PAPER_CSV=${PAPER_CSV:-../shared/reference/scaling_v8.csv}
read -r -a EAGER_SIZES <<< "${SIZES:-60m 150m 320m 590m 1b}"
read -r -a COMPILED_SIZES <<< "${SIZES:-60m 150m 320m 590m 1b}"
LOG="$OUT/gpu_bench.log"

say() { echo "[gpu_bench $(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$LOG"; }

bench() {  # bench PASS TIMEOUT_S VARIANTS SIZE [FLAG...]: one size of one pass, in its own process
  local name=$1-$4 limit=$2 variants=$3 size=$4
  shift 4
  if (( limit < 30 )); then
    say "$name: skipped, ${limit}s of the budget left"
    return
  fi
  say "$name: --size $size x $variants on $DEVICE ($PRECISION), at most ${limit}s"
  timeout -k 15 "$limit" python3 -m rrlib bench --size "$size" --variants "$variants" --device "$DEVICE" \
    --precision "$PRECISION" --warmup 3 --steps 10 --paper-csv "$PAPER_CSV" --out "$OUT/$name.json" "$@" 2>&1 \
    | tee -a "$LOG"
  local status=${PIPESTATUS[0]}
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    say "$name: stopped at its time limit; the sizes before it are kept"
  elif [[ $status -ne 0 ]]; then
    say "$name: failed with exit status $status (see above)"
  fi
}
left() { echo $(( BUDGET_S - SECONDS )); }

say "start: commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), budget ${BUDGET_S}s"
if [[ $DEVICE == cuda* ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
fi
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$LOG"

for size in "${EAGER_SIZES[@]}"; do
  bench eager "$(( $(left) < EAGER_S ? $(left) : EAGER_S ))" review,highway,standard "$size"
done
for size in "${COMPILED_SIZES[@]}"; do
  bench compiled "$(left)" review,standard "$size" --compile --compile-backend "$COMPILE_BACKEND"
done

for name in "${EAGER_SIZES[@]/#/eager-}" "${COMPILED_SIZES[@]/#/compiled-}"; do
  if [[ -f "$OUT/$name.md" ]]; then
    say "$name ($OUT/$name.md):"
    tee -a "$LOG" < "$OUT/$name.md"
  fi
done
say "done"
