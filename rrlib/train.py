"""One training run, from a resolved ``RunConfig`` to a ``result.json``.

The run folder ``<out_root>/<size>/<variant>/seed<k>/`` holds:

    config.json     the resolved config, git commit, library/torch versions, device, precision
    metrics.jsonl   one line per logged step (loss, lr, grad norm, tokens/s) and per periodic evaluation
    ckpt.pt         the latest checkpoint (model, optimizer, step, minutes); written atomically
    result.json     written once, atomically, when the run ends (status finished or diverged)

Faults: a checkpoint is written every ``ckpt_every`` steps and on SIGTERM/SIGINT. Batches are a pure function
of (seed, step) and nothing else draws random numbers after init, so a run killed at any point and started
again continues bitwise-identically on CPU. A NaN/inf loss ends the run with status ``diverged``. Starting a
run that has a result does nothing. A file lock on the run folder keeps two processes from running one run.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from . import __version__
from .config import PROJECT_ROOT, ConfigError, RunConfig, project_path
from .data import fixed_eval_windows, get_batch, load_token_data, paper_eval_windows
from .evaluate import evaluate
from .model import GPT



class RunBusy(RuntimeError):
    """Another process holds this run's lock."""


# ---------------------------------------------------------------- small helpers

def write_json_atomic(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def git_commit() -> str:
    """HEAD of the project's checkout (+dirty), or $RRLIB_GIT_COMMIT for a copy made without .git."""
    if os.environ.get("RRLIB_GIT_COMMIT"):
        return os.environ["RRLIB_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


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
    """bf16 autocast around forward passes only; fp32/tf32 run without autocast (tf32 is a matmul flag)."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    if precision == "bf16":
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


def lr_at(step: int, cfg) -> float:
    """Linear warmup over ``warmup_steps``, then cosine from lr down to ``min_lr_frac``·lr at the last step."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def make_optimizer(model: torch.nn.Module, cfg, device: torch.device) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices only (embeddings included), not on biases, gains or scalar gates."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), fused=device.type == "cuda")


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """An exclusive lock on the run folder, released by the OS even if the process is killed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "run.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"{run_dir} is being run by another process") from None
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield


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
        cache_dir=str(project_path(dc.cache_dir)), gpt2_dir=dc.gpt2_dir)


def optimizer_step(model, fwd, optimizer, x, y, lr: float, accum: int, autocast, grad_clip: float,
                   distributed: bool = False):
    """One optimizer step over (x, y) in ``accum`` micro-batches; returns (mean loss, grad norm) on the device.

    ``fwd`` is what runs the forward pass (the model, its compiled form, or its DDP wrapper); gradients are
    synchronised only on the last micro-batch.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
    micro = x.shape[0] // accum
    step_loss = torch.zeros((), device=x.device)
    for k in range(accum):
        last = k == accum - 1
        with (contextlib.nullcontext() if last or not distributed else fwd.no_sync()), autocast():
            _, loss = fwd(x[k * micro:(k + 1) * micro], y[k * micro:(k + 1) * micro])
        (loss / accum).backward()
        step_loss += loss.detach() / accum
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return step_loss, grad_norm


def read_result(run_dir: Path) -> dict | None:
    path = Path(run_dir) / "result.json"
    return json.loads(path.read_text()) if path.exists() else None


# ---------------------------------------------------------------- distributed

def dist_info() -> tuple[int, int, int]:
    """(rank, local rank, world size) from torchrun's environment; (0, 0, 1) for a plain process."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


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

def train_run(run: RunConfig, progress: bool = True) -> dict:
    """Train one run to its result (or resume it); returns the result dict. Raises RunBusy if locked."""
    run_dir = run.run_dir
    done = read_result(run_dir)
    if done is not None:
        return done
    rank, local_rank, world = dist_info()
    accum = grad_accum_steps(run.train, world)
    device = pick_device(run.train.device)
    if world > 1:
        if device.type == "cuda":
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    lock = run_lock(run_dir) if rank == 0 else contextlib.nullcontext()
    with lock, StopFlag() as stop:
        done = read_result(run_dir)  # another process may have finished it while we waited
        if done is not None:
            return done
        return _train(run, run_dir, device, rank, world, accum, stop, progress and rank == 0)


def _train(run, run_dir, device, rank, world, accum, stop, progress) -> dict:
    tc = run.train
    precision = resolve_precision(tc.precision, device)
    autocast = autocast_factory(precision, device)
    data = load_run_data(run)

    torch.manual_seed(run.seed)
    model = GPT(run.model).to(device)
    optimizer = make_optimizer(model, tc, device)
    start_step, minutes_before = 0, 0.0
    ckpt_path = run_dir / "ckpt.pt"
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=device, weights_only=True)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start_step, minutes_before = ckpt["step"], ckpt["minutes"]
    fwd = torch.compile(model) if tc.compile else model
    if world > 1:
        fwd = DistributedDataParallel(fwd, device_ids=[device.index] if device.type == "cuda" else None)

    header = {
        "config": run.to_dict(), "git_commit": git_commit(), "rrlib_version": __version__,
        "torch_version": torch.__version__, "python": platform.python_version(), "device": _device_name(device),
        "precision": precision, "compile": tc.compile, "world_size": world, "grad_accum_steps": accum,
        "attention": _attention_backend(device), "data_source": data.source, "command": _command_line(),
    }
    if rank == 0:
        write_json_atomic(run_dir / "config.json", header)
        _truncate_metrics(run_dir / "metrics.jsonl", start_step)
        print(f"[rrlib] {run.size}/{run.variant}/seed{run.seed}: device {header['device']}, precision "
              f"{precision}, attention {header['attention']}, compile {tc.compile}, world {world}, "
              f"params {model.n_params() / 1e6:.2f}M, start step {start_step}", flush=True)

    def save(step, minutes):
        if rank == 0:
            tmp = ckpt_path.with_suffix(".tmp")
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                        "minutes": minutes}, tmp)
            os.replace(tmp, ckpt_path)

    def fixed_eval():
        return evaluate(model, fixed_eval_windows(data.heldout, run.model.seq_len, tc.fixed_eval_tokens,
                                                  batch_size=max(1, tc.batch_size // world)), device, autocast)

    tokens_per_step = tc.batch_size * run.model.seq_len
    first_bad = torch.full((), -1, dtype=torch.long, device=device)
    loss_acc = torch.zeros((), device=device)
    metrics = open(run_dir / "metrics.jsonl", "a") if rank == 0 else None
    bar = _progress_bar(start_step, tc.steps, progress)
    clock = TrainClock()
    step, window_start = start_step, start_step
    try:
        while step < tc.steps:
            lr = lr_at(step, tc)
            x, y = get_batch(data.train, step, run.seed, tc.batch_size, run.model.seq_len, rank, world)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
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
                tok_s = n * tokens_per_step / clock.window()
                mean_loss = loss_acc.item() / n
                loss_acc.zero_()
                window_start = step
                _log(metrics, {"step": step, "loss": mean_loss, "lr": lr, "grad_norm": grad_norm.item(),
                               "tokens_per_s": tok_s})
                if bar is not None:
                    bar.update(n)
                    bar.set_postfix(loss=f"{mean_loss:.4f}", tok_s=f"{tok_s:,.0f}")
                if first_bad.item() >= 0:
                    save(step, minutes_before + clock.train_seconds() / 60)
                    return _finish(run, run_dir, model, header, "diverged", step, minutes_before, clock,
                                   start_step, diverged_step=int(first_bad.item()))
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
        "peak_memory_MB": _peak_memory_mb(next(model.parameters()).device),
        "status": status, "diverged_step": diverged_step, **(evals or {}),
    }
    if int(os.environ.get("RANK", 0)) == 0:
        write_json_atomic(run_dir / "result.json", result)
    return result


def _command_line() -> str:
    """How this process was started, without the machine's paths (a result file travels between machines)."""
    if sys.argv[0].endswith("__main__.py"):
        return " ".join(["python -m rrlib", *sys.argv[1:]])
    return f"{Path(sys.argv[0]).name} (through the Python API)"  # e.g. a notebook kernel: its arguments are not ours


def _log(fh, record: dict) -> None:
    if fh is not None:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, drop log lines past the checkpoint so the log reads as one uninterrupted run."""
    if path.exists():
        keep = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= step]
        path.write_text("".join(ln + "\n" for ln in keep))


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


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def _attention_backend(device: torch.device) -> str:
    if device.type != "cuda":
        return "sdpa (cpu)"
    b = torch.backends.cuda
    enabled = [n for n, on in (("flash", b.flash_sdp_enabled()), ("mem_efficient", b.mem_efficient_sdp_enabled()),
                               ("math", b.math_sdp_enabled())) if on]
    return "sdpa (" + ", ".join(enabled) + ")"
