"""Tables for a reader: a few columns, numbers rounded to what they can say, the full table as CSV beside the page.

A results table has more columns than a page can show (17 in a sweep's). ``reader_table`` shows the chosen
columns, formatted (p-values to two significant digits, booleans as ✓ and –, missing values as –), writes every
column to ``<report>/tables/<name>.csv`` and links it, where ``<report>`` is the folder above ``figures_dir``
(the page's own folder).

Every float a CSV holds is rounded by ``rounded`` (never into a number's integer part) before it is written, so
that the committed files are the same bytes on any x86-64 CPU:

- what a model computes afresh (gate probes, gradients at initialisation) to ``SIGNIFICANT`` (5) significant
  digits, also in the data fed to its figures (``reader_table(digits=5)``): a rebuild on another CPU (other SIMD
  kernels in ATen, BLAS or numpy) moves such values in their 7th-8th digit;
- everything else to ``STORED_DIGITS`` (10), the default: the statistics a page computes from result files
  (slopes, regressions, intervals) move in their 15th-16th digit with the BLAS and numpy kernels a CPU takes, and
  ten digits are six more than any page or README table shows, so a value read back and formatted again is not
  rounded twice (2.1675047 to 2.1675 to 2.167) unless it lies within 1e-10 of a boundary.

Either rounding still flips a last digit where a value lies within a machine's difference of a rounding boundary.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from ..runs.folders.disk import write_bytes_atomic
from ..runs.config import project_path
from ..stats import digits as digits_of

MISSING = "–"
SIGNIFICANT = 5  # more than any page quotes; a 6th digit would flip on another CPU about 10x as often
STORED_DIGITS = 10  # what a CSV keeps of any other float: well above what is shown, well below the CPU's noise
P_COLUMN = re.compile(r"^p$|_p$|^p_|^p \(|\bp$", re.I)  # p, welch_p, paired_p, p_holm, "p (Holm)", "Holm p"


def round_significant(x: float, digits: int = SIGNIFICANT) -> float:
    """``x`` to ``digits`` significant digits, but never rounded into its integer part (12345.6 to 12346)."""
    return digits_of.round_significant(x, digits)


def rounded(data, digits: int = SIGNIFICANT):
    """``data`` with every float rounded by ``round_significant``: a DataFrame (float columns and a float index), a
    Series, a numpy array or a torch tensor (returned as a float64 numpy array), or one float."""
    if isinstance(data, pd.DataFrame):
        out = data.copy()
        for column in out.columns[[pd.api.types.is_float_dtype(t) for t in out.dtypes]]:
            out[column] = rounded(out[column], digits)
        if pd.api.types.is_float_dtype(out.index):
            out.index = pd.Index(rounded(out.index.to_numpy(), digits), name=out.index.name)
        return out
    if isinstance(data, pd.Series):
        return data.map(lambda v: round_significant(v, digits)) if pd.api.types.is_float_dtype(data) else data
    if hasattr(data, "detach"):  # a torch tensor, without importing torch here
        data = data.detach().cpu().double().numpy()
    if isinstance(data, np.ndarray):
        return np.array([round_significant(v, digits) for v in data.ravel().tolist()],
                        dtype=float).reshape(data.shape) if data.dtype.kind == "f" else data
    return round_significant(data, digits) if isinstance(data, float) else data


def fmt_p(p) -> str:
    """A p-value to two significant digits (0.00035, 0.062, 1)."""
    return MISSING if _missing(p) else f"{p:.2g}"


def fmt_number(x, digits: int = 4) -> str:
    """A number to ``digits`` significant digits, integers without a decimal point, thousands separated."""
    if _missing(x):
        return MISSING
    if isinstance(x, bool):
        return fmt_bool(x)
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def fmt_bool(x) -> str:
    return MISSING if _missing(x) else ("✓" if x else "–")


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA


def formatted(df: pd.DataFrame, formats: dict | None = None) -> pd.DataFrame:
    """``df`` as strings for reading: ``formats`` maps a column to a format string or function; other columns are
    formatted by kind (p-values, booleans, numbers)."""
    formats = formats or {}
    out = pd.DataFrame(index=df.index)
    for column in df.columns:
        values, rule = df[column], formats.get(column)
        if isinstance(rule, str):
            out[column] = [MISSING if _missing(v) else rule.format(v) for v in values]
        elif callable(rule):
            out[column] = [rule(v) for v in values]
        elif values.dtype == bool:
            out[column] = [fmt_bool(v) for v in values]
        elif P_COLUMN.search(str(column)) and pd.api.types.is_numeric_dtype(values):
            out[column] = [fmt_p(v) for v in values]
        elif pd.api.types.is_numeric_dtype(values):
            out[column] = [fmt_number(v) for v in values]
        else:
            out[column] = [MISSING if _missing(v) else str(v) for v in values]
    return out


def reader_table(df: pd.DataFrame, name: str, figures_dir=None, columns=None, formats: dict | None = None,
                 rename: dict | None = None, index: bool = True, full: pd.DataFrame | None = None,
                 digits: int | None = None):
    """Show ``df[columns]`` formatted for reading; with ``figures_dir``, write ``full`` (default: all of ``df``)
    as CSV, rounded by ``rounded`` to ``digits`` significant digits (default ``STORED_DIGITS``), and link it.

    ``rename`` gives the shown columns their reader's names (with units). Returns the table and its link as one
    HTML output, whose ids come from ``name`` so that a rebuilt page is byte for byte the same.
    """
    from IPython.display import HTML

    picked = df[list(columns)] if columns is not None else df
    if not index:  # a hidden index may repeat (tables stacked by concat), which the styler refuses
        picked = picked.reset_index(drop=True)
    shown = formatted(picked, formats).rename(columns=rename or {})
    # text (a claim, a test, a verdict) reads from the left; numbers stay right-aligned, digits under digits
    text = [(rename or {}).get(c, c) for c in picked.columns if not pd.api.types.is_numeric_dtype(picked[c])]
    styler = shown.style.set_uuid(name.replace(".", "_")).set_properties(subset=text, **{"text-align": "left"})
    link = ""
    if figures_dir is not None:
        folder = project_path(figures_dir).parent / "tables"
        folder.mkdir(parents=True, exist_ok=True)
        full = df if full is None else full
        digits = STORED_DIGITS if digits is None else digits
        write_bytes_atomic(folder / f"{name}.csv", rounded(full, digits).to_csv(index=index and full is df).encode())
        more = "the same table" if full is df and len(shown.columns) == len(df.columns) else \
            f"{len(full)} rows × {len(full.columns)} columns"
        link = (f'<p class="rrlib-csv">Full table ({more}, to {digits} significant digits): '
                f'<a href="tables/{name}.csv">tables/{name}.csv</a></p>')
    return HTML((styler if index else styler.hide(axis="index")).to_html() + link)
