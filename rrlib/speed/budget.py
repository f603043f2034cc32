"""What a preset's sweep costs before it runs: tokens, training FLOPs and device-hours.

    python -m rrlib.budget 60m_tpp2 60m_tpp20 150m_tpp2 150m_tpp20 [--mfu 0.24-0.29 --device "H200" --precision bf16]

Two estimates per preset, both computed, none typed in:

- **at the paper's measured speed**: the paper's CSV records minutes per run; for a preset whose Review model
  has the architecture of one of the paper's sizes, each variant's tokens/s is that size's tokens (steps × its preset's
  batch × context, 64 × 256) over its minutes, so the hours are those of the paper's own GPU (which its paper does not name);
- **at the predicted MFU**: training FLOPs (6·N-style count from the model's structure, ``GPT.flops_per_token``
  × tokens) ÷ (MFU × the device's dense peak from ``rrlib.speed.peaks.PEAK_TFLOPS``), as a range of hours from
  a range of MFU (``PREDICTED_MFU``, or ``--mfu``).

A measured MFU from ``scripts/gpu_bench.sh`` on the device at hand replaces the predicted one (``--mfu``).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import torch

from ..model import GPT
from ..parsing import OneLineParser, path_text
from ..runs.config import ConfigError, given_path, project_path
from ..runs.presets import load_preset, resolve_run
from .peaks import PEAK_TFLOPS, table_peak
from .pricing import PAPER_SIZES, PAPER_VARIANTS, read_paper_csv

PAPER_CSV = "outputs/reference/scaling_v8.csv"  # the committed copy

# What the code's FLOPs and memory traffic predict for a compiled bf16 training step of Review on an H200 (an
# estimate made by reading the code's matmuls and elementwise passes against the device's peak and bandwidth,
# not a measurement; no GPU has run these models here yet). Small models spend more of a step moving
# activations and the head's logits, so the prediction rises with size. A size between two of these is given
# the span from the lower one's low to the upper one's high; none outside them.
PREDICTED_MFU = {"60m": (0.24, 0.29), "1b": (0.41, 0.50)}


def _non_embedding(size: str) -> int:
    with torch.device("meta"):
        return GPT(resolve_run(size, "review", 0).model).n_non_embedding_params()


def predicted_mfu(size: str) -> tuple[float, float] | None:
    """The predicted MFU range for ``size`` (by its Review model's non-embedding parameters), or None."""
    n = _non_embedding(size)
    known = sorted((_non_embedding(s), lo_hi) for s, lo_hi in PREDICTED_MFU.items())
    for n_known, lo_hi in known:
        if n == n_known:
            return lo_hi
    for (n_lo, (lo, _)), (n_hi, (_, hi)) in zip(known, known[1:]):
        if n_lo < n < n_hi:
            return lo, hi
    return None


def parse_mfu(text: str) -> tuple[float, float]:
    """An MFU or a range of them, "0.3" or "0.24-0.29", each in (0, 1]."""
    try:  # a minus after an exponent's e (1e-3) is the number's, not the range's
        values = [float(v) for v in re.split(r"(?<![eE])-", text)]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or not all(0 < v <= 1 for v in values) or values != sorted(values):
        raise ConfigError(f"--mfu must be a fraction in (0, 1] or a range LOW-HIGH of them (e.g. 0.24-0.29), "
                          f"got {text!r}")
    return values[0], values[-1]


def architecture(size: str) -> tuple:
    """What fixes a size's speed per token: Review's width, depth, heads, context, vocabulary."""
    m = resolve_run(size, "review", 0).model
    return m.d_model, m.n_layers, m.n_heads, m.seq_len, m.vocab_size


def paper_tokens_per_s(csv_path) -> dict[tuple, dict[str, float]]:
    """{architecture: {variant: tokens/s}} from the paper's CSV minutes."""
    df = read_paper_csv(csv_path)
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
                mfu: tuple[float, float] | None = None) -> dict:
    """Runs, tokens, FLOPs and hours of a preset's whole sweep (its variants × seeds); with ``peak_flops``
    and an MFU range (low, high), the hours at its high and at its low end."""
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
            "mfu": f"{mfu[0]:.0%}" if mfu and mfu[0] == mfu[1] else f"{mfu[0]:.0%}-{mfu[1]:.0%}" if mfu else None,
            "hours_from": flops / (mfu[1] * peak_flops) / 3600 if mfu and peak_flops else None,
            "hours_to": flops / (mfu[0] * peak_flops) / 3600 if mfu and peak_flops else None}


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m rrlib.budget", description=__doc__.splitlines()[0])
    p.add_argument("sizes", nargs="+", help="presets (params/*.yaml names) whose sweeps to price")
    p.add_argument("--mfu", default=None, help="model FLOP utilisation, or a range LOW-HIGH, e.g. one measured by "
                                               "scripts/gpu_bench.sh (default: the predicted range per size)")
    p.add_argument("--device", default="H200", help="device name looked up in rrlib.speed.peaks' table")
    p.add_argument("--precision", default="bf16", choices=("bf16", "tf32"), help="which peak of the device")
    p.add_argument("--paper-csv", default=None, type=path_text,
                   help=f"the paper's runs, for its measured speed (default: {PAPER_CSV})")
    args = p.parse_args(argv)
    try:
        peak = table_peak(args.device, args.precision)
        if peak is None:
            raise ConfigError(f"no {args.precision} peak for device {args.device!r} in rrlib.speed.peaks.PEAK_TFLOPS; "
                              f"valid devices: {', '.join(label for _, label, _, _ in PEAK_TFLOPS)}")
        csv = project_path(given_path(args.paper_csv) if args.paper_csv else PAPER_CSV)
        # the default table may be absent (a copied tree); one the user names must be there
        speed = paper_tokens_per_s(csv) if args.paper_csv or Path(csv).exists() else None
        given = parse_mfu(args.mfu) if args.mfu else None
        rows = [preset_cost(size, speed, peak[0], given or predicted_mfu(size)) for size in args.sizes]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    table = pd.DataFrame(rows)
    print(f"peak: {peak[1]}; MFU: {'as given' if given else 'predicted (rrlib.speed.budget.PREDICTED_MFU)'}; "
          f"paper speed: {'from ' + (args.paper_csv or PAPER_CSV) if speed else 'unavailable'}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
