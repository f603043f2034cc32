"""The powered looped study (page 05; rrlib.studies.looped_study.POWER: 1,000 steps, the two scalings, seeds fixed by
its pilot), read from its run folders: outputs/looped_power/lr<lr>/looped<N>/<rule>/seed<k>.

Nothing is read before the design allows it: the pilot's design once its seeds (looped_study.POWER_PILOT_SEEDS) have
finished every cell of the grid they call for by themselves, the verdicts once every seed of the design has finished
its whole grid (extensions included). Until then ``pilot`` and ``reading`` return None and ``progress`` says how far
the study is.

``pilot`` is the design the pilot fixes, one row per estimator (looped_study.pilot_design):

    estimator               parabola (primary) or grid
    effect, ci_low, ci_high, p, mde, n, sd   the pilot's contrast, 1/N's slope − 1/√N's per doubling of N, paired
    seeds_needed, target    the seeds at which that SD detects ``target`` (80 % power, α 0.05)
    pilot_cpu_hours, cpu_hours_per_seed, design_seeds, design_cpu_hours   its cost, and the design it fixes

``reading`` is the stated estimator on the design's seeds, a ``rrlib.results.looped.LoopedReading`` (optima,
transfer, trainability, contrast; the contrast is the design's question). ``regime`` (a ``Regime``) is what the runs
trained and whether their held-out loss still fell at the end.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..home import project_path
from ..runs.config import run_folder
from ..studies import looped_study, power_study
from . import result
from .looped import PRIMARY, LoopedReading, cell_optima, train_stream, with_stalls

OUT_ROOT = looped_study.POWER.out_root


@dataclass
class PowerProgress:
    """How far the powered design is."""
    finished: int  # finished runs
    total: int  # runs of the grid the design asks for now, at its seeds
    whole_seeds: list  # the seeds that finished every cell under both rules
    grown: list  # (rule, N, rates in the pilot's own grid, rates now): cells later seeds' extensions grew
    pilot_done: bool  # the pilot's seeds finished the grid they call for
    done: bool  # every seed of the design finished


@dataclass
class Regime:
    """What the design's runs trained, and whether their held-out loss still fell over their last steps."""
    runs: int
    steps: int
    tokens: int  # per run
    tokens_per_param: tuple  # each rule's, smallest and largest
    passes: float  # over the train stream
    cpu_hours: float  # the sum of the runs' training minutes
    stalled: int  # runs at the unigram level
    late_steps: int  # power_study.LATE_STEPS
    falling: int  # runs whose held-out loss fell over the last ``late_steps`` steps
    measured: int  # runs that evaluated often enough to tell
    fall_min: float
    fall_max: float


def _design(design: str) -> looped_study.Design:
    return looped_study.DESIGNS[design]


def _roots(root=OUT_ROOT, *args, **kwargs):
    return [project_path(root)]


@result(_roots)
def design_runs(root: str = OUT_ROOT, design: str = "power", metric: str = PRIMARY) -> pd.DataFrame:
    """The design's finished runs, with ``lr``, ``loops`` and ``stalled`` (rrlib.results.looped.with_stalls)."""
    d = _design(design)
    runs = looped_study.study_runs(root, d.count_setting)
    runs = runs[runs["status"] == "finished"].reset_index(drop=True) if len(runs) else runs
    return with_stalls(runs, train_stream(f"{d.size_prefix}{d.counts[0]}", d.rules[0]), metric)


def _pilot_runs(runs: pd.DataFrame, d: looped_study.Design):
    """The pilot as it stood when it fixed the design: its seeds on the grid they call for by themselves (an
    extension that later seeds call for runs for the pilot's seeds too, but does not move what the pilot fixed)."""
    seeds = list(looped_study.POWER_PILOT_SEEDS)
    grid, pilot_runs = looped_study.seeds_own_grid(runs, seeds, d)
    whole = looped_study.complete_seeds(pilot_runs, grid, seeds)
    return grid, pilot_runs, all(whole.get(rule) == seeds for rule in d.rules)


@result(_roots)
def progress(root: str = OUT_ROOT, design: str = "power", metric: str = PRIMARY) -> PowerProgress:
    """How far the design under ``root`` is (a ``PowerProgress``)."""
    d = _design(design)
    runs = design_runs(root, design, metric)
    grid = looped_study.design_grid(runs, d)
    under = looped_study.complete_seeds(runs, grid, d.seeds)
    whole = [s for s in d.seeds if all(s in under.get(rule, []) for rule in d.rules)]
    pilot_grid, _, pilot_done = _pilot_runs(runs, d)
    grown = [(rule, n, len(pilot_grid[(rule, n)]), len(rates)) for (rule, n), rates in grid.items()
             if len(rates) > len(pilot_grid[(rule, n)])]
    return PowerProgress(len(runs), looped_study.grid_runs(grid, d.seeds), whole, grown, pilot_done,
                         set(d.seeds) <= set(whole) and len(runs) > 0)


@result(_roots)
def pilot(root: str = OUT_ROOT, design: str = "power", metric: str = PRIMARY) -> pd.DataFrame | None:
    """The design the pilot fixes (the module's docstring names the columns), or None until the pilot has finished."""
    d = _design(design)
    _, pilot_runs, done = _pilot_runs(design_runs(root, design, metric), d)
    if not done:
        return None
    return looped_study.pilot_design(looped_study.readings(pilot_runs, metric)["contrast"], pilot_runs,
                                     len(looped_study.POWER_PILOT_SEEDS), d)


def _finished(root: str, design: str, metric: str) -> pd.DataFrame | None:
    """The runs of the design's seeds once every one of them has finished its grid, else None."""
    if not progress(root, design, metric).done:
        return None
    runs = design_runs(root, design, metric)
    return runs[runs["seed"].isin(_design(design).seeds)].reset_index(drop=True)


@result(_roots)
def reading(root: str = OUT_ROOT, design: str = "power", metric: str = PRIMARY) -> LoopedReading | None:
    """The stated estimator on the design's seeds (a ``LoopedReading``; its transfer with stalled runs and without),
    or None until every seed of the design has finished."""
    runs = _finished(root, design, metric)
    if runs is None:
        return None
    tables = looped_study.readings(runs, metric)
    return LoopedReading(tables["optima"], tables["transfer"], tables["trainability"], tables["contrast"],
                         cell_optima(tables["optima"]))


@result(_roots)
def regime(root: str = OUT_ROOT, design: str = "power", metric: str = PRIMARY) -> Regime | None:
    """What the design's runs trained (power_study.regime) and how far each one's held-out loss fell over its last
    power_study.LATE_STEPS steps (power_study.late_fall), or None until every seed of the design has finished."""
    runs = _finished(root, design, metric)
    if runs is None:
        return None
    d = _design(design)
    falls = pd.Series([power_study.late_fall(run_folder(f"{root}/lr{r.lr:g}", r.size, r.variant, r.seed))
                       for r in runs.itertuples()], dtype=float)
    shape = power_study.regime(runs, train_stream(f"{d.size_prefix}{d.counts[0]}", d.rules[0]).tokens)
    return Regime(shape["runs"], shape["steps"], shape["tokens"], shape["tokens_per_param"], shape["passes"],
                  shape["cpu_hours"], int(runs["stalled"].sum()), power_study.LATE_STEPS, int((falls > 0).sum()),
                  int(falls.notna().sum()), float(falls.min()), float(falls.max()))
