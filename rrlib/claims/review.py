"""The Review paper's rows, from the results other pages show (rrlib.results): its depth claims (page 02's runs,
results.depth), its claims about its own runs (page 04's paired tests of the paper's CSV, results.statistics, and the
CSV itself for the growth from 590M to 1B), and its growth with size (page 04's trend, page 06's fit of size against
tokens per parameter, results.size_tokens). Each function takes the claims by id (rrlib.claims.records), the result
and the evidence to cite, and returns ledger rows."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import t as t_dist

from rrlib import stats
from rrlib.stats import ledger

from .rows import link, missing, no_gain, row



DEPTH_CLAIMS = ("review-convex-stalls", "review-additive-trains")
PAPER_RUN_CLAIMS = ("review-no-gain-paper", "review-standard-better-60m", "review-gain-590m", "review-gain-1b",
                    "review-gain-grows-1b")


def depth_rows(claims: dict, depth_runs: pd.DataFrame | None, evidence: tuple[str, str],
               alpha: float = 0.05) -> list[dict]:
    """(a): the convex form at the deepest depth against the additive (paired by seed, Holm over the depths), and
    the additive form's loss at the shallowest depth minus the deepest (Welch: different models). Untested while
    the depth ablation's runs (``depth_runs``: rrlib.results.depth.depth_runs) are None."""
    scored = None if depth_runs is None or "fixed_loss" not in depth_runs else \
        pd.to_numeric(depth_runs["fixed_loss"], errors="coerce").notna()
    if scored is None or not scored.any():  # no depth run with a held-out loss
        return [missing(claims[c], "02_runs") for c in DEPTH_CLAIMS]
    depth_runs = depth_runs.assign(size=depth_runs["n_layers"].map(lambda n: f"{n:02d} blocks"))
    convex = stats.compare(depth_runs[depth_runs["variant"].isin(["review", "review_convex"])], "fixed_loss",
                           n_boot=0)
    deepest = convex.iloc[-1]
    onset = convex.loc[convex["significant"] & (convex["paired_gap"] > 0.1), "size"]
    additive = depth_runs[depth_runs["variant"] == "review"]
    shallow, deep = additive["n_layers"].min(), additive["n_layers"].max()
    fall = ledger.welch(additive.loc[additive["n_layers"] == shallow, "fixed_loss"],
                        additive.loc[additive["n_layers"] == deep, "fixed_loss"], alpha)
    return [
        row(claims["review-convex-stalls"],
            f"review_convex − review, fixed_loss, at {deepest['size']} ({int(deepest['paired_n'])} seeds, paired; "
            f"Holm over {len(convex)} depths); more than 0.1 nats behind from "
            f"{onset.iloc[0] if len(onset) else 'no depth'} on",
            ledger.judge("directional", deepest["paired_gap"], deepest["p_holm"], alpha=alpha), evidence[0],
            deepest["paired_gap"], deepest["ci_low"], deepest["ci_high"], deepest["p_holm"],
            f"Holm over the {len(convex)} depths", detectable=deepest["mde"]),
        row(claims["review-additive-trains"],
            f"review's fixed_loss at {shallow} blocks − at {deep} blocks (Welch, {fall['n']} seeds each)",
            ledger.judge("directional", fall["effect"], fall["p"], alpha=alpha), evidence[1], fall["effect"],
            fall["ci_low"], fall["ci_high"], fall["p"], "none: one comparison", detectable=fall["mde"])]


def no_gain_cpu_row(claim, power_tests: pd.DataFrame | None, power_items: list[str],
                    ours_tests: pd.DataFrame | None, paper_tests: pd.DataFrame | None, alpha: float = 0.05) -> dict:
    """(d) at CPU scale: page 04's powered designs (``power_tests``, pooled; ``power_items`` their tables) read
    alone once they have finished, the 5-seed sizes (``ours_tests``) until then, judged at the record's margin."""
    if power_tests is not None and paper_tests is not None:
        fewest, most = int(power_tests["paired_n"].min()), int(power_tests["paired_n"].max())
        designs = "designs" if len(power_items) > 1 else "design"
        return no_gain(claim, power_tests, f"{', '.join(power_tests['size'].unique())}, the powered {designs} "
                                           f"({fewest if fewest == most else f'{fewest}–{most}'} seeds, fixed_loss)",
                       link("04_statistics", *power_items), alpha)
    if ours_tests is None or paper_tests is None:
        return missing(claim, "04_ours_tests")
    return no_gain(claim, ours_tests, ", ".join(ours_tests["size"].unique()) + " (fixed_loss)",
                   link("04_statistics", "04_ours_tests"), alpha)


def paper_run_rows(claims: dict, paper_tests: pd.DataFrame | None, paper_results: pd.DataFrame, evidence: str,
                   alpha: float = 0.05) -> list[dict]:
    """(d, e) on the paper's own runs: no advantage through 320M (at the margin), standard better at 60M, the gains
    at 590M and 1B over both baselines (the paired test decides, the paper's Welch p beside it), and the gain at 1B
    against 590M (``paper_results``: the paper's per-seed runs). The paper's effects are its stated ones. Untested
    while page 04's table (``paper_tests``) is None."""
    if paper_tests is None:
        return [missing(claims[c], "04_paper_tests") for c in PAPER_RUN_CLAIMS]

    def at(sizes):
        return paper_tests[paper_tests["size"].isin(sizes)]

    rows = [no_gain(claims["review-no-gain-paper"], at(["60M", "150M", "320M"]),
                    "60M–320M (the paper's runs, val_loss)", evidence, alpha)]
    sixty = paper_tests.set_index(["size", "baseline"]).loc[("60M", "standard")]
    rows.append(row(
        claims["review-standard-better-60m"], "review − standard at 60M (the paper's runs, val_loss, paired)",
        ledger.judge("directional", -sixty["paired_gap"], sixty["paired_p"], alpha=alpha), evidence,
        -sixty["paired_gap"], -sixty["ci_high"], -sixty["ci_low"], sixty["paired_p"], "none: one comparison",
        claims["review-standard-better-60m"].stated_effect, sixty["mde"]))
    for size, cid in (("590M", "review-gain-590m"), ("1B", "review-gain-1b")):
        both = at([size])
        effect, low, high, p = ledger.intersection(both["paired_gap"].to_numpy(), both["ci_low"].to_numpy(),
                                                   both["ci_high"].to_numpy(), both["paired_p"].to_numpy())
        binding = both.iloc[ledger.binding(both["paired_p"], both["paired_gap"])]
        rows.append(row(
            claims[cid],
            f"Review's paired gaps at {size} (the paper's runs, val_loss, paired by seed: " + ", ".join(
                f"vs {b} {g:+.4f}, p {q:.2g}"
                for b, g, q in zip(both["baseline"], both["paired_gap"], both["paired_p"]))
            + f"); the comparison with the larger p (vs {binding['baseline']}). The paper's own test, Welch's t on the "
            "per-seed losses: " + ", ".join(f"vs {b} p {q:.2g}" for b, q in zip(both["baseline"], both["welch_p"])),
            ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p, ledger.NO_CORRECTION,
            claims[cid].stated_effect, binding["mde"]))
    # the per-seed paired gaps at 1B against those at 590M: the growth of the gain, per baseline
    growth = []
    for baseline in ("highway", "standard"):
        per_size = {s: (paper_results[(paper_results["size"] == s) & (paper_results["variant"] == baseline)]
                        .set_index("seed")["val_loss"]
                        - paper_results[(paper_results["size"] == s) & (paper_results["variant"] == "review")]
                        .set_index("seed")["val_loss"]) for s in ("590M", "1B")}
        growth.append(ledger.welch(per_size["1B"], per_size["590M"], alpha))
    effect, low, high, p = ledger.intersection([g["effect"] for g in growth], [g["ci_low"] for g in growth],
                                               [g["ci_high"] for g in growth], [g["p"] for g in growth])
    binding = growth[ledger.binding([g["p"] for g in growth], [g["effect"] for g in growth])]
    rows.append(row(
        claims["review-gain-grows-1b"],
        "Review's per-seed gap at 1B − at 590M (Welch over seeds), per baseline; the one with the larger p",
        ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p, ledger.NO_CORRECTION,
        claims["review-gain-grows-1b"].stated_effect, binding["mde"]))
    return rows


def paper_slope(trend: pd.DataFrame | None) -> float:
    """The Review paper's growth of the gain with size as its own runs give it: the slope per decade, the smaller
    over the two baselines (its words, "grows across the tested range", state no number)."""
    return np.nan if trend is None else float(trend["slope_per_decade"].min())


def trend_row(claims: dict, trend: pd.DataFrame | None, evidence: str, alpha: float = 0.05) -> dict:
    """(f) on the paper's runs: the slope of the gap on log10 size, per baseline; both must hold. Untested while
    page 04's trend (``trend``) is None."""
    if trend is None:
        return missing(claims["review-grows-with-scale"], "04_paper_trend")
    # the slope's t-interval on n_sizes − 2 degrees of freedom, from page 04's standard error
    half = t_dist.ppf(1 - alpha / 2, (trend["n_sizes"] - 2).clip(lower=1)) * trend["stderr"]
    effect, low, high, p = ledger.intersection(trend["slope_per_decade"].to_numpy(),
                                               (trend["slope_per_decade"] - half).to_numpy(),
                                               (trend["slope_per_decade"] + half).to_numpy(), trend["p"].to_numpy())
    binding = trend.iloc[ledger.binding(trend["p"], trend["slope_per_decade"])]
    return row(
        claims["review-grows-with-scale"],
        "slope of Review's gap on log10 size (nats per decade, the paper's 5 sizes, one point each), the smaller over "
        "the two baselines, the one with the larger p (" + ", ".join(
            f"{b} {s:+.4f}, p {q:.2g}, detectable {ledger.detectable_coefficient(e, n - 2, alpha):.4f}"
            for b, s, q, e, n in zip(trend["baseline"], trend["slope_per_decade"], trend["p"], trend["stderr"],
                                     trend["n_sizes"])) + ")",
        ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p, ledger.NO_CORRECTION,
        paper_slope(trend), detectable=ledger.detectable_coefficient(binding["stderr"], binding["n_sizes"] - 2, alpha))


def size_row(claims: dict, factors: pd.DataFrame | None, slope: float, evidence: str, alpha: float = 0.05) -> dict:
    """(f) on the CPU grid: the coefficient of log10 size in page 06's fit of the gap on size and tokens per
    parameter, per baseline (both must hold), against the paper's own slope per decade. Untested while page 06's
    fit (``factors``) is None."""
    if factors is None:
        return missing(claims["review-size-not-budget"], "06_gap_factors")
    size_terms = factors[(factors["metric"] == "fixed_loss") & (factors["term"] == "log10_size")]
    effect, low, high, p = ledger.intersection(size_terms["coef"].to_numpy(), size_terms["ci_low"].to_numpy(),
                                               size_terms["ci_high"].to_numpy(), size_terms["p"].to_numpy())
    binding = size_terms.iloc[ledger.binding(size_terms["p"], size_terms["coef"])]
    tpp = factors[(factors["metric"] == "fixed_loss") & (factors["term"] == "log10_tokens_per_param")]
    return row(
        claims["review-size-not-budget"],
        f"page 06: coefficient of log10 size in the gap's fit on size and tokens per parameter "
        f"({int(size_terms['n_cells'].iloc[0])} cells, fixed_loss), the baseline with the larger p (detectable "
        + ", ".join(f"{b} {ledger.detectable_coefficient(e, d, alpha):.3f}" for b, e, d in
                    zip(size_terms["baseline"], size_terms["stderr"], size_terms["df"]))
        + "); tokens per parameter: " + ", ".join(
            f"{b} {c:+.3f} [{lo:+.3f}, {hi:+.3f}]" for b, c, lo, hi in
            zip(tpp["baseline"], tpp["coef"], tpp["ci_low"], tpp["ci_high"])),
        ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p, ledger.NO_CORRECTION,
        slope, detectable=ledger.detectable_coefficient(binding["stderr"], binding["df"], alpha))
