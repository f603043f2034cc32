"""Ledger rows built from a claim's record alone, or from a record and one table: any row of a record (``row``), a
row whose input is missing (``missing``, ``unfinished``), a claim registered before its runs (``pending``), a claim
beyond the CPU with its cost (``beyond_reach``), and a claim of no gain over several comparisons judged at its
margin (``no_gain``); and the evidence a row cites (``link``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rrlib.stats import ledger

from . import reach
from .records import Claim


DIRECTIONAL = ("direction", "trend")  # the record kinds the directional rule judges


def row(claim: Claim, test: str = "", verdict: str = "", *args, **kwargs) -> dict:
    """A ledger row of ``claim`` (its paper and label first; the rest as rrlib.stats.ledger.row takes them), which
    states no power against the paper's effect where the record's scope is the paper's own runs. A directional claim
    on this harness's runs whose interval lies below the effect its paper states, on the row's scale, is
    contradicted at this scale (rrlib.stats.ledger.at_this_scale); the test says so."""
    own = claim.scope == ledger.OWN_RUNS
    names = ("evidence", "effect", "ci_low", "ci_high")
    given = dict(zip(names, args)) | {k: v for k, v in kwargs.items() if k in names}
    on_scale = not claim.paper_effect or claim.paper_effect.get("scale") != ledger.OTHER_SCALE
    if claim.kind in DIRECTIONAL and not own and on_scale:
        judged = ledger.at_this_scale(verdict, float(given.get("ci_high", np.nan)), claim.stated_effect)
        if judged != verdict:
            test += (f"; the interval's upper end {given['ci_high']:+.4g} lies below the paper's "
                     f"{claim.stated_effect:.4g}: an effect as large as the paper's is ruled out at this scale")
            verdict = judged
    return ledger.row(claim.paper, claim.label, test, verdict, *args, own_runs=own, **kwargs)


def missing(claim: Claim, table: str) -> dict:
    """Untested: the result this row reads (shown on a page as ``table``) has no runs under the folders read."""
    return row(claim, "", ledger.untested(f"no runs yet for the result it reads ({table})"), "")


def unfinished(claim: Claim, what: str, done: int, planned: int, runs: tuple[int, int] | None = None) -> dict:
    """Untested: no verdict from fewer seeds than the design's (``done`` of ``planned``; ``runs``, where given, the
    runs ended of those planned, since a seed counts only once all its runs have ended); the row keeps the metric
    and test it will be judged by (``waiting``)."""
    ran = f"; {runs[0]} of {runs[1]} runs" if runs else ""
    return waiting(claim, f"{what} runs not finished ({done} of {planned} seeds{ran})")


def link(page: str, *items: str) -> str:
    """The evidence: the page, then its tables and figures, as paths relative to the report."""
    return "; ".join([f"{page}.reader.html"] + [f"tables/{i}.csv" if not i.endswith(".png") else f"figures/{i}"
                                                for i in items])


def waiting(claim: Claim, reason: str, evidence: str = "") -> dict:
    """Untested for ``reason`` while its design runs: the row shows the metric, test and margin it was registered
    with, the ones its verdict will come from."""
    return row(claim, f"{claim.metric}; {claim.test}", ledger.untested(reason), evidence,
               paper_effect=claim.stated_effect, margin=claim.margin_value)


def pending(claim: Claim, evidence: str = "") -> dict:
    """A claim registered before its runs, whose design has not run yet."""
    return waiting(claim, "registered before its runs; its design has not run yet", evidence)


def beyond_reach(claim: Claim, flops_per_second: float, evidence: str = "") -> dict:
    """A GPU-only claim: out of reach, with the CPU-hours its cheapest test would take at ``flops_per_second``."""
    return ledger.row(claim.paper, claim.label, claim.metric,
                      ledger.out_of_reach(reach.reason(claim.needs, flops_per_second)), evidence,
                      paper_effect=claim.stated_effect)


def no_gain(claim: Claim, tests: pd.DataFrame, where: str, evidence: str, alpha: float = 0.05) -> dict:
    """A "no gain" claim over several comparisons (``tests``: one row each, with size, baseline, paired_gap, ci_low,
    ci_high, paired_n, mde and paired_p or p), judged at the record's margin: every comparison's gain shown below it
    supports the claim (the comparison whose one-sided p is the largest decides); a gain shown above it in any
    comparison contradicts it (the one with the smallest such p is the row's). A significant gain inside the margin
    is no gain in the claim's sense."""
    margin = claim.margin_value
    below = [ledger.below_margin_p(r.paired_gap, r.ci_low, r.ci_high, r.paired_n, margin, alpha)
             for r in tests.itertuples()]
    beyond = [ledger.beyond_margin_p(r.paired_gap, r.ci_low, r.ci_high, r.paired_n, margin, alpha=alpha)
              for r in tests.itertuples()]
    shown_beyond = np.nanmin(beyond) < alpha
    k = int(np.nanargmin(beyond)) if shown_beyond else ledger.binding(below)
    chosen = tests.iloc[k]
    p = chosen["paired_p"] if "paired_p" in chosen else chosen["p"]  # page 04's paper tests, or compare's columns
    decided_by = (f"a gain shown above the margin over {chosen['baseline']} at {chosen['size']} (one-sided p "
                  f"{beyond[k]:.2g})" if shown_beyond else
                  f"one-sided p that every gain is below {margin:g} nats: {below[k]:.2g} ({chosen['size']} vs "
                  f"{chosen['baseline']}, the largest)")
    against = "; ".join(f"{r.size} vs {r.baseline} {r.paired_gap:+.4f}" for r in tests.itertuples())
    return row(
        claim,
        f"Review's paired gaps, {len(tests)} comparisons at {where} ({against}); {decided_by}",
        ledger.judge("null", chosen["paired_gap"], p, below[k], p_beyond=beyond[k], alpha=alpha),
        evidence, chosen["paired_gap"], chosen["ci_low"], chosen["ci_high"], p, "none: every comparison must hold",
        np.nan, chosen["mde"], margin)
