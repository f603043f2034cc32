"""The Delta AttnRes paper's conversion by fine-tuning (page 07's conversion part, rrlib.studies.claims_study): where
the converted model starts (its largest logit difference from the pretrained model at conversion, by the paper's
default recipe, no gate; the identity gate beside it), and whether it ends better than the same checkpoint
continued (continued − converted, paired by seed, by each recipe: the paper's default decides, the identity-gated
form is shown beside it, Holm over the two in the table)."""
from __future__ import annotations

import pandas as pd

from rrlib import stats
from rrlib.stats import ledger, verdict
from rrlib.studies.claims_study import CONVERTED

from .rows import row, unfinished

START_TOLERANCE = 1e-6  # |logit difference| within which the converted model starts at the pretrained function
DEFAULT, GATED = "without a gate (the code's default)", "with the identity gate"

START_VIEW = {"columns": ["max_abs_logit_diff", "max_abs_logit_diff_without_gate", "gate_abs_mean_trained"],
              "formats": {"max_abs_logit_diff": "{:.3g}", "max_abs_logit_diff_without_gate": "{:.3g}",
                          "gate_abs_mean_trained": "{:.3g}"},
              "rename": {"max_abs_logit_diff": "max |Δ logit| at conversion",
                         "max_abs_logit_diff_without_gate": "… without the identity gate",
                         "gate_abs_mean_trained": "mean |g| after fine-tuning"}}


def start_row(claim, conversions: pd.DataFrame, planned: int, evidence: str) -> dict:
    """Judged on the paper's default recipe (no gate): supported when its largest |logit difference| at conversion
    over every seed (``conversions``: claims_study.read_conversions) is within ``START_TOLERANCE``; the identity
    gate, which starts at the function by construction, beside it. Untested while fewer than ``planned`` seeds."""
    if len(conversions) < planned:
        return unfinished(claim, "the gated converted", len(conversions), planned)
    worst = conversions["max_abs_logit_diff_without_gate"].max()
    return row(claim,
               f"largest |logit difference| at conversion over {len(conversions)} seeds' held-out windows, by the "
               f"paper's default recipe (no gate); with the identity gate (not the default): up to "
               f"{conversions['max_abs_logit_diff'].max():.3g}; supported at ≤ 1e-6",  # START_TOLERANCE
               ledger.judge("measured", holds=worst <= START_TOLERANCE), evidence, worst,
               correction="none: a measurement")


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
