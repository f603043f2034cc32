"""The claims ledger's verdict rules: one row per claim, its effect with an interval, and a verdict by a rule
fixed here, not chosen per claim.

Every effect is signed so that positive means what the claim says (a gain, less growth, sharper routing); a
claim of "no gain" is read on the gain itself. The rules, at level ``alpha`` on the p-value after the row's
stated correction:

    directional claim   supported          the effect is positive and significant
                        contradicted       the effect is negative and significant
                        not at this scale  neither; the row states the smallest effect its design detects
    null claim          supported          no comparison shows a significant effect of the excluded sign
    ("no gain")         contradicted       one does
    equivalence claim   supported          a TOST puts the effect within ±margin
    ("no worse")        contradicted       the effect is negative and significant
                        not at this scale  neither; the row states the margin and the TOST p
    any claim           untested           the reason (a size beyond this machine, a study still running)

A claim about two comparisons at once ("over both baselines") is an intersection: its effect is the smaller,
its p the larger of the two (the intersection-union test, which needs no further correction).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

VERDICTS = ("supported", "not at this scale", "contradicted", "untested")
COLUMNS = ["paper", "claim", "test", "effect", "ci_low", "ci_high", "verdict", "evidence"]


def directional(effect: float, p: float, alpha: float = 0.05) -> str:
    if not np.isfinite(p):
        return "not at this scale"
    if p < alpha:
        return "supported" if effect > 0 else "contradicted"
    return "not at this scale"


def null_claim(effects, ps, alpha: float = 0.05) -> str:
    """``effects`` signed so that positive is what the claim excludes (a gain, where it says "no gain")."""
    found = any(e > 0 and p < alpha for e, p in zip(effects, ps))
    return "contradicted" if found else "supported"


def equivalence(effect: float, p: float, p_equivalent: float, alpha: float = 0.05) -> str:
    if np.isfinite(p_equivalent) and p_equivalent < alpha:
        return "supported"
    if np.isfinite(p) and p < alpha and effect < 0:
        return "contradicted"
    return "not at this scale"


def intersection(effects, lows, highs, ps) -> tuple[float, float, float, float]:
    """(effect, ci_low, ci_high, p) of "both hold": the comparison with the smaller effect, and the larger p."""
    k = int(np.argmin(effects))
    return effects[k], lows[k], highs[k], float(np.max(ps))


def paired(diffs, alpha: float = 0.05) -> dict:
    """Mean of per-seed differences, its t-interval, paired p and the smallest mean the design detects."""
    from .stats import detectable_gap

    d = np.asarray(diffs, dtype=float)
    n = len(d)
    if n < 2:
        return {"effect": d.mean() if n else np.nan, "ci_low": np.nan, "ci_high": np.nan, "p": np.nan,
                "mde": np.nan, "n": n}
    se = d.std(ddof=1) / math.sqrt(n)
    half = sps.t.ppf(1 - alpha / 2, n - 1) * se
    p = 2 * sps.t.sf(abs(d.mean() / se), n - 1) if se > 0 else np.nan
    return {"effect": d.mean(), "ci_low": d.mean() - half, "ci_high": d.mean() + half, "p": p,
            "mde": detectable_gap(d.std(ddof=1), n, alpha), "n": n}


def detectable_coefficient(stderr: float, dof: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest regression coefficient a two-sided t-test on ``dof`` degrees of freedom detects with ``power``
    at the standard error it met: (t_{1−α/2} + t_{power})·SE, the usual approximation (the noncentral t's
    lower tail is neglected)."""
    if not np.isfinite(stderr) or dof < 1:
        return np.nan
    return float((sps.t.ppf(1 - alpha / 2, dof) + sps.t.ppf(power, dof)) * stderr)


def welch(a, b, alpha: float = 0.05) -> dict:
    """mean(a) − mean(b) for two independent groups, with Welch's t-interval and p."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    test = sps.ttest_ind(a, b, equal_var=False)
    ci = test.confidence_interval(1 - alpha)
    return {"effect": a.mean() - b.mean(), "ci_low": ci.low, "ci_high": ci.high, "p": test.pvalue, "n": min(len(a), len(b))}


def row(paper: str, claim: str, test: str, verdict: str, evidence: str, effect=np.nan, ci_low=np.nan,
        ci_high=np.nan) -> dict:
    if verdict not in VERDICTS and not verdict.startswith("untested: "):
        raise ValueError(f"verdict {verdict!r} is none of {', '.join(VERDICTS)} (untested with its reason)")
    return dict(zip(COLUMNS, (paper, claim, test, effect, ci_low, ci_high, verdict, evidence)))


def untested(reason: str) -> str:
    return f"untested: {reason}"


def ledger(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def verdict_kind(verdict: str) -> str:
    """The verdict without an untested row's reason: one of ``VERDICTS``."""
    return "untested" if verdict.startswith("untested") else verdict
