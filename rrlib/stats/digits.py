"""Rounding to significant digits, as the report stores and ranks numbers (rrlib.views.tables stores every page's
floats by it; rrlib.results.mechanism ranks the gate's stored values by it, so that a rank reads the same on
another CPU)."""
from __future__ import annotations

import math

import pandas as pd


def round_significant(x, digits: int) -> float:
    """``x`` to ``digits`` significant digits, but never rounded into its integer part (12345.6 to 12346 at 5); a
    missing value (None, NaN, pd.NA), zero or infinity as it is."""
    if x is None or x is pd.NA or x == 0 or not math.isfinite(x):
        return x
    return round(float(x), max(0, digits - 1 - math.floor(math.log10(abs(x)))))
