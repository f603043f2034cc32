"""Rows for the family's claims that a paired comparison of runs answers: a method's gain over the standard residual
at the family page's size (its Holm p from page 05's table, its interval from the runs), Block AttnRes keeping
AttnRes's gain, a method beating every one of several baselines (the largest p decides), one comparison read off a
powered design or the runs, and the conversion into Delta AttnRes judged on the paper's default recipe."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rrlib.report import ledger, verdict


def _row(claim, *args, **kwargs) -> dict:
    return ledger.row(claim.paper, claim.label, *args, **kwargs)


def paired(runs: pd.DataFrame, variant: str, baselines, alpha: float = 0.05) -> pd.DataFrame:
    """baseline − variant per baseline, paired by seed, Holm over the baselines: the compare engine's one method
    (rrlib.report.verdict.compare_pairs, which ``python -m rrlib compare`` runs too), indexed by baseline."""
    return verdict.compare_pairs(runs, [variant], list(baselines), alpha=alpha).set_index("baseline")


def interval(runs: pd.DataFrame, variant: str, alpha: float = 0.05) -> tuple[float, float]:
    """standard − variant's paired interval from the runs (page 05's table gives the Holm p); NaNs without runs."""
    if not len(runs) or not {variant, "standard"} <= set(runs["variant"]):
        return np.nan, np.nan
    test = paired(runs, variant, ["standard"], alpha).loc["standard"]
    return test["ci_low"], test["ci_high"]


def gain_over_standard(claim, variant: str, summary: pd.DataFrame, runs: pd.DataFrame, size: str, evidence: str,
                       wide: pd.DataFrame | None = None, wide_size: str = "", alpha: float = 0.05) -> dict:
    """``variant`` beats the standard residual: standard − variant at ``size`` from page 05's summary (Holm over
    the family), the interval from the runs, and the same gap at the wider size beside it."""
    if variant not in set(summary["variant"]):
        return _row(claim, "", ledger.untested(f"no {size} runs of {variant}"), "")
    r = summary.set_index("variant").loc[variant]
    also = ""
    if wide is not None and variant in set(wide["variant"]):
        w = wide.set_index("variant").loc[variant]
        also = f"; at {wide_size} {w['gap vs standard']:+.4f}, Holm p {w['p (Holm)']:.2g}"
    return _row(claim,
                f"standard − {variant} at {size}, fixed_loss, Holm over the family: Holm p {r['p (Holm)']:.2g}" + also,
                ledger.judge("directional", r["gap vs standard"], r["p (Holm)"], alpha=alpha), evidence,
                r["gap vs standard"], *interval(runs, variant, alpha), r["p (Holm)"],
                f"Holm over the family's {len(summary) - 1} comparisons with standard (page 05)",
                detectable=r["detectable gap"])


def block_keeps_gain(claim, summary: pd.DataFrame, runs: pd.DataFrame, size: str, evidence: str,
                     alpha: float = 0.05) -> dict:
    """A gain can only be kept where there is one: the row's verdict is AttnRes's own gain's, Block's beside it."""
    by = summary.set_index("variant")
    full, block = by.loc["attnres"], by.loc["attnres_block"]
    speed = (f"; speed vs standard (bench) {full['tokens/s vs standard']:.2f} full, "
             f"{block['tokens/s vs standard']:.2f} block" if np.isfinite(full["tokens/s vs standard"]) else "")
    return _row(claim,
                f"AttnRes's own gain over standard at {size} (standard − attnres, Holm over the family): "
                f"{full['gap vs standard']:+.4f}, Holm p {full['p (Holm)']:.2g}; "
                f"Block's {block['gap vs standard']:+.4f}" + speed,
                ledger.judge("directional", full["gap vs standard"], full["p (Holm)"], alpha=alpha), evidence,
                full["gap vs standard"], *interval(runs, "attnres", alpha), full["p (Holm)"],
                f"Holm over the family's {len(summary) - 1} comparisons with standard (page 05)",
                detectable=full["detectable gap"])


def beats_all(claim, tests: pd.DataFrame, variant: str, where: str, evidence: str, alpha: float = 0.05) -> dict:
    """``variant`` beats every baseline of ``tests`` (compare_pairs' rows by baseline): the comparison with the
    largest p decides, with its own gap and interval, against the paper's stated effect."""
    effect, low, high, p = ledger.intersection(tests["gap"].to_numpy(), tests["ci_low"].to_numpy(),
                                               tests["ci_high"].to_numpy(), tests["p"].to_numpy())
    binding = tests.iloc[ledger.binding(tests["p"])]
    return _row(claim,
                f"{where}, fixed_loss, paired over {int(tests['seeds'].min())} seeds: " + "; ".join(
                    f"{b} − {variant} {r.gap:+.4f} (p {r.p:.2g})" for b, r in tests.iterrows())
                + "; the comparison with the larger p",
                ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p,
                ledger.NO_CORRECTION, claim.stated_effect, binding["detectable"])


def one_comparison(claim, test: pd.Series, text: str, evidence: str, alpha: float = 0.05) -> dict:
    """One paired comparison (a compare_pairs row) decides the claim."""
    return _row(claim, text, ledger.judge("directional", test["gap"], test["p"], alpha=alpha), evidence, test["gap"],
                test["ci_low"], test["ci_high"], test["p"], "none: one comparison", detectable=test["detectable"])


def conversion(claim, arm_tests: dict, steps_of: str, conversions: pd.DataFrame, margin: float, evidence: str,
               alpha: float = 0.05) -> dict:
    """Continued − converted by each recipe (``arm_tests``: compare_pairs rows by recipe name, the paper's default
    first); the default decides, the identity-gated form is shown beside it."""
    default = next(iter(arm_tests))
    t = arm_tests[default]
    opened = (f"; the identity gates opened to a mean |g| of {conversions['gate_abs_mean_trained'].mean():.3g}"
              if len(conversions) else "")
    return _row(claim,
                f"continued standard − converted delta_attnres_block, fixed_loss after {steps_of}'s steps again, "
                f"{int(t['seeds'])} seeds paired: " + "; ".join(
                    f"{name} {r['gap']:+.4f} (p {r['p']:.2g}, TOST p ±{margin} {r['p_equivalent']:.2g})"
                    for name, r in arm_tests.items())
                + f"; the row's numbers are the paper's default recipe ({default})" + opened,
                ledger.judge("directional", t["gap"], t["p"], alpha=alpha), evidence, t["gap"], t["ci_low"],
                t["ci_high"], t["p"], "none: one comparison (the paper's default recipe)", detectable=t["detectable"])
