#!/usr/bin/env bash
# Every claim the CPU can reach (rrlib/studies/depth_reach_study.py and looped_reach_study.py hold the registered
# designs): ReZero's speed and LayerScale over depth (each a pilot, then the design it sizes), ReZero at 24-120
# blocks and Highway at 100-300, the AttnRes and MGR mechanism runs on fresh seeds, the loop norms (a pilot, then
# its design), then the looped L sweep (looped_study's unique_layers design, through scripts/looped_study.sh). The
# controls of rrlib/studies/reach_control_study.py run when STUDIES names them (STUDIES="highway_control ...").
# First it times one training step of every arm at each study's deepest size (step_times.json under the study's
# folder) and prints each design with its arithmetic and cost. One run at a time, one thread; finished runs are
# skipped, so a second call resumes; STUDIES picks some (default: all, in the order above).
#   nohup bash scripts/depth_reach.sh > depth_reach.log 2>&1 &
# Run it from a checkout of one commit (no tracked file edited while it runs), so every run records a clean commit.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} JOBS=1
STUDIES=${STUDIES:-"rezero_speed layerscale_depth rezero_depth highway_depth mechanisms loop_norms unique_layers"}
module_of() {
  case "$1" in
    loop_norms) echo rrlib.studies.looped_reach_study ;;
    highway_control|highway_rates|highway_horizon|rezero_control|rezero_horizon|layerscale_eps|layerscale_rates|\
    layerscale_horizon|attnres_outputs) echo rrlib.studies.reach_control_study ;;
    *) echo rrlib.studies.depth_reach_study ;;
  esac
}
for study in $STUDIES; do
  [ "$study" = unique_layers ] && continue
  [ -f "outputs/$study/step_times.json" ] || python3 -m "$(module_of "$study")" --study "$study" --time || exit 1
done
for study in $STUDIES; do
  echo "$(date +%T) $study"
  if [ "$study" = unique_layers ]; then
    python3 -m rrlib.studies.looped_reach_study --unique-layers
    DESIGN=unique_layers bash scripts/looped_study.sh
    continue
  fi
  module=$(module_of "$study")
  previous=""
  while :; do
    python3 -m "$module" --study "$study" --probe || exit 1
    python3 -m "$module" --study "$study" --design || exit 1
    lines=$(python3 -m "$module" --study "$study" --plan) || exit 1
    [ "$lines" = "$previous" ] && break
    echo "$lines" | bash scripts/run_sweeps.sh || exit 1  # the failed sweeps' logs say why
    previous=$lines
  done
  echo "$(date +%T) $study: every run of its design is done"
done
