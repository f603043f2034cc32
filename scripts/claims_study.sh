#!/usr/bin/env bash
# Notebook 07's own runs (rrlib.report.claims_study): the family at SIZE (default `family`) retrained with its
# weights kept under outputs/claims, Review's two gate halves beside it, and the conversion of each seed's trained
# standard into Delta AttnRes under outputs/convert; then the probe files the page reads. One run at a time, one
# thread (the machine is shared); finished runs are skipped, so a second call resumes. The log goes to
# outputs/logs/claims-<size>.log.
#   bash scripts/claims_study.sh            # SIZE=family_mini bash scripts/claims_study.sh on a faster machine
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-family}
mkdir -p outputs/logs
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} python3 -m rrlib.report.claims_study --size "$SIZE" "$@" \
  >> "outputs/logs/claims-$SIZE.log" 2>&1
