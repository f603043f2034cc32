"""Timing one size's variants in one process: each model built and warmed up, then interleaved rounds of timed
training steps (rrlib.runs.optim's step), its memory and evaluation cost, and the ratios against the
parameter-matched standard. The measurement itself is described in rrlib.speed.bench."""
from __future__ import annotations

import dataclasses
import inspect
import statistics
import time
import warnings
from datetime import datetime

import torch

from ..model import GPT
from ..rules import rule_class
from ..runs.config import RunConfig
from ..runs.device import autocast_factory
from ..runs.provenance import attention_kernel
from ..runs.evaluate import evaluate
from ..runs.optim import group_lrs, make_optimizer, optimizer_step
from .memory import peak_tensor_bytes
from .peaks import mfu


BASELINE = "standard"


@dataclasses.dataclass
class Case:
    """One model under test with its optimizer, a fixed random batch and the step times gathered so far."""

    run: RunConfig
    model: GPT
    fwd: torch.nn.Module
    optimizer: torch.optim.Optimizer
    x: torch.Tensor
    y: torch.Tensor
    attention: str
    plain_head: bool = False  # GPT(plain_head=True): unpadded head, full fp32 logits (``--plain``)
    warmup_s: float = 0.0
    first_step_s: float = 0.0
    peak_memory: int = 0
    host_syncs: int | None = None  # counted on CUDA only
    times: list = dataclasses.field(default_factory=list)


def build_case(run: RunConfig, device: torch.device, precision: str, plain_head: bool = False,
               backend: str = "inductor") -> Case:
    torch.manual_seed(run.seed)
    with device:  # initialise on the device: a 1B model's init on the host takes seconds
        model = GPT(run.model, plain_head=plain_head)
    fwd = model.compile_steps(backend) if run.train.compile else model  # per residual step, as a run compiles
    tokens = torch.randint(0, run.model.vocab_size, (run.train.batch_size, run.model.seq_len + 1),
                           generator=torch.Generator().manual_seed(run.seed)).to(device)
    return Case(run, model, fwd, make_optimizer(model, run.train, device), tokens[:, :-1].contiguous(),
                tokens[:, 1:].contiguous(), attention_kernel(run.model, run.train.batch_size, device, precision),
                plain_head=plain_head)


def train_step(case: Case, step: int, autocast) -> None:
    """A run's optimizer step (rrlib.runs.optim) for one process without accumulation: lr, forward, backward,
    clip, AdamW."""
    optimizer_step(case.model, case.fwd, case.optimizer, case.x, case.y,
                   group_lrs(step, case.run.train, case.optimizer), 1, autocast, case.run.train.grad_clip)


def timed_steps(case: Case, n: int, autocast, device: torch.device) -> list[float]:
    """Seconds of each of n training steps.

    On CUDA, PyTorch's sync debug mode watches the steps: every operation that made the host wait for the
    device is added to ``case.host_syncs`` (there should be none).
    """
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                events[0].record()
                for k in range(n):
                    train_step(case, k, autocast)
                    events[k + 1].record()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        case.host_syncs = (case.host_syncs or 0) + sum("synchronizing" in str(w.message) for w in caught)
        torch.cuda.synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]
    clock = cpu_step_clock()
    times = []
    for k in range(n):
        start = clock()
        train_step(case, k, autocast)
        times.append(clock() - start)
    return times


def cpu_step_clock():
    """The clock CPU steps are timed by: the thread's CPU time when torch runs on one thread, wall time else.

    On one thread the step's work is this thread's, and its CPU time leaves out the time other jobs on a shared
    machine held the core (wall-clock ratios between rules moved by ±10% from one run to the next beside two
    training processes); with more threads the work is spread over torch's pool, which only wall time sees.
    """
    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


def warm_up(case: Case, steps: int, autocast, device: torch.device) -> None:
    """The untimed first steps: compilation, allocator growth, optimizer state.

    The first step is timed on its own: it holds the compilation, which ``summarise`` reports apart from the
    step time as ``compile_s`` (the first step less the median step).
    """
    start = time.perf_counter()
    for k in range(steps):
        train_step(case, k, autocast)
        if k == 0:
            if device.type == "cuda":
                torch.cuda.synchronize()
            case.first_step_s = time.perf_counter() - start
    if device.type == "cuda":
        torch.cuda.synchronize()
    case.warmup_s = time.perf_counter() - start


def eval_seconds(case: Case, n: int, autocast, device: torch.device) -> float:
    """Median seconds of rrlib.runs.evaluate over the training batch: the fixed evaluation's cost per batch."""
    batch = [(case.x, case.y)]
    evaluate(case.model, batch, device, autocast)  # warmup; evaluate ends in a host sync, so each call is whole
    times = []
    for _ in range(n):
        start = time.perf_counter()
        evaluate(case.model, batch, device, autocast)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_step_memory(case: Case, autocast) -> int | None:
    """Peak tensor bytes of one eager training step (rrlib.speed.memory), the variant's own need on a CPU, where the
    process's peak RSS only grows; None for a compiled step, whose kernels the tracker cannot see."""
    if case.run.train.compile:
        return None
    return peak_tensor_bytes(lambda: train_step(case, 0, autocast))


def rule_option_sets(variant: str, recompute: bool) -> list[dict]:
    """The rule options a variant is measured with: none, and with ``--recompute`` also recompute=True for the
    rules that offer it (the cross-depth rules' checkpointed depth mixing)."""
    offers = "recompute" in inspect.signature(rule_class(variant)).parameters
    return [{}, {"recompute": True}] if recompute and offers else [{}]


def bench_size(runs: list[RunConfig], device, precision, args, peak_flops, keep) -> list[dict]:
    """Every variant of one size: build and warm up each in turn, then interleaved rounds of timed steps.

    ``keep(rows)`` is called with the size's rows as soon as the steps are timed, and again once the evaluation
    (which compiles more graphs under --compile) has been timed too: a stop in between keeps the step times."""
    autocast = autocast_factory(precision, device)
    torch.compiler.reset()  # a fresh compile cache per size, so each size's compile cost is its own
    cases = []
    for run, plain_head in ((run, plain) for run in runs for plain in ((False, True) if args.plain else (False,))):
        base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        case = build_case(run, device, precision, plain_head, args.compile_backend)
        warm_up(case, args.warmup, autocast, device)
        case.peak_memory = (torch.cuda.max_memory_allocated(device) - base if device.type == "cuda" else
                            cpu_step_memory(case, autocast))
        say(f"{run.size}/{run.variant}: d_model {run.model.d_model}, {case.model.n_params() / 1e6:.2f}M params, "
             f"attention {case.attention}, warmup {args.warmup} steps {case.warmup_s:.1f}s")
        cases.append(case)
    for _ in range(args.repeats):
        for case in cases:
            case.times += timed_steps(case, args.steps, autocast, device)
    rows = []
    for case in cases:
        rows.append(summarise(case, None, precision, peak_flops))
        say(f"{case.run.size}/{case.run.variant}: step {rows[-1]['step_ms']:.1f} ms, "
             f"{rows[-1]['tokens_per_s']:,.0f} tokens/s"
             + ("" if not case.host_syncs else f"; {case.host_syncs} host syncs in the timed steps"))
    add_ratios(rows)
    keep(rows)
    for case, row in zip(cases, rows):
        eval_s = eval_seconds(case, args.steps, autocast, device)
        row.update(eval_ms=eval_s * 1e3, eval_to_step=eval_s * 1e3 / row["step_ms"])
    keep(rows)
    return rows


def misaligned(d_model: int, n_heads: int, precision: str) -> list[str]:
    """The widths whose rows are not 16-byte aligned in ``precision`` (8 bf16 or 4 fp32 elements): their matmuls
    and attention run slower kernels, which a comparison between rules would charge to the rule."""
    per_16_bytes = 8 if precision == "bf16" else 4
    widths = {"d_model": d_model, "head_dim": d_model // n_heads}
    return [f"{name} {value}" for name, value in widths.items() if value % per_16_bytes]


def summarise(case: Case, eval_s: float, precision: str, peak_flops: float | None) -> dict:
    run, model = case.run, case.model
    tokens_per_step = run.train.batch_size * run.model.seq_len
    step_s = statistics.median(case.times)
    tokens_per_s = tokens_per_step * len(case.times) / sum(case.times)
    return {
        "size": run.size, "variant": run.variant, "d_model": run.model.d_model, "n_layers": run.model.n_layers,
        "n_heads": run.model.n_heads, "seq_len": run.model.seq_len, "batch_size": run.train.batch_size,
        "params": model.n_params(), "non_embedding_params": model.n_non_embedding_params(),
        "flops_per_token": model.flops_per_token(), "attention": case.attention, "compile": run.train.compile,
        "rule_options": dict(run.model.rule_options),
        "precision": precision, "timed_steps": len(case.times), "step_ms": step_s * 1e3,
        "step_ms_min": min(case.times) * 1e3, "step_ms_max": max(case.times) * 1e3, "tokens_per_s": tokens_per_s,
        "mfu": mfu(model.flops_per_token(), tokens_per_s, peak_flops), "peak_memory_bytes": case.peak_memory,
        "head": "plain" if case.plain_head else "padded, chunked loss", "first_step_s": case.first_step_s,
        "compile_s": max(0.0, case.first_step_s - step_s), "warmup_s": case.warmup_s, "eval_ms": None if eval_s is None else eval_s * 1e3,
        "eval_to_step": None if eval_s is None else eval_s / step_s,
        "host_syncs": case.host_syncs, "misaligned": misaligned(run.model.d_model, run.model.n_heads, precision),
    }


def add_ratios(rows: list[dict]) -> None:
    """Ratios within one size, each to the row that differs in one thing only (None without it): step time and
    tokens/s to the parameter-matched standard (same head, compile flag), the step-time ratio over the FLOP
    ratio to it (``step_per_flop_vs_standard``: 1 when a rule's time follows its FLOPs), with ``--plain`` the
    tokens/s over the plain head's, with ``--compile-ratio`` the compiled step over the eager one, and with
    ``--recompute`` the peak memory over the same rule's without recomputation."""
    def find(variant, head, compile=False, options=None):
        return next((r for r in rows if r["variant"] == variant and r.get("head") == head
                     and r.get("compile", False) == compile and r.get("rule_options", {}) == (options or {})), None)

    def ratio(row, other, key):
        return None if other is None or not row[key] or not other[key] else row[key] / other[key]

    for row in rows:
        head, compile, options = row.get("head"), row.get("compile", False), row.get("rule_options", {})
        base = find(BASELINE, head, compile)
        row["step_time_vs_standard"] = ratio(row, base, "step_ms")
        row["tokens_per_s_vs_standard"] = ratio(row, base, "tokens_per_s")
        row["step_per_flop_vs_standard"] = (None if base is None else
                                            row["step_time_vs_standard"] / ratio(row, base, "flops_per_token"))
        row["tokens_per_s_vs_plain"] = ratio(row, find(row["variant"], "plain", compile, options), "tokens_per_s")
        row["compiled_vs_eager"] = (ratio(row, find(row["variant"], head, False, options), "step_ms")
                                    if compile else None)
        row["peak_memory_vs_default"] = (ratio(row, find(row["variant"], head, compile), "peak_memory_bytes")
                                         if options else None)


def say(text: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {text}", flush=True)
