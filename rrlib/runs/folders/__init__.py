"""Who runs a run folder, and what it holds against the run asked for.

A file lock keeps two processes from running one run (``run_lock``). ``claimed`` reads the folder's files
through rrlib.runs.folders.runfiles' guarded reads and compares the run they record (its fingerprint's settings) with
the one asked for: its settings (the fingerprint's), the checkpoint's run against the config's, and the data's
content (the hash of its tokens, for runs that record one). The same run answers with its result or resumes;
another run or a damaged file is refused with one sentence, or moved aside when asked (``move_folder_aside``),
whatever the conflict; nothing is deleted.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import sys
from pathlib import Path

import torch

from .checkpoints import CKPT_FILE, drop_checkpoint
from ..config import ConfigError, RunConfig
from ..device import resolve_precision
from ..data import DataError
from .runfiles import (DATA_HASH, METRICS_FILE, MOVE_ASIDE, RunConflict, StateError, differences, fingerprint,
                       read_checkpoint, read_config, read_result, recorded_identity, run_identity)


class RunBusy(RuntimeError):
    """Another process holds this run's lock."""


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """An exclusive lock on the run folder, released by the OS even if the process is killed."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fh = open(run_dir / "run.lock", "w")
    except OSError as err:  # what checked_output cannot see (a read-only disk, a race)
        raise ConfigError(f"cannot make {run_dir / 'run.lock'} ({err.strerror or err}); give --out a folder you can "
                          f"write") from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(f"{run_dir} is being run by another process") from None
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            # removed while still held, so a finished run's folder keeps only its results (a killed process leaves
            # it, and the next run takes it over: the lock is the flock, not the file)
            (run_dir / "run.lock").unlink(missing_ok=True)


def claimed(run: RunConfig, move_aside: bool = False) -> tuple[RunConfig, dict | None]:
    """What the run's folder holds, checked against ``run``: (the run with 'auto' settled, its result if done).

    Raises RunConflict when the folder holds a finished run or a checkpoint made with other settings or on other
    data, and StateError when one of its files cannot be read or a checkpoint has lost its metrics.jsonl; with
    ``move_aside`` the folder is moved aside instead, whatever the conflict. A checkpoint left beside this run's
    result (a kill between the two writes) is removed here, on the next visit.
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
    conflict = _conflict(settled, recorded, header, ckpt, result is not None)
    if conflict is None:
        if result is not None:  # a kill between the result and the checkpoint's removal left it (11.8 GB at 1b)
            drop_checkpoint(run_dir)
        elif not (run_dir / METRICS_FILE).is_file():
            _missing_log(run_dir, ckpt["step"], move_aside)
        return settled, result
    if move_aside:
        move_folder_aside(run_dir, fingerprint(recorded))
        return run, None
    raise RunConflict(f"{run_dir} holds {conflict}; train this one under another --out, or {MOVE_ASIDE}")


def finished_at(run: RunConfig, out_root: str) -> tuple[RunConfig, dict] | None:
    """The same run finished under another root (a committed study's), read without writing anything there: (the
    run as recorded, its result), or None where that folder holds no such finished run (nothing, another run, a
    damaged file, or data that differs)."""
    there = dataclasses.replace(run, out_root=out_root)
    try:
        result, header = read_result(there.run_dir), read_config(there.run_dir)
        if result is None or header is None:
            return None
        recorded = recorded_identity(header)
        settled = as_recorded(there, recorded, to_train=False)
        return (settled, result) if _conflict(settled, recorded, header, None, True) is None else None
    except (StateError, DataError, ConfigError):
        return None


def _missing_log(run_dir: Path, step: int, move_aside: bool) -> None:
    """A checkpoint without its log: resuming would write a log that starts at the checkpoint's step as if it were
    the whole run's, so it is named (and moved aside only when asked)."""
    log = run_dir / METRICS_FILE
    what = "is not a file" if log.exists() else "is missing"
    if move_aside:
        move_folder_aside(run_dir, "no-log")
        return
    raise StateError(f"{log} {what} beside a checkpoint at step {step}, so the run's log of steps 1 to {step} is "
                     f"lost; restore it, delete {CKPT_FILE} to train the run again from step 0, or {MOVE_ASIDE}")


def _conflict(run: RunConfig, recorded: dict, header: dict | None, ckpt: dict | None, finished: bool) -> str | None:
    """What in the folder is not the run asked for, in words (None: it is this run).

    Three things can differ: the settings (the fingerprint's), the checkpoint's run against its config.json's (a
    folder that two runs have written to), and the data's content (a data file of the same name with other
    tokens). A run recorded before content hashes existed is matched by the data's name alone.
    """
    what = "a finished run" if finished else "a run in progress"
    asked = asked_identity(run)
    if asked != recorded:
        return f"{what} with other settings ({differences(recorded, asked)})"
    if header is not None and ckpt is not None and ckpt.get("identity") not in (None, recorded):
        return (f"a config.json and a ckpt.pt of two different runs (the checkpoint's: "
                f"{differences(ckpt['identity'], recorded)})")
    there = {h for h in ((header or {}).get(DATA_HASH), (ckpt or {}).get(DATA_HASH)) if h}
    if not there:
        return None
    # imported here: the data's modules write through this package's disk module, so a module-level import would
    # make importing either package first a circle
    from ..data.rundata import load_run_data

    try:
        here = load_run_data(run).content_hash
    except DataError:
        if finished:  # the data is not here to compare: the result stands for what its files record
            return None
        raise
    if there != {here}:
        name = Path(run.data.data_path).name if run.data.data_path else run.data.dataset
        return (f"{what} trained on other data: the tokens of {name} hash to {', '.join(sorted(there))} there and "
                f"{here} here: not the data the run was trained on")
    return None


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
