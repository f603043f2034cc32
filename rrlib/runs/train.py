"""One training run, from a resolved ``RunConfig`` to a ``result.json``.

The run folder ``<out_root>/<size>/<variant>/seed<k>/`` holds:

    config.json     the resolved config, git commit, library/torch versions, device, precision,
                    the attention kernel its shapes get (e.g. flash_attention or math)
    metrics.jsonl   one line per logged step (loss, lr, grad norm, tokens/s) and per periodic evaluation
    ckpt.pt         while it runs: the latest checkpoint (model, optimizer, step, minutes); written atomically
    result.json     written once, atomically, when the run ends (status finished or diverged); ckpt.pt then goes
    weights.pt      the final weights, only with train.keep_weights bf16 or fp32 (rrlib.runs.folders.checkpoints)

Faults: a checkpoint is written every ``ckpt_every`` steps and on SIGTERM/SIGINT. Batches are a pure function
of (seed, step) and nothing else draws random numbers after init, so a run killed at any point and started
again continues bitwise-identically on CPU, its metrics log line for line (the open log window is part of the
checkpoint). A NaN/inf loss ends the run with status ``diverged``, and so does a run whose final training loss or
either final evaluation is far above a uniform guess's (``diverged_loss``). Starting a run that has a result does
nothing. A file lock on the run folder keeps two processes from running one run.

Identity: every file of the folder carries the run's fingerprint and its data's hash (rrlib.runs.folders.runfiles); a folder
that holds a run with other settings or other data, finished or not, is never resumed or answered from, and every
file is read guarded (rrlib.runs.folders). Before the folder gets a file, the settings have been checked
(rrlib.runs.validate), the data's sizes against the run's windows (rrlib.runs.data.rundata), the folder and the run's
pace on a CPU (rrlib.runs.pace). Device and precision are rrlib.runs.device's, the optimiser step
rrlib.runs.optim's, what the files record of the code and machine rrlib.runs.provenance's.
"""
from __future__ import annotations

import contextlib
import math
import os
import platform
import signal
import time
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..model import GPT
from ..version import __version__
from .folders.checkpoints import CKPT_FILE, drop_checkpoint, init_source, keep_final, save_checkpoint, start_from
from .config import ConfigError, RunConfig, project_path
from .data import DataError, fixed_eval_windows, get_batch, paper_eval_windows
from .allocator import keep_freed_memory
from .device import autocast_factory, dist_info, join_process_group, pick_device, resolve_precision
from .folders.disk import disk_full, full_disk, write_json_atomic
from .evaluate import evaluate
from .folders import claimed, run_lock
from .folders.output_paths import checked_run_outputs
from .optim import group_lrs, make_optimizer, optimizer_step
from .pace import check_cpu_reach
from .provenance import attention_kernel, command_line, device_name, git_commit
from .data.rundata import checked_run_data
from .folders.runfiles import (DATA_HASH, append_log, fingerprint, log_intact, read_checkpoint, run_identity,
                       truncate_metrics)


# ---------------------------------------------------------------- small helpers

# A final loss above this many times ln(vocab) is a diverged run. A uniform guess over the vocabulary scores ln(vocab)
# (10.82 nats for GPT-2's, 5.55 for bytes) and the model at its init scores within a few hundredths of it; a model
# that learns anything ends below it. Half as much again is worse than knowing nothing by more than any run that
# trains shows: logits grown large and wrong, what a step size that blew up leaves when the loss stays finite.
DIVERGED_LOSS_FACTOR = 1.5


def diverged_loss(loss: float | None, vocab_size: int) -> bool:
    """Whether a final loss says the run diverged: not finite, or above DIVERGED_LOSS_FACTOR · ln(vocab_size)."""
    return loss is not None and not (math.isfinite(loss) and loss <= DIVERGED_LOSS_FACTOR * math.log(vocab_size))


class StopFlag:
    """Turns SIGTERM/SIGINT into a flag checked between steps, so the run can checkpoint and leave cleanly."""

    def __init__(self):
        self.signum = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.signum = signum

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def device_batches(tokens, start: int, stop: int, seed: int, batch_size: int, seq_len: int, rank: int, world: int,
                   device: torch.device):
    """The training batches of steps start..stop-1, each on the device when its step asks for it.

    The next batch is cut while the current step's kernels run (the generator resumes only after they are
    queued). On CUDA it travels from pinned memory with ``non_blocking``: a copy from pageable memory is staged
    and makes the host wait. Batches stay a pure function of (seed, step), so resuming is unchanged.
    """
    def fetch(step):
        x, y = get_batch(tokens, step, seed, batch_size, seq_len, rank, world)
        if device.type == "cuda":
            x, y = (t.pin_memory().to(device, non_blocking=True) for t in (x, y))
        return x, y

    ahead = fetch(start) if start < stop else None
    for step in range(start, stop):
        yield ahead
        ahead = fetch(step + 1) if step + 1 < stop else None


def grad_accum_steps(cfg, world_size: int) -> int:
    """Micro-steps per optimizer step: tokens per step stay fixed however memory forces the batch to split."""
    if cfg.batch_size % world_size:
        raise ConfigError(f"batch_size {cfg.batch_size} is not divisible by the world size {world_size}; "
                          f"choose a batch size that is a multiple of {world_size}")
    share = cfg.batch_size // world_size
    micro = cfg.micro_batch_size or share
    if share % micro:
        raise ConfigError(f"micro_batch_size {micro} does not divide the per-process batch {share}; "
                          f"valid choices are the divisors of {share}")
    return share // micro


# ---------------------------------------------------------------- the run


def train_run(run: RunConfig, progress: bool = True, move_aside: bool = False, allow_slow: bool | None = None,
              skip_done: bool = False) -> dict | None:
    """Train one run to its result (or resume it); returns the result dict. Raises RunBusy if locked.

    With ``skip_done``, a run found finished (so not trained by this call) returns None instead of its result.

    A folder that holds this run finished answers with its result; one that holds another run (or a file that
    cannot be read) raises RunConflict (StateError), unless ``move_aside`` moves it aside first. A run far beyond
    a CPU's reach stops before it starts unless ``allow_slow`` (default: $RRLIB_ALLOW_SLOW=1). Everything a run
    can be refused for (its settings, its data's sizes, its folder, its pace) is found before its folder gets a
    file; running out of memory or disk ends in one sentence with the way out.
    """
    checked_run_outputs(run.run_dir, project_path(run.data.cache_dir))  # first: reading needs paths one can look at
    run, done = claimed(run, move_aside)
    if done is not None:
        return None if skip_done else done
    rank, local_rank, world = dist_info()
    accum = grad_accum_steps(run.train, world)
    device = pick_device(run.train.device)
    check_cpu_reach([run], device, allow_slow)
    data = checked_run_data(run)
    run_dir = run.run_dir
    device = join_process_group(device, local_rank, world)
    if device.type == "cpu":
        keep_freed_memory()  # each step's activations come back from the heap, not as fresh pages (allocator.py)
    # folders this call creates: a bad input found while starting leaves none behind
    created = [d for d in (run_dir, *list(run_dir.parents)[:3]) if not d.exists()]  # up to the out root
    lock = run_lock(run_dir) if rank == 0 else contextlib.nullcontext()
    try:
        with lock, StopFlag() as stop:
            run, done = claimed(run)  # another process may have finished it while we waited
            if done is not None:
                return None if skip_done else done
            return _train(run, run_dir, data, device, rank, world, accum, stop, progress and rank == 0)
    except (ConfigError, DataError):
        if rank == 0 and created and {p.name for p in run_dir.iterdir()} <= {"run.lock"}:
            (run_dir / "run.lock").unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # a folder another process has written to meanwhile stays
                for folder in created:  # innermost first; each is empty once the one inside it is gone
                    folder.rmdir()
        raise
    except Exception as err:  # noqa: BLE001 - only the two below are turned into a sentence; the rest go on
        if out_of_memory(err):
            raise ConfigError(out_of_memory_advice(run, device, world)) from None
        if disk_full(err):  # an append to metrics.jsonl (the atomic writes say so themselves)
            raise full_disk(run_dir / "metrics.jsonl", err) from None
        raise


def out_of_memory(err: BaseException) -> bool:
    """CUDA's OutOfMemoryError, or the CPU allocator's failure (a RuntimeError on torch 2.13)."""
    return isinstance(err, (torch.OutOfMemoryError, MemoryError)) or \
        (isinstance(err, RuntimeError) and "can't allocate memory" in str(err))


def out_of_memory_advice(run: RunConfig, device: torch.device, world: int) -> str:
    share = run.train.batch_size // world
    micro = run.train.micro_batch_size or share
    where = f"{run.size}/{run.variant}/seed{run.seed} ran out of memory on {device_name(device)} with {micro} " \
            f"sequence{'' if micro == 1 else 's'} per forward pass"
    if micro == 1:
        return f"{where}; even one sequence does not fit: use a smaller size or a device with more memory"
    smaller = next(d for d in range(micro // 2, 0, -1) if share % d == 0)
    return (f"{where}; pass --micro-batch-size {smaller} (or a smaller divisor of {share}) and run the same command "
            f"again: each step still takes {run.train.batch_size} sequences, in smaller passes, the run is the same "
            f"run (its fingerprint leaves the split out), and it goes on from its last checkpoint")


def _train(run, run_dir, data, device, rank, world, accum, stop, progress) -> dict:
    tc = run.train
    precision = resolve_precision(tc.precision, device)
    autocast = autocast_factory(precision, device)

    if device.type == "cuda":  # peak_memory_MB is this run's, not the largest of a sweep's runs so far
        torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(run.seed)
    model = GPT(run.model)
    if tc.init_from is not None:  # a resumed run's checkpoint replaces these weights below
        start_from(init_source(run), model)
    model = model.to(device)
    optimizer = make_optimizer(model, tc, device)
    identity = run_identity(run, device.type, precision)
    start_step, minutes_before = 0, 0.0
    # the log window open at the checkpoint: a run stopped between log steps logs the same lines as one that was not
    window = {"start": 0, "loss_sum": 0.0, "first_bad": -1}
    ckpt = read_checkpoint(run_dir / CKPT_FILE, map_location=device)  # claimed() has checked it is this run's
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start_step, minutes_before = ckpt["step"], ckpt["minutes"]
        window = ckpt.get("log_window", {**window, "start": start_step})
    fwd = model.compile_steps() if tc.compile else model  # per residual step: compile time flat in depth
    if world > 1:
        fwd = DistributedDataParallel(fwd, device_ids=[device.index] if device.type == "cuda" else None)

    header = {
        "config": run.to_dict(), "git_commit": git_commit(), "rrlib_version": __version__,
        "torch_version": torch.__version__, "python": platform.python_version(), "device": device_name(device),
        "precision": precision, "compile": tc.compile, "world_size": world, "grad_accum_steps": accum,
        "attention": attention_kernel(run.model, tc.micro_batch_size or tc.batch_size // world, device, precision),
        "data_source": data.source, "command": command_line(),
        "device_type": device.type, "fingerprint": fingerprint(identity), DATA_HASH: data.content_hash,
    }
    if rank == 0:
        write_json_atomic(run_dir / "config.json", header)
        truncate_metrics(run_dir / "metrics.jsonl", start_step)
        print(f"[rrlib] {run.size}/{run.variant}/seed{run.seed}: device {header['device']}, precision "
              f"{precision}, attention {header['attention']}, compile {tc.compile}, world {world}, "
              f"params {model.n_params() / 1e6:.2f}M, start step {start_step}", flush=True)

    def save(step, minutes):
        loss_sum = loss_acc.clone()
        if world > 1:  # every rank resumes with the window's mean, so the next all-reduce / world is right
            dist.all_reduce(loss_sum)
            loss_sum /= world
        if rank == 0:
            save_checkpoint(run_dir, model, optimizer, step, minutes, identity=identity,
                            fingerprint=header["fingerprint"], **{DATA_HASH: data.content_hash},
                            log_window={"start": window_start, "loss_sum": loss_sum.item(),
                                        "first_bad": int(first_bad.item())})

    # evaluation passes are as large as training's, so a micro-batch that fits training fits them (the windows and
    # the sums over them do not depend on it)
    per_pass = tc.micro_batch_size or tc.batch_size // world

    def fixed_eval():
        return evaluate(model, fixed_eval_windows(data.heldout, run.model.seq_len, tc.fixed_eval_tokens,
                                                  batch_size=per_pass), device, autocast)

    tokens_per_step = tc.batch_size * run.model.seq_len
    first_bad = torch.full((), window["first_bad"], dtype=torch.long, device=device)
    loss_acc = torch.full((), window["loss_sum"], device=device)
    metrics = open(run_dir / "metrics.jsonl", "ab", buffering=0) if rank == 0 else None
    bar = _progress_bar(start_step, tc.steps, progress)
    clock = TrainClock()
    step, window_start = start_step, window["start"]
    stopping = None  # the signal every rank stops for, once they agree on one
    mean_loss = None  # the last log window's; none when a run resumes at its last step
    batches = device_batches(data.train, step, tc.steps, run.seed, tc.batch_size, run.model.seq_len, rank, world,
                             device)
    try:
        while step < tc.steps:
            lrs = group_lrs(step, tc, optimizer)
            lr = lrs[0]  # the log's: the groups other than the rule's
            x, y = next(batches)
            step_loss, grad_norm = optimizer_step(model, fwd, optimizer, x, y, lrs, accum, autocast, tc.grad_clip,
                                                  distributed=world > 1)
            # divergence is recorded on the device and read at log steps: no host sync per step
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(step_loss), step, first_bad)
            loss_acc += step_loss
            step += 1

            if step % tc.log_every == 0 or step == tc.steps:
                if world > 1:
                    dist.all_reduce(loss_acc)
                    loss_acc /= world
                    first_bad, stopping = _agree(first_bad, stop.signum, device)
                n = step - window_start
                timed = step - max(window_start, start_step)  # a window opened before a resume was timed in part
                tok_s = timed * tokens_per_step / clock.window()
                # the log step's one host sync: the three numbers come over in one transfer
                loss_sum, norm, bad_step = torch.stack([loss_acc.double(), grad_norm.double(),
                                                        first_bad.double()]).tolist()
                mean_loss = loss_sum / n
                loss_acc.zero_()
                window_start = step
                append_log(metrics, {"step": step, "loss": mean_loss, "lr": lr, "grad_norm": norm,
                               "tokens_per_s": tok_s})
                if bar is not None:
                    bar.update(timed)
                    bar.set_postfix(loss=f"{mean_loss:.4f}", tok_s=f"{tok_s:,.0f}")
                if bad_step >= 0:  # a diverged run resumes nothing: no checkpoint, as a finished one
                    return _finish(run, run_dir, model, header, "diverged", step, minutes_before, clock,
                                   start_step, diverged_step=int(bad_step),
                                   why=f"a non-finite training loss at step {int(bad_step)}")
            if step % tc.eval_every == 0 and step < tc.steps:
                with clock.paused() as paused:
                    ev = fixed_eval()
                append_log(metrics, {"step": step, "fixed_loss": ev["loss"], "fixed_ece": ev["ece"],
                               "eval_seconds": paused.seconds})
                if not math.isfinite(ev["loss"]):  # the final evaluation would score it diverged: stop here
                    return _finish(run, run_dir, model, header, "diverged", step, minutes_before, clock,
                                   start_step, diverged_step=step,
                                   why=f"fixed_loss not finite at the evaluation of step {step}")
            if world == 1:  # one process stops at the next step; ranks stop where they agreed to (_agree)
                stopping = stop.signum
            if step % tc.ckpt_every == 0 and step < tc.steps or stopping:
                with clock.paused():
                    save(step, minutes_before + clock.train_seconds() / 60)
                    if world > 1:  # no rank leaves (and has the launcher stop the others) before rank 0 has saved
                        dist.barrier()
                if stopping:
                    raise KeyboardInterrupt(f"stopped by signal {stopping} at step {step}; checkpoint saved")
        if metrics is not None:
            log_intact(metrics, run_dir / "metrics.jsonl")
        with clock.paused():
            paper = evaluate(model, in_passes(paper_eval_windows(data.heldout, run.seed, tc.paper_eval_batches,
                                                                 tc.batch_size, run.model.seq_len), per_pass),
                             device, autocast)
            fixed = fixed_eval()
        evals = {"val_loss": paper["loss"], "ece": paper["ece"], "fixed_loss": fixed["loss"],
                 "fixed_ece": fixed["ece"], "paper_eval_tokens": paper["tokens"], "fixed_eval_tokens": fixed["tokens"]}
        final = {"final training loss": mean_loss, "val_loss": paper["loss"], "fixed_loss": fixed["loss"]}
        far = [f"{name} {loss:.3g}" for name, loss in final.items() if diverged_loss(loss, run.model.vocab_size)
               and math.isfinite(loss)]
        lost = [name for name, loss in final.items() if loss is not None and not math.isfinite(loss)]
        if far or lost:  # finite or not, a number no file should hold as a loss is recorded as missing
            evals = {k: v if v is None or math.isfinite(v) else None for k, v in evals.items()}
            limit = DIVERGED_LOSS_FACTOR * math.log(run.model.vocab_size)
            why = [f"{', '.join(lost)} not finite"] * bool(lost) + [
                f"{', '.join(far)} above {DIVERGED_LOSS_FACTOR:g} ln(vocab) = {limit:.2f}"] * bool(far)
            return _finish(run, run_dir, model, header, "diverged", step, minutes_before, clock, start_step, evals,
                           diverged_step=step, why="; ".join(why))
        return _finish(run, run_dir, model, header, "finished", step, minutes_before, clock, start_step, evals)
    finally:
        if bar is not None:
            bar.close()
        if metrics is not None:
            metrics.close()


def _agree(first_bad: torch.Tensor, signum: int | None, device) -> tuple[torch.Tensor, int | None]:
    """Every rank's view of the run at a log step, one all-reduce: the first step any rank diverged at (-1 for
    none) and the signal any rank was sent (None for none), so that every rank stops, checkpoints and records
    divergence at the same step, whichever rank was signalled."""
    never = torch.iinfo(torch.long).max
    flags = torch.stack([torch.where(first_bad < 0, never, first_bad),
                         torch.tensor(-(signum or 0), dtype=torch.long, device=device)])
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    bad, sig = flags.tolist()
    return torch.full((), -1 if bad == never else bad, dtype=torch.long, device=device), -sig or None


class TrainClock:
    """Wall time spent training, with evaluation and checkpointing paused out of it."""

    def __init__(self):
        self.start = self.window_start = time.perf_counter()
        self.paused_total = self.window_paused = 0.0

    @contextlib.contextmanager
    def paused(self):
        t0 = time.perf_counter()
        box = SimpleNamespace(seconds=0.0)
        try:
            yield box
        finally:
            box.seconds = time.perf_counter() - t0
            self.paused_total += box.seconds
            self.window_paused += box.seconds

    def train_seconds(self) -> float:
        return time.perf_counter() - self.start - self.paused_total

    def window(self) -> float:
        """Training seconds since the last call."""
        now = time.perf_counter()
        seconds = max(now - self.window_start - self.window_paused, 1e-9)
        self.window_start, self.window_paused = now, 0.0
        return seconds


def _finish(run, run_dir, model, header, status, step, minutes_before, clock, start_step, evals=None,
            diverged_step=None, why=None) -> dict:
    """The result, written once; a diverged run says ``why`` (``diverged_because``), and what it has no number for
    (its evaluations, after a non-finite loss) is null."""
    tc = run.train
    n_params = model.n_params()
    tokens = step * tc.batch_size * run.model.seq_len
    train_seconds = clock.train_seconds()
    result = {
        "size": run.size, "variant": run.variant, "seed": run.seed, "params_M": round(n_params / 1e6, 2),
        "steps": step, "val_loss": None, "ece": None, "minutes": round(minutes_before + train_seconds / 60, 3),
        "fixed_loss": None, "fixed_ece": None, "paper_eval_tokens": None, "fixed_eval_tokens": None, "params": n_params,
        "non_embedding_params": model.n_non_embedding_params(), "flops_per_token": model.flops_per_token(),
        "tokens": tokens, "tokens_per_param": tokens / n_params,
        "tokens_per_s": (step - start_step) * tc.batch_size * run.model.seq_len / max(train_seconds, 1e-9),
        "train_flops": model.flops_per_token() * tokens, "eval_seconds": clock.paused_total,
        "d_model": run.model.d_model, "n_layers": run.model.n_layers, "n_heads": run.model.n_heads,
        "n_loops": run.model.n_loops, "lr": tc.lr, "precision": header["precision"], "device": header["device"],
        "world_size": header["world_size"], "git_commit": header["git_commit"],
        "rrlib_version": __version__, "torch_version": torch.__version__, "data_source": header["data_source"],
        "fingerprint": header["fingerprint"], DATA_HASH: header[DATA_HASH],
        "peak_memory_MB": _peak_memory_mb(next(model.parameters()).device),
        "status": status, "diverged_step": diverged_step, **(evals or {}),
    }
    if why is not None:
        result["diverged_because"] = why
    if int(os.environ.get("RANK", 0)) == 0:
        keep_final(run_dir, model, tc.keep_weights)
        write_json_atomic(run_dir / "result.json", result)
        drop_checkpoint(run_dir)  # after the result: a kill in between leaves a finished run, not a lost one
    return result


def in_passes(batches, size: int):
    """Each (x, y) batch as passes of at most ``size`` windows."""
    for x, y in batches:
        for i in range(0, len(x), size):
            yield x[i:i + size], y[i:i + size]


def _progress_bar(start: int, total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=False)


def _peak_memory_mb(device: torch.device) -> float:
    """Peak tensor memory on CUDA since the run started; on CPU the process's peak resident set (includes Python
    and data, and in a sweep the earlier runs': the kernel keeps no resettable peak)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


