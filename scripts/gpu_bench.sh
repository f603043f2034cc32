#!/usr/bin/env bash
# The speed benchmark on one GPU: the paper's five sizes, in about BUDGET_S = 540 seconds (one 10-minute call).
#   bash scripts/gpu_bench.sh --stamp     # beforehand, in the checkout: writes BENCH_COMMIT (the commit)
#   bash scripts/gpu_bench.sh OUTDIR
# A host that receives the working tree without .git learns the commit from BENCH_COMMIT (untracked, not
# ignored, so it travels with the tree); the paper's runs travel as outputs/reference/scaling_v8.csv.
# Writes into OUTDIR: gpu_bench.log (everything printed), one <pass>-<size>.json/.md per pass and size (each in
# its own process; a size's rows are written as soon as its steps are timed, before its evaluation is timed, and
# its variants are timed interleaved, so their ratios share the machine's drift), and last sweep.json/.md: the
# paper sweep's device-hours priced once from all measured sizes (rrlib.speed.pricing), one price per precision
# and compile setting, the TF32 eager one labelled as the paper's configuration. Passes, in order:
#   1. eager, bf16: every size, smallest first, x review, highway, standard (at most EAGER_S each);
#   2. eager, tf32 (the paper's precision) at 60m and 1b: the TF32 price, other sizes from their MFU;
#   3. compiled (--compile, per residual step as `train --compile` runs it), bf16, review and standard at 60m
#      and 1b (at most COMPILED_S each);
#   then, while the budget lasts (optional): compiled 150m, 320m, 590m; tf32 150m, 320m, 590m.
# A pass that would get under 30 s is skipped; a size stopped at its limit keeps nothing, the others are kept.
# A dry run without a GPU (tests/test_gpu_path.py runs it):
#   DEVICE=cpu PRECISION=fp32 PRICE_PRECISION=fp32 SIZES=tiny COMPILE_BACKEND=eager bash scripts/gpu_bench.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
if [[ $# -eq 1 && $1 == --stamp ]]; then
  python3 -c 'from rrlib.runs.provenance import git_commit; print(git_commit())' > BENCH_COMMIT && cat BENCH_COMMIT
  exit $?
fi
if [[ $# -ne 1 ]]; then
  echo "usage: bash scripts/gpu_bench.sh OUTDIR, or bash scripts/gpu_bench.sh --stamp" >&2
  exit 2
fi
mkdir -p "$1" && OUT=$(cd "$1" && pwd)
export PYTHONUNBUFFERED=1
# a size's models stay resident together; expandable segments keep the 1b ones from fragmenting memory
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
DEVICE=${DEVICE:-cuda}
PRECISION=${PRECISION:-bf16}
PRICE_PRECISION=${PRICE_PRECISION:-tf32}  # the paper's
BUDGET_S=${BUDGET_S:-540}
COMPILE_BACKEND=${COMPILE_BACKEND:-inductor}
EAGER_S=${EAGER_S:-50}
COMPILED_S=${COMPILED_S:-150}  # a cold inductor compile of review and standard, then the evaluation's graphs
PAPER_CSV=${PAPER_CSV:-outputs/reference/scaling_v8.csv}
read -r -a SIZES <<< "${SIZES:-60m 150m 320m 590m 1b}"
if [[ -n ${MAIN_SIZES:-} ]]; then read -r -a MAIN <<< "$MAIN_SIZES"
elif [[ ${#SIZES[@]} -ge 2 ]]; then MAIN=("${SIZES[0]}" "${SIZES[-1]}"); else MAIN=("${SIZES[@]}"); fi
REST=()
for size in "${SIZES[@]}"; do [[ " ${MAIN[*]} " == *" $size "* ]] || REST+=("$size"); done
LOG="$OUT/gpu_bench.log"
export RRLIB_GIT_COMMIT=${RRLIB_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || cat BENCH_COMMIT 2>/dev/null \
  || echo unknown)}

say() { echo "[gpu_bench $(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$LOG"; }
left() { echo $(( BUDGET_S - SECONDS )); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }

bench() {  # bench NAME TIMEOUT_S PRECISION VARIANTS SIZE [FLAG...]: one size of one pass, in its own process
  local name=$1-$5 limit=$2 precision=$3 variants=$4 size=$5
  shift 5
  if (( limit < 30 )); then
    say "$name: skipped, ${limit}s of the budget left"
    return
  fi
  say "$name: --size $size x $variants on $DEVICE ($precision), at most ${limit}s"
  timeout -k 15 "$limit" python3 -m rrlib bench --size "$size" --variants "$variants" --device "$DEVICE" \
    --precision "$precision" --warmup 3 --steps 10 --paper-csv '' --out "$OUT/$name.json" "$@" 2>&1 \
    | tee -a "$LOG"
  local status=${PIPESTATUS[0]}
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    say "$name: stopped at its time limit; what it had timed is kept"
  elif [[ $status -ne 0 ]]; then
    say "$name: failed with exit status $status (see above)"
  fi
}
compiled() { bench compiled "$(cap "$COMPILED_S")" "$PRECISION" review,standard "$1" --compile \
               --compile-backend "$COMPILE_BACKEND"; }

say "start: commit $RRLIB_GIT_COMMIT, budget ${BUDGET_S}s"
if [[ $DEVICE == cuda* ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
fi
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$LOG"

for size in "${SIZES[@]}"; do bench eager "$(cap "$EAGER_S")" "$PRECISION" review,highway,standard "$size"; done
for size in "${MAIN[@]}"; do
  bench "eager-$PRICE_PRECISION" "$(cap "$EAGER_S")" "$PRICE_PRECISION" review,highway,standard "$size"
done
for size in "${MAIN[@]}"; do compiled "$size"; done
say "the required passes are done; optional passes while the budget lasts"
for size in "${REST[@]}"; do compiled "$size"; done
for size in "${REST[@]}"; do
  bench "eager-$PRICE_PRECISION" "$(cap "$EAGER_S")" "$PRICE_PRECISION" review,highway,standard "$size"
done

for md in "$OUT"/*-*.md; do
  [[ -f $md ]] && { say "$(basename "$md"):"; tee -a "$LOG" < "$md"; }
done
say "the sweep, priced once from every file:"
python3 -m rrlib.speed.pricing "$OUT" --paper-csv "$PAPER_CSV" 2>&1 | tee -a "$LOG"
say "done"
