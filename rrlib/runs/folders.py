"""Who runs a run folder, and what it holds against the run asked for.

A file lock keeps two processes from running one run (``run_lock``). ``claimed`` reads the folder's files
through rrlib.runs.runfiles' guarded reads and compares the run they record (its fingerprint's settings) with
the one asked for: the same run answers with its result or resumes, another run or a damaged file is refused
with one sentence, or moved aside when asked (``move_folder_aside``); nothing is deleted.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import sys
from pathlib import Path

import torch

from .checkpoints import CKPT_FILE
from .config import RunConfig
from .device import resolve_precision
from .runfiles import (MOVE_ASIDE, RunConflict, StateError, differences, fingerprint, read_checkpoint, read_config,
                       read_result, recorded_identity, run_identity)


class RunBusy(RuntimeError):
    """Another process holds this run's lock."""


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


def claimed(run: RunConfig, move_aside: bool = False) -> tuple[RunConfig, dict | None]:
    """What the run's folder holds, checked against ``run``: (the run with 'auto' settled, its result if done).

    Raises RunConflict when the folder holds a finished run or a checkpoint made with other settings, and
    StateError when one of its files cannot be read; with ``move_aside`` the folder is moved aside instead.
    """
    run_dir = run.run_dir
    try:
        result, header = read_result(run_dir), read_config(run_dir)
        if result is not None and header is None:
            raise StateError(f"{run_dir / 'config.json'} is missing beside a result, so what the run was cannot be "
                             f"checked; restore it, or {MOVE_ASIDE}")
        # the checkpoint is opened (memory-mapped: cheap at any size) so a damaged one is named before training
        ckpt = read_checkpoint(run_dir / CKPT_FILE, mmap=True) if result is None else None
    except StateError:
        if not move_aside:
            raise
        move_folder_aside(run_dir, "unreadable")
        return run, None
    if result is None and ckpt is None:
        return run, None  # nothing trained is kept: whatever the folder holds is started afresh
    recorded = recorded_identity(header) if header is not None else ckpt.get("identity")
    if recorded is None:
        return run, None  # a checkpoint from before fingerprints, without its config.json: nothing to compare
    settled = as_recorded(run, recorded, to_train=result is None)
    asked = asked_identity(settled)
    if asked == recorded:
        return settled, result
    if move_aside:
        move_folder_aside(run_dir, fingerprint(recorded))
        return run, None
    what = f"a {result['status']} run" if result is not None else "a run in progress"
    raise RunConflict(f"{run_dir} holds {what} with other settings ({differences(recorded, asked)}); train this "
                      f"one under another --out, or {MOVE_ASIDE}")


def _device_type(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name.split(":")[0]


def asked_identity(run: RunConfig) -> dict:
    device_type = _device_type(run.train.device)
    return run_identity(run, device_type, resolve_precision(run.train.precision, torch.device(device_type)))


def as_recorded(run: RunConfig, recorded: dict, to_train: bool) -> RunConfig:
    """``run`` with 'auto' device and precision read as the folder's run had them.

    'auto' leaves the choice to rrlib, so a finished run asked again with 'auto' is the same run whatever device
    it trained on, and a resumed one goes on as it began, where that device type is here.
    """
    tc, there = run.train, recorded["run"]
    device = tc.device
    if device == "auto" and (not to_train or there["device_type"] == "cpu" or torch.cuda.is_available()):
        device = there["device_type"]
    precision = tc.precision
    if precision == "auto" and _device_type(device) == there["device_type"]:
        precision = there["precision"]
    return dataclasses.replace(run, train=dataclasses.replace(tc, device=device, precision=precision))


def move_folder_aside(run_dir: Path, tag: str) -> Path:
    """Rename the run folder to ``moved-seed<k>-<tag>`` beside it: kept, and out of every ``seed*`` glob."""
    with run_lock(run_dir):
        target, n = run_dir.with_name(f"moved-{run_dir.name}-{tag}"), 1
        while target.exists():
            n += 1
            target = run_dir.with_name(f"moved-{run_dir.name}-{tag}-{n}")
        os.rename(run_dir, target)
    print(f"[rrlib] moved {run_dir} aside to {target.name}", file=sys.stderr, flush=True)
    return target
