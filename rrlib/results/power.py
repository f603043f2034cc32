"""The powered CPU designs' results (pages 04 and 05; their numbers are ``rrlib.studies.power_study``'s): what a
design's pilot fixes (``pilot``), the design's tests by the compare engine (``design_tests``) and its verdict as a
page prints it (``design_verdict``).

A design is read only whole: a verdict at fewer seeds than the design fixed would be optional stopping. Until then
its tests are None, and ``sentence`` or ``lines`` say how many runs have finished.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..runs.config import project_path
from ..stats import verdict
from ..studies.power_study import (PILOT_SEEDS, design_runs, finished_design, pilot_design, pilot_sentence,
                                   reach_sentence, regime_sentence, tests)
from . import result

ROOT = "outputs/power/runs"  # the powered studies' run folders: <size>/<variant>/seed<k>
TARGET = 0.010  # nats: the gap page 04's designs were sized to detect (80 % power, paired; page 05's family: 0.017)


def root_beside(out_root: str) -> str:
    """The powered studies' run folders beside the run folders ``out_root``: ``<out_root>/../power/runs``."""
    return str(Path(out_root).parent / "power" / "runs")


def _design_folder(root: str, size: str, *_, **__):
    """@result's roots: the design's size under its root."""
    return [project_path(root) / size]


@dataclass
class Pilot:
    """What a design's pilot (seeds 0 to ``PILOT_SEEDS`` - 1 of every rule) fixes.

    ``design``, one row per baseline (``rrlib.studies.power_study.pilot_design``, whose docstring says how each is
    found): ``variant``, ``baseline``, ``pilot_seeds``, ``sd`` (the paired SD of the differences on
    ``fixed_loss``), ``detectable_pilot`` (the gap the pilot's seeds detect), ``target``, ``seeds_needed`` (to detect
    the target with 80 % power), ``design_seeds`` and ``design_runs`` (one design for every baseline),
    ``minutes_per_run`` (the pilot's median), ``design_cpu_hours``, ``comparison_cpu_hours`` (this baseline's
    comparison alone), ``budget_cpu_hours``, ``within_budget``, ``budget_seeds`` (the seeds the budget buys),
    ``detectable_in_budget`` (the gap those detect) and ``size``; None until every pilot run has finished.
    ``sentence``: the design in words, or how many of the pilot's runs have finished."""

    size: str
    design: pd.DataFrame | None
    sentence: str


@result(_design_folder)
def pilot(root: str, size: str, variant: str, baselines, target: float = TARGET,
          alpha: float = verdict.ALPHA) -> Pilot:
    """The pilot of the design at ``size`` under ``root``: ``variant`` against each of ``baselines``."""
    rules = [variant, *baselines]
    runs = design_runs(root, size, rules, range(PILOT_SEEDS))
    if len(runs) < len(rules) * PILOT_SEEDS:
        return Pilot(size, None, f"{size}: {len(runs)} of its pilot's {len(rules) * PILOT_SEEDS} runs "
                     f"({', '.join(rules)} at seeds 0-{PILOT_SEEDS - 1}) have finished under {root}; the design it "
                     "fixes follows when all have")
    design = pilot_design(runs, variant, list(baselines), target, alpha=alpha).assign(size=size)
    return Pilot(size, design, pilot_sentence(size, design))


@result(_design_folder)
def design_tests(root: str, size: str, questions: dict, n_seeds: int,
                 alpha: float = verdict.ALPHA) -> pd.DataFrame | None:
    """The design's paired tests by the compare engine, one row per comparison: one compare call per question (a
    variant and the list of its baselines: ``rrlib.studies.power_study.tests``, Holm over the baselines of each) over
    seeds 0 to ``n_seeds`` - 1; None until every run of every rule named has finished. Columns: ``variant``,
    ``baseline``, ``metric`` (``fixed_loss``), ``margin`` (of the TOST), ``alpha``, ``mean_variant``,
    ``mean_baseline``, ``seed_list`` (the seeds, space-separated), ``seeds``, ``gap`` (baseline − variant: > 0
    favours the variant), ``sd`` (of the paired differences), ``ci_low``, ``ci_high``, ``p`` (paired t),
    ``detectable`` (the gap detected with 80 % power at that SD), ``p_equivalent`` (TOST at ±margin), ``p_holm``,
    ``p_equivalent_holm``, ``verdict`` (better, worse, equivalent or inconclusive), page 04's names of three of them
    (``paired_gap`` = gap, ``paired_n`` = seeds, ``mde`` = detectable) and ``size``."""
    runs, _ = finished_design(root, size, _rules(questions), n_seeds)
    if runs is None:
        return None
    return pd.concat([tests(runs, variant, against, size, alpha=alpha) for variant, against in questions.items()],
                     ignore_index=True)


def _rules(questions: dict) -> list[str]:
    return list(dict.fromkeys(rule for variant, against in questions.items() for rule in (variant, *against)))


@dataclass
class Design:
    """A powered design's verdict: ``tests`` (``design_tests``; None until every run has finished) and ``lines``:
    the regime its runs trained in and what they cost, one verdict sentence per comparison and, given the target,
    whether each reached it; or how many runs have finished."""

    size: str
    tests: pd.DataFrame | None
    lines: list[str] = field(default_factory=list)


@result(_design_folder)
def design_verdict(root: str, size: str, questions: dict, n_seeds: int, alpha: float = verdict.ALPHA,
                   target: float | None = None) -> Design:
    """The verdict of the design at ``size`` under ``root`` (``design_tests``) and the lines a page prints about it.
    Its regime reads the train stream's length, so the data must be at hand (``rrlib.runs.data.sources``)."""
    runs, waiting = finished_design(root, size, _rules(questions), n_seeds)
    if runs is None:
        return Design(size, None, [waiting])
    rows = design_tests(root, size, questions, n_seeds, alpha)
    records = rows.to_dict("records")
    reached = [] if target is None else [reach_sentence(row, target) for row in records]
    return Design(size, rows, [regime_sentence(root, size, runs), *(verdict.sentence(row) for row in records),
                               *reached])
