"""Corrections for a family of tests read at once: Holm's step-down adjustment (the chance of any false claim) and
Benjamini–Hochberg's q-values (the false discovery rate), both statsmodels' ``multipletests``.

A NaN p is a test that did not run: it stays NaN and stays outside the family, so a comparison with one seed or no
spread does not make the others' correction stricter.
"""
import numpy as np
from statsmodels.stats.multitest import multipletests


def _adjusted(pvalues, method: str) -> np.ndarray:
    p = np.asarray(pvalues, dtype=float)
    out = np.full_like(p, np.nan)
    run = ~np.isnan(p)
    if run.any():
        out[run] = multipletests(p[run], method=method)[1]
    return out


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the input order; NaNs (tests not run) stay NaN, outside the family."""
    return _adjusted(pvalues, "holm")


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini–Hochberg q-values (the false discovery rate at which each test would just be rejected), in the input
    order; NaNs stay NaN, outside the family. Shown beside Holm's p, which controls the chance of any false claim
    instead: q ≤ Holm's p always."""
    return _adjusted(pvalues, "fdr_bh")
