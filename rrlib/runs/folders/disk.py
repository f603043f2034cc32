"""Writing files so that a kill or a full disk leaves no half of one: temporary files beside the target, removed
when a write fails and, once their writer is dead, by the next process that writes there; a full disk as one
sentence with the way out. ``write_atomic`` is the one writer every whole file goes through (checkpoints, results,
tables, the report's pages, caches)."""
from __future__ import annotations

import errno
import json
import os
import re
import socket
import sys
from pathlib import Path

from ...rules import ConfigError

FULL = (errno.ENOSPC, errno.EDQUOT)
_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())


class DiskFull(ConfigError):
    """A write ran out of disk space; the message names the file and the way out."""


def disk_full(err: BaseException) -> bool:
    """Whether ``err``, or an error it was raised from, is a full disk or an exhausted quota.

    torch.save reports a failed write as a RuntimeError ("unexpected pos ...") and the OSError comes after it, when
    the file is closed; either may be the one that surfaces, so the whole chain is looked at.
    """
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in FULL:
            return True
        err = err.__cause__ or err.__context__
    return False


def full_disk(path: Path, err: BaseException) -> DiskFull:
    return DiskFull(f"the disk holding {path.parent} is full (writing {path.name}: "
                    f"{os.strerror(errno.ENOSPC).lower()}); free space there or give another folder (--out, "
                    f"data.cache_dir), then run the same command again: a run goes on from its last checkpoint")


def tmp_beside(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: named by this process and host, so concurrent
    writers never share one and a dead writer's file can be told from a live one's."""
    return path.with_name(f"{path.name}.{os.getpid()}@{_HOST}.tmp")


def _writer_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_tmp(path: Path) -> None:
    """Remove temporary files of ``path`` left by a process of this host that died while writing them.

    Files of another host (a shared disk) are left alone; ``<name>.<pid>.tmp`` is the form before the host was in
    the name, and was only ever written on the machine that reads it.
    """
    _remove_dead_writers(path.parent, re.escape(path.name), ".tmp", "writing it")


def remove_stale_asides(folder: Path) -> None:
    """Remove the old versions a report page's publish kept aside (``<name>.<pid>@<host>.old``, rrlib.report.pages)
    whose process of this host died before it could remove them: a build killed during its last renames. The new
    versions are in place by then; nothing reads the old ones."""
    _remove_dead_writers(folder, r".+", ".old", "publishing a page")


def _remove_dead_writers(folder: Path, name: str, suffix: str, doing: str) -> None:
    """Remove ``<name>.<pid>[@<host>]<suffix>`` files in ``folder`` of dead processes of this host, each said."""
    pattern = re.compile(rf"({name})\.(\d+)(?:@([A-Za-z0-9_-]+))?{re.escape(suffix)}")
    if not folder.is_dir():
        return
    for tmp in folder.iterdir():
        match = pattern.fullmatch(tmp.name)
        if match and match[3] in (None, _HOST) and not _writer_alive(int(match[2])) and tmp.is_file():
            try:
                size = tmp.stat().st_size
                tmp.unlink()
            except OSError:  # gone meanwhile, or a folder this process cannot write: nothing to clean
                continue
            print(f"[rrlib] removed {tmp} ({size / 1e6:,.1f} MB), left by process {match[2]} that stopped while "
                  f"{doing}", file=sys.stderr, flush=True)


def write_atomic(path: Path, write, tmp: Path | None = None) -> None:
    """``write(file)`` into a temporary file beside ``path``, fsynced, then renamed over it: a kill leaves the old
    file or the new one, never half of one, and nothing is written through what stands at ``path`` (the rename
    replaces a link itself, not what it points to).

    ``tmp`` is this process's (``tmp_beside``: concurrent writers never share one; a dead writer's is removed here
    first) unless the caller names one its own lock guards. The fsync comes before the rename because a rename can
    reach the disk before the data it names: after a power cut the folder would hold a whole-looking file of zeros.
    A write that fails (a full disk, a signal) removes its half-written file; a full disk is one DiskFull sentence.
    """
    path = Path(path)
    if tmp is None:
        remove_stale_tmp(path)
        tmp = tmp_beside(path)
    tmp.unlink(missing_ok=True)  # a file left by a killed write, or a link: never written through ("x" below)
    try:
        with open(tmp, "xb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if disk_full(err):
            raise full_disk(path, err) from None
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """``data`` as the whole of ``path``, replaced atomically (``write_atomic``)."""
    write_atomic(path, lambda fh: fh.write(data))


def write_json_atomic(path: Path, obj: dict) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())
