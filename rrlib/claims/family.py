"""Rows for the family's claims that a paired comparison of runs answers: a method's gain over the standard residual
at the family page's size (its Holm p from the family's summary, rrlib.results.family, its interval from the runs), Block AttnRes keeping
AttnRes's gain, a method beating every one of several baselines (the largest p decides), and one comparison read
off page 05's powered design (``powered``) or the runs."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rrlib.stats import ledger, verdict

from .rows import link, missing, row


def paired(runs: pd.DataFrame, variant: str, baselines, alpha: float = 0.05) -> pd.DataFrame:
    """baseline − variant per baseline, paired by seed, Holm over the baselines: the compare engine's one method
    (rrlib.stats.verdict.compare_pairs, which ``python -m rrlib compare`` runs too), indexed by baseline."""
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
    the family), the interval from the runs, and the same gap at the wider size beside it. Untested while
    ``summary`` (page 05's table) is None."""
    if summary is None:
        return missing(claim, f"05_{size}_summary")
    if variant not in set(summary["variant"]):
        return row(claim, "", ledger.untested(f"no {size} runs of {variant}"), "")
    r = summary.set_index("variant").loc[variant]
    also = ""
    if wide is not None and variant in set(wide["variant"]):
        w = wide.set_index("variant").loc[variant]
        also = f"; at {wide_size} {w['gap']:+.4f}, Holm p {w['p_holm']:.2g}"
    return row(claim,
               f"standard − {variant} at {size}, fixed_loss, Holm over the family: Holm p {r['p_holm']:.2g}" + also,
               ledger.judge("directional", r["gap"], r["p_holm"], alpha=alpha), evidence,
               r["gap"], *interval(runs, variant, alpha), r["p_holm"],
               f"Holm over the family's {len(summary) - 1} comparisons with standard (page 05)",
               detectable=r["detectable"])


def block_keeps_gain(claim, summary: pd.DataFrame, runs: pd.DataFrame, size: str, evidence: str,
                     alpha: float = 0.05) -> dict:
    """A gain can only be kept where there is one: the row's verdict is AttnRes's own gain's, Block's beside it.
    Untested while ``summary`` (page 05's table) is None."""
    if summary is None:
        return missing(claim, f"05_{size}_summary")
    by = summary.set_index("variant")
    if not {"attnres", "attnres_block"} <= set(by.index):
        return row(claim, "", ledger.untested(f"no {size} runs of attnres and attnres_block"), "")
    full, block = by.loc["attnres"], by.loc["attnres_block"]
    speed = (f"; speed vs standard (bench) {full['tokens_per_s_vs_standard']:.2f} full, "
             f"{block['tokens_per_s_vs_standard']:.2f} block" if np.isfinite(full["tokens_per_s_vs_standard"]) else "")
    return row(claim,
               f"AttnRes's own gain over standard at {size} (standard − attnres, Holm over the family): "
               f"{full['gap']:+.4f}, Holm p {full['p_holm']:.2g}; "
               f"Block's {block['gap']:+.4f}" + speed,
               ledger.judge("directional", full["gap"], full["p_holm"], alpha=alpha), evidence,
               full["gap"], *interval(runs, "attnres", alpha), full["p_holm"],
               f"Holm over the family's {len(summary) - 1} comparisons with standard (page 05)",
               detectable=full["detectable"])


def beats_all(claim, tests: pd.DataFrame, variant: str, where: str, evidence: str, alpha: float = 0.05) -> dict:
    """``variant`` beats every baseline of ``tests`` (compare_pairs' rows by baseline): the comparison with the
    largest p decides, with its own gap and interval, against the paper's stated effect."""
    effect, low, high, p = ledger.intersection(tests["gap"].to_numpy(), tests["ci_low"].to_numpy(),
                                               tests["ci_high"].to_numpy(), tests["p"].to_numpy())
    binding = tests.iloc[ledger.binding(tests["p"], tests["gap"])]
    return row(claim,
               f"{where}, fixed_loss, paired over {int(tests['seeds'].min())} seeds: " + "; ".join(
                   f"{b} − {variant} {r.gap:+.4f} (p {r.p:.2g})" for b, r in tests.iterrows())
               + "; the comparison with the larger p",
               ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p,
               ledger.NO_CORRECTION, claim.stated_effect, binding["detectable"])


def one_comparison(claim, test: pd.Series, text: str, evidence: str, alpha: float = 0.05) -> dict:
    """One paired comparison (a compare_pairs row) decides the claim."""
    return row(claim, text, ledger.judge("directional", test["gap"], test["p"], alpha=alpha), evidence, test["gap"],
               test["ci_low"], test["ci_high"], test["p"], "none: one comparison", detectable=test["detectable"])



def powered(power_tests: pd.DataFrame | None, variant: str) -> pd.DataFrame | None:
    """Page 05's powered design's tests of ``variant`` (``power_tests``: its table, None until all its runs have
    finished), under compare_pairs' names and indexed by baseline; None where it has none."""
    if power_tests is None:
        return None
    part = power_tests[power_tests["variant"] == variant]
    return part.set_index("baseline") if len(part) else None


def beats_both(claim, variant: str, base: str, power_tests: pd.DataFrame | None, runs: pd.DataFrame, size: str,
               alpha: float = 0.05) -> dict:
    """``variant`` beats ``base`` and standard: the powered design, sized for the paper's smallest gain, reads alone
    once it has finished (page 05 says why); until then the family's runs at ``size``."""
    tests = powered(power_tests, variant)
    if tests is not None:
        where, evidence = f"{tests['size'].iloc[0]}, the powered design", link("05_related_methods", "05_power_tests")
    elif len(runs) and {base, variant, "standard"} <= set(runs["variant"]):
        tests = paired(runs, variant, [base, "standard"], alpha)
        where, evidence = size, link("05_related_methods", f"05_{size}_summary")
    else:
        return row(claim, "", ledger.untested(f"no {size} runs of {variant}"), "")
    return beats_all(claim, tests, variant, where, evidence, alpha)


def powered_gain(claim, variant: str, power_tests: pd.DataFrame | None, alpha: float = 0.05) -> dict | None:
    """standard − ``variant`` on page 05's powered design, which reads alone; None while it has not finished."""
    tests = powered(power_tests, variant)
    if tests is None:
        return None
    t = tests.loc["standard"]
    return one_comparison(claim, t, f"standard − {variant} at {t['size']}, the powered design, fixed_loss, paired "
                                    f"over {int(t['seeds'])} seeds", link("05_related_methods", "05_power_tests"),
                          alpha)


def over(claim, variant: str, baseline: str, runs: pd.DataFrame, size: str, alpha: float = 0.05) -> dict:
    """``variant`` beats ``baseline`` on the family's runs at ``size``: one paired comparison."""
    if not (len(runs) and {baseline, variant} <= set(runs["variant"])):
        return row(claim, "", ledger.untested(f"no {size} runs of {baseline} and {variant}"), "")
    t = paired(runs, variant, [baseline], alpha).loc[baseline]
    return one_comparison(claim, t, f"{baseline} − {variant} at {size}, fixed_loss, paired over {int(t['seeds'])} "
                                    f"seeds", link("05_related_methods", f"05_{size}_summary"), alpha)
