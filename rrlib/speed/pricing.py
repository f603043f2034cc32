"""The paper's sweep (its 42 runs) in device-hours at the benchmark's measured speed: a measured (size, variant)
costs its runs' tokens ÷ tokens/s, another its training FLOPs ÷ (MFU × peak), with the MFU measured for that
variant at the nearest measured size."""
from __future__ import annotations

import functools
from pathlib import Path

import torch

from ..model import GPT
from ..runs.config import ConfigError
from ..runs.presets import resolve_run


# The paper's names for what rrlib calls presets and variants.
PAPER_SIZES = {"60M": "60m", "150M": "150m", "320M": "320m", "590M": "590m", "1B": "1b"}


SIZE_ORDER = list(PAPER_SIZES.values())


PAPER_VARIANTS = {"review_neutral": "review"}


@functools.cache
def paper_runs(csv_path: Path) -> list[dict]:
    """The paper's runs as rrlib names, each with its tokens (steps × the preset's batch × context)."""
    import pandas as pd

    cells = {}  # (size, variant) → (tokens per step, FLOPs per token): resolved once per cell
    runs = []
    for row in pd.read_csv(csv_path).itertuples():
        if row.size not in PAPER_SIZES:
            raise ConfigError(f"{csv_path} has size {row.size!r}; the paper's sizes are {', '.join(PAPER_SIZES)}")
        key = PAPER_SIZES[row.size], PAPER_VARIANTS.get(row.variant, row.variant)
        if key not in cells:
            run = resolve_run(*key, 0)
            with torch.device("meta"):  # counted from the model's structure, without memory or init
                cells[key] = run.train.batch_size * run.model.seq_len, GPT(run.model).flops_per_token()
        tokens_per_step, flops_per_token = cells[key]
        runs.append({"size": key[0], "size_rank": SIZE_ORDER.index(key[0]), "variant": key[1],
                     "tokens": row.steps * tokens_per_step, "flops_per_token": flops_per_token,
                     "minutes": row.minutes})
    return runs


def sweep_hours(runs: list[dict], measured: dict, peak_flops: float | None) -> dict:
    """Device-hours of ``runs`` at the measured speed.

    measured maps (size, variant) to {"size_rank", "tokens_per_s", "mfu"}. A run whose (size, variant) was
    measured costs tokens ÷ tokens/s. Another costs tokens × flops_per_token ÷ (MFU × peak), with the MFU of the
    same variant at the measured size nearest in rank (the larger on a tie); without one it stays unpriced.
    """
    measured_h = estimated_h = 0.0
    unpriced = []
    for run in runs:
        m = measured.get((run["size"], run["variant"]))
        near = sorted((abs(o["size_rank"] - run["size_rank"]), -o["size_rank"], o["mfu"])
                      for (_, variant), o in measured.items() if variant == run["variant"] and o["mfu"] is not None)
        if m is not None:
            measured_h += run["tokens"] / m["tokens_per_s"] / 3600
        elif near and peak_flops is not None:
            estimated_h += run["tokens"] * run["flops_per_token"] / (near[0][2] * peak_flops) / 3600
        else:
            unpriced.append(f"{run['size']}/{run['variant']}")
    return {"runs": len(runs), "measured_hours": measured_h, "flop_estimated_hours": estimated_h,
            "total_hours": None if unpriced else measured_h + estimated_h, "unpriced_runs": unpriced,
            "paper_reported_hours": sum(r["minutes"] for r in runs) / 60}


def price_sweep(csv_path: Path, rows: list[dict], peak_flops) -> dict | None:
    """The paper's sweep priced from the benchmark's rows, or None when no paper size was measured."""
    measured = {(r["size"], r["variant"]): {"size_rank": SIZE_ORDER.index(r["size"]),
                                            "tokens_per_s": r["tokens_per_s"], "mfu": r["mfu"]}
                for r in rows if r["size"] in SIZE_ORDER}
    return sweep_hours(paper_runs(csv_path), measured, peak_flops) if measured else None
