"""Speed: throughput, MFU, memory and the overhead of each residual rule against the parameter-matched standard.

    python -m rrlib bench --size 60m --size 1b --variants review,highway,standard --compile
    python -m rrlib bench --size mini --variants review,standard --device cpu --steps 1 --repeats 30 --threads 1
    python -m rrlib bench --tokenize "$RRLIB_DATA/tinystories/TinyStories-train-sample.txt"

Every (size, variant) of one invocation is measured in one process (rrlib.speed.timing), on random tokens of the
model's vocabulary, with a run's step (rrlib.runs.optim: make_optimizer's AdamW, fused on CUDA; gradient clipping;
autocast_factory's precision; ``--compile`` compiles each residual step as a run does). Per cell it reports the
median step time over the timed steps (after warmup), tokens/s (timed tokens ÷ timed seconds), the ratios of both
to ``standard`` at the same size, the model's parameters and FLOPs per token, peak memory, MFU on CUDA, and the
cost of the fixed evaluation (rrlib.runs.evaluate on the same tokens, under no_grad, as a run evaluates) per
training step, and the compile cost apart from the step time (the first step less the median step). ``--plain``
adds each variant with the plain head (unpadded matmul, full fp32 logits) and reports tokens/s over it. Every
variant of a size is built and warmed up first; then ``--repeats`` rounds of ``--steps`` timed steps run variant
after variant, so drift on a shared machine hits every variant alike (``--steps 1 --repeats 30`` alternates single
steps; ``--threads 1`` keeps a busy 2-core machine from stalling multi-threaded kernels).

On CUDA, step times come from a chain of CUDA events recorded between steps and read after one synchronize, so the
host never waits for the device inside the timed loop (PyTorch's sync debug mode counts any operation that does, as
``host_syncs``). MFU divides by a peak FLOP/s that is always named: the dense bf16/tf32 number from the vendor's
data sheet for the device (rrlib.speed.peaks), or one measured with ``--measure-peak``. Peak memory is
``torch.cuda.max_memory_allocated`` during the variant's build and warmup, less what was allocated before it. On a
CPU, where no allocator keeps statistics, it is the peak tensor storage of one eager training step after the warmup
(``rrlib.speed.memory``: storages counted from the operator that makes them until they are freed); it leaves out
what the step does not allocate (weights, optimizer state). ``--recompute`` adds each cross-depth rule with its
depth mixing checkpointed and reports its peak memory over the plain rule's; ``--compile-ratio`` measures every
variant eager and compiled in the same rounds and reports the ratio.

The paper's sweep (its 42 runs, ``--paper-csv``) is priced at the measured tokens/s (rrlib.speed.pricing): a
measured (size, variant) costs its runs' tokens ÷ tokens/s; a size not measured costs its training FLOPs ÷ (MFU ×
peak), with the MFU measured for that variant at the nearest measured size (CUDA only).
"""
from __future__ import annotations

import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from ..rules.native import target_isa
from ..runs.folders.disk import write_bytes_atomic, write_json_atomic
from ..runs.config import given_path, project_path
from ..runs.data import TOKENIZERS, get_tokenizer, iter_stories
from ..runs.allocator import keep_freed_memory
from ..runs.arguments import variant_list
from ..runs.folders.output_paths import FILE, checked_output
from ..runs.data.token_cache import load_token_data
from ..runs.device import autocast_factory, pick_device, resolve_precision
from ..runs.presets import resolve_run
from ..runs.provenance import device_name, git_commit, portable_arguments, portable_path
from ..version import __version__
from .peaks import resolve_peak
from .arguments import parse_args
from .pricing import SIZE_ORDER, price_sweep, read_paper_csv
from .timing import bench_size, cpu_step_clock, rule_option_sets, say



# ---------------------------------------------------------------- the machine

def cpu_description() -> dict:
    """The host CPU, which every result file records (the same model and threads run other kernels on another
    CPU): its model name; its vector instruction sets (``vector_isa``, from the kernel's flags: AVX2, AVX-512,
    AVX-VNNI, AMX, which the same code's speed ratios between rules depend on); the instruction set ATen's
    vectorised kernels dispatch to; and what ``-march=native`` targets, which rrlib.rules.native's kernels are
    built for (``march`` and ``extensions`` None without a compiler)."""
    model, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as info:  # Linux names the model here; platform.processor() says "x86_64"
            lines = info.read().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), model)
        flags = next((line.split(":", 1)[1] for line in lines if line.startswith("flags")), "")
    except OSError:
        pass
    try:
        isa = target_isa()
    except (OSError, RuntimeError, subprocess.SubprocessError):
        isa = {"march": None, "extensions": None}
    return {"model": model, "vector_isa": vector_isa(flags),
            "aten_capability": torch.backends.cpu.get_cpu_capability(), **isa}


VECTOR_FLAGS = ("avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")


def vector_isa(flags: str) -> list[str]:
    """The vector instruction sets of ``VECTOR_FLAGS`` that a /proc/cpuinfo ``flags`` line lists, in that order."""
    listed = set(flags.split())
    return [flag for flag in VECTOR_FLAGS if flag in listed]


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
    ("warmup (s)", "warmup_s", "{:.1f}"), ("attention", "attention", "{}"),
    ("not 16-byte aligned", "misaligned", lambda v: ", ".join(v) or "–"), ("head", "head", "{}"),
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


# ---------------------------------------------------------------- command line

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    variants = variant_list(args.variants, "--variants")
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
    checked_output(out_path, "--out", FILE, beside=(".md",))  # before anything is measured, not after
    # as a training run on the CPU does: the steps' memory reused, not faulted in afresh (rrlib.runs.allocator)
    kept = device.type == "cpu" and keep_freed_memory()
    result = {
        "command": "python -m rrlib bench " + " ".join(portable_arguments(argv)),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": git_commit(),
        "rrlib_version": __version__, "torch_version": torch.__version__, "python": platform.python_version(),
        "device": device_name(device), "cpu": cpu_description(), "precision": precision,
        "allocator": "glibc's, freed memory kept for later steps" if kept else "the process's own, as found",
        "compile": "eager and compiled" if args.compile_ratio else args.compile, "steps": args.steps,
        "warmup": args.warmup, "repeats": args.repeats, "peak_flops": peak_flops, "peak_flops_source": peak_source,
        "step_clock": ("CUDA events" if device.type == "cuda" else
                       "thread CPU time" if cpu_step_clock() is time.thread_time else "wall time"),
        "peak_memory_kind": ("torch.cuda.max_memory_allocated during build and warmup, less what was held before"
                             if device.type == "cuda" else
                             "peak tensor storage of one eager training step (rrlib.speed.memory), above what was "
                             "held before it; none for a compiled step"),
        "results": [], "out_of_memory": [], "sweep": None, "tokenize": None,
    }
    csv = Path(args.paper_csv) if args.paper_csv else None
    if grid and csv is not None and csv.is_file():
        read_paper_csv(csv)  # a bad table is named now, not after the sizes have been measured
    if grid:
        say(f"{result['device']}, torch {torch.__version__}, precision {precision}, compile {args.compile}; "
             f"peak FLOP/s {'–' if peak_flops is None else f'{peak_flops / 1e12:.1f}T'} ({peak_source})")
        if csv is not None and not csv.is_file():
            say(f"no paper CSV at {csv}: the sweep's device-hours are skipped (pass --paper-csv)")

    def keep(rows):  # after a size's timed steps and again after its evaluation: a stop keeps what was timed
        result["results"] = done + rows
        if csv is not None and csv.is_file():
            result["sweep"] = price_sweep(csv, result["results"], peak_flops)
        save(out_path, result)

    for runs in grid:
        done = list(result["results"])
        try:
            bench_size(runs, device, precision, args, peak_flops, keep)
        except torch.cuda.OutOfMemoryError:  # one size too large for the device must not cost the others
            say(f"{runs[0].size}: out of device memory, skipped (a smaller --batch-size may fit)")
            result["results"] = done
            result["out_of_memory"].append(runs[0].size)
            continue
    if args.tokenize:
        result["tokenize"] = bench_tokenize(project_path(given_path(args.tokenize)), gpt2_dir)
    report = save(out_path, result)
    print(report)
    # printed as recorded: gpu_bench.sh keeps the output as a log that travels with the result files
    print(f"\nwrote {portable_path(out_path)} and {out_path.with_suffix('.md').name}")
    return 0


def save(out_path: Path, result: dict) -> str:
    """The JSON and, beside it, the markdown report; returns the report."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_path, result)
    report = render(result)
    write_bytes_atomic(out_path.with_suffix(".md"), (report + "\n").encode())
    return report


def render(result: dict) -> str:
    """The markdown report: the table, then what each number means, the sweep's hours and tokenising."""
    parts = []
    if result["results"]:
        cpu = result["cpu"]
        parts += [f"Device {result['device']} on {cpu['model']} (ATen {cpu['aten_capability']}, -march=native "
                  f"{cpu['march']}), vector ISA {' '.join(cpu.get('vector_isa') or ['unknown'])}, "
                  f"torch {result['torch_version']}, precision {result['precision']}, "
                  f"compile {result['compile']}, commit {result['git_commit']}; median of "
                  f"{result['steps'] * result['repeats']} timed steps after {result['warmup']} warmup steps, "
                  f"timed by {result.get('step_clock', 'wall time')}; allocator "
                  f"{result.get('allocator', 'not recorded')}. "
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
