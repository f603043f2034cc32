"""A size's sweep spread over worker processes, one device each, and whether each of its runs fits one device.

Notebook 03 trains through ``spread_sweep``. With one worker the sweep runs in the caller's process
(rrlib.runs.loading.quiet_sweep); with n, n processes run ``rrlib sweep --shard k/n`` (``worker_commands``), the
sweep command's own deterministic share of the grid (rrlib.runs.sweep.grid), so each run is trained once and the
workers never talk. On a GPU host each worker sees only its own GPU (``CUDA_VISIBLE_DEVICES``); on a CPU each
gets its share of the cores. The caller sees each run's line as a worker writes it (on stderr, which a rendered
page leaves out), then the results table once every worker has ended. A worker that failed or died is named in
one sentence (``SweepIncomplete``, the others' table attached); the runs that finished stay in their folders and
a rerun trains only the rest.

Before any work (``check_workers``): the worker count against the devices, one sentence naming the valid
choices; and on a GPU, each variant's run against the device's memory (``step_memory``): a run that does not fit
is one sentence with the ``torchrun`` line that trains it on several GPUs, or the size of device it needs.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import torch
import yaml

from ..model import GPT, LOSS_CHUNK_TOKENS, count_params
from ..runs.config import ConfigError, RunConfig, project_path
from ..runs.device import autocast_factory, pick_device, resolve_precision
from ..runs.loading import quiet_sweep
from ..runs.presets import resolve_run, size_name
from ..runs.sweep import SweepIncomplete, grid, results_table, write_results
from .memory import peak_tensor_bytes

_MEASURED: dict = {}  # step_memory's answers in this process, by the model's settings, precision and device
HELD_BYTES = 12  # per parameter, across steps: fp32 weights and AdamW's two fp32 moments (bf16 autocast keeps them)
GRAD_BYTES = 4  # per parameter, fp32 gradients: made as backward frees the activations, held through a step that
#                 accumulates micro-batches (and in DDP's buckets), all of them at the optimizer step


# ---------------------------------------------------------------- how many workers, on what


def gpus_for(device: str) -> list[int]:
    """The GPUs (CUDA indices) a sweep on ``device`` spreads over: every visible one for auto or cuda, the one
    named (cuda:1), none for the CPU."""
    picked = pick_device(device)
    if picked.type != "cuda":
        return []
    return [picked.index] if picked.index is not None else list(range(torch.cuda.device_count()))


def worker_count(workers, device: str, runs: int) -> int:
    """``workers`` checked (None: one per visible GPU, 1 on a CPU), at most ``runs``; one sentence if it cannot be.

    On a GPU host a worker is a GPU, so there are at most as many as GPUs; on a CPU at most as many as cores, as a
    worker that shares a core with another only slows both."""
    gpus = len(gpus_for(device))
    most = gpus or os.cpu_count() or 1
    if workers is None:
        return max(1, min(gpus or 1, runs))
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= most:
        where = (f"one worker per GPU, and {gpus} are visible" + (" (-p device cpu for CPU workers)" if gpus > 1 else "")
                 if gpus else f"one worker per CPU core, and this machine has {most}")
        raise ConfigError(f"workers {workers!r} is not a choice here; give a whole number from 1 to {most} "
                          f"({where}), or leave it out for {gpus or 1}")
    return min(workers, runs)


# ---------------------------------------------------------------- does a run fit one device


def step_memory(run: RunConfig, device: torch.device = torch.device("cpu")) -> tuple[int, int]:
    """(bytes a training step of ``run`` holds on one device whatever its batch, bytes per sequence of its
    micro-batch): an estimate, ``HELD_BYTES`` per parameter plus what the forward pass keeps for backward
    (``step_bytes`` adds the gradients where they are held beside it).

    The forward pass is measured (rrlib.speed.memory) on ``device`` (the GPU itself, before any run, where there is
    one) under the precision the run takes on a GPU, at one and two blocks and at two batch sizes that each fill the
    loss's chunk of tokens (rrlib.model's LOSS_CHUNK_TOKENS: its logits do not grow with the batch beyond it), then
    extended linearly in blocks and sequences. On the CPU, whose eager kernels keep more than CUDA's, it errs high
    against the H200 benchmark's measured peaks (outputs/bench/h200/eager-*.json): 60m at TF32 by 15 %, 1b at TF32
    by 15 % and at bf16 by 25 % (tests/test_notebook_workers.py checks 60m). A rule whose memory grows faster than
    linearly in depth (the cross-depth rules) is underestimated at depth.
    """
    key = (repr(run.model), run.train.precision, str(device))
    if key not in _MEASURED:
        _MEASURED[key] = _measured_step_memory(run, device)
    return _MEASURED[key]


def step_bytes(run: RunConfig, memory: tuple[int, int], sequences: int, accumulates: bool) -> int:
    """The peak of a step of ``sequences`` per forward pass, from ``step_memory``'s ``memory``: with the gradients
    beside the activations where the step ``accumulates`` micro-batches (or buckets them for DDP), and never less
    than the optimizer step's weights, moments and gradients."""
    fixed, per_seq = memory
    params = count_params(run.model)
    return max(fixed + sequences * per_seq + (GRAD_BYTES * params if accumulates else 0),
               (HELD_BYTES + GRAD_BYTES) * params)


def _measured_step_memory(run: RunConfig, device: torch.device) -> tuple[int, int]:
    base = -(-LOSS_CHUNK_TOKENS // run.model.seq_len)  # sequences that fill one chunk
    autocast = autocast_factory(resolve_precision(run.train.precision, torch.device("cuda")), device)

    def kept(blocks: int, batch: int) -> int:
        torch.manual_seed(0)
        with device:
            model = GPT(dataclasses.replace(run.model, n_layers=blocks))
            x = torch.randint(0, run.model.vocab_size, (batch, run.model.seq_len))
        losses = []  # each loss held, and with it the graph backward would read, until the peak is taken

        def forward():
            with autocast():
                losses.append(model(x, x)[1])
        return peak_tensor_bytes(forward)

    one, two = ((kept(b, base), kept(b, 2 * base)) for b in (1, 2))
    if device.type == "cuda":
        torch.cuda.empty_cache()  # give back what the measurement held: a worker trains on this GPU next
    per_seq = [(big - small) / base for small, big in (one, two)]
    fixed = [small - base * rate for (small, _), rate in zip((one, two), per_seq)]
    at_depth = lambda pair: max(pair[0] + (run.model.n_layers - 1) * (pair[1] - pair[0]), 0)  # noqa: E731
    return int(HELD_BYTES * count_params(run.model) + at_depth(fixed)), int(at_depth(per_seq))


def fit_sentence(run: RunConfig, overrides: dict, capacity: int, device_name: str, gpus: int,
                 measured_on: torch.device = torch.device("cpu")) -> str | None:
    """None when ``run`` fits ``capacity`` bytes; else one sentence: what it needs, and the ``torchrun`` line (with
    ``overrides`` as flags) of the fewest GPUs whose share of the batch fits (DDP keeps a whole model on each) and
    the micro-batch that fits on one, or the device it needs."""
    memory = step_memory(run, measured_on)
    batch = run.train.batch_size
    micro = run.train.micro_batch_size or batch
    need = step_bytes(run, memory, micro, micro < batch)
    if need <= capacity:
        return None
    gib = lambda n: f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"  # noqa: E731
    said = (f"{run.size}/{run.variant} does not fit one {device_name} ({gib(capacity)}): a training step needs about "
            f"{gib(need)} at {micro} sequences per forward pass (rrlib.speed.workers.step_memory)")
    divisors = [n for n in range(2, batch + 1) if batch % n == 0]
    share = next((n for n in divisors if step_bytes(run, memory, batch // n, True) <= capacity), None)
    if share is None:
        return (f"{said}, and even one sequence per GPU needs {gib(step_bytes(run, memory, 1, True))} (its weights, "
                f"gradients and AdamW state, which every GPU of a DDP run holds whole, take "
                f"{gib((HELD_BYTES + GRAD_BYTES) * count_params(run.model))}); train it on a device with more memory")
    line = shlex.join(["torchrun", "--nproc-per-node", str(share), "-m", "rrlib", "train", "--size", run.size,
                       "--variant", run.variant, "--seed", str(run.seed), *setting_flags(overrides)])
    host = "" if share <= gpus else f" (this host has {gpus}: run it where {share} are)"
    # the same share of the batch per forward pass fits one GPU as micro-batches, its gradients held between them
    return (f"{said}; train it on {share} GPUs{host}, each with {batch // share} of its {batch} sequences: {line} "
            f"(or on one, slower, with -y '{{settings: {{train: {{micro_batch_size: {batch // share}}}}}}}')")


# ---------------------------------------------------------------- the workers


def setting_flags(overrides: dict) -> list[str]:
    """A notebook's overrides as the command line's ``--set SECTION.KEY=VALUE`` flags, each value in YAML on one
    line (as ``--set`` reads it)."""
    def word(value) -> str:
        return yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n").removesuffix("\n...")

    return [f"--set={section}.{key}={word(value)}" for section, values in sorted(overrides.items())
            for key, value in sorted(values.items())]


def worker_commands(size: str, cells: list[tuple[str, int]], overrides: dict, out_root: str, n: int) -> list[list[str]]:
    """The sweep command of each of ``n`` workers: ``rrlib sweep --shard k/n`` over exactly ``cells``' variants and
    seeds (so each worker's shard is ``grid``'s k-th share of these cells)."""
    variants = list(dict.fromkeys(v for v, _ in cells))
    seeds = list(dict.fromkeys(s for _, s in cells))
    common = [sys.executable, "-m", "rrlib", "sweep", "--size", str(size), "--variants", ",".join(variants),
              "--seeds", ",".join(map(str, seeds)), "--out", str(project_path(out_root)), *setting_flags(overrides)]
    return [common + [f"--shard={k}/{n}"] for k in range(n)]


def worker_env(k: int, n: int, gpus: list[int]) -> dict:
    """Worker k's environment: on a GPU host its own GPU alone, on a CPU its share of the threads; no progress
    bars (the sweep's line per run is the progress the caller shows)."""
    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    if gpus:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")  # CUDA's indices count within what is visible
        env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[gpus[k]] if visible else str(gpus[k])
    else:
        threads = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
        env["OMP_NUM_THREADS"] = str(max(1, threads // n))
    return env


class Worker:
    """One worker process: its shard, its output read line by line on a thread, the last error line kept."""

    def __init__(self, k: int, n: int, command: list[str], env: dict, cells: list, log):
        self.k, self.n, self.cells, self.error, self.last = k, n, cells, None, None
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, bufsize=1, cwd=str(project_path(".")))
        self.reader = threading.Thread(target=self._read, args=(log,), daemon=True)
        self.reader.start()

    def _read(self, log) -> None:
        for line in self.process.stdout:
            line = line.rstrip()
            if line.startswith("[sweep"):  # the sweep's line per run: the progress the caller shows
                log(f"[worker {self.k + 1}/{self.n}] {line}")
            elif line.startswith("error: "):  # the sweep command's one sentence, when it ends badly
                self.error = line.removeprefix("error: ")
            elif line.strip():  # else the last line said (an unforeseen error's traceback ends in its message)
                self.last = line.strip()

    def wait(self) -> str | None:
        """None when the worker ended well; else why not, in words."""
        code = self.process.wait()
        self.reader.join()
        if code == 0:
            return None
        runs = ", ".join(f"{v}/seed{s}" for v, s in self.cells)
        if code < 0:
            why = f"died ({signal.Signals(-code).name})"
        else:
            why = f"failed: {(self.error or self.last or f'exit status {code}').rstrip('.')}"
        return f"worker {self.k + 1} of {self.n} (shard {self.k}/{self.n}: {runs}) {why}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # a run saves its checkpoint and stops (rrlib.runs.train)


def check_workers(size: str, variants, seeds, overrides: dict, out_root: str, workers,
                  capacity: int | None = None) -> tuple[int, list[int]]:
    """The number of workers the sweep will use and the GPUs it spreads over, after every check a user's input can
    fail, before any work:
    the grid and each run's settings (as the sweep resolves them), ``workers`` against the devices of the runs'
    device setting, and on a GPU each variant's run against the memory of one (``capacity`` bytes: default, the
    smallest of those GPUs')."""
    cells = grid(size, variants, seeds)
    runs = [resolve_run(size, v, s, overrides, out_root) for v, s in cells]
    device = runs[0].train.device
    n = worker_count(workers, device, len(cells))
    gpus = gpus_for(device)
    if gpus or capacity is not None:
        name, on = "device", torch.device("cpu")
        if capacity is None:
            index = min(gpus, key=lambda i: torch.cuda.get_device_properties(i).total_memory)
            props, on = torch.cuda.get_device_properties(index), torch.device("cuda", index)
            capacity, name = props.total_memory, props.name
        for run in {r.variant: r for r in runs}.values():  # one seed's run per variant: seeds share the shape
            said = fit_sentence(run, overrides, capacity, name, len(gpus), on)
            if said:
                raise ConfigError(said)
    return n, gpus


def spread_sweep(size: str, variants, seeds, overrides: dict, out_root: str, workers=None, log=None):
    """The size's runs trained over ``workers`` processes (``check_workers`` first); the results table of the asked
    cells, as ``quiet_sweep`` returns it. Raises SweepIncomplete, naming each worker that failed or died, after every
    worker has ended."""
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    n, gpus = check_workers(size, variants, seeds, overrides, out_root, workers)
    if n == 1:
        return quiet_sweep(size, variants, seeds, overrides, out_root)
    cells = grid(size, variants, seeds)
    commands = worker_commands(size, cells, overrides, out_root, n)
    shown = [out_root if word == str(project_path(out_root)) else word for word in commands[0][3:-1]]
    log(f"[workers] {len(cells)} {size_name(size)} runs over {n} workers, one "
        f"{'GPU' if gpus else 'share of the CPU'} each: rrlib {shlex.join(shown)} --shard=k/{n}")
    started = []
    try:
        for k, command in enumerate(commands):
            started.append(Worker(k, n, command, worker_env(k, n, gpus), grid(size, variants, seeds, (k, n)), log))
        failed = [why for why in (w.wait() for w in started) if why]
    finally:
        for worker in started:
            worker.stop()
    name = size_name(size)
    table = write_results(out_root, name, results_table(out_root, name, log=log))
    table = table[[cell in set(cells) for cell in zip(table["variant"], table["seed"])]].reset_index(drop=True)
    if failed:
        raise SweepIncomplete(f"{'; '.join(failed)}; {len(table)} of {len(cells)} runs finished and stay in "
                              f"{Path(out_root) / name}, and a rerun trains only the rest", table)
    return table
