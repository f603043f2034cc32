"""The Delta AttnRes paper's conversion by fine-tuning (page 07's conversion part, rrlib.studies.claims_study): where
the converted model starts is shown (``START_VIEW``: its largest logit difference from the pretrained model at
conversion, by the paper's default recipe, no gate, and with the identity gate; no quoted sentence claims it starts
at the pretrained function, so no row judges it), whether it ends better than the same checkpoint
continued (continued − converted, paired by seed, by each recipe: the paper's default decides, the identity-gated
form is shown beside it, Holm over the two in the table); and the claim as the paper states it, that a pretrained
model converts by fine-tuning, as non-inferiority against continued training (``non_inferior``) on fresh seeds."""
from __future__ import annotations

import pandas as pd

from rrlib import stats
from rrlib.stats import ledger, verdict
from rrlib.studies.claims_study import CONVERTED

from .rows import row

DEFAULT, GATED = "without a gate (the code's default)", "with the identity gate"

START_VIEW = {"columns": ["max_abs_logit_diff", "max_abs_logit_diff_without_gate", "gate_abs_mean_trained"],
              "formats": {"max_abs_logit_diff": "{:.3g}", "max_abs_logit_diff_without_gate": "{:.3g}",
                          "gate_abs_mean_trained": "{:.3g}"},
              "rename": {"max_abs_logit_diff": "max |Δ logit| at conversion",
                         "max_abs_logit_diff_without_gate": "… without the identity gate",
                         "gate_abs_mean_trained": "mean |g| after fine-tuning"}}


def arm_tests(continued: pd.DataFrame, gated: pd.DataFrame, margin: float, alpha: float = 0.05) -> dict:
    """continued − converted by each recipe that has both arms' runs (compare_pairs rows, with a TOST at
    ±``margin``), the paper's default first: ``continued`` holds the continued standard and the ungated
    conversion, ``gated`` the identity-gated one."""
    arms = {DEFAULT: continued,
            GATED: pd.concat([continued[continued["variant"] == "standard"], gated], ignore_index=True)}
    return {name: verdict.compare_pairs(runs, [CONVERTED], ["standard"], margin=margin, alpha=alpha).iloc[0]
            for name, runs in arms.items() if {"standard", CONVERTED} <= set(runs["variant"])}


def seeds_done(tests: dict) -> int:
    """The seeds every recipe has finished (0 while one has none)."""
    return min((int(t["seeds"]) for t in tests.values()), default=0)


def arms_table(tests: dict) -> pd.DataFrame:
    """The recipes' tests, one row each, with Holm over the recipes (``p_holm``)."""
    p_holm = dict(zip(tests, stats.holm([t["p"] for t in tests.values()])))
    return pd.DataFrame({name: {**t, "p_holm": p_holm[name]} for name, t in tests.items()}).T


def arms_view(margin: float) -> dict:
    """How ``arms_table`` reads on the page."""
    return {"columns": ["mean_baseline", "mean_variant", "gap", "ci_low", "ci_high", "p", "p_holm", "p_equivalent",
                        "detectable", "seeds"],
            "formats": {c: "{:+.4f}" for c in ("gap", "ci_low", "ci_high")}
            | {"mean_baseline": "{:.4f}", "mean_variant": "{:.4f}", "p": "{:.2g}", "p_holm": "{:.2g}",
               "p_equivalent": "{:.2g}", "detectable": "{:.4f}"},
            "rename": {"mean_baseline": "continued", "mean_variant": "converted", "gap": "continued − converted",
                       "ci_low": "95 % low", "ci_high": "95 % high", "p": "paired p", "p_holm": "Holm p",
                       "p_equivalent": f"TOST p (±{margin})", "detectable": "detectable (80 %)"}}


def ends_better(claim, tests: dict, steps_of: str, conversions: pd.DataFrame, margin: float, evidence: str,
                alpha: float = 0.05) -> dict:
    """Continued − converted by each recipe (``tests``: ``arm_tests``, the paper's default first); the default
    decides, the identity-gated form is shown beside it."""
    default = next(iter(tests))
    t = tests[default]
    opened = (f"; the identity gates opened to a mean |g| of {conversions['gate_abs_mean_trained'].mean():.3g}"
              if len(conversions) else "")
    return row(claim,
               f"continued standard − converted delta_attnres_block, fixed_loss after {steps_of}'s steps again, "
               f"{int(t['seeds'])} seeds paired: " + "; ".join(
                   f"{name} {r['gap']:+.4f} (p {r['p']:.2g}, TOST p ±{margin} {r['p_equivalent']:.2g})"
                   for name, r in tests.items())
               + f"; the row's numbers are the paper's default recipe ({default})" + opened,
               ledger.judge("directional", t["gap"], t["p"], alpha=alpha), evidence, t["gap"], t["ci_low"],
               t["ci_high"], t["p"], "none: one comparison (the paper's default recipe)", detectable=t["detectable"])


def non_inferior(claim, tests: dict, steps_of: str, evidence: str, alpha: float = 0.05) -> dict:
    """The converted model is not worse than the same checkpoint continued by the record's margin or more: the
    shortfall converted − continued (``tests``: ``arm_tests`` on the design's seeds, the paper's default recipe
    first, which decides), one-sided t that it lies below the margin (supported where shown below it, contradicted
    where shown above it, ledger.judge's null rule); the identity-gated recipe beside it."""
    margin, default = claim.margin_value, next(iter(tests))
    t = tests[default]
    shortfall, low, high, n = -t["gap"], -t["ci_high"], -t["ci_low"], int(t["seeds"])
    below = ledger.below_margin_p(shortfall, low, high, n, margin, alpha)
    beyond = ledger.beyond_margin_p(shortfall, low, high, n, margin, alpha=alpha)
    beside = "; ".join(f"{name} {-r['gap']:+.4f} [{-r['ci_high']:+.4f}, {-r['ci_low']:+.4f}]"
                       for name, r in tests.items() if name != default)
    return row(claim,
               f"converted delta_attnres_block − continued standard, fixed_loss after {steps_of}'s steps again, {n} "
               f"seeds paired, by the paper's default recipe ({default}); one-sided p that the shortfall is below "
               f"{margin:g} nats: {below:.2g}" + (f"; beside it, {beside}" if beside else ""),
               ledger.judge("null", shortfall, t["p"], below, p_beyond=beyond, alpha=alpha), evidence, shortfall,
               low, high, t["p"], "none: one comparison (the paper's default recipe)", detectable=t["detectable"],
               margin=margin)
