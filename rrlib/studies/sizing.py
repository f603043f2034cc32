"""Sizing a design before its runs: the seeds a detectable-gap target needs, from a pilot's spread taken at an upper
confidence bound, at the level the claim's correction leaves.

Why the upper bound: a pilot of a few seeds underestimates the SD as often as not, and a design sized at the point
estimate misses its target whenever it does (the Review power designs' realised SDs came out 15-40 % above their
pilots'). The one-sided upper 80 % bound of an SD from n values is sd·√((n − 1)/χ²₀.₂₀(n − 1)): with three values
it is 2.1× the estimate, with eight 1.3× (rrlib.stats.verdict.sd_upper_bound; ``compare --detect`` sizes the same
way, through rrlib.stats.verdict.design_seeds, which this calls).

Why α/m: Holm's first step tests the smallest p at α/m; a design that reaches its target at α/m reaches it at every
later step of the same family too. A one-sided test at α is sized as the two-sided test at 2α (the same
critical value).
"""
from __future__ import annotations

import numpy as np

from ..stats import detectable_gap
from ..stats.verdict import design_seeds, sd_upper_bound


def size(values, target: float, alpha: float = 0.05, family: int = 1, one_sided: bool = False,
         least: int = 2) -> dict:
    """The design one set of pilot values fixes: their SD and its upper bound, the level the test runs at
    (α/``family``; doubled for a one-sided test, see the module docstring), the seeds whose detectable gap at
    that SD is at most ``target`` (at least ``least``; None past 1,000), and the gap those seeds detect."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    sd = float(values.std(ddof=1)) if len(values) > 1 else np.nan
    seeds = design_seeds(sd, len(values), target, alpha * (2 if one_sided else 1), family) \
        if np.isfinite(sd) and sd > 0 else None
    seeds = None if seeds is None else max(seeds, least)
    sized = {"pilot_n": len(values), "sd": sd, "sd_upper": sd_upper_bound(sd, len(values)), "alpha": alpha / family,
             "one_sided": one_sided, "target": target, "seeds": seeds}
    return sized | {"detectable": detects(sized, seeds) if seeds else np.nan}


def detects(sized: dict, seeds: int) -> float:
    """The gap ``seeds`` detect with 80 % power at a sized design's SD bound and level (``size``'s)."""
    return detectable_gap(sized["sd_upper"], seeds, sized["alpha"] * (2 if sized["one_sided"] else 1))
