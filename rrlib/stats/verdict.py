"""Is rule A better than rule B? The paired comparisons and the words they earn, for ``rrlib compare`` and the ledger.

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
- ``verdict``: better, worse, equivalent or inconclusive by ``verdict_word`` (rrlib.stats.paired, the one rule
  behind every "better" and "worse" the project prints) on the Holm-adjusted p and TOST p: better or worse where
  the Holm p is below α, the gap's sign deciding; equivalent where not and the Holm-adjusted TOST p is; else
  inconclusive, with the ``detectable`` gap saying what the design could have seen.

Each pair's numbers are one ``PairedComparison`` (rrlib.stats.paired), written under its ``row()`` names.

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
from scipy import stats

from .correction import holm
from .paired import ALPHA, POWER, detectable_gap, paired_comparison, paired_power, verdict_word  # noqa: F401

DEFAULT_MARGIN = 0.01  # nats: the smallest gain the Review paper reports (see the module docstring)
METRIC = "fixed_loss"
WORDS = ("better", "worse", "equivalent", "inconclusive", "diverged")  # verdict_word's, and diverged (mark_diverged)
SD_CONFIDENCE = 0.8  # design_seeds sizes on this one-sided upper confidence bound of the pilot's SD


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
            row.update(paired_comparison(b[shared].to_numpy() - a[shared].to_numpy(), alpha, margin).row())
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
    if n < 2 or not np.isfinite(sd):
        return np.nan
    return float(sd * np.sqrt((n - 1) / stats.chi2.ppf(1 - confidence, n - 1)))


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
