"""How long runs would take on this CPU, and the guard that stops those far beyond its reach before they start.

The estimate is measured: an optimizer step of the run's own model (width, depth, rule, micro-batch, precision),
timed on this machine, times the run's steps. The first measurement is kept in the run's cache folder
(``pace.json``, one figure per machine, thread count and model shape), so the same command gets the same answer
from one call to the next, whatever the machine's load at that moment; delete the file to measure again (after
the machine or its load has changed for good). Before any step is timed, the run's FLOPs at the CPU's matmul peak
(also measured once and kept) bound its time from below: a run far beyond reach even at that speed (a paper size:
hundreds of hours) is refused without building its model, and one that would need under a fiftieth of the limit
at that speed starts without a timing.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time

import torch

from ..model import GPT
from .config import ConfigError, RunConfig, project_path
from .device import autocast_factory, cpu_matmul_flops, resolve_precision, training_flops
from .folders.disk import DiskFull, write_bytes_atomic
from .optim import make_optimizer, optimizer_step

CPU_REACH_HOURS = 12  # beyond this a run is not a CPU's job
PACE_FILE = "pace.json"
# A run's FLOPs at the matmul peak decide without a timing when the answer is plain: beyond ten times the limit
# even at that speed, it is refused; under a fiftieth of it, it starts (no model here trains 50x below the peak).
# Between the two, its steps are timed. The margins also absorb a peak measured while the machine was busy.
BEYOND, SURE = 10, 1 / 50
DIRECT_SECONDS = 2.0  # a micro-batch step expected to take at most this long is timed whole (``time_step``)


def _machine() -> str:
    return f"{platform.node()} {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def kept(store, key: str, measure) -> float:
    """The figure ``store`` keeps under ``key``; measured (and kept, where the folder can be written) if none is."""
    try:
        table = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        table = {}
    if isinstance(table, dict) and isinstance(table.get(key), (int, float)) and table[key] > 0:
        return table[key]
    table = table if isinstance(table, dict) else {}
    table[key] = measure()
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(store, (json.dumps(table, indent=1, sort_keys=True) + "\n").encode())
    except (OSError, DiskFull):  # a cache that cannot be written: the figure is measured again next time
        pass
    return table[key]


def matmul_peak(cache_dir) -> float:
    """This CPU's matmul FLOP/s at its current threads, as first measured here (kept in ``cache_dir``)."""
    return kept(project_path(cache_dir) / PACE_FILE, f"{_machine()}: matmul FLOP/s by CPU time", cpu_matmul_flops)


def _step_key(run: RunConfig) -> str:
    shape = {"model": run.model.__dict__, "micro_batch": run.train.micro_batch_size or run.train.batch_size,
             "batch": run.train.batch_size, "precision": resolve_precision(run.train.precision, torch.device("cpu"))}
    return f"{_machine()}: step {hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]}"


def time_step(run: RunConfig) -> float:
    """Seconds of one optimizer step of ``run`` on this CPU, from a fresh model (the run's own is not touched).

    A micro-batch whose step takes a few seconds at most (``DIRECT_SECONDS``, judged from a step of one sequence)
    is timed as it is. A larger one costs about a + c·b (a fixed part, then the b sequences), so steps at one and
    two sequences give both and its time is read off the line: timing it whole would take too long, and only there
    is the line's noise, multiplied by b, small beside the step (at a small model, a line through two noisy steps
    of a few hundredths of a second overstates a step of eight sequences several times over). Its accumulation
    steps multiply it.
    """
    tc, device = run.train, torch.device("cpu")
    micro = tc.micro_batch_size or tc.batch_size
    model = GPT(run.model)
    optimizer = make_optimizer(model, tc, device)
    autocast = autocast_factory(resolve_precision(tc.precision, device), device)

    def seconds(b: int) -> float:
        x = torch.randint(0, run.model.vocab_size, (b, run.model.seq_len + 1))
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            optimizer_step(model, model, optimizer, x[:, :-1], x[:, 1:], tc.lr, 1, autocast, tc.grad_clip)
            best = min(best, time.perf_counter() - t0)
        return best

    seconds(min(micro, 2))  # the first steps allocate and pick kernels: not what the rest cost
    one = seconds(1)
    if micro <= 2 or one * micro <= DIRECT_SECONDS:
        seconds(micro)  # its own first step at this size, as above
        per_micro = seconds(micro)
    else:
        two = seconds(2)
        per_micro = two + (micro - 2) * max(two - one, 0.0)
    return per_micro * (tc.batch_size // micro)


def named_step_time(run: RunConfig) -> float:
    """``time_step``, with an error the model raises (a user's rule that returns the wrong shape) said in one
    sentence naming the rule, before any run starts."""
    try:
        return time_step(run)
    except Exception as err:  # a user's rule: whatever it raises is one sentence
        raise ConfigError(f"the rule {run.variant} fails a training step of its {run.size} model (timed for the "
                          f"estimate): {type(err).__name__}: {' '.join(str(err).split())}") from None


def estimated_seconds(runs: list[RunConfig]) -> float:
    """Seconds ``runs`` would train for on this CPU: each model's step time, timed once here and kept in its cache
    folder's pace.json (see the module docstring), times its steps. Evaluations are not counted."""
    total, step = 0.0, {}
    for r in runs:
        key = _step_key(r)
        if key not in step:
            step[key] = kept(project_path(r.data.cache_dir) / PACE_FILE, key, lambda: named_step_time(r))
        total += r.train.steps * step[key]
    return total


def check_cpu_reach(runs: list[RunConfig], device: torch.device, allow_slow: bool | None = None) -> None:
    """Stop, with the estimate, before training ``runs`` on a CPU when they would take far beyond its reach."""
    if allow_slow is None:
        allow_slow = os.environ.get("RRLIB_ALLOW_SLOW") == "1"
    if device.type != "cpu" or allow_slow or not runs:
        return
    first = runs[0]
    store = project_path(first.data.cache_dir) / PACE_FILE
    what = f"{first.size}/{first.variant}/seed{first.seed}" if len(runs) == 1 else \
        f"these {len(runs)} {first.size} runs"
    way_out = "run on a GPU, or pass --allow-slow (RRLIB_ALLOW_SLOW=1 outside the command line) to start anyway"
    flops = sum(training_flops(r) for r in runs)
    peak = matmul_peak(first.data.cache_dir)
    floor_hours = flops / peak / 3600
    if floor_hours > BEYOND * CPU_REACH_HOURS:
        raise ConfigError(f"{what} would take at least {floor_hours:,.0f} hours on this CPU ({flops:.1e} training "
                          f"FLOPs at its matmul peak of {peak / 1e9:.0f} GFLOP/s, measured once and kept in {store}); "
                          f"{way_out}")
    if floor_hours < SURE * CPU_REACH_HOURS:
        return
    hours = estimated_seconds(runs) / 3600
    if hours > CPU_REACH_HOURS:
        per_step = f"{first.train.steps:,} steps at {estimated_seconds([first]) / first.train.steps:.3g} s a step" \
            if len(runs) == 1 else f"{sum(r.train.steps for r in runs):,} steps in all"
        raise ConfigError(f"{what} would take about {hours:,.0f} hours on this CPU ({per_step}, timed for its model "
                          f"on this machine and kept in {store}); {way_out}")
