"""What produced a run, as its files record it: the code's commit (marked when tracked code had changed), the
command that started it, its device and the attention kernel it uses;
never a path of the machine it ran on."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

from ..home import IN_CHECKOUT, given_path
from ..model import sdpa_head_dim
from .config import PROJECT_ROOT


# What runs write, not code: a sweep rewrites its committed results.csv, a report its pages. A change there must
# not mark the runs that follow as made by uncommitted code (it did: every run after a sweep's table was "+dirty").
WRITTEN_BY_RUNS = ("outputs", "paper")


def git_commit() -> str:
    """HEAD of the project's checkout (+dirty if tracked code or settings changed), or $RRLIB_GIT_COMMIT for a
    copy made without .git; an installed package has no checkout (the folder it works in may be another
    project's), so its runs record the library version alone."""
    if os.environ.get("RRLIB_GIT_COMMIT"):
        return os.environ["RRLIB_GIT_COMMIT"]
    if not IN_CHECKOUT:
        return "unknown"
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *(f":(exclude){folder}" for folder in WRITTEN_BY_RUNS)], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def portable_path(value) -> str:
    """A path as a file that travels between machines records it: an absolute one becomes its path inside the
    project, or its file name outside it; a relative one stays as given."""
    value = str(value)
    if not os.path.isabs(value):
        return value
    shown = given_path(value)  # the library's form: relative inside the project, else still absolute
    return Path(shown).name if os.path.isabs(shown) else shown


def portable_arguments(argv) -> list[str]:
    """Command-line arguments without the machine's paths: each path argument, alone or after ``--flag=``, as
    ``portable_path`` shows it."""
    def portable(arg: str) -> str:
        flag, sep, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        return flag + sep + portable_path(value)
    return [portable(str(arg)) for arg in argv]


def command_line() -> str:
    """How this process was started, without the machine's paths (``portable_arguments``)."""
    if sys.argv[0].endswith("__main__.py"):
        return " ".join(["python -m rrlib", *portable_arguments(sys.argv[1:])])
    if Path(sys.argv[0]).name == "rrlib":  # the console script
        return " ".join(["rrlib", *portable_arguments(sys.argv[1:])])
    return f"{Path(sys.argv[0]).name} (through the Python API)"  # e.g. a notebook kernel: its arguments are not ours


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def attention_kernel(model_cfg, batch: int, device: torch.device, precision: str) -> str:
    """The SDPA kernel the dispatcher picks for this model's q, k, v (their shape, dtype and strides), e.g.
    "flash_attention" or "math": the kernel a run's attention uses, not merely the backends it allows (a head dim
    the fast kernels cannot take falls back to math, which keeps the T x T matrix in fp32)."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    true_dim = model_cfg.d_model // model_cfg.n_heads
    head_dim = sdpa_head_dim(true_dim, device.type)
    qkv = torch.empty(batch, model_cfg.seq_len, 3, model_cfg.n_heads, head_dim,
                      device=device, dtype=dtype).permute(2, 0, 3, 1, 4)  # as Attention.forward passes it
    q, k, v = (t.contiguous() for t in qkv) if head_dim != true_dim else qkv  # F.pad returns contiguous copies
    return SDPBackend(torch._fused_sdp_choice(q, k, v, is_causal=True)).name.lower()
