"""What page 07 reads besides the records: another page's table, the finished runs of a folder, every depth's probe
files of page 07's depth part, and the FLOP rate the harness's committed CPU runs reached (which prices an
out-of-reach claim, rrlib.claims.reach)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rrlib.report import claims_study
from rrlib.runs.config import project_path
from rrlib.runs.sweep import results_table


def page_table(tables_dir: Path, name: str) -> pd.DataFrame | None:
    """Another page's full table, or None when that page has not been built with it."""
    path = Path(tables_dir) / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def finished(root: str, size: str, seeds=None) -> pd.DataFrame:
    """The finished runs of ``size`` under ``root`` (those of ``seeds`` where given); an empty table without them."""
    if not (project_path(root) / size).exists():
        return pd.DataFrame(columns=["variant", "seed"])
    table = results_table(root, size)
    return table[table["seed"].isin(seeds)] if seeds is not None and len(table) else table


def cpu_rate(root: str, size: str) -> float:
    """Training FLOPs per second over the committed runs of ``size`` under ``root``; NaN without them."""
    runs = finished(root, size)
    return runs["train_flops"].sum() / (runs["minutes"].sum() * 60) if len(runs) else np.nan


def depth_probes(root: str, sizes, variants, seeds, kind: str) -> pd.DataFrame:
    """Every depth's probe files (``kind``: scales or routing) in one table, the depth's size in a ``depth``
    column."""
    return pd.concat([claims_study.read_probes(root, size, variants, seeds, kind).assign(depth=size)
                      for size in sizes], ignore_index=True)
