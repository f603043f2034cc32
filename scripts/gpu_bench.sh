#!/usr/bin/env bash
# The speed benchmark on one GPU: the paper's five sizes, bf16, in about BUDGET_S = 300 seconds.
#   bash scripts/gpu_bench.sh OUTDIR
# Writes into OUTDIR: gpu_bench.log (everything printed), eager.json/.md and compiled.json/.md. Each JSON and
# markdown file is rewritten after every size, so a pass stopped at its time limit keeps the sizes it finished.
#   1. eager: every size x review, highway, standard. A complete table and the paper sweep's GPU-hours at
#      eager speed, which stand even if compiling fails.
#   2. compiled (--compile: the whole model, as `train --compile` runs it), review and standard only, until
#      BUDGET_S seconds from the start. Compiling the unrolled model takes longer the deeper it is (on a CPU
#      34 s at 8 blocks, 121 s at 24), so not every size fits: 1b goes first (the largest share of the sweep's
#      hours, and the paper's claim), then the others smallest first. The sweep prices a size not reached from
#      the MFU measured at the nearest size that was. Highway's compiled speed is left out to fit one more size.
# Needs nothing outside the repository except the paper's runs for the sweep's GPU-hours, PAPER_CSV (default
# ../shared/reference/scaling_v8.csv; skipped, with a message, when missing).
# A dry run without a GPU: DEVICE=cpu PRECISION=fp32 SIZES=tiny bash scripts/gpu_bench.sh OUTDIR
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
PAPER_CSV=${PAPER_CSV:-../shared/reference/scaling_v8.csv}
read -r -a EAGER_SIZES <<< "${SIZES:-60m 150m 320m 590m 1b}"
read -r -a COMPILED_SIZES <<< "${SIZES:-1b 60m 150m 320m 590m}"
LOG="$OUT/gpu_bench.log"

say() { echo "[gpu_bench $(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$LOG"; }

bench() {  # bench NAME TIMEOUT_S VARIANTS SIZE... [-- FLAG...]: one pass, in one process
  local name=$1 limit=$2 variants=$3
  shift 3
  local args=()
  while [[ $# -gt 0 && $1 != -- ]]; do args+=(--size "$1"); shift; done
  [[ $# -gt 0 ]] && shift
  say "$name: ${args[*]} x $variants on $DEVICE ($PRECISION), at most ${limit}s"
  timeout -k 15 "$limit" python -m rrlib bench "${args[@]}" --variants "$variants" --device "$DEVICE" \
    --precision "$PRECISION" --warmup 3 --steps 10 --paper-csv "$PAPER_CSV" --out "$OUT/$name.json" "$@" 2>&1 \
    | tee -a "$LOG"
  local status=${PIPESTATUS[0]}
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    if [[ -f "$OUT/$name.json" ]]; then
      say "$name: stopped at its time limit; $OUT/$name.json keeps the sizes it finished"
    else
      say "$name: stopped at its time limit before it finished a size"
    fi
  elif [[ $status -ne 0 ]]; then
    say "$name: failed with exit status $status (see above)"
  fi
}

say "start: commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), budget ${BUDGET_S}s"
if [[ $DEVICE == cuda* ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
fi
python -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$LOG"

bench eager 150 review,highway,standard "${EAGER_SIZES[@]}"
bench compiled $(( BUDGET_S - SECONDS > 60 ? BUDGET_S - SECONDS : 60 )) review,standard "${COMPILED_SIZES[@]}" \
  -- --compile

for name in eager compiled; do
  if [[ -f "$OUT/$name.md" ]]; then
    say "$name ($OUT/$name.md):"
    tee -a "$LOG" < "$OUT/$name.md"
  fi
done
say "done"
