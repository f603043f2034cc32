"""The leaderboard study's design: every rule of the family, old and new, against standard at ``family_power`` with
its 47 seeds, through ``rrlib compare``, reusing the committed runs under outputs/power/runs (standard, attnres,
delta_attnres and mgr have all 47). ``rrlib study plan leaderboard`` prints this plan and ``rrlib study run
leaderboard`` runs it (rrlib.studies.registry); page 08 reads it.

The plan: per rule, the seeds already finished, the runs to train, the CPU-minutes a run takes and the CPU-hours.
Minutes per run: a rule with finished ``family_power`` runs, their median; any other, the median of the committed
standard runs times the rule's step time over standard's (``step_ratios``: ``rrlib study run`` measures it with
``rrlib bench``, page 08 reads it from the committed benchmark files, so the page is built from files alone). Rules are
taken in order, the new ones and Review first, then the rest of the ``family`` preset's; each gets all 47 seeds while
the budget lasts, the first that does not fit gets the seeds the rest of the budget buys (none below 4, a pilot's
seeds), and so on (the plan says at what seeds each rule stands).
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

SIZE, SEEDS, BASELINE = "family_power", 47, "standard"
RUNS, OUT, LOGS = "outputs/power/runs", "outputs/power/leaderboard", "outputs/logs"
NEW_RULES = ("denseformer", "dynamic_dense", "laurel_rw", "laurel_lr", "value_residual")
FIRST = (*NEW_RULES, "review")  # the order: the new rules and Review before the rest
BUDGET_CPU_HOURS = 20.0
MIN_SEEDS = 4  # the fewest seeds a rule is run at (rrlib.studies.power_study's pilot)


def step_ratios(rules: list[str], repeats: int = 10) -> dict[str, float]:
    """Each rule's step time over standard's at ``SIZE`` on this CPU: ``rrlib bench``, every rule in one process,
    ``repeats`` interleaved single steps at one thread, each timed by the thread's CPU time (docs/speed.md; a busy
    machine still moves a ratio by several per cent)."""
    from ..runs.config import project_path

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bench.json"
        subprocess.run([sys.executable, "-m", "rrlib", "bench", "--size", SIZE, "--variants",
                        ",".join([BASELINE, *rules]), "--device", "cpu", "--steps", "1", "--repeats", str(repeats),
                        "--threads", "1", "--out", str(out)], cwd=project_path("."), check=True,
                       stdout=subprocess.DEVNULL)
        return {row["variant"]: row["step_time_vs_standard"] for row in json.loads(out.read_text())["results"]}


def board() -> list[str]:
    """Every rule of the board in the order it is run: ``FIRST``, then the ``family`` preset's other rules."""
    from ..runs.presets import load_preset
    rest = [v for v in load_preset("family").variants if v not in FIRST and v != BASELINE]
    return [*FIRST, *rest]


def finished_seeds(rule: str) -> set[int]:
    from .power_study import design_runs
    return set(design_runs(RUNS, SIZE, [rule], range(SEEDS))["seed"])


def minutes_per_run(step_ratios: Callable[[list[str]], dict[str, float]]) -> dict[str, float]:
    """CPU-minutes one run of each rule takes: its finished runs' median, else the median of standard's times the
    rule's step time over standard's, which ``step_ratios`` gives for the rules without finished runs."""
    from .power_study import design_runs
    runs = design_runs(RUNS, SIZE, [BASELINE, *board()], range(SEEDS))
    measured = runs.groupby("variant")["minutes"].median().to_dict()
    if BASELINE not in measured:
        raise FileNotFoundError(f"no finished {SIZE} {BASELINE} runs under {RUNS}: the board reuses them (copy them "
                                f"in)")
    unmeasured = [rule for rule in board() if rule not in measured]
    ratios = step_ratios(unmeasured) if unmeasured else {}
    return {rule: measured.get(rule) or measured[BASELINE] * ratios[rule] for rule in board()}

def plan(budget: float, minutes: dict[str, float]) -> list[dict]:
    """One row per rule of ``minutes`` (``minutes_per_run``), in its order: seeds finished, the seeds it stands at
    within ``budget`` CPU-hours, the runs to train for them, minutes per run, and the CPU-hours they cost."""
    rows, left = [], budget * 60
    for rule, per_run in minutes.items():
        done = finished_seeds(rule)
        missing = [s for s in range(SEEDS) if s not in done]
        affordable = int(left // per_run) if per_run > 0 else len(missing)
        # the seeds 0..n-1 it stands at: all 47, or as many as the rest of the budget trains
        seeds = SEEDS if affordable >= len(missing) else next(
            n for n in range(SEEDS, -1, -1) if sum(s not in done for s in range(n)) <= affordable)
        if seeds < MIN_SEEDS:  # fewer seeds than a pilot's make no verdict worth a row
            seeds = len(done) if len(done) >= MIN_SEEDS and done == set(range(len(done))) else 0
        train = sum(s not in done for s in range(seeds))
        left -= train * per_run
        rows.append({"rule": rule, "finished": len(done), "seeds": seeds, "to_train": train, "minutes": per_run,
                     "cpu_hours": train * per_run / 60, "all_seeds_cpu_hours": len(missing) * per_run / 60})
    return rows
