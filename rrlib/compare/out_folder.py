"""Who writes into a comparison's ``--out``: one call at a time, or the shards of one design together.

The lock is on the folder itself (the OS releases the lock of a killed process). Shards of one design share it;
a shard also holds a lock on ``.shards-<design>.lock`` in the folder, named by a hash of its design (the request
without its shard), so that a shard of another design, whose runs and verdict would mix with these under one
``--out``, finds it held and is refused. The file goes when the last shard of its design leaves (a killed one's is
removed by the next shard that finds it free).

That lock only sees shards that run at the same moment. So a sharded design also leaves a lasting record in the
folder, ``.design.json`` (its design in words), from its first shard until its verdict is written
(``design_done``): a shard of another design, or a plain call of another design, that comes while the record is
there, even after every shard of the first has stopped or been killed, is refused, since its runs and verdict would
mix with the first design's. A plain call of the same design finishes it.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from pathlib import Path

from ..runs.config import ConfigError
from ..runs.folders.disk import write_bytes_atomic

SHARDS = ".shards-{}.lock"
RECORD = ".design.json"  # the sharded design training into the folder, until its verdict is written


@contextlib.contextmanager
def out_lock(out_dir: Path, shared: bool = False, wait: bool = False, design: str = ""):
    """One compare at a time writes into ``out_dir``: a second is refused in one sentence. ``shared``: the shards of
    one ``design``, which train side by side into one ``--out``, hold it together (each trains its own share of the
    runs, and every run folder has a lock of its own); a plain call is refused while they do, and they while it
    does, and so is a shard of another design. ``wait``: block until the lock is free instead of refusing."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise ConfigError(f"another rrlib compare is writing into --out {out_dir}; wait for it to finish, or give "
                              f"another --out") from None
        if design:
            _same_design(out_dir, design, record=shared)
        with _one_design(out_dir, design) if shared else contextlib.nullcontext():
            yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _one_design(out_dir: Path, design: str):
    """Held by the shards of ``design`` while they train into ``out_dir``; refused while another design's are."""
    mine = out_dir / SHARDS.format(hashlib.sha256(design.encode()).hexdigest()[:12])
    fd = os.open(mine, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        for other in out_dir.glob(SHARDS.format("*")):
            if other != mine and _held(other):
                raise ConfigError(f"shards of another comparison are training into --out {out_dir}; shards share "
                                  f"one --out only when they are one design (the same flags but --shard): give "
                                  f"this one another --out, or the same flags as theirs")
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the last of its design: the file goes with it
            mine.unlink(missing_ok=True)
        except BlockingIOError:
            pass
        os.close(fd)


def _same_design(out_dir: Path, design: str, record: bool) -> None:
    """Refuse a call of another design than the sharded one whose verdict ``out_dir`` waits for; a shard
    (``record``) records its design where none is recorded."""
    path = out_dir / RECORD
    recorded = None
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise ConfigError(f"{path} is not a regular file; compare keeps its record of a sharded design there: remove "
                          f"it, or give another --out")
    if path.is_file():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))["design"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise ConfigError(f"{path} is not the record compare writes of a sharded design; remove it, or give "
                              f"another --out") from None
    if recorded is not None and recorded != design:
        raise ConfigError(f"shards of another comparison have trained into --out {out_dir} and its verdict is not "
                          f"written yet; finish them (the same flags as theirs, with or without --shard), or give "
                          f"this one another --out")
    if record and recorded is None:
        write_bytes_atomic(path, json.dumps({"design": design}).encode())


def design_done(out_dir: Path) -> None:
    """The verdict of the folder's sharded design is written: another design may use the folder."""
    (out_dir / RECORD).unlink(missing_ok=True)


def _held(path: Path) -> bool:
    """Whether a live process holds ``path``'s lock; a file nobody holds (a killed shard's) is removed."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        path.unlink(missing_ok=True)
        return False
    finally:
        os.close(fd)
