"""Where and how a run computes: its device and precision ('auto' settled), bf16 autocast, joining the process
group under torchrun, and the guard that stops a run far beyond a CPU's reach before it starts."""
from __future__ import annotations

import contextlib
import functools
import math
import os
import time

import torch
import torch.distributed as dist

from ..model import GPT
from .config import ConfigError, RunConfig


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for but CUDA is not available; valid devices here: auto, cpu")
    try:
        return torch.device(name)
    except RuntimeError:
        raise ConfigError(f"unknown device {name!r}; valid devices: auto, cpu, cuda, cuda:<index>") from None


def resolve_precision(precision: str, device: torch.device) -> str:
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


def autocast_factory(precision: str, device: torch.device):
    """bf16 autocast around forward passes only; fp32/tf32 run without autocast.

    TF32 is set through ``torch.set_float32_matmul_precision`` alone ("high" = TF32 for fp32 matmuls, as the
    paper; "highest" = full fp32). The legacy ``allow_tf32`` flags are never touched: on torch 2.13, mixing
    them with this API makes a later ``get_float32_matmul_precision()`` raise, and inductor's autotuning
    calls it.
    """
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    if precision == "bf16":
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


def dist_info() -> tuple[int, int, int]:
    """(rank, local rank, world size) from torchrun's environment; (0, 0, 1) for a plain process."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def join_process_group(device: torch.device, local_rank: int, world: int) -> torch.device:
    """Under torchrun (``world`` > 1): this process's own GPU, and the process group joined; else ``device``."""
    if world > 1:
        if device.type == "cuda":
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


# Beyond this many hours at the CPU's full matmul speed, a run is not a CPU's job (a paper size is days).
CPU_REACH_HOURS = 12


@functools.cache
def cpu_matmul_flops() -> float:
    """Measured fp32 matmul FLOP/s of this CPU at its current threads: faster than training ever runs on it."""
    n, reps = 512, 4
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 * reps / best


def training_flops(run: RunConfig) -> float:
    """FLOPs of the run's training steps, counted from the model's structure (built on the meta device)."""
    with torch.device("meta"):
        model = GPT(run.model)
    return model.flops_per_token() * run.train.steps * run.train.batch_size * run.model.seq_len


def check_cpu_reach(runs: list[RunConfig], device: torch.device, allow_slow: bool | None = None) -> None:
    """Stop, with the estimate, before training ``runs`` on a CPU when they would take far beyond its reach."""
    if allow_slow is None:
        allow_slow = os.environ.get("RRLIB_ALLOW_SLOW") == "1"
    if device.type != "cpu" or allow_slow or not runs:
        return
    flops = sum(training_flops(r) for r in runs)
    if flops < 1e14:  # under 12 hours even at 2.3 GFLOP/s: no need to measure
        return
    rate = cpu_matmul_flops()
    hours = flops / rate / 3600
    if hours > CPU_REACH_HOURS:
        r = runs[0]
        what = f"{r.size}/{r.variant}/seed{r.seed}" if len(runs) == 1 else f"these {len(runs)} {r.size} runs"
        raise ConfigError(f"{what} would take at least {hours:,.0f} hours on this CPU ({flops:.1e} training FLOPs "
                          f"at its full matmul speed, {rate / 1e9:.0f} GFLOP/s measured); run on a GPU, or pass "
                          f"--allow-slow (RRLIB_ALLOW_SLOW=1 outside the command line) to start anyway")
