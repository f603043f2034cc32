"""One training run, from a resolved ``RunConfig`` to a ``result.json``.

The run folder ``<out_root>/<size>/<variant>/seed<k>/`` holds:

    config.json     the resolved config, git commit, library/torch versions, device, precision
    metrics.jsonl   one line per logged step (loss, lr, grad norm, tokens/s) and per periodic evaluation
    ckpt.pt         while it runs: the latest checkpoint (model, optimizer, step, minutes); written atomically
    result.json     written once, atomically, when the run ends (status finished or diverged); ckpt.pt then goes
    weights.pt      the final weights, only with train.keep_weights bf16 or fp32 (rrlib.checkpoints)

Faults: a checkpoint is written every ``ckpt_every`` steps and on SIGTERM/SIGINT. Batches are a pure function
of (seed, step) and nothing else draws random numbers after init, so a run killed at any point and started
again continues bitwise-identically on CPU, its metrics log line for line (the open log window is part of the
checkpoint). A NaN/inf loss ends the run with status ``diverged``. Starting a run that has a result does
nothing. A file lock on the run folder keeps two processes from running one run.

Identity: every file of the folder carries the run's fingerprint (rrlib.runs.runfiles); a folder that holds a run
with other settings, finished or not, is never resumed or answered from, and every file is read guarded
(rrlib.runs.folders). Device, precision and the CPU-reach guard are rrlib.runs.device's, the optimiser step
rrlib.runs.optim's, what the files record of the code and machine rrlib.runs.provenance's.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import time
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .. import __version__
from ..model import GPT
from .checkpoints import (CKPT_FILE, drop_checkpoint, init_source, keep_final, save_checkpoint, start_from,
                          write_json_atomic)
from .config import ConfigError, RunConfig, project_path
from .data import DataError, fixed_eval_windows, get_batch, load_token_data, paper_eval_windows
from .device import autocast_factory, check_cpu_reach, dist_info, join_process_group, pick_device, resolve_precision
from .evaluate import evaluate
from .folders import claimed, run_lock
from .optim import lr_at, make_optimizer, optimizer_step
from .provenance import attention_backend, command_line, device_name, git_commit
from .runfiles import MOVE_ASIDE, RunConflict, differences, fingerprint, read_checkpoint, run_identity, truncate_metrics


# ---------------------------------------------------------------- small helpers


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


def load_run_data(run: RunConfig):
    """The run's train and held-out token streams, with its relative paths resolved as the user meant them."""
    dc = run.data
    return load_token_data(
        dataset=dc.dataset, data_path=str(project_path(dc.data_path)) if dc.data_path else None,
        val_path=str(project_path(dc.val_path)) if dc.val_path else None, tokenizer=dc.tokenizer,
        max_stories=dc.max_stories, heldout=dc.heldout, heldout_frac=dc.heldout_frac,
        cache_dir=str(project_path(dc.cache_dir)), gpt2_dir=dc.gpt2_dir, eos_in_text=dc.eos_in_text,
        heldout_cut=dc.heldout_cut)


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
    a CPU's reach stops before it starts unless ``allow_slow`` (default: $RRLIB_ALLOW_SLOW=1).
    """
    run, done = claimed(run, move_aside)
    if done is not None:
        return None if skip_done else done
    rank, local_rank, world = dist_info()
    accum = grad_accum_steps(run.train, world)
    device = pick_device(run.train.device)
    check_cpu_reach([run], device, allow_slow)
    run_dir = run.run_dir
    device = join_process_group(device, local_rank, world)
    # folders this call creates: a bad input found while starting (data that cannot be read) leaves none behind
    created = [d for d in (run_dir, *list(run_dir.parents)[:3]) if not d.exists()]  # up to the out root
    lock = run_lock(run_dir) if rank == 0 else contextlib.nullcontext()
    try:
        with lock, StopFlag() as stop:
            run, done = claimed(run)  # another process may have finished it while we waited
            if done is not None:
                return None if skip_done else done
            return _train(run, run_dir, device, rank, world, accum, stop, progress and rank == 0)
    except (ConfigError, DataError):
        if rank == 0 and created and {p.name for p in run_dir.iterdir()} <= {"run.lock"}:
            (run_dir / "run.lock").unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # a folder another process has written to meanwhile stays
                for folder in created:  # innermost first; each is empty once the one inside it is gone
                    folder.rmdir()
        raise


def _train(run, run_dir, device, rank, world, accum, stop, progress) -> dict:
    tc = run.train
    precision = resolve_precision(tc.precision, device)
    autocast = autocast_factory(precision, device)
    data = load_run_data(run)

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
    ckpt = read_checkpoint(run_dir / CKPT_FILE, map_location=device)
    if ckpt is not None:
        if ckpt.get("identity", identity) != identity:
            raise RunConflict(f"{run_dir / CKPT_FILE} was written by a run with other settings "
                              f"({differences(ckpt['identity'], identity)}); train this one under another --out, "
                              f"or {MOVE_ASIDE}")
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
        "attention": attention_backend(device), "data_source": data.source, "command": command_line(),
        "device_type": device.type, "fingerprint": fingerprint(identity),
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
                            fingerprint=header["fingerprint"],
                            log_window={"start": window_start, "loss_sum": loss_sum.item(),
                                        "first_bad": int(first_bad.item())})

    def fixed_eval():
        return evaluate(model, fixed_eval_windows(data.heldout, run.model.seq_len, tc.fixed_eval_tokens,
                                                  batch_size=max(1, tc.batch_size // world)), device, autocast)

    tokens_per_step = tc.batch_size * run.model.seq_len
    first_bad = torch.full((), window["first_bad"], dtype=torch.long, device=device)
    loss_acc = torch.full((), window["loss_sum"], device=device)
    metrics = open(run_dir / "metrics.jsonl", "a") if rank == 0 else None
    bar = _progress_bar(start_step, tc.steps, progress)
    clock = TrainClock()
    step, window_start = start_step, window["start"]
    batches = device_batches(data.train, step, tc.steps, run.seed, tc.batch_size, run.model.seq_len, rank, world,
                             device)
    try:
        while step < tc.steps:
            lr = lr_at(step, tc)
            x, y = next(batches)
            step_loss, grad_norm = optimizer_step(model, fwd, optimizer, x, y, lr, accum, autocast, tc.grad_clip,
                                                  distributed=world > 1)
            # divergence is recorded on the device and read at log steps: no host sync per step
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(step_loss), step, first_bad)
            loss_acc += step_loss
            step += 1

            if step % tc.log_every == 0 or step == tc.steps:
                if world > 1:
                    dist.all_reduce(loss_acc)
                    loss_acc /= world
                n = step - window_start
                timed = step - max(window_start, start_step)  # a window opened before a resume was timed in part
                tok_s = timed * tokens_per_step / clock.window()
                # the log step's one host sync: the three numbers come over in one transfer
                loss_sum, norm, bad_step = torch.stack([loss_acc.double(), grad_norm.double(),
                                                        first_bad.double()]).tolist()
                mean_loss = loss_sum / n
                loss_acc.zero_()
                window_start = step
                _log(metrics, {"step": step, "loss": mean_loss, "lr": lr, "grad_norm": norm,
                               "tokens_per_s": tok_s})
                if bar is not None:
                    bar.update(timed)
                    bar.set_postfix(loss=f"{mean_loss:.4f}", tok_s=f"{tok_s:,.0f}")
                if bad_step >= 0:  # a diverged run resumes nothing: no checkpoint, as a finished one
                    return _finish(run, run_dir, model, header, "diverged", step, minutes_before, clock,
                                   start_step, diverged_step=int(bad_step))
            if step % tc.eval_every == 0 and step < tc.steps:
                with clock.paused() as paused:
                    ev = fixed_eval()
                _log(metrics, {"step": step, "fixed_loss": ev["loss"], "fixed_ece": ev["ece"],
                               "eval_seconds": paused.seconds})
            if step % tc.ckpt_every == 0 or stop.signum is not None:
                with clock.paused():
                    save(step, minutes_before + clock.train_seconds() / 60)
                if stop.signum is not None:
                    raise KeyboardInterrupt(f"stopped by signal {stop.signum} at step {step}; checkpoint saved")
        with clock.paused():
            save(step, minutes_before + clock.train_seconds() / 60)
            paper = evaluate(model, paper_eval_windows(data.heldout, run.seed, tc.paper_eval_batches,
                                                       tc.batch_size, run.model.seq_len), device, autocast)
            fixed = fixed_eval()
        evals = {"val_loss": paper["loss"], "ece": paper["ece"], "fixed_loss": fixed["loss"],
                 "fixed_ece": fixed["ece"], "paper_eval_tokens": paper["tokens"], "fixed_eval_tokens": fixed["tokens"]}
        return _finish(run, run_dir, model, header, "finished", step, minutes_before, clock, start_step, evals)
    finally:
        if bar is not None:
            bar.close()
        if metrics is not None:
            metrics.close()


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
            diverged_step=None) -> dict:
    tc = run.train
    n_params = model.n_params()
    tokens = step * tc.batch_size * run.model.seq_len
    train_seconds = clock.train_seconds()
    result = {
        "size": run.size, "variant": run.variant, "seed": run.seed, "params_M": round(n_params / 1e6, 2),
        "steps": step, "val_loss": None, "ece": None, "minutes": round(minutes_before + train_seconds / 60, 3),
        "fixed_loss": None, "fixed_ece": None, "params": n_params,
        "non_embedding_params": model.n_non_embedding_params(), "flops_per_token": model.flops_per_token(),
        "tokens": tokens, "tokens_per_param": tokens / n_params,
        "tokens_per_s": (step - start_step) * tc.batch_size * run.model.seq_len / max(train_seconds, 1e-9),
        "train_flops": model.flops_per_token() * tokens, "eval_seconds": clock.paused_total,
        "d_model": run.model.d_model, "n_layers": run.model.n_layers, "n_heads": run.model.n_heads,
        "n_loops": run.model.n_loops, "lr": tc.lr, "precision": header["precision"], "device": header["device"],
        "world_size": header["world_size"], "git_commit": header["git_commit"],
        "rrlib_version": __version__, "torch_version": torch.__version__, "data_source": header["data_source"],
        "fingerprint": header["fingerprint"],
        "peak_memory_MB": _peak_memory_mb(next(model.parameters()).device),
        "status": status, "diverged_step": diverged_step, **(evals or {}),
    }
    if int(os.environ.get("RANK", 0)) == 0:
        keep_final(run_dir, model, tc.keep_weights)
        write_json_atomic(run_dir / "result.json", result)
        drop_checkpoint(run_dir)  # after the result: a kill in between leaves a finished run, not a lost one
    return result


def _log(fh, record: dict) -> None:
    if fh is not None:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


def _progress_bar(start: int, total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=False)


def _peak_memory_mb(device: torch.device) -> float:
    """Peak tensor memory on CUDA; on CPU the process's peak resident set (includes Python and data)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


