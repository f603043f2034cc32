"""The powered CPU studies as a page shows them (their numbers are rrlib.studies.power_study's): a pilot's design
as a table and a sentence, and a design's verdict as a table and the lines a page prints.
"""
from __future__ import annotations

import pandas as pd

from ..stats import verdict
from ..studies.power_study import (BUDGET_CPU_HOURS, PILOT_SEEDS, design_runs, finished_design, pilot_design,
                                   pilot_sentence, reach_sentence, regime_sentence, tests)
from . import tables


def pilot(root: str, size: str, variant: str, baselines, target: float, name: str, figures_dir=None,
          alpha: float = verdict.ALPHA):
    """A design's pilot as a page shows it: ``pilot_design`` as the table ``name`` and ``pilot_sentence``, once
    all its runs (seeds 0 to ``PILOT_SEEDS`` - 1 of the variant and its baselines) have finished, else how many
    have. Returns the table (or None) and the sentence."""
    rules = [variant, *baselines]
    runs = design_runs(root, size, rules, range(PILOT_SEEDS))
    if len(runs) < len(rules) * PILOT_SEEDS:
        return None, (f"{size}: {len(runs)} of its pilot's {len(rules) * PILOT_SEEDS} runs ({', '.join(rules)} at "
                      f"seeds 0-{PILOT_SEEDS - 1}) have finished under {root}; the design it fixes follows when all have")
    design = pilot_design(runs, variant, baselines, target, alpha=alpha).assign(size=size)
    shown = tables.reader_table(
        design.set_index(["variant", "baseline"]), name, figures_dir,
        columns=["pilot_seeds", "sd", "detectable_pilot", "seeds_needed", "comparison_cpu_hours", "design_seeds",
                 "design_cpu_hours", "budget_seeds", "detectable_in_budget"],
        formats={"sd": "{:.4f}", "detectable_pilot": "{:.4f}", "comparison_cpu_hours": "{:.1f}",
                 "design_cpu_hours": "{:.1f}", "detectable_in_budget": "{:.4f}"},
        rename={"pilot_seeds": "pilot seeds", "sd": "paired SD", "detectable_pilot": "detectable at the pilot",
                "seeds_needed": f"seeds to detect {target:g}", "comparison_cpu_hours": "CPU-h, this comparison alone",
                "design_seeds": "design's seeds",
                "design_cpu_hours": "design CPU-h", "budget_seeds": f"seeds in {BUDGET_CPU_HOURS:g} CPU-h",
                "detectable_in_budget": "detectable in budget"}, full=design)
    return shown, pilot_sentence(size, design)


def design_verdict(root: str, size: str, questions: dict, n_seeds: int, name: str, figures_dir=None,
                   alpha: float = verdict.ALPHA, target: float | None = None):
    """A design's verdict as a page shows it: one compare call per question (a variant and its baselines, Holm
    within each), read only once every run of the design (seeds 0 to ``n_seeds`` - 1 of every rule the questions
    name) has finished. Returns the tests, their table ``name`` (``shown_tests``) and the lines to print: the
    regime sentence, one verdict sentence per comparison and, given the ``target`` the design was sized for, one
    sentence on whether each comparison reached it (``reach_sentence``); while runs are missing, None, None and how
    many have finished."""
    rules = list(dict.fromkeys(rule for variant, against in questions.items() for rule in (variant, *against)))
    runs, waiting = finished_design(root, size, rules, n_seeds)
    if runs is None:
        return None, None, [waiting]
    rows = pd.concat([tests(runs, variant, against, size, alpha=alpha) for variant, against in questions.items()],
                     ignore_index=True)
    records = rows.to_dict("records")
    reached = [] if target is None else [reach_sentence(row, target) for row in records]
    return (rows, shown_tests(rows, name, figures_dir),
            [regime_sentence(root, size, runs), *(verdict.sentence(row) for row in records), *reached])


def shown_tests(rows: pd.DataFrame, name: str, figures_dir=None):
    """The design's tests as a page shows them (``tables.reader_table``; with ``figures_dir``, all of ``rows`` is
    written as the table ``name``), one line per comparison."""
    margin = float(rows["margin"].iloc[0])
    return tables.reader_table(
        rows.set_index(["variant", "baseline"]), name, figures_dir,
        columns=["mean_baseline", "mean_variant", "gap", "ci_low", "ci_high", "p", "p_holm", "detectable",
                 "p_equivalent_holm", "seeds", "verdict"],
        formats={c: "{:+.4f}" for c in ("gap", "ci_low", "ci_high")} |
        {"mean_baseline": "{:.4f}", "mean_variant": "{:.4f}", "p": "{:.2g}", "p_holm": "{:.2g}", "detectable": "{:.4f}",
         "p_equivalent_holm": "{:.2g}"},
        rename={"mean_baseline": "baseline's loss", "mean_variant": "variant's loss", "gap": "baseline − variant",
                "ci_low": "95 % low", "ci_high": "95 % high", "p": "paired p", "p_holm": "Holm p",
                "detectable": "detectable (80 %)", "p_equivalent_holm": f"TOST Holm p (±{margin:g})"},
        full=rows)
