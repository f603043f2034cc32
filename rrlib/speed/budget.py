"""What a preset's sweep costs before it runs: tokens, training FLOPs and device-hours.

    python -m rrlib.budget 60m_tpp2 60m_tpp20 150m_tpp2 150m_tpp20 [--mfu 0.3 --device "H200" --precision bf16]

Two estimates per preset, both computed, none typed in:

- **at the paper's measured speed**: the paper's CSV records minutes per run; for a preset whose Review model
  has the architecture of one of the paper's sizes, each variant's tokens/s is that size's tokens (steps × its preset's
  batch × context, 64 × 256) over its minutes, so the hours are those of the paper's own GPU (which its paper does not name);
- **at an assumed MFU**: training FLOPs (6·N-style count from the model's structure, ``GPT.flops_per_token``
  × tokens) ÷ (MFU × the device's dense peak from ``rrlib.speed.peaks.PEAK_TFLOPS``).

A measured MFU from ``scripts/gpu_bench.sh`` on the device at hand replaces the assumed one.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch

from ..model import GPT
from ..runs.config import ConfigError, given_path, project_path
from ..runs.presets import load_preset, resolve_run
from .peaks import table_peak
from .pricing import PAPER_SIZES, PAPER_VARIANTS

PAPER_CSV = "../shared/reference/scaling_v8.csv"


def architecture(size: str) -> tuple:
    """What fixes a size's speed per token: Review's width, depth, heads, context, vocabulary."""
    m = resolve_run(size, "review", 0).model
    return m.d_model, m.n_layers, m.n_heads, m.seq_len, m.vocab_size


def paper_tokens_per_s(csv_path) -> dict[tuple, dict[str, float]]:
    """{architecture: {variant: tokens/s}} from the paper's CSV minutes."""
    df = pd.read_csv(csv_path)
    df["variant"] = df["variant"].replace(PAPER_VARIANTS)
    df = df[df["size"].isin(PAPER_SIZES)]
    out: dict[tuple, dict[str, float]] = {}
    for size, size_runs in df.groupby("size"):
        preset = load_preset(PAPER_SIZES[size])  # the paper's batch × context, as its preset has them
        tokens_per_step = preset.train.batch_size * preset.model.seq_len
        speeds = out.setdefault(architecture(PAPER_SIZES[size]), {})
        for variant, runs in size_runs.groupby("variant"):
            # total tokens over total time: the speed at which its seeds' runs took the minutes they record
            speeds[variant] = runs["steps"].sum() * tokens_per_step / (runs["minutes"].sum() * 60)
    return out


def preset_cost(size: str, paper_speed: dict | None = None, peak_flops: float | None = None,
                mfu: float | None = None) -> dict:
    """Runs, tokens, FLOPs and hours of a preset's whole sweep (its variants × seeds)."""
    preset = load_preset(size)
    speeds = (paper_speed or {}).get(architecture(size), {})
    runs = tokens = flops = 0
    paper_hours, priced = 0.0, True
    for variant in preset.variants:
        run = resolve_run(size, variant, preset.seeds[0])
        run_tokens = run.train.steps * run.train.batch_size * run.model.seq_len
        with torch.device("meta"):
            per_token = GPT(run.model).flops_per_token()
        n = len(preset.seeds)
        runs, tokens, flops = runs + n, tokens + n * run_tokens, flops + n * run_tokens * per_token
        if variant in speeds:
            paper_hours += n * run_tokens / speeds[variant] / 3600
        else:
            priced = False
    return {"size": size, "runs": runs, "steps": resolve_run(size, preset.variants[0], 0).train.steps,
            "tokens_per_run_M": tokens / runs / 1e6, "train_PFLOP": flops / 1e15,
            "hours_at_paper_speed": paper_hours if priced and speeds else None,
            "hours_at_mfu": flops / (mfu * peak_flops) / 3600 if mfu and peak_flops else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m rrlib.budget", description=__doc__.splitlines()[0])
    p.add_argument("sizes", nargs="+", help="presets (params/*.yaml names) whose sweeps to price")
    p.add_argument("--mfu", type=float, default=0.3, help="assumed model FLOP utilisation for the FLOP estimate")
    p.add_argument("--device", default="H200", help="device name looked up in rrlib.speed.peaks' table")
    p.add_argument("--precision", default="bf16", choices=("bf16", "tf32"), help="which peak of the device")
    p.add_argument("--paper-csv", default=None, help=f"the paper's runs, for its measured speed (default: {PAPER_CSV})")
    args = p.parse_args(argv)
    try:
        peak = table_peak(args.device, args.precision)
        if peak is None:
            raise ConfigError(f"no {args.precision} peak for device {args.device!r} in rrlib.speed.peaks.PEAK_TFLOPS")
        csv = project_path(given_path(args.paper_csv) if args.paper_csv else PAPER_CSV)
        speed = paper_tokens_per_s(csv) if Path(csv).exists() else None
        rows = [preset_cost(size, speed, peak[0], args.mfu) for size in args.sizes]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    table = pd.DataFrame(rows).rename(columns={"hours_at_mfu": f"hours_at_mfu_{args.mfu:g}_{peak[1].split()[0]}"})
    print(f"peak: {peak[1]}; paper speed: {'from ' + (args.paper_csv or PAPER_CSV) if speed else 'unavailable'}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
