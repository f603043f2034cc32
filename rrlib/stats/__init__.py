"""From a results table to the numbers the report quotes: tests, effect sizes, intervals, trend, verdicts.

The table is tidy, one row per run: `size, variant, seed, params_M` plus metric columns (`val_loss`,
`ece`, `fixed_loss`, ...). Every metric is read as lower-is-better, and the gap of a comparison is
`baseline - reference` (the reference is `review` unless a caller names another rule), so a positive gap favours
the reference. The default metric of every function is the primary one, `fixed_loss` (every run scored on the
same held-out windows); the paper's CSV has only `val_loss`, which its callers name.

Why more than the paper's test. The paper compares each baseline with Review by a two-sample Welch t-test
on per-seed losses. But a seed fixes the batch order and the eval windows for every variant, so the runs
are paired by seed: seed-to-seed noise is shared, and the per-seed differences carry the signal. The
Welch test treats that shared noise as error and loses most of its power at three seeds. We keep Welch
(for fidelity) and add beside it the paired t-test over the seeds both variants have, which is the
primary test here, with Holm's step-down correction over the whole family of (size, baseline)
comparisons, since the report reads many p-values at once. Paired CIs, Cohen's d and the paired d_z come
with every comparison, and so does the smallest gap the design could have detected (`mde`), so that "no
difference" is never read from a test that could not have seen one.

When the bootstrap is not used. A percentile bootstrap over n seeds can only draw the C(2n − 1, n) distinct
multisets of those seeds, so its 2.5 % limit is one of few values: at three seeds 10 resamples, at five 126.
`bootstrap_allowed` asks for at least `MIN_TAIL_RESAMPLES` distinct resamples beyond each limit
(C(2n − 1, n)·α/2 ≥ 25, i.e. seven or more seeds at α = 0.05); below that `compare` leaves the bootstrap
columns empty, with a note, and the t-interval is the interval.

What the package holds, and its libraries. This module reads results tables; the tests themselves are the field's:
statsmodels' where it has them (``multipletests`` for Holm and Benjamini–Hochberg in ``correction``, the paired
TOST in ``paired``) and scipy's otherwise (the t-tests and intervals, the noncentral t of the power solve, which
``paired.detectable_gap`` says why it keeps). ``paired`` holds the one paired-comparison result type,
``PairedComparison``, that this module's paired columns, ``rrlib compare`` (``verdict``) and the claims ledger
(``ledger``) all read, and the one rule for its word (``verdict_word``). The package imports nothing of rrlib's.
"""
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

# the field's tests, one import away for every caller (rrlib.stats.holm, rrlib.stats.paired_comparison, ...)
from .correction import benjamini_hochberg, holm  # noqa: F401
from .paired import (POWER, PairedComparison, detectable_gap, equivalence_p, flat, paired_comparison,  # noqa: F401
                     paired_power, verdict_word)

REQUIRED = ("size", "variant", "seed", "params_M")
ALIASES = {"review_neutral": "review"}  # the paper's name for our `review`
TESTED = ("welch_t", "welch_df", "welch_p", "welch_p_one", "paired_t", "paired_df", "paired_p", "paired_p_one",
          "cohen_d", "d_z", "test", "p", "ci_low", "ci_high", "mde", "boot_low", "boot_high")  # NaN until computed
MIN_TAIL_RESAMPLES = 25  # distinct bootstrap resamples wanted beyond each percentile limit


def finished_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Drop runs whose `status` is not "finished" (a table without `status` is kept whole).

    What was dropped is said in a warning and kept in `attrs["note"]` for the report to quote.
    """
    if "status" not in df.columns:
        return df
    done = df["status"] == "finished"
    out = df[done].copy()
    dropped = df.loc[~done, "status"].fillna("missing")
    out.attrs["note"] = (f"dropped {len(dropped)} unfinished runs (status: {', '.join(sorted(set(dropped)))})"
                         if len(dropped) else "")
    if len(dropped):
        warnings.warn(out.attrs["note"], stacklevel=2)
    return out


def load_results(source) -> pd.DataFrame:
    """A tidy results table from a CSV path or a DataFrame: finished runs, `review_neutral` read as `review`. A row
    whose seed is not a whole number or whose `params_M` is not a number is one sentence naming it (a file's line:
    blank lines are kept while reading so that a row's index + 2 is its line, the header being line 1)."""
    if isinstance(source, (str, Path)):
        df, where = pd.read_csv(source, skip_blank_lines=False).dropna(how="all"), f"{source} line "
    else:
        df, where = source.copy(), "results table row "
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"results table lacks columns {missing}; it needs {list(REQUIRED)} and a metric")
    kept = df["status"] == "finished" if "status" in df.columns else pd.Series(True, index=df.index)
    for column, whole in (("seed", True), ("params_M", False)):
        values = pd.to_numeric(df[column], errors="coerce")
        bad = df.index[kept & (values.isna() | ((values % 1 != 0) if whole else False))]
        if len(bad):
            line = bad[0] + 2 if where.endswith("line ") else bad[0]
            raise ValueError(f"{where}{line}: {column} is {df.loc[bad[0], column]!r}, not "
                             f"{'a whole number' if whole else 'a number'}")
    df = finished_runs(df)
    df["size"] = df["size"].astype(str)
    df["variant"] = df["variant"].replace(ALIASES)
    df["seed"] = df["seed"].astype(int)
    repeated = df[df.duplicated(["size", "variant", "seed"], keep=False)]
    if len(repeated):
        runs = sorted(set(map(tuple, repeated[["size", "variant", "seed"]].values.tolist())))
        raise ValueError(f"more than one run for (size, variant, seed): {runs}")
    return df


def size_order(df: pd.DataFrame) -> list:
    """Sizes from smallest to largest by mean `params_M` (names like "tiny", "60m" do not sort)."""
    return list(df.groupby("size")["params_M"].mean().sort_values().index)


def headline(df, metric: str = "fixed_loss", reference: str = "review") -> pd.DataFrame:
    """Mean metric per size (rows, smallest first) and variant (columns, the reference first)."""
    df = _checked(df, metric, reference)
    wide = df.pivot_table(index="size", columns="variant", values=metric, aggfunc="mean")
    return wide.loc[size_order(df), [reference] + _baselines(df, reference)]


def compare(df, metric: str = "fixed_loss", reference: str = "review", alpha: float = 0.05,
            n_boot: int = 10000, seed: int = 0) -> pd.DataFrame:
    """One row per (size, baseline): means, SDs, gap, Welch and paired tests, effect sizes, CIs, Holm.

    `p` is the primary test named in `test`: paired over shared seeds when there are two or more, else
    Welch. `ci_low/ci_high` are its (1 - alpha) t-interval of the gap; `boot_low/boot_high` a percentile
    bootstrap of the same gap (`n_boot=0` skips it). `p_holm` adjusts `p` over every row, and
    `significant` is `p_holm < alpha`. `note` says what was not tested and why.
    """
    df = _checked(df, metric, reference)
    rows = []
    for size in size_order(df):
        here = df[df["size"] == size]
        ref = here[here["variant"] == reference].set_index("seed")[metric]
        if ref.empty:
            continue
        for baseline in _baselines(here, reference):
            base = here[here["variant"] == baseline].set_index("seed")[metric]
            row = {"size": size, "params_M": here.loc[here["variant"] == reference, "params_M"].mean(),
                   "baseline": baseline, "metric": metric}
            row.update(_compare_one(ref, base, reference, baseline, alpha, n_boot, seed))
            rows.append(row)
    if not rows:
        raise ValueError(f"no variant to compare with {reference!r} at any size")
    out = pd.DataFrame(rows)
    out["p_holm"] = holm(out["p"])
    out["significant"] = out["p_holm"] < alpha
    return out


def trend(df, metric: str = "fixed_loss", reference: str = "review") -> pd.DataFrame:
    """Gap against log10(Review parameters), one row per baseline: slope per decade, its p-value, r.

    The points are the per-size gaps of the primary test (the mean paired difference, or the difference of
    means where nothing pairs), not per-seed gaps:
    a scaling claim is about sizes, and seeds of one size share its model and recipe (steps change with
    size), so per-seed points would be pseudo-replicates that shrink the p-value. One point per size also
    weights each size equally when seed counts differ. Fewer than three sizes leave no residual df: p NaN.
    """
    table = compare(df, metric, reference, n_boot=0)
    rows = []
    for baseline, group in table.groupby("baseline", sort=False):
        x, y = np.log10(group["params_M"].to_numpy()), _tested_gap(group).to_numpy()
        keep = ~np.isnan(y)
        x, y = x[keep], y[keep]
        row = {"baseline": baseline, "metric": metric, "slope_per_decade": np.nan, "stderr": np.nan,
               "p": np.nan, "r": np.nan, "n_sizes": len(x)}
        if len(x) >= 3:
            fit = stats.linregress(x, y)
            row.update(slope_per_decade=fit.slope, stderr=fit.stderr, p=fit.pvalue, r=fit.rvalue)
        elif len(x) == 2:
            row["slope_per_decade"] = (y[1] - y[0]) / (x[1] - x[0])
        rows.append(row)
    return pd.DataFrame(rows)


def gap_factors(df, metric: str = "fixed_loss", reference: str = "review", alpha: float = 0.05) -> pd.DataFrame:
    """Which factor the gap follows: per baseline, OLS of the per-cell gap on log10 size and log10 tokens/param.

        gap_cell = a + b_size · log10(params_M) + b_tpp · log10(tokens per parameter) + e

    A cell is one size name (one model width trained for one token budget); its gap is the primary test's
    (the mean paired difference), its size and tokens per parameter are the reference variant's. One point
    per cell, not per seed, for the reason given in ``trend``. A grid where the larger width is also trained
    at the smaller one's tokens per parameter keeps the two logs from being collinear; the paper's sizes are
    not such a grid (its tokens per parameter fall as size grows), so its runs cannot separate them.
    Returns one row per (baseline, term) with the coefficient (nats per decade), its standard error, the
    (1 − alpha) t-interval on n_cells − 3 degrees of freedom, and its two-sided p.
    """
    df = _checked(df, metric, reference)
    if "tokens_per_param" not in df.columns:
        raise ValueError("the table needs a tokens_per_param column (every rrlib result file has one)")
    table = compare(df, metric, reference, alpha=alpha, n_boot=0)
    cells = df[df["variant"] == reference].groupby("size")[["params_M", "tokens_per_param"]].mean()
    rows = []
    for baseline, group in table.groupby("baseline", sort=False):
        group = group.assign(gap_cell=_tested_gap(group)).dropna(subset=["gap_cell"])
        x = np.column_stack([np.ones(len(group)), np.log10(cells.loc[group["size"], "params_M"]),
                             np.log10(cells.loc[group["size"], "tokens_per_param"])])
        y = group["gap_cell"].to_numpy()
        dof = len(y) - x.shape[1]
        base = {"baseline": baseline, "metric": metric, "n_cells": len(y), "df": dof}
        if dof < 1 or np.linalg.matrix_rank(x) < x.shape[1]:
            note = "fewer cells than coefficients + 1" if dof < 1 else "size and tokens/param are collinear"
            rows += [{**base, "term": t, "coef": np.nan, "stderr": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                      "p": np.nan, "note": note} for t in ("intercept", "log10_size", "log10_tokens_per_param")]
            continue
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        resid = y - x @ coef
        cov = (resid @ resid / dof) * np.linalg.inv(x.T @ x)
        se = np.sqrt(np.diag(cov))
        t_crit = stats.t.ppf(1 - alpha / 2, dof)
        for term, c, e in zip(("intercept", "log10_size", "log10_tokens_per_param"), coef, se):
            p = 2 * stats.t.sf(abs(c / e), dof) if e > 0 else np.nan
            rows.append({**base, "term": term, "coef": c, "stderr": e, "ci_low": c - t_crit * e,
                         "ci_high": c + t_crit * e, "p": p, "note": ""})
    return pd.DataFrame(rows)


def verdicts(comparison: pd.DataFrame, alpha: float = 0.05, reference: str = "review") -> pd.DataFrame:
    """A plain-words verdict per size, built from a `compare` table (its primary test and Holm p).

    `alpha` and `reference` should match the ones given to `compare`: the text names the reference rule, never a
    fixed one. "Trend" is the conventional band: unadjusted p < 2 * alpha without Holm significance.
    """
    comparison = comparison.assign(tested_gap=_tested_gap(comparison))
    rows = []
    for size, group in comparison.groupby("size", sort=False):
        parts = [f"vs {r.baseline}: {_verdict(r, alpha, reference)}"
                 + (f" [{r.metrics_note}]" if getattr(r, "metrics_note", "") else "") for r in group.itertuples()]
        rows.append({"size": size, "verdict": "; ".join(parts)})
    return pd.DataFrame(rows)


def _checked(df, metric: str, reference: str) -> pd.DataFrame:
    df = load_results(df)
    if df.empty:  # every run dropped: say which statuses, not that the metric has no numbers
        raise ValueError(f"no finished run to compare: {df.attrs.get('note') or 'the results table has no rows'}")
    if metric not in df.columns or not pd.api.types.is_numeric_dtype(df[metric]):
        numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and c not in REQUIRED]
        raise ValueError(f"metric {metric!r} is not a numeric column; choose one of {numeric}")
    df = df.dropna(subset=[metric])  # a run that did not record this metric (an older result file) cannot count
    if reference not in set(df["variant"]):
        raise ValueError(f"reference variant {reference!r} not in the table; variants: {sorted(set(df['variant']))}")
    return df


def _baselines(df: pd.DataFrame, reference: str) -> list:
    return sorted(set(df["variant"]) - {reference})


def _tested_gap(table: pd.DataFrame) -> pd.Series:
    """The gap the primary test is about: the mean paired difference when paired, else the difference of means."""
    return table["paired_gap"].where(table["test"] == "paired", table["gap"])


def _compare_one(ref: pd.Series, base: pd.Series, reference: str, baseline: str,
                 alpha: float, n_boot: int, seed: int) -> dict:
    """The statistics of one comparison; `ref` and `base` are the metric indexed by seed."""
    shared = ref.index.intersection(base.index).sort_values()
    r, b = ref.to_numpy(), base.to_numpy()
    diffs = base[shared].to_numpy() - ref[shared].to_numpy()
    n_ref, n_base, k = len(r), len(b), len(shared)
    row = {"n_ref": n_ref, "n_base": n_base, "mean_ref": r.mean(), "mean_base": b.mean(), "sd_ref": ref.std(),
           "sd_base": base.std(), "gap": b.mean() - r.mean(), "paired_n": k,
           "paired_gap": diffs.mean() if k else np.nan}
    row.update(dict.fromkeys(TESTED, np.nan), test="none")
    if max(n_ref, n_base) < 2:
        return {**row, "note": "one seed: no test"}
    notes = []
    if k < max(n_ref, n_base):
        unpaired = [f"{name} {sorted(set(s.index) - set(shared))}"
                    for name, s in ((reference, ref), (baseline, base)) if len(s) > k]
        notes.append(f"paired on the {k} shared seeds (unpaired: {', '.join(unpaired)})")
    level = 1 - alpha
    if min(n_ref, n_base) < 2:
        notes.append(f"one seed of {reference if n_ref < 2 else baseline}: no Welch test")
    elif flat(r) and flat(b):
        notes.append("no spread in either variant: no Welch test")
    else:
        welch = stats.ttest_ind(b, r, equal_var=False)
        pooled = np.sqrt(((n_ref - 1) * r.var(ddof=1) + (n_base - 1) * b.var(ddof=1)) / (n_ref + n_base - 2))
        ci = welch.confidence_interval(level)
        row.update(welch_t=welch.statistic, welch_df=welch.df, welch_p=welch.pvalue,
                   welch_p_one=stats.ttest_ind(b, r, equal_var=False, alternative="greater").pvalue,
                   cohen_d=row["gap"] / pooled, test="welch", p=welch.pvalue, ci_low=ci.low, ci_high=ci.high)
    paired = paired_comparison(diffs, alpha)
    if k < 2:
        notes.append("fewer than two shared seeds: no paired test")
    elif not paired.tested:
        notes.append("identical paired differences: no paired test")
    else:
        row.update(paired_t=paired.t, paired_df=k - 1, paired_p=paired.p, paired_p_one=paired.p_greater,
                   d_z=paired.d_z, test="paired", p=paired.p, ci_low=paired.ci_low, ci_high=paired.ci_high,
                   mde=paired.detectable)
    sizes = [k] if row["test"] == "paired" else [n_ref, n_base]
    if n_boot and row["test"] != "none" and not bootstrap_allowed(sizes, alpha):
        notes.append(f"no bootstrap: {' × '.join(map(str, sizes))} seeds give {distinct_resamples(sizes)} "
                     "distinct resamples")
    elif n_boot and row["test"] != "none":
        rng = np.random.default_rng(seed)  # fresh per comparison, so results do not depend on row order
        if row["test"] == "paired":  # resample seeds, keeping each seed's pair together
            boots = rng.choice(diffs, (n_boot, k)).mean(1)
        else:
            boots = rng.choice(b, (n_boot, n_base)).mean(1) - rng.choice(r, (n_boot, n_ref)).mean(1)
        row["boot_low"], row["boot_high"] = np.percentile(boots, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return {**row, "note": "; ".join(notes)}


def distinct_resamples(sizes) -> int:
    """How many different resamples a bootstrap can draw: per group of n, the C(2n − 1, n) multisets."""
    return math.prod(math.comb(2 * n - 1, n) for n in sizes)


def bootstrap_allowed(sizes, alpha: float = 0.05) -> bool:
    """Whether a percentile bootstrap over groups of these sizes has enough distinct resamples beyond each of
    its (1 − alpha) limits to be more than a single resample (the rule in the module docstring)."""
    return min(sizes) >= 2 and distinct_resamples(sizes) * alpha / 2 >= MIN_TAIL_RESAMPLES


def compare_metrics(df, primary: str = "fixed_loss", secondary: str = "val_loss", **kwargs) -> pd.DataFrame:
    """`compare` on the primary metric, with the secondary metric's p and Holm p beside each row and a note
    where the two disagree on significance, so that no verdict holds for one metric silently."""
    main = compare(df, primary, **kwargs)
    other = compare(df, secondary, **kwargs)[["size", "baseline", "p", "p_holm", "significant"]]
    out = main.merge(other.rename(columns={"p": f"p_{secondary}", "p_holm": f"p_holm_{secondary}",
                                           "significant": f"significant_{secondary}"}),
                     on=["size", "baseline"], how="left")
    differs = out["significant"] != out[f"significant_{secondary}"].fillna(False).astype(bool)
    out["metrics_note"] = np.where(differs, np.where(out["significant"], f"significant with {primary} only",
                                                     f"significant with {secondary} only"), "")
    return out


def _verdict(r, alpha: float, reference: str) -> str:
    """The page's sentence for one row: the comparison's word (``verdict_word``) on its Holm p, else, in the
    conventional band (unadjusted p < 2 * alpha), the same word read as a trend."""
    if np.isnan(r.p):
        return f"gap {r.tested_gap:+.4f}, {r.note}"
    word = verdict_word(r.tested_gap, r.p_holm, alpha=alpha)
    if word in ("better", "worse"):
        return (f"{reference} {word} by {abs(r.tested_gap):.4f}, significant after Holm correction "
                f"(p_holm={_p(r.p_holm)})")
    detectable = f"; the design detects {r.mde:.4f} with 80 % power" if np.isfinite(getattr(r, "mde", np.nan)) else ""
    trend = verdict_word(r.tested_gap, r.p, alpha=2 * alpha)
    if trend == "better":
        return (f"trend favouring {reference} by {r.tested_gap:.4f} (p={_p(r.p)}, not significant after "
                f"Holm{detectable})")
    if trend == "worse":
        return f"{reference} worse by {-r.tested_gap:.4f} (p={_p(r.p)}, not significant after Holm{detectable})"
    return f"no gain (gap {r.tested_gap:+.4f}, p={_p(r.p)}{detectable})"


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"
