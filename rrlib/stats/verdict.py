"""Is rule A better than rule B? The paired comparison and the word it earns, for ``rrlib compare`` and the ledger.

One function answers the question for every caller (``compare_pairs``), so a user's comparison and the report's
own can never disagree on method. Per (variant, baseline) it takes the seeds both have and their per-seed
difference on the metric (``fixed_loss`` unless told otherwise: every run is scored on the same held-out
windows), and reports

- ``gap``: the mean of baseline − variant (nats; > 0: the variant's loss is lower, i.e. better), its (1 − α)
  paired t-interval and two-sided paired-t ``p``;
- ``p_holm``: Holm's adjustment of ``p`` over the comparisons of the call (the family is what one call asks);
- ``detectable``: the smallest true gap the design detects with 80 % power at level α (paired t, at the SD of
  the differences it met; rrlib.stats.detectable_gap);
- ``p_equivalent`` and its Holm adjustment: the TOST p that the true gap lies within ±``margin``;
- ``verdict``: one word by ``verdict_word``.

The verdict words, in order of precedence:

==============  =====================================================================================
better / worse  Holm p < α: the gap's sign decides
equivalent      not better or worse, and the Holm-adjusted TOST p < α: any true gap is within ±margin
inconclusive    neither: the design could not tell (its ``detectable`` gap says what it could have seen)
==============  =====================================================================================

A pair one of whose rules diverged (a non-finite metric, or a run recorded ``diverged``) on any of its seeds is
``diverged`` instead, with each side's count of diverged seeds (``mark_diverged``, which ``rrlib compare``
applies): its remaining seeds would be a test of the seeds that happened not to diverge.

The default margin, 0.01 nats, is about the smallest gain the Review paper reports (0.009–0.016 nats at 590M–1B
against its two baselines): "equivalent" then means "no gain as large as the paper's". A margin of one's own
belongs to the question, chosen before the runs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .ledger import paired
from . import detectable_gap, equivalence_p, holm

ALPHA = 0.05
DEFAULT_MARGIN = 0.01  # nats: the smallest gain the Review paper reports (see the module docstring)
METRIC = "fixed_loss"
WORDS = ("better", "worse", "equivalent", "inconclusive", "diverged")
POWER = 0.8  # the power every design here is sized for
SD_CONFIDENCE = 0.8  # design_seeds sizes on this one-sided upper confidence bound of the pilot's SD


def paired_gap(diffs, alpha: float = ALPHA, margin: float = DEFAULT_MARGIN) -> dict:
    """The statistics of one paired comparison from its per-seed differences (baseline − variant)."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    out = {"seeds": n, "gap": d.mean() if n else np.nan, "sd": d.std(ddof=1) if n > 1 else np.nan,
           "ci_low": np.nan, "ci_high": np.nan, "p": np.nan, "detectable": np.nan, "p_equivalent": np.nan}
    if n < 2 or np.ptp(d) <= 1e-12 * max(1.0, np.abs(d).max()):
        return out  # one seed, or no spread: no t statistic
    t = paired(d, alpha)  # the ledger's paired t: one formula for both
    out.update(ci_low=t["ci_low"], ci_high=t["ci_high"], p=float(t["p"]), detectable=t["mde"],
               p_equivalent=equivalence_p(d, margin))
    return out


def verdict_word(gap: float, p_holm: float, p_equivalent_holm: float, alpha: float = ALPHA) -> str:
    """better, worse, equivalent or inconclusive (the table in the module docstring)."""
    if np.isfinite(p_holm) and p_holm < alpha:
        return "better" if gap > 0 else "worse"
    if np.isfinite(p_equivalent_holm) and p_equivalent_holm < alpha:
        return "equivalent"
    return "inconclusive"


def compare_pairs(table: pd.DataFrame, variants, baselines, metric: str = METRIC, margin: float = DEFAULT_MARGIN,
                  alpha: float = ALPHA, seeds=None) -> pd.DataFrame:
    """One row per (variant, baseline) of one size's results table (columns variant, seed and ``metric``).

    ``seeds`` restricts the test to those seeds (default: every seed both variants have). A variant compared with
    itself is skipped. Holm spans the rows returned.
    """
    missing = {"variant", "seed", metric} - set(table.columns)
    if missing:
        raise ValueError(f"the results table lacks {sorted(missing)}")
    by_variant = {v: g.set_index("seed")[metric].dropna() for v, g in table.groupby("variant")}
    rows = []
    for variant in variants:
        for baseline in baselines:
            if baseline == variant:
                continue
            a, b = by_variant.get(variant, pd.Series(dtype=float)), by_variant.get(baseline, pd.Series(dtype=float))
            shared = a.index.intersection(b.index)
            if seeds is not None:
                shared = shared.intersection(pd.Index(list(seeds)))
            shared = shared.sort_values()
            row = {"variant": variant, "baseline": baseline, "metric": metric, "margin": margin, "alpha": alpha,
                   "mean_variant": a[shared].mean() if len(shared) else np.nan,
                   "mean_baseline": b[shared].mean() if len(shared) else np.nan,
                   "seed_list": " ".join(str(s) for s in shared)}
            row.update(paired_gap(b[shared].to_numpy() - a[shared].to_numpy(), alpha, margin))
            rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["p_holm"] = holm(out["p"])
    out["p_equivalent_holm"] = holm(out["p_equivalent"])
    out["verdict"] = [verdict_word(r.gap, r.p_holm, r.p_equivalent_holm, alpha) for r in out.itertuples()]
    return out


def seeds_needed(sd: float, target: float, alpha: float = ALPHA, most: int = 1000) -> int | None:
    """The fewest seeds whose detectable gap (80 % power, paired) at this SD is at most ``target``; None past
    ``most``."""
    if not np.isfinite(sd) or sd <= 0:
        return 2
    for n in range(2, most + 1):
        if detectable_gap(sd, n, alpha) <= target:
            return n
    return None


def sd_upper_bound(sd: float, n: int, confidence: float = SD_CONFIDENCE) -> float:
    """The one-sided upper ``confidence`` bound of a normal SD estimated over ``n`` values: sd·√((n−1)/χ²), with
    χ² the (1 − confidence) quantile on n − 1 degrees of freedom; NaN where it has no bound (fewer than two values,
    an SD that is not finite)."""
    from scipy import stats as sp

    if n < 2 or not np.isfinite(sd):
        return np.nan
    return float(sd * np.sqrt((n - 1) / sp.chi2.ppf(1 - confidence, n - 1)))


def design_seeds(sd: float, pilot_n: int, target: float, alpha: float = ALPHA, comparisons: int = 1,
                 most: int = 1000) -> int | None:
    """The seeds a paired design needs to detect ``target`` with 80 % power in every one of ``comparisons`` Holm-
    corrected tests, sized from a pilot's SD over ``pilot_n`` seeds; None past ``most``.

    Two choices make it honest where ``seeds_needed`` is not: the level is Holm's strictest, α / comparisons (the
    step the smallest p must pass, so every comparison is sized to pass it), and the SD is its upper 80 %
    one-sided bound (``sd_upper_bound``), since a pilot's SD is itself noisy and sizing on the point estimate
    under-powers about half the designs. ``seeds_needed`` stays as it was for the designs already run and
    reported (pages 04 and 05 price theirs with it). A SD that is not a positive finite number cannot size a
    design: ValueError (the caller says why: a rule diverged, or the runs did not differ at all).
    """
    if not (np.isfinite(sd) and sd > 0) or pilot_n < 2:
        raise ValueError(f"a design cannot be sized from an SD of {sd!r} over {pilot_n} seeds")
    return seeds_needed(sd_upper_bound(sd, pilot_n), target, alpha / max(1, comparisons), most)


def paired_power(gap: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """The power of a two-sided paired t-test over ``n`` seeds at level ``alpha`` to detect a true gap ``gap`` at
    this SD of the differences (noncentral t): what a finished design reached for its target."""
    from scipy import stats as sp

    if n < 2 or not (np.isfinite(sd) and sd > 0):
        return float("nan")
    crit = sp.t.ppf(1 - alpha / 2, n - 1)
    delta = abs(gap) / (sd / np.sqrt(n))
    return float(sp.nct.sf(crit, n - 1, delta) + np.nan_to_num(sp.nct.cdf(-crit, n - 1, delta)))


def diverged_seeds(table: pd.DataFrame, rule: str, seeds, metric: str = METRIC) -> int:
    """How many of ``seeds`` the rule diverged on: a non-finite metric, or a run recorded as diverged."""
    runs = table[(table["variant"] == rule) & table["seed"].isin(list(seeds))]
    bad = ~np.isfinite(pd.to_numeric(runs[metric], errors="coerce").astype(float))
    if "status" in runs:
        bad |= runs["status"].eq("diverged")
    return int(bad.sum())


def mark_diverged(rows: pd.DataFrame, table: pd.DataFrame, seeds, metric: str = METRIC) -> pd.DataFrame:
    """``rows`` (compare_pairs') with each side's count of diverged seeds among ``seeds``; a pair where either
    side diverged on any seed is ``diverged`` and has no p-values (a test of the seeds that happened to stay
    finite would be no test of the rule)."""
    rows = rows.copy()
    rows["diverged_variant"] = [diverged_seeds(table, v, seeds, metric) for v in rows["variant"]]
    rows["diverged_baseline"] = [diverged_seeds(table, b, seeds, metric) for b in rows["baseline"]]
    rows["seeds_asked"] = len(list(seeds))
    hit = (rows["diverged_variant"] > 0) | (rows["diverged_baseline"] > 0)
    for column in ("gap", "ci_low", "ci_high", "p", "p_holm", "detectable", "p_equivalent", "p_equivalent_holm"):
        rows[column] = rows[column].astype(float).where(~hit)
    rows.loc[hit, "verdict"] = "diverged"
    return rows


def mark_identical(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (compare_pairs') where a pair's runs gave exactly the same loss on every one of two or more seeds
    marked ``equivalent`` with a TOST p of 0: no t statistic exists without spread, but no true gap other than 0 fits
    such data (a rule that computes what its baseline computes). compare_pairs itself leaves them untested, as the
    report's pages read them (page 05's scaled_loops and scaled at N = 1 are such a pair)."""
    rows = rows.copy()
    same = (rows["seeds"] >= 2) & (rows["gap"] == 0) & (rows["sd"] == 0)
    rows.loc[same, ["ci_low", "ci_high", "p_equivalent", "p_equivalent_holm"]] = 0.0
    rows.loc[same, ["p", "p_holm"]] = 1.0
    rows.loc[same, "verdict"] = "equivalent"
    return rows


def sentence(row) -> str:
    """The verdict of one row in words, naming the variant and its baseline (never a fixed rule name)."""
    gap = f"{row['gap']:+.4f} nats [{row['ci_low']:+.4f}, {row['ci_high']:+.4f}]"
    seen = f"the design detects {row['detectable']:.4f} with 80 % power" if np.isfinite(row["detectable"]) else \
        "no test (fewer than two seeds with spread)"
    word = row["verdict"]
    if word == "diverged":
        asked = row.get("seeds_asked", row["seeds"])
        sides = [f"{row[side]} diverged on {row[f'diverged_{side}']} of {asked} seeds"
                 for side in ("variant", "baseline") if row.get(f"diverged_{side}", 0)]
        return f"{row['variant']} against {row['baseline']}: diverged ({' and '.join(sides)}), so no test"
    if word in ("better", "worse"):
        return (f"{row['variant']} is {word} than {row['baseline']}: gap {gap}, Holm p {row['p_holm']:.3g} over "
                f"{row['seeds']} seeds")
    if word == "equivalent":
        return (f"{row['variant']} is equivalent to {row['baseline']} within ±{row['margin']:g} nats (TOST Holm p "
                f"{row['p_equivalent_holm']:.3g}): gap {gap} over {row['seeds']} seeds")
    return (f"{row['variant']} against {row['baseline']}: inconclusive, gap {gap}, Holm p {row['p_holm']:.3g} "
            f"over {row['seeds']} seeds; {seen}")
