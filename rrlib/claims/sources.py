"""What page 07 reads besides the records and the results: the finished runs of a folder, every depth's probe
files of page 07's depth part, the FLOP rate the harness's committed CPU runs reached (which prices an out-of-reach
claim, rrlib.claims.reach), and a note of what its own study holds."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rrlib.studies import claims_study
from rrlib.runs.config import project_path
from rrlib.runs.sweep import results_table


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


def study_note(plan: list[dict], size: str, root: str, own: pd.DataFrame, committed: pd.DataFrame, out_root: str,
               wide_size: str, seeds) -> list[str]:
    """What page 07's family part holds, in a line or two: its planned runs at ``size`` (``plan``: the sweeps of
    claims_study.study_plan) and how many of them (``own``, under ``root``) have finished, what a run at
    ``wide_size`` would cost in training FLOPs, and how closely a retrained run reproduced its committed result
    (``committed``: the same settings and seeds)."""
    planned = sum(len(sweep["variants"]) * len(sweep["seeds"]) for sweep in plan)
    cost = {s: finished(out_root, s, seeds)["train_flops"].mean() for s in (size, wide_size)
            if s and len(finished(out_root, s, seeds))}
    lines = [f"This page's study: {planned} runs at {size} ({len(own)} of its runs under {root} finished"
             + (f", {own['minutes'].mean():.1f} min of training each on average" if len(own) else "") + ")"
             + (f"; a {wide_size} run costs {cost[wide_size] / cost[size]:.1f}× a {size} run's training FLOPs"
                if len(cost) == 2 else "") + "."]
    if len(own) and len(committed):
        again = own.merge(committed, on=["variant", "seed"], suffixes=("", "_committed"))
        lines.append(f"{len(again)} retrained runs against their committed results: largest |Δ fixed_loss| "
                     f"{(again['fixed_loss'] - again['fixed_loss_committed']).abs().max():.1g}")
    return lines
