"""Who writes into a comparison's ``--out``: one call at a time, or the shards of one design together.

The lock is on the folder itself (the OS releases the lock of a killed process). Shards of one design share it;
a shard also holds a lock on ``.shards-<design>.lock`` in the folder, named by a hash of its design (the request
without its shard), so that a shard of another design, whose runs and verdict would mix with these under one
``--out``, finds it held and is refused. The file goes when the last shard of its design leaves (a killed one's is
removed by the next shard that finds it free).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from pathlib import Path

from ..runs.config import ConfigError

SHARDS = ".shards-{}.lock"


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
