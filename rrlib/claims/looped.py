"""The looped-transformer paper's rows, from page 05's looped reading (the powered design's, rrlib.results.
looped_power, once it has finished; the 200-step study's, rrlib.results.looped, before): 1/N against 1/√N at each
seed's optimum (every N must hold), the optimum's slope over N under 1/N (equivalence at the record's margin; the
supplementary edge extension must agree), and the slope contrast between the two scalings. Each returns one ledger
row, or None while the study has no finished seed; ``ledger_rows`` makes all three, in progress where a table has
none."""
from __future__ import annotations

import pandas as pd
from scipy.stats import t as t_dist

from rrlib.studies import looped_study
from rrlib.stats import ledger

from .rows import row


def trainability_row(claim, trainable: pd.DataFrame, study: str, evidence: str, alpha: float = 0.05) -> dict | None:
    """scaled_loops − scaled at each seed's optimum, per N: the largest p over N > 1, and that N's gap."""
    done = trainable.dropna(subset=["p"])  # N = 1 is the same model under both rules: no test there
    if done.empty:
        return None
    effect, low, high, p = ledger.intersection(done["gap"].to_numpy(), done["ci_low"].to_numpy(),
                                               done["ci_high"].to_numpy(), done["p"].to_numpy())
    # the binding N's detectable gap from its interval: half-width = t_{1-α/2}·SE, detectable = (t_{1-α/2} + t_{0.8})·SE
    n_binding = int(done.iloc[ledger.binding(done["p"], done["gap"])]["seeds"])
    t_half, t_power = t_dist.ppf(1 - alpha / 2, n_binding - 1), t_dist.ppf(0.8, n_binding - 1)
    return row(claim, f"scaled_loops − scaled at each seed's optimum, {study}, "
                      f"N = {', '.join(map(str, done['loops']))} "
                      f"(" + ", ".join(f"N = {n}: {g:+.4f}, p {q:.2g}" for n, g, q in
                                       zip(done["loops"], done["gap"], done["p"])) + "); the N with the largest p",
               ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p,
               ledger.NO_CORRECTION, detectable=(high - low) / 2 * (t_half + t_power) / t_half)


def transfer_row(claim, transfer: pd.DataFrame, study: str, evidence: str, alpha: float = 0.05) -> dict | None:
    """The slope of log₂(optimal lr) on log₂ N under 1/N, judged at the record's margin (the TOST first; only a slope
    shown beyond the margin contradicts). A verdict that rests on the seeds whose optimum was interior in every cell
    holds only if it survives the supplementary extension that gives every seed one; where it does not, the claim
    is undecided at this scale, and the row says so."""
    primary = transfer[(transfer["variant"] == "scaled") & (transfer["runs"] == "all runs")]
    if primary.empty or primary["slope"].isna().all():
        return None
    first, second = primary.iloc[0], primary.iloc[1]  # the study's primary estimator first, the grid argmin next
    margin = claim.margin_value

    def as_claim(estimate):
        beyond = ledger.beyond_margin_p(estimate["slope"], estimate["ci_low"], estimate["ci_high"],
                                        int(estimate["seeds"]), margin, "both", alpha)
        return ledger.judge("equivalence", estimate["slope"], estimate["p"], estimate["p_equivalent"], alpha=alpha,
                            p_beyond=beyond)

    kind = as_claim(first)
    test = (f"slope of log₂(optimal lr) on log₂ N under 1/N scaling, {study} ({first['estimator']}, "
            f"{int(first['seeds'])} "
            f"seeds): p {first['p']:.2g}, TOST p (±1/6) {first['p_equivalent']:.2g}; the study's verdict: "
            f"{first['verdict']}; by the {second['estimator']} optimum ({int(second['seeds'])} seeds) TOST p "
            f"{second['p_equivalent']:.2g}, {second['verdict']}")
    extended = transfer[(transfer["variant"] == "scaled") & transfer["runs"].str.startswith("edge cells")]
    if len(extended):
        also = extended.iloc[0]
        test += (f"; with the edge cells extended (supplementary, {int(also['seeds'])} seeds) TOST p "
                 f"{also['p_equivalent']:.2g}, {also['verdict']}")
        if as_claim(also) != kind:
            kind = "inconclusive"
            first = also
    return row(claim, test, kind, evidence, first["slope"], first["ci_low"], first["ci_high"], first["p"],
               "none: one slope (the supplementary extension must agree)", detectable=first["mde"], margin=margin)


def contrast_row(claim, optima: pd.DataFrame | None, study: str, powered: bool, evidence: str,
                 alpha: float = 0.05) -> dict | None:
    """Under 1/√N the optimum falls with N (the paper's account: 1/√N under-scales each loop's update), under 1/N it
    stays, so the optimum moves less under 1/N. Per seed, the slope of log₂(optimal lr) on log₂ N under each rule
    (looped_study.seed_slopes); effect = slope under 1/N − under 1/√N, paired by seed, on the study's primary
    estimator (the grid argmin beside). ``powered``: the design was sized for looped_study.CONTRAST_TARGET."""
    slopes = looped_study.seed_slopes(optima) if optima is not None and "seed" in optima else pd.DataFrame()
    contrast = {estimator: looped_study.slope_contrast(slopes, estimator, alpha=alpha)
                for estimator in ("parabola", "grid")}
    if contrast["parabola"]["n"] < 2:
        return None
    t, g = contrast["parabola"], contrast["grid"]
    return row(
        claim,
        f"slope of log₂(optimal lr) per doubling of N, 1/N's − 1/√N's, {study}, paired over the "
        f"{t['n']} seeds with a parabola "
        f"optimum at every N under both rules; by the grid argmin ({g['n']} seeds) {g['effect']:+.3f} "
        f"[{g['ci_low']:+.3f}, {g['ci_high']:+.3f}], p {g['p']:.2g}"
        + (f"; the design was sized from its pilot to detect {looped_study.CONTRAST_TARGET:g} per doubling"
           if powered else ""),
        ledger.judge("directional", t["effect"], t["p"], alpha=alpha), evidence, t["effect"], t["ci_low"],
        t["ci_high"], t["p"], "none: one comparison (the grid argmin beside it)", detectable=t["mde"])


def ledger_rows(claims: dict, trainable: pd.DataFrame | None, transfer: pd.DataFrame | None,
                optima: pd.DataFrame | None, powered: bool, evidence: str, alpha: float = 0.05) -> list[dict]:
    """The three looped rows from the reading's tables (None where the reading has none), in the ledger's order:
    trainability, transfer, contrast. ``powered``: the tables are the powered design's (1,000 steps), which reads
    alone once it has finished; otherwise the 200-step study's."""
    study = "the powered design (1,000 steps)" if powered else "the 200-step study"
    made = {"looped-trainability": None if trainable is None else trainability_row(
                claims["looped-trainability"], trainable, study, evidence, alpha),
            "looped-transfer": None if transfer is None else transfer_row(
                claims["looped-transfer"], transfer, study, evidence, alpha),
            "looped-contrast": contrast_row(claims["looped-contrast"], optima, study, powered, evidence, alpha)}
    in_progress = ledger.untested("study in progress (no seed has finished every cell)")
    return [r or row(claims[cid], claims[cid].metric, in_progress, evidence) for cid, r in made.items()]
