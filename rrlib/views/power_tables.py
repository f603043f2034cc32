"""The powered CPU designs as a page shows them (their results are rrlib.results.power's): a pilot's design as a
table and a sentence, and a design's verdict as a table and the lines a page prints.
"""
from __future__ import annotations

import pandas as pd

from ..results import power
from ..stats import verdict
from ..studies.power_study import BUDGET_CPU_HOURS
from . import tables


def pilot(root: str, size: str, variant: str, baselines, target: float, name: str, figures_dir=None,
          alpha: float = verdict.ALPHA):
    """A design's pilot (``rrlib.results.power.pilot``) as a page shows it: its design as the table ``name``
    (``shown_pilot``) and its sentence. Returns the table (None until all its runs have finished) and the sentence."""
    found = power.pilot(root, size, variant, list(baselines), target, alpha)
    return (None if found.design is None else shown_pilot(found.design, name, figures_dir)), found.sentence


def shown_pilot(design: pd.DataFrame, name: str, figures_dir=None):
    """A pilot's design as a page shows it (``tables.reader_table``; with ``figures_dir``, all of ``design`` is
    written as the table ``name``), one line per comparison."""
    target = float(design["target"].iloc[0])
    return tables.reader_table(
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


def design_verdict(root: str, size: str, questions: dict, n_seeds: int, name: str, figures_dir=None,
                   alpha: float = verdict.ALPHA, target: float | None = None):
    """A design's verdict (``rrlib.results.power.design_verdict``) as a page shows it. Returns the tests, their
    table ``name`` (``shown_tests``) and the lines to print; while runs are missing, None, None and how many have
    finished."""
    found = power.design_verdict(root, size, questions, n_seeds, alpha, target)
    if found.tests is None:
        return None, None, found.lines
    return found.tests, shown_tests(found.tests, name, figures_dir), found.lines


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
