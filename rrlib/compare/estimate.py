"""What compare says before it trains: the runs it reuses, the runs it trains, and about how long that takes here.

The time is measured, never typed in: for a rule with finished runs in the comparison, the time a step took in them
on this kind of device (the median, evaluations included), since its other runs differ by their seed alone; for the
rest, one step of each model timed once on this machine (rrlib.runs.pace), which a busy machine can put off by a
factor of two or more, and the message says so. On a GPU nothing is estimated before the first steps.
"""
from __future__ import annotations

import numpy as np

from ..runs.config import project_path
from ..runs.device import pick_device
from ..runs.pace import PACE_FILE, estimated_seconds
from ..runs.provenance import device_name


def describe(done, todo, log) -> None:
    """What the call will do, before it trains: reused runs, runs to train, and the time that takes here."""
    log(f"[compare] {len(done)} runs finished already (reused), {len(todo)} to train")
    if not todo:
        return
    by_rule = {}
    for run in todo:
        by_rule.setdefault(run.variant, []).append(run.seed)
    log("[compare] to train: " + "; ".join(f"{v} seeds {', '.join(map(str, s))}" for v, s in by_rule.items()))
    device = pick_device(todo[0].train.device)
    if device.type != "cpu":
        log(f"[compare] on {device}: no estimate is made before the first steps (the progress bar gives one)")
        return
    measured = measured_step_seconds(done, device_name(device))
    seconds = sum(run.train.steps * measured[run.variant] for run in todo if run.variant in measured)
    timed = [run for run in todo if run.variant not in measured]
    how = []
    if len(timed) < len(todo):
        how.append(f"{', '.join(v for v in by_rule if v in measured)} at the time a step took in its finished runs "
                   f"here, evaluations included")
    if timed:
        seconds += estimated_seconds(timed)
        store = project_path(todo[0].data.cache_dir) / PACE_FILE
        how.append(f"{'the rest' if how else 'each model'} at one step timed once on this machine and kept in "
                   f"{store} (delete it to time again), evaluations not included: a rough figure, off by a factor "
                   f"of two or more where the machine was busy when the step was timed")
    log(f"[compare] about {duration(seconds)} of training on this CPU: {'; '.join(how)}")


def measured_step_seconds(done, device: str) -> dict[str, float]:
    """Each rule's seconds a step, whole (evaluations and checkpoints included), as its finished runs of this
    comparison took them on this kind of device (the median); a rule with none is left out. The runs of one rule
    differ by their seed alone, so a finished one times the rest better than one step timed beforehand."""
    per_step = {}
    for run, result in done:
        if result.get("status") == "finished" and result.get("device") == device and (result.get("steps") or 0) > 0 \
                and (result.get("minutes") or 0) > 0:
            per_step.setdefault(run.variant, []).append(60 * result["minutes"] / result["steps"])
    return {rule: float(np.median(times)) for rule, times in per_step.items()}


def duration(seconds: float) -> str:
    """'25 s', '6 min', '3.5 h': a time the way one reads it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
