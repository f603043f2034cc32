"""Speed: throughput, MFU, memory and the overhead of each residual rule against the parameter-matched standard.

    python -m rrlib bench --size 60m --size 1b --variants review,highway,standard --compile
    python -m rrlib bench --size mini --variants review,standard --device cpu --steps 1 --repeats 30 --threads 1
    python -m rrlib bench --tokenize ../shared/data/tinystories/TinyStories-train-sample.txt

Every (size, variant) of one invocation is measured in one process, on random tokens of the model's vocabulary,
with rrlib.train's step (make_optimizer's AdamW, fused on CUDA; gradient clipping; autocast_factory's precision;
``--compile`` compiles each residual step as a run does). Per cell it reports the median step time over the timed
steps (after warmup), tokens/s (timed tokens ÷ timed seconds), the ratios of both to ``standard`` at the same
size, the model's parameters and FLOPs per token, peak memory, MFU on CUDA, and the cost of the fixed
evaluation (rrlib.evaluate on the same tokens, under no_grad, as a run evaluates) per training step, and the
compile cost apart from the step time (the first step less the median step). ``--plain`` adds each variant
with the plain head (unpadded matmul, full fp32 logits) and reports tokens/s over it.
Every variant of a size is built and warmed up first; then ``--repeats`` rounds of ``--steps`` timed steps
run variant after variant, so drift on a shared machine hits every variant alike (``--steps 1 --repeats 30``
alternates single steps; ``--threads 1`` keeps a busy 2-core machine from stalling multi-threaded kernels).

On CUDA, step times come from a chain of CUDA events recorded between steps and read after one synchronize,
so the host never waits for the device inside the timed loop (PyTorch's sync debug mode counts any operation
that does, as ``host_syncs``). MFU divides by a peak FLOP/s that is always named: the dense bf16/tf32 number
from the vendor's data sheet for the device (``PEAK_TFLOPS``), or one measured with ``--measure-peak``. Peak
memory is ``torch.cuda.max_memory_allocated`` during the variant's build and warmup, less what was allocated
before it. On a CPU, where no allocator keeps statistics, it is the peak tensor storage of one eager training
step after the warmup (``rrlib.memory``: storages counted from the operator that makes them until they are
freed); it leaves out what the step does not allocate (weights, optimizer state). ``--recompute`` adds each
cross-depth rule with its depth mixing checkpointed and reports its peak memory over the plain rule's;
``--compile-ratio`` measures every variant eager and compiled in the same rounds and reports the ratio.

The paper's sweep (its 42 runs, ``--paper-csv``) is priced at the measured tokens/s: a measured (size, variant)
costs its runs' tokens ÷ tokens/s; a size not measured costs its training FLOPs ÷ (MFU × peak), with the MFU
measured for that variant at the nearest measured size (CUDA only).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import platform
import statistics
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

from .. import __version__
from ..runs.config import ConfigError, RunConfig
from ..runs.presets import resolve_run
from ..runs.data import TOKENIZERS, get_tokenizer, iter_stories
from ..runs.token_cache import load_token_data
from ..runs.evaluate import evaluate
from .memory import peak_tensor_bytes
from ..model import GPT
from ..rules import rule_class
from ..runs.checkpoints import write_json_atomic
from ..runs.config import PROJECT_ROOT, given_path, project_path
from ..runs.folders import writable_folder
from ..runs.device import autocast_factory, pick_device, resolve_precision
from ..runs.optim import lr_at, make_optimizer, optimizer_step
from ..runs.provenance import device_name, git_commit

SHARED = PROJECT_ROOT.parent / "shared"
PAPER_CSV = SHARED / "reference" / "scaling_v8.csv"
GPT2_DIR = SHARED / "data" / "gpt2"
# The paper's names for what rrlib calls presets and variants.
PAPER_SIZES = {"60M": "60m", "150M": "150m", "320M": "320m", "590M": "590m", "1B": "1b"}
SIZE_ORDER = list(PAPER_SIZES.values())
PAPER_VARIANTS = {"review_neutral": "review"}
BASELINE = "standard"

# Dense (no structured sparsity) tensor-core peaks in TFLOP/s, from NVIDIA's data sheets, whose headline
# numbers are with sparsity (2x these). Matched in order against the lower-cased CUDA device name: the first
# substring found wins, so the more specific names come first ("gh200" contains "h200", "h100 pcie" "h100").
PEAK_TFLOPS = [
    # substring,  label,              bf16,   tf32
    ("gh200", "GH200", 989.5, 494.5),
    ("h200 nvl", "H200 NVL", 835.5, 417.5),
    ("h200", "H200 SXM", 989.5, 494.5),
    ("h100 nvl", "H100 NVL", 835.5, 417.5),
    ("h100 pcie", "H100 PCIe", 756.5, 378.0),
    ("h100", "H100 SXM", 989.5, 494.5),
    ("a100", "A100", 312.0, 156.0),
    ("b200", "B200", 2250.0, 1100.0),
    ("l40s", "L40S", 362.0, 183.0),
]


# ---------------------------------------------------------------- peak FLOP/s and MFU

def table_peak(device_name: str, precision: str) -> tuple[float, str] | None:
    """(FLOP/s, where it comes from) for a CUDA device name and precision, or None if the table lacks it."""
    for substring, label, bf16, tf32 in PEAK_TFLOPS:
        if substring in device_name.lower():
            tflops = {"bf16": bf16, "tf32": tf32}.get(precision)
            return None if tflops is None else (tflops * 1e12, f"{label} {precision} dense, vendor data sheet")
    return None


def measure_peak(device: torch.device, precision: str, n: int = 8192, iters: int = 20) -> tuple[float, str]:
    """The FLOP/s of an n×n×n matmul in the run's precision, timed with CUDA events after a warmup."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32  # tf32 is the flag autocast_factory set
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        a @ b
    end.record()
    torch.cuda.synchronize()
    flops = 2 * n ** 3 * iters / (start.elapsed_time(end) / 1e3)
    return flops, f"measured: {n}x{n} {precision} matmul"


def resolve_peak(device: torch.device, precision: str, measure: bool) -> tuple[float | None, str]:
    """The peak FLOP/s that MFU divides by, and a sentence saying where it came from (printed, stored)."""
    if device.type != "cuda":
        return None, f"none: MFU is reported on CUDA only (this is {device.type})"
    if measure:
        return measure_peak(device, precision)
    found = table_peak(device_name(device), precision)
    if found is None:
        return None, f"none: no {precision} peak for {device_name(device)!r} in the table; pass --measure-peak"
    return found


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation: the model's training FLOPs per second over the device's peak."""
    return None if peak_flops is None else flops_per_token * tokens_per_s / peak_flops


# ---------------------------------------------------------------- one (size, variant)

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


def attention_kernel(run: RunConfig, device: torch.device, precision: str) -> str:
    """The SDPA kernel the dispatcher picks for this model's q, k, v (their shape, dtype and strides)."""
    cfg = run.model
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    qkv = torch.empty(run.train.batch_size, cfg.seq_len, 3, cfg.n_heads, cfg.d_model // cfg.n_heads,
                      device=device, dtype=dtype).permute(2, 0, 3, 1, 4)  # as Attention.forward slices it
    return SDPBackend(torch._fused_sdp_choice(qkv[0], qkv[1], qkv[2], is_causal=True)).name.lower()


def build_case(run: RunConfig, device: torch.device, precision: str, plain_head: bool = False,
               backend: str = "inductor") -> Case:
    torch.manual_seed(run.seed)
    with device:  # initialise on the device: a 1B model's init on the host takes seconds
        model = GPT(run.model, plain_head=plain_head)
    fwd = model.compile_steps(backend) if run.train.compile else model  # per residual step, as a run compiles
    tokens = torch.randint(0, run.model.vocab_size, (run.train.batch_size, run.model.seq_len + 1),
                           generator=torch.Generator().manual_seed(run.seed)).to(device)
    return Case(run, model, fwd, make_optimizer(model, run.train, device), tokens[:, :-1].contiguous(),
                tokens[:, 1:].contiguous(), attention_kernel(run, device, precision), plain_head=plain_head)


def train_step(case: Case, step: int, autocast) -> None:
    """rrlib.train's optimizer step for one process without accumulation: lr, forward, backward, clip, AdamW."""
    optimizer_step(case.model, case.fwd, case.optimizer, case.x, case.y, lr_at(step, case.run.train), 1, autocast,
                   case.run.train.grad_clip)


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
    """Median seconds of rrlib.evaluate over the training batch: the fixed evaluation's cost per batch."""
    batch = [(case.x, case.y)]
    evaluate(case.model, batch, device, autocast)  # warmup; evaluate ends in a host sync, so each call is whole
    times = []
    for _ in range(n):
        start = time.perf_counter()
        evaluate(case.model, batch, device, autocast)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_step_memory(case: Case, autocast) -> int | None:
    """Peak tensor bytes of one eager training step (rrlib.memory), the variant's own need on a CPU, where the
    process's peak RSS only grows; None for a compiled step, whose kernels the tracker cannot see."""
    if case.run.train.compile:
        return None
    return peak_tensor_bytes(lambda: train_step(case, 0, autocast))


def rule_option_sets(variant: str, recompute: bool) -> list[dict]:
    """The rule options a variant is measured with: none, and with ``--recompute`` also recompute=True for the
    rules that offer it (the cross-depth rules' checkpointed depth mixing)."""
    offers = "recompute" in inspect.signature(rule_class(variant)).parameters
    return [{}, {"recompute": True}] if recompute and offers else [{}]


def bench_size(runs: list[RunConfig], device, precision, args, peak_flops) -> list[dict]:
    """Every variant of one size: build and warm up each in turn, then interleaved rounds of timed steps."""
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
        _say(f"{run.size}/{run.variant}: d_model {run.model.d_model}, {case.model.n_params() / 1e6:.2f}M params, "
             f"attention {case.attention}, warmup {args.warmup} steps {case.warmup_s:.1f}s")
        cases.append(case)
    for _ in range(args.repeats):
        for case in cases:
            case.times += timed_steps(case, args.steps, autocast, device)
    rows = []
    for case in cases:
        rows.append(summarise(case, eval_seconds(case, args.steps, autocast, device), precision, peak_flops))
        _say(f"{case.run.size}/{case.run.variant}: step {rows[-1]['step_ms']:.1f} ms, "
             f"{rows[-1]['tokens_per_s']:,.0f} tokens/s"
             + ("" if not case.host_syncs else f"; {case.host_syncs} host syncs in the timed steps"))
    add_ratios(rows)
    return rows


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
        "compile_s": max(0.0, case.first_step_s - step_s), "warmup_s": case.warmup_s, "eval_ms": eval_s * 1e3,
        "eval_to_step": eval_s / step_s,
        "host_syncs": case.host_syncs,
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


# ---------------------------------------------------------------- the paper's sweep in device-hours

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


# ---------------------------------------------------------------- tokenising

def bench_tokenize(path, gpt2_dir) -> dict:
    """MB/s of text through each tokenizer's batch API, and the seconds of a first and a cached load."""
    stories = list(iter_stories(path))
    n_bytes = sum(len(s.encode("utf-8")) for s in stories)
    out = {"file": Path(path).name, "stories": len(stories), "text_bytes": n_bytes}
    for name in TOKENIZERS:
        tok = get_tokenizer(name, gpt2_dir)
        tok.encode("")  # GPT-2 loads its BPE files on first use: time the tokenising alone
        start = time.perf_counter()
        n_tokens = sum(map(len, tok.encode_batch(stories)))
        seconds = time.perf_counter() - start
        with tempfile.TemporaryDirectory() as cache:
            loads = []
            for _ in range(2):  # the first tokenises and writes the cache, the second maps it
                start = time.perf_counter()
                load_token_data(data_path=str(path), tokenizer=name, cache_dir=cache, gpt2_dir=gpt2_dir)
                loads.append(time.perf_counter() - start)
        out[name] = {"tokens": n_tokens, "mb_per_s": n_bytes / 1e6 / seconds, "first_load_s": loads[0],
                     "cached_load_s": loads[1]}
    return out


# ---------------------------------------------------------------- output

TABLE_COLUMNS = [
    ("size", "size", "{}"), ("variant", "variant", "{}"), ("d", "d_model", "{}"),
    ("params (M)", "params", lambda v: f"{v / 1e6:.2f}"),
    ("GFLOPs/token", "flops_per_token", lambda v: f"{v / 1e9:.3f}"),
    ("step (ms)", "step_ms", "{:.1f}"), ("tokens/s", "tokens_per_s", "{:,.0f}"),
    ("compiled", "compile", "{}"), ("options", "rule_options", lambda v: ", ".join(f"{k}={x}" for k, x in v.items())),
    ("step vs std", "step_time_vs_standard", "{:.3f}"), ("tok/s vs std", "tokens_per_s_vs_standard", "{:.3f}"),
    ("step/FLOP vs std", "step_per_flop_vs_standard", "{:.3f}"),
    ("compiled/eager", "compiled_vs_eager", "{:.3f}"), ("mem vs default", "peak_memory_vs_default", "{:.3f}"),
    ("MFU", "mfu", "{:.1%}"), ("peak mem (MiB)", "peak_memory_bytes", lambda v: f"{v / 2**20:,.1f}"),
    ("eval/step", "eval_to_step", "{:.2f}"), ("compile (s)", "compile_s", "{:.1f}"),
    ("warmup (s)", "warmup_s", "{:.1f}"), ("attention", "attention", "{}"), ("head", "head", "{}"),
    ("tok/s vs plain", "tokens_per_s_vs_plain", "{:.3f}"),
]


def markdown_table(rows: list[dict]) -> str:
    def cell(fmt, value):
        if value is None:
            return "–"
        return fmt(value) if callable(fmt) else fmt.format(value)

    lines = ["| " + " | ".join(h for h, _, _ in TABLE_COLUMNS) + " |",
             "|" + "|".join("---" for _ in TABLE_COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(fmt, row[key]) for _, key, fmt in TABLE_COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def _say(text: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {text}", flush=True)


# ---------------------------------------------------------------- command line

def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m rrlib bench", description=__doc__.splitlines()[0])
    p.add_argument("--size", action="append", default=[], help="a preset; repeat for several")
    p.add_argument("--variants", default="review,highway,standard", help="comma-separated residual rules")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:<index>")
    p.add_argument("--precision", default="auto", help="auto (bf16 on CUDA, fp32 on CPU), fp32, tf32, bf16")
    p.add_argument("--compile", action="store_true", help="torch.compile each residual step, as a run does")
    p.add_argument("--compile-ratio", action="store_true",
                   help="measure every variant eager and compiled in the same rounds; report compiled/eager")
    p.add_argument("--recompute", action="store_true",
                   help="also measure each cross-depth rule with recompute=True (its depth mixing checkpointed)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile backend; 'eager' traces without code generation (a fast dry run)")
    p.add_argument("--plain", action="store_true",
                   help="also measure each variant with the plain head (unpadded matmul, full fp32 logits)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant and round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation happens here)")
    p.add_argument("--repeats", type=int, default=1, help="interleaved rounds of timed steps over the variants")
    p.add_argument("--batch-size", type=int, default=None, help="sequences per step; default: the preset's")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads (torch.set_num_threads); 1 is steadier on a machine shared with other jobs")
    p.add_argument("--measure-peak", action="store_true", help="time a matmul for the peak FLOP/s (CUDA)")
    p.add_argument("--paper-csv", default=str(PAPER_CSV), help="the paper's runs, for the sweep's device-hours")
    p.add_argument("--tokenize", metavar="PATH", help="also time tokenising this text file and reloading it")
    p.add_argument("--gpt2-dir", default=str(GPT2_DIR), help="folder with GPT-2's encoder.json and vocab.bpe")
    p.add_argument("--out", default=None, help="result JSON; default outputs/bench/<device>-<sizes>.json")
    args = p.parse_args(argv)
    for name in ("steps", "repeats", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name} must be a positive whole number, got {value}")
    if args.warmup < 0:
        raise ConfigError(f"--warmup must be zero or more, got {args.warmup}")
    if not args.size and not args.tokenize:
        raise ConfigError("nothing to measure: pass --size (one or more) and/or --tokenize PATH")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    train = {"device": args.device, "precision": args.precision}
    if args.batch_size is not None:
        train["batch_size"] = args.batch_size
    compiles = (False, True) if args.compile_ratio else (args.compile,)
    # every cell is resolved (and a bad size or variant reported) before anything is measured
    grid = [[resolve_run(size, variant, 0, {"train": {**train, "compile": compile},
                                            "model": {"rule_options": options}})
             for variant in variants for compile in compiles
             for options in rule_option_sets(variant, args.recompute)] for size in args.size]
    device = pick_device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    precision = resolve_precision(args.precision, device)
    autocast_factory(precision, device)  # sets the tf32 flag the peak measurement relies on
    peak_flops, peak_source = resolve_peak(device, precision, args.measure_peak) if grid else (None, "none")
    gpt2_dir = args.gpt2_dir if Path(args.gpt2_dir).is_dir() else None
    # a path typed here is the current folder's; the default is the project's
    out_path = project_path(given_path(args.out) if args.out else
                            f"outputs/bench/{device.type}-{'-'.join(args.size) or 'tokenize'}.json")
    writable_folder(out_path.parent, "--out")  # before anything is measured, not after
    result = {
        "command": "python -m rrlib bench " + " ".join(argv),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": git_commit(),
        "rrlib_version": __version__, "torch_version": torch.__version__, "python": platform.python_version(),
        "device": device_name(device), "precision": precision,
        "compile": "eager and compiled" if args.compile_ratio else args.compile, "steps": args.steps,
        "warmup": args.warmup, "repeats": args.repeats, "peak_flops": peak_flops, "peak_flops_source": peak_source,
        "step_clock": ("CUDA events" if device.type == "cuda" else
                       "thread CPU time" if cpu_step_clock() is time.thread_time else "wall time"),
        "peak_memory_kind": ("torch.cuda.max_memory_allocated during build and warmup, less what was held before"
                             if device.type == "cuda" else
                             "peak tensor storage of one eager training step (rrlib.memory), above what was "
                             "held before it; none for a compiled step"),
        "results": [], "out_of_memory": [], "sweep": None, "tokenize": None,
    }
    csv = Path(args.paper_csv)
    if grid:
        _say(f"{result['device']}, torch {torch.__version__}, precision {precision}, compile {args.compile}; "
             f"peak FLOP/s {'–' if peak_flops is None else f'{peak_flops / 1e12:.1f}T'} ({peak_source})")
        if not csv.is_file():
            _say(f"no paper CSV at {csv}: the sweep's device-hours are skipped (pass --paper-csv)")
    for runs in grid:
        try:
            result["results"] += bench_size(runs, device, precision, args, peak_flops)
        except torch.cuda.OutOfMemoryError:  # one size too large for the device must not cost the others
            _say(f"{runs[0].size}: out of device memory, skipped (a smaller --batch-size may fit)")
            result["out_of_memory"].append(runs[0].size)
            continue
        if csv.is_file():
            result["sweep"] = price_sweep(csv, result["results"], peak_flops)
        save(out_path, result)  # after every size, so a stopped benchmark keeps what it finished
    if args.tokenize:
        result["tokenize"] = bench_tokenize(project_path(given_path(args.tokenize)), gpt2_dir)
    report = save(out_path, result)
    print(report)
    print(f"\nwrote {out_path} and {out_path.with_suffix('.md').name}")
    return 0


def save(out_path: Path, result: dict) -> str:
    """The JSON and, beside it, the markdown report; returns the report."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_path, result)
    report = render(result)
    out_path.with_suffix(".md").write_text(report + "\n")
    return report


def render(result: dict) -> str:
    """The markdown report: the table, then what each number means, the sweep's hours and tokenising."""
    parts = []
    if result["results"]:
        parts += [f"Device {result['device']}, torch {result['torch_version']}, precision {result['precision']}, "
                  f"compile {result['compile']}, commit {result['git_commit']}; median of "
                  f"{result['steps'] * result['repeats']} timed steps after {result['warmup']} warmup steps, "
                  f"timed by {result.get('step_clock', 'wall time')}. "
                  f"Peak FLOP/s: {result['peak_flops_source']}. Peak memory: {result['peak_memory_kind']}. "
                  f"eval/step: the fixed evaluation's forward pass per batch over the training step.", "",
                  markdown_table(result["results"])]
    if result["out_of_memory"]:
        parts += ["", f"Out of device memory, not measured: {', '.join(result['out_of_memory'])}."]
    sweep = result["sweep"]
    if sweep is not None:
        measured = sorted({r["size"] for r in result["results"] if r["size"] in SIZE_ORDER}, key=SIZE_ORDER.index)
        total = "not all runs priced" if sweep["total_hours"] is None else f"{sweep['total_hours']:.1f} h"
        parts += ["", f"The paper's sweep ({sweep['runs']} runs; {sweep['paper_reported_hours']:.1f} h as the paper "
                      f"reports them) at this device's measured speed: {total}. Runs at the measured sizes "
                      f"({', '.join(measured)}): {sweep['measured_hours']:.1f} h; the others, from their FLOPs at "
                      f"the MFU of the nearest measured size: {sweep['flop_estimated_hours']:.1f} h."]
        if sweep["unpriced_runs"]:
            parts.append(f"Not priced (not measured, no MFU to extrapolate with): "
                         f"{', '.join(sorted(set(sweep['unpriced_runs'])))}.")
    tok = result["tokenize"]
    if tok is not None:
        parts += ["", f"Tokenising {tok['file']} ({tok['text_bytes'] / 1e6:.1f} MB, {tok['stories']:,} stories):", "",
                  "| tokenizer | MB/s | tokens | first load (s) | cached load (ms) |", "|---|---|---|---|---|"]
        parts += [f"| {name} | {tok[name]['mb_per_s']:.1f} | {tok[name]['tokens']:,} | "
                  f"{tok[name]['first_load_s']:.2f} | {tok[name]['cached_load_s'] * 1e3:.1f} |" for name in TOKENIZERS]
    return "\n".join(parts)
