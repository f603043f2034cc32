"""Where and how a run computes: its device and precision ('auto' settled), bf16 autocast, joining the process
group under torchrun, and what a CPU's arithmetic can reach (its matmul peak; a run's training FLOPs), which the
guard in rrlib.runs.pace and the report's cost of missing runs build on."""
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
from .validate import DEVICE_NAMES


def pick_device(name: str) -> torch.device:
    """The device called ``name``: auto, cpu, cuda or cuda:<index>, where it exists (mps, meta and the like do not
    run rrlib's training)."""
    if not DEVICE_NAMES.fullmatch(name):
        raise ConfigError(f"unknown device {name!r}; valid devices: auto, cpu, cuda, cuda:<index>")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for but CUDA is not available; valid devices here: auto, cpu")
    device = torch.device(name)
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError(f"device {name!r} asked for but this machine has {torch.cuda.device_count()} GPU(s); "
                          f"valid devices here: auto, cpu, cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return device


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


@functools.cache
def cpu_matmul_flops() -> float:
    """Measured fp32 matmul FLOP/s of this CPU at its current threads: faster than training ever runs on it.

    Timed by the process's CPU time spread over its threads, not by the wall clock, so that other work on the
    machine (which takes cores away, not speed from them) does not read as a slower CPU: on a shared machine the
    wall clock varies several-fold from one call to the next.
    """
    n, reps = 512, 4
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = math.inf
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(reps):
            a @ b
        best = min(best, (time.process_time() - t0) / torch.get_num_threads())
    return 2 * n ** 3 * reps / max(best, 1e-9)


def training_flops(run: RunConfig) -> float:
    """FLOPs of the run's training steps, counted from the model's structure (built on the meta device)."""
    with torch.device("meta"):
        model = GPT(run.model)
    return model.flops_per_token() * run.train.steps * run.train.batch_size * run.model.seq_len
