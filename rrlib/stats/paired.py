"""One paired comparison, the one result type every caller reads: ``rrlib compare``'s verdict rows, the claims
ledger's effects and the pages' tests of ``rrlib.stats.compare`` all come from ``paired_comparison``.

Why paired. A seed fixes the batch order and the evaluation windows for every rule, so two rules' runs at one seed
share most of their noise, and the per-seed differences carry the signal (the package docstring says what the
paper's unpaired Welch test loses by ignoring this). So the question "is A better than B?" is a one-sample t-test
on the differences baseline − variant: scipy's ``ttest_1samp`` (what ``ttest_rel`` computes on the two columns), its
(1 − α) t-interval, the paired TOST at ±margin (statsmodels' ``DescrStatsW.ttost_mean``, the test
``ttost_paired`` runs on x1 − x2), and the smallest gap the design detects at 80 % power (``detectable_gap``).

Differences with no spread (one seed, or every seed the same difference up to float rounding) have no t statistic:
their comparison carries the mean and the count, and NaN for every test.

The word a comparison earns, ``verdict_word``, is the one rule behind every "better" and "worse" the project prints:
``rrlib compare``'s verdicts, the pages' sentences (``rrlib.stats.verdicts``) and the ledger's directional claims
(``rrlib.stats.ledger.judge``: the word the claim predicts is "supported", its opposite "contradicted").
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats
from scipy.optimize import brentq
from statsmodels.stats.weightstats import DescrStatsW

ALPHA = 0.05
POWER = 0.8  # the power at which ``detectable`` is the smallest detectable gap, and every design here is sized for
# compare's columns, in the order its files have always written them, and the same numbers under the ledger
# tables' names (an effect signed as its claim; ``mde`` and ``n`` as those committed tables name them)
COLUMNS = ("seeds", "gap", "sd", "ci_low", "ci_high", "p", "detectable", "p_equivalent")
EFFECT_COLUMNS = {"gap": "effect", "ci_low": "ci_low", "ci_high": "ci_high", "p": "p", "detectable": "mde",
                  "seeds": "n"}


@dataclasses.dataclass(frozen=True)
class PairedComparison:
    """The statistics of one paired comparison, from its per-seed differences (baseline − variant: > 0 favours the
    variant; or any effect signed as its claim). Every test is NaN where the differences have no spread."""

    seeds: int  # how many differences (the seeds both sides have)
    gap: float  # their mean
    sd: float  # their SD (n − 1); NaN under two seeds
    ci_low: float  # the (1 − alpha) paired t-interval of the gap
    ci_high: float
    p: float  # two-sided paired t
    detectable: float  # the smallest true gap the design detects with POWER at alpha, at the SD it met
    p_equivalent: float  # TOST p that the true gap lies within ±margin; NaN without a margin
    t: float  # the t statistic, on seeds − 1 degrees of freedom
    p_greater: float  # one-sided p against a true gap ≤ 0
    alpha: float = ALPHA
    margin: float = float("nan")

    @property
    def tested(self) -> bool:
        """Whether there was a test: two or more differences with spread."""
        return bool(np.isfinite(self.p))

    @property
    def d_z(self) -> float:
        """The paired effect size: the mean difference over their SD."""
        return self.gap / self.sd if self.tested else float("nan")

    def row(self) -> dict:
        """compare's columns (``COLUMNS``), as its verdict files and the pages' tables have them."""
        return {name: getattr(self, name) for name in COLUMNS}

    def effect_row(self) -> dict:
        """The same numbers under the ledger tables' names: effect, ci_low, ci_high, p, mde, n."""
        return {column: getattr(self, name) for name, column in EFFECT_COLUMNS.items()}


def paired_comparison(diffs, alpha: float = ALPHA, margin: float = float("nan")) -> PairedComparison:
    """The paired comparison of these per-seed differences at level ``alpha`` (and a TOST at ±``margin`` if given)."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    untested = dict.fromkeys(("ci_low", "ci_high", "p", "detectable", "p_equivalent", "t", "p_greater"), np.nan)
    if n < 2 or flat(d):
        return PairedComparison(n, d.mean() if n else np.nan, d.std(ddof=1) if n > 1 else np.nan, alpha=alpha,
                                margin=margin, **untested)
    test = stats.ttest_1samp(d, 0.0)
    ci = test.confidence_interval(1 - alpha)
    sd = d.std(ddof=1)
    return PairedComparison(n, d.mean(), sd, ci.low, ci.high, float(test.pvalue), detectable_gap(sd, n, alpha),
                            equivalence_p(d, margin) if np.isfinite(margin) else np.nan, float(test.statistic),
                            float(stats.t.sf(test.statistic, test.df)), alpha, margin)


def verdict_word(gap: float, p: float, p_equivalent: float = float("nan"), alpha: float = ALPHA) -> str:
    """The word of a comparison at level ``alpha``, its p-values already corrected as its family requires:

    ==============  =====================================================================================
    better / worse  p < α: the gap's sign decides
    equivalent      not better or worse, and the TOST p < α: any true gap is within ±margin
    inconclusive    neither: the design could not tell (its ``detectable`` gap says what it could have seen)
    ==============  =====================================================================================
    """
    if np.isfinite(p) and p < alpha:
        return "better" if gap > 0 else "worse"
    if np.isfinite(p_equivalent) and p_equivalent < alpha:
        return "equivalent"
    return "inconclusive"


def equivalence_p(diffs, margin: float) -> float:
    """TOST p-value that the mean of ``diffs`` lies within ±``margin`` (statsmodels' paired TOST: the larger of the two
    one-sided t-tests' p). Below alpha, the (1 − 2·alpha) interval lies inside the margin: "no difference larger
    than it"."""
    d = np.asarray(diffs, dtype=float)
    if len(d) < 2 or flat(d):
        return np.nan
    return float(DescrStatsW(d).ttost_mean(-margin, margin)[0])


def _power(delta: float, dof: int, crit: float) -> float:
    """The power of a two-sided t-test with critical value ``crit`` on ``dof`` degrees of freedom at the
    standardised effect ``delta`` (mean / (sd / √n)): both tails of the noncentral t. The far tail's cdf is NaN where
    it underflows past 1e-16, which counts as 0 (statsmodels' ``ttest_power`` leaves it NaN, see detectable_gap)."""
    return stats.nct.sf(crit, dof, delta) + np.nan_to_num(stats.nct.cdf(-crit, dof, delta))


def paired_power(gap: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """The power of a two-sided paired t-test over ``n`` seeds at level ``alpha`` to detect a true gap ``gap`` at
    this SD of the differences (noncentral t): what a finished design reached for its target."""
    if n < 2 or not (np.isfinite(sd) and sd > 0):
        return float("nan")
    return float(_power(abs(gap) / (sd / np.sqrt(n)), n - 1, stats.t.ppf(1 - alpha / 2, n - 1)))


def detectable_gap(sd_diff: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true mean paired difference a two-sided paired t-test over ``n`` seeds detects with ``power``
    at level ``alpha``, given the SD of the paired differences (from the noncentral t; the observed SD stands in for
    the true one, so this is the design's resolution at the noise it met).

    The solve is scipy's brentq on the power above, not statsmodels' ``TTestPower.solve_power``: its power is
    1 − ``nctdtr``, NaN where the far tail underflows (d·√n above about 20 at a few seeds), so at 2 seeds and
    α = 0.05/15 it returns d = 10.0, whose power is 0.06, without a warning; and its root finder stops at
    xtol 1e-5, a change in the sixth digit of the committed detectable gaps."""
    if n < 2 or not np.isfinite(sd_diff) or sd_diff <= 0:
        return np.nan
    dof = n - 1
    crit = stats.t.ppf(1 - alpha / 2, dof)

    def shortfall(delta):
        return _power(delta, dof, crit) - power

    high = 2 * crit + 4
    while shortfall(high) < 0:
        high *= 1.5
    return float(brentq(shortfall, 0.0, high) * sd_diff / math.sqrt(n))


def flat(x: np.ndarray) -> bool:
    """No spread beyond float rounding: a t statistic would divide by (almost) zero and mean nothing."""
    return bool(np.ptp(x) <= 1e-12 * max(1.0, np.abs(x).max()))
