#!/usr/bin/env bash
# Notebook 07's own runs (rrlib.studies.claims_study), one part per call (PART, default `family`):
#   family      the family at SIZE (default `family`) retrained with its weights kept under outputs/claims,
#               Review's two gate halves beside it, then the probe files the page reads;
#   depth       standard, attnres, delta_attnres and mgr at 8, 16 and 24 blocks, probed (the mechanism rows);
#   conversion  the Delta AttnRes paper's fine-tuning recipe: standard pretrained, then continued and converted
#               (outputs/convert, outputs/convert_gated).
# One run at a time, one thread (the machine is shared); finished runs are skipped, so a second call resumes.
# The log goes to outputs/logs/claims-<part>.log.
#   bash scripts/claims_study.sh            # PART=depth bash scripts/claims_study.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PART=${PART:-family}
SIZE=${SIZE:-family}
case " family depth conversion " in  # rrlib.studies.claims_study.PARTS; a test keeps the two the same
  *" $PART "*) ;;
  *) echo "error: PART=$PART is not a part of the claims study; valid: family, depth, conversion" >&2; exit 2 ;;
esac
mkdir -p outputs/logs
log="outputs/logs/claims-$PART.log"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} python3 -m rrlib.studies.claims_study --part "$PART" --size "$SIZE" "$@" \
  >> "$log" 2>&1 || { status=$?; echo "error: the claims study's $PART part FAILED (exit $status): $(tail -n 1 "$log")" \
  "($log)" >&2; exit "$status"; }
