"""The claims ledger's one verdict rule, and the rows it judges: each claim's test, its correction, its effect with
an interval and p from the same comparison, the paper's own effect, what the design could detect, and a verdict.

Every effect is signed so that positive means what the claim says (a gain, less growth, sharper routing); a claim of
"no gain" is read on the gain itself. ``judge`` is the rule, at level ``alpha`` on the row's p after its stated
correction (``correction``: which comparisons Holm spans, or none for a claim that needs every part to hold):

    directional claim   supported      the effect is positive and significant
    ("A beats B")       contradicted   the effect is negative and significant; or, where the row tests the
                                       paper's own regime, the one-sided test that the effect is below the paper's
                                       rejects (a gain as large as the paper's is ruled out)
                                       Symmetrically, on this harness's own runs: a design whose interval lies
                                       wholly below the paper's stated effect (on the row's scale) contradicts
                                       the claim at this scale (``at_this_scale``), as an interval wholly above
                                       zero supports it
                        inconclusive   neither: the row states the smallest effect its design detects beside the
                                       paper's, so a reader sees whether it could have seen it; on the paper's
                                       own runs it states it alone (``OWN_RUNS``)
    null claim          supported      the one-sided test that the effect is below ``margin`` rejects: any gain is
    ("no gain")                        smaller than the margin, which is tied to the paper's own effect
                        contradicted   the one-sided test that the effect is above ``margin`` rejects: a gain as large
                                       as the margin is shown (a significant gain inside the margin is no gain in
                                       the claim's sense, so it never contradicts)
                        inconclusive   neither
    equivalence claim   supported      the TOST at ±``margin`` rejects: the effect lies within the margin (looked at
    ("does not depend                  first)
    on N")              contradicted   the effect is shown beyond the margin (``beyond_margin_p``, either side)
                        inconclusive   neither
    measured claim      supported /    a quantity against the value the paper states, with the tolerance written
    ("about 7 %")       contradicted   in the row (``holds``)
    any claim           out of reach   what it needs (a size beyond a CPU, model-parallel training, a measurement
                                       the study does not make), with no numbers
                        untested       while its inputs are missing (a result with no runs, runs not
                                       finished), or for a claim registered before its design has run

A claim's verdict is its comparison's word, translated: ``judge`` reads the effect, p and margin test by
``rrlib.stats.paired.verdict_word`` (the rule behind ``rrlib compare``'s verdicts), with the effect signed as the
claim, so "better" supports the claim and "worse" contradicts it, and a claim of no difference is supported where its
comparison is "equivalent" at the claim's margin (``CLAIMED``); "inconclusive" means the same in both.

The detectable gap is set against the effect the paper states, never against the same data's estimate. A row whose
scope is the paper's own runs (``OWN_RUNS``) tests data whose effect *is* the paper's effect, so setting the
design's power against it would be a post hoc power statement: such a row states its detectable gap alone
(``could_see``, ``row``'s ``own_runs``).

A claim about several comparisons that must all hold ("over both baselines", "at every N") is an intersection-union
test: its p is the largest of the parts' unadjusted p-values, which needs no further correction, and its effect and
interval are that same comparison's (``intersection``), so a row's interval and p always come from one comparison.
A part whose effect runs against the claim decides it first (``binding``): shown significant, it contradicts the
claim however strong the other parts are; supported needs every part positive and significant.
A claim that holds if any of several forms does it ("by either recipe") is Holm over the forms, decided by the form
most in the claim's favour (``union``): supported if any form's effect is positive and significant, contradicted
only if every form's is negative and significant.

Where more than one registered design answers a claim (the family's three seeds, a powered design, the
leaderboard's 47 seeds), the design with the smallest detectable gap decides (``decide``), whichever way its verdict
goes; the others stand beside it in the row's test ("also registered"). A design that has no verdict yet (untested)
or no detectable gap decides only where no other design has one. So a claim is read on its strongest evidence, not
on the first design that answered it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from .paired import verdict_word

VERDICTS = ("supported", "contradicted", "inconclusive", "out of reach", "untested")
# a claim's verdict from its comparison's word (the module docstring)
CLAIMED = {"better": "supported", "worse": "contradicted", "equivalent": "supported"}
KINDS = ("directional", "null", "equivalence", "measured")
COLUMNS = ["paper", "claim", "test", "correction", "effect", "ci_low", "ci_high", "p", "paper_effect", "detectable",
           "margin", "verdict", "evidence", "setting"]  # setting: what a controlled verdict holds in (claims.controls)
NO_CORRECTION = "none: every part must hold (the largest p)"
OWN_RUNS = "the paper's own runs"  # a record's scope where the paper's effect is the tested data's own estimate
NO_POWER = "the paper's own runs: its effect is this data's estimate, so no power statement"
OTHER_SCALE = "other"  # a record's paper_effect.scale where the paper's effect is not on the row's metric
TIE = 1e-9  # detectable gaps this close (relative) are one design's gap computed twice: the first listed decides


def judge(kind: str, effect: float = np.nan, p: float = np.nan, p_margin: float = np.nan,
          holds: bool | None = None, alpha: float = 0.05, p_beyond: float = np.nan) -> str:
    """The verdict of one claim by the rule in the module docstring: ``p`` after the row's correction, ``p_margin``
    the p of its margin test (``below_margin_p`` at the null claim's margin, or at the paper's own effect for a
    directional claim on the paper's regime; the TOST p for an equivalence claim), ``p_beyond`` the p that the
    effect lies beyond the margin (``beyond_margin_p``: a null or equivalence claim is contradicted by nothing else)."""
    if kind not in KINDS:
        raise ValueError(f"claim kind {kind!r} is none of {', '.join(KINDS)}")
    if kind == "measured":
        if holds is None:
            raise ValueError("a measured claim needs holds=True or False")
        return "supported" if holds else "contradicted"
    if kind == "directional":
        word = verdict_word(effect, p, alpha=alpha)
    else:  # no difference: the comparison's equivalence at the claim's margin (one-sided for "no gain")
        word = verdict_word(effect, np.nan, p_margin, alpha)
    if word in CLAIMED:
        return CLAIMED[word]
    against = p_margin if kind == "directional" else p_beyond
    return "contradicted" if np.isfinite(against) and against < alpha else "inconclusive"


def below_margin_p(effect: float, ci_low: float, ci_high: float, n: int, margin: float, alpha: float = 0.05) -> float:
    """One-sided p that the true effect is below ``margin``, from a paired t-interval at level 1 − alpha over ``n``
    seeds (its standard error is read off the interval): the test of "no gain as large as the margin"."""
    if n < 2 or not all(np.isfinite([effect, ci_low, ci_high])) or ci_high <= ci_low:
        return np.nan
    se = (ci_high - ci_low) / (2 * sps.t.ppf(1 - alpha / 2, n - 1))
    return float(sps.t.cdf((effect - margin) / se, n - 1))


def beyond_margin_p(effect: float, ci_low: float, ci_high: float, n: int, margin: float, sides: str = "upper",
                    alpha: float = 0.05) -> float:
    """One-sided p that the true effect lies beyond ``margin``: above it (``sides`` upper, a "no gain" claim), or
    beyond ±margin on the side the estimate lies (both, an equivalence claim). The complement of the one-sided
    test ``below_margin_p`` on the same interval."""
    if sides not in ("upper", "both"):
        raise ValueError(f"sides {sides!r} is none of upper, both")
    if sides == "both" and effect < 0:
        effect, ci_low, ci_high = -effect, -ci_high, -ci_low
    below = below_margin_p(effect, ci_low, ci_high, n, margin, alpha)
    return 1 - below if np.isfinite(below) else np.nan


def binding(ps, effects=None) -> int:
    """The position of the part that decides "every part holds": one not tested (p NaN: the claim cannot hold on
    it); else, given the parts' ``effects`` (signed as the claim), the part least in the claim's favour: a negative
    effect with the smallest p where any effect is not positive (a part shown against the claim refutes it, however
    strong the others), else the positive part with the largest p; without ``effects``, the largest p (parts whose
    p tests the claim's side already, such as a margin test's)."""
    ps = np.asarray(ps, dtype=float)
    untested = np.flatnonzero(np.isnan(ps))
    if len(untested):
        return int(untested[0])
    if effects is None:
        return int(np.argmax(ps))
    effects = np.asarray(effects, dtype=float)
    return int(min(range(len(ps)), key=lambda k: (effects[k] > 0, ps[k] if effects[k] <= 0 else -ps[k])))


def union(effects, ps) -> int:
    """The position of the form that decides "some form holds", its p already corrected over the forms (Holm): the
    form most in the claim's favour, by its one-sided evidence for a positive effect. So a positive form with the
    smallest p where any form is positive, else the negative form with the largest p: the verdict is supported when
    any form is significantly positive and contradicted only when every form is significantly negative. A form not
    tested (p NaN) decides nothing while another was tested."""
    effects, ps = np.asarray(effects, dtype=float), np.asarray(ps, dtype=float)
    tested = np.flatnonzero(np.isfinite(ps) & np.isfinite(effects))
    if not len(tested):
        return 0
    return int(min(tested, key=lambda k: (effects[k] <= 0, ps[k] if effects[k] > 0 else -ps[k])))


def intersection(effects, lows, highs, ps) -> tuple[float, float, float, float]:
    """(effect, ci_low, ci_high, p) of "every part holds": the binding part's (``binding``), all four its own."""
    k = binding(ps, effects)
    return effects[k], lows[k], highs[k], float(ps[k])


def detectable_coefficient(stderr: float, dof: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest regression coefficient a two-sided t-test on ``dof`` degrees of freedom detects with ``power``
    at the standard error it met: (t_{1−α/2} + t_{power})·SE, the usual approximation (the noncentral t's
    lower tail is neglected)."""
    if not np.isfinite(stderr) or dof < 1:
        return np.nan
    return float((sps.t.ppf(1 - alpha / 2, dof) + sps.t.ppf(power, dof)) * stderr)


def welch(a, b, alpha: float = 0.05) -> dict:
    """mean(a) − mean(b) for two independent groups, with Welch's t-interval and p, and the detectable difference
    at their pooled spread (the paired formula on the Welch standard error: an approximation)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    test = sps.ttest_ind(a, b, equal_var=False)
    ci = test.confidence_interval(1 - alpha)
    se = (ci.high - ci.low) / (2 * sps.t.ppf(1 - alpha / 2, test.df))
    return {"effect": a.mean() - b.mean(), "ci_low": ci.low, "ci_high": ci.high, "p": test.pvalue,
            "n": min(len(a), len(b)), "mde": detectable_coefficient(se, test.df, alpha)}


def row(paper: str, claim: str, test: str, verdict: str, evidence: str, effect=np.nan, ci_low=np.nan,
        ci_high=np.nan, p=np.nan, correction: str = "", paper_effect=np.nan, detectable=np.nan,
        margin=np.nan, own_runs: bool = False, setting: str | None = None) -> dict:
    """One ledger row. An inconclusive row says what its design could see, beside the paper's effect; alone where
    the row tests the paper's own runs (``own_runs``), whose effect is the same data's estimate."""
    if verdict not in VERDICTS and not verdict.startswith(("untested: ", "out of reach: ")):
        raise ValueError(f"verdict {verdict!r} is none of {', '.join(VERDICTS)} (untested or out of reach with its "
                         f"reason)")
    if verdict == "inconclusive" and np.isfinite(detectable):
        seen = f"the design detects {detectable:.4g}"
        test += f"; {seen}" + (f" against the paper's {paper_effect:.4g}" if np.isfinite(paper_effect) and not own_runs
                               else "")
    values = (paper, claim, test, correction, effect, ci_low, ci_high, p, paper_effect, detectable, margin,
              verdict, evidence, setting)
    return dict(zip(COLUMNS, values))


def at_this_scale(verdict: str, ci_high: float, paper_effect: float) -> str:
    """The symmetric half of the directional rule: an inconclusive row whose interval's upper end lies below the
    paper's stated effect (positive, as the claim is signed) has ruled out an effect as large as the paper's, and
    contradicts the claim at this scale; any other verdict stands (a significant effect in the claim's direction,
    smaller than the paper's, supports the direction the claim states)."""
    if verdict == "inconclusive" and np.isfinite(ci_high) and np.isfinite(paper_effect) and 0 < paper_effect and \
            ci_high < paper_effect:
        return "contradicted"
    return verdict


def decide(candidates: list[dict]) -> dict:
    """The row of the design that decides a claim several registered designs answer: the smallest finite detectable
    gap among the rows with a verdict (not untested, not out of reach), the first in ``candidates`` on a tie (equal
    within a relative ``TIE``, as two designs reading the same runs are); where
    none has both, the first with a verdict, else the first. The others are named in its test, each with its
    effect, interval and verdict, after "also registered"."""
    if not candidates:
        raise ValueError("decide needs at least one design's row")

    def judged(r):
        return verdict_kind(r["verdict"]) in ("supported", "contradicted", "inconclusive")

    sized = [k for k, r in enumerate(candidates) if judged(r) and np.isfinite(r["detectable"])]
    with_verdict = [k for k, r in enumerate(candidates) if judged(r)]
    if sized:  # designs on the same runs detect the same gap but for rounding: within TIE, the first decides
        least = min(candidates[j]["detectable"] for j in sized)
        k = next(j for j in sized if candidates[j]["detectable"] <= least * (1 + TIE))
    else:
        k = (with_verdict or [0])[0]
    chosen, others = dict(candidates[k]), [r for j, r in enumerate(candidates) if j != k]
    if others:
        chosen["test"] += "; also registered: " + "; ".join(_beside(r) for r in others)
    return chosen


def _beside(r: dict) -> str:
    """A design that did not decide, in a phrase: its test's first clause, effect, interval and verdict."""
    what = r["test"].split(";")[0] or "a design"
    if not np.isfinite(r["effect"]):
        return f"{what}: {r['verdict']}"
    interval = f" [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]" if np.isfinite(r["ci_low"]) else ""
    seen = f", detects {r['detectable']:.3g}" if np.isfinite(r["detectable"]) else ""
    return f"{what}: {r['effect']:+.4f}{interval}, {verdict_kind(r['verdict'])}{seen}"


def untested(reason: str) -> str:
    return f"untested: {reason}"


def out_of_reach(needs: str) -> str:
    return f"out of reach: {needs}"


def ledger(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def could_see(r) -> str:
    """Whether the row's design could have answered its claim: its detectable gap (80 % power) beside the effect the
    paper states, or beside the margin of a claim of no difference. A row on the paper's own runs (its ``scope``
    ``OWN_RUNS``) states its detectable gap alone: the paper's effect, and the margin taken from it, are estimates
    from the same runs, and power judged against them would be post hoc. ``r`` is a ledger row (a mapping); its
    ``margin_sides`` (the record's, rrlib.claims.page.attach) writes an upper margin +m, a two-sided one ±m."""
    kind, _, reason = r["verdict"].partition(": ")
    seen, paper = r.get("detectable", float("nan")), r.get("paper_effect", float("nan"))
    margin = r.get("margin", float("nan"))
    if kind == "out of reach":
        return f"no: {reason}"
    if kind == "untested":
        return f"not yet: {reason}"
    if r.get("scope") == OWN_RUNS:
        return f"detects {seen:.3g}; {NO_POWER}" if pd.notna(seen) else NO_POWER
    if r.get("effect_scale") == OTHER_SCALE and pd.notna(paper):
        return (f"{'answered' if kind in ('supported', 'contradicted') else 'unclear'}: detects {seen:.3g}; the "
                f"paper's {abs(paper):.3g} is on another scale than this row's metric") if pd.notna(seen) else \
            "the paper's effect is on another scale than this row's metric"
    against = f" vs the paper's {abs(paper):.3g}" if pd.notna(paper) else ""
    if kind in ("supported", "contradicted"):  # a verdict reached is a question answered
        return f"yes: answered (detects {seen:.3g}{against})" if pd.notna(seen) else "yes: a measurement"
    if pd.isna(seen):
        return "–"
    if pd.isna(paper) and pd.notna(margin):  # a claim of no difference: could the design show equivalence?
        sign = "+" if r.get("margin_sides") == "upper" else "±"  # "no gain" bounds the gain above only
        return f"{'yes' if seen <= margin else 'no'}: detects {seen:.3g} vs the margin {sign}{margin:.3g}"
    if pd.isna(paper):
        return f"unclear: detects {seen:.3g}; the paper gives no effect size to set against it"
    return f"{'yes' if seen <= abs(paper) else 'no'}: detects {seen:.3g}{against}"


def verdict_kind(verdict: str) -> str:
    """The verdict without its reason: one of ``VERDICTS``."""
    for kind in ("untested", "out of reach"):
        if verdict.startswith(kind):
            return kind
    return verdict


def verdict_counts(verdicts) -> dict[str, int]:
    """The verdicts counted by kind (``verdict_kind``) in ``VERDICTS``' order, a kind none has left out: the one count
    page 07, the index's abstract and the README state."""
    kinds = pd.Series(list(verdicts), dtype=object).map(verdict_kind).value_counts()
    return {kind: int(kinds[kind]) for kind in VERDICTS if kinds.get(kind, 0)}
