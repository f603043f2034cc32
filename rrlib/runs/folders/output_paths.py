"""Where a command may write, checked once before any work starts: the one check every output path passes.

A command writes only regular files and folders: over a regular file, into a folder, or where nothing is yet. A
path that names anything else (a symbolic link, wherever it points; a character device, a pipe, a socket), that
lies under a file,
that cannot be looked at (a loop of symbolic links, a name too long for the file system) or that lies where this
process cannot write is refused in one sentence naming the path and the option that gave it, before anything is
measured, trained or written. ``train --out``, ``sweep --out``, a run's ``data.cache_dir``, ``bench --out`` (its
JSON and the markdown beside it) and ``report --out``/``--build`` all pass through ``checked_output``
(``checked_run_outputs`` for a run's two).

It imports no torch or pandas of its own, so that a command can check its paths before it loads either.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from ...rules import ConfigError

FOLDER, FILE = "folder", "file"
NEVER_WRITTEN = "is not a regular file or folder (a device, a pipe, a socket or a link to nothing), never written over"
A_LINK = "is a symbolic link, and nothing is written through a link (it could point outside the folder you named)"
RUN_FILES = ("config.json", "result.json", "metrics.jsonl", "ckpt.pt", "weights.pt", "run.lock")


def _kind(path: Path, option: str, follow: bool = True) -> str | None:
    """'folder', 'file', 'other' (a device, a pipe, a socket, a link to nothing), 'link' (unless ``follow``), or
    None where nothing is."""
    if not follow and os.path.islink(path) and os.path.exists(path):
        return "link"  # a link to nothing is 'other' below, as it always was
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "other" if os.path.islink(path) else None  # a dangling link: writing would replace the link
    except NotADirectoryError:
        return None  # a file above it: the parents' check names that file
    except OSError as err:  # a loop of links, a name too long, no permission to look
        raise ConfigError(f"cannot write {path}: {err.strerror or err}; give {option} another path") from None
    return FOLDER if stat.S_ISDIR(mode) else FILE if stat.S_ISREG(mode) else "other"


def _no_link(target: Path, option: str) -> None:
    if _kind(target, option, follow=False) == "link":
        raise ConfigError(f"cannot write {target}: {target} {A_LINK}; remove the link or give {option} another path")


def checked_no_links(folder: Path, option: str, subfolders: tuple[str, ...] = (), files: tuple = ()) -> None:
    """A folder whose entries a command replaces (the report's pages, figures and tables): no entry of ``folder`` or
    of its ``subfolders``, none of those subfolders and none of ``files`` (paths beside it that it rewrites) may be
    a symbolic link, to something or to nothing, or one sentence names the first. Replacing a link would write over
    what is not a regular file."""
    subs = [folder / name for name in subfolders]
    candidates = [*subs, *files]
    for place in (folder, *subs):
        if place.is_dir() and not place.is_symlink():
            candidates += sorted(place.iterdir())
    for path in candidates:
        if os.path.islink(path):
            raise ConfigError(f"cannot write {path}: {path} {A_LINK}; remove the link or give {option} another path")


def checked_run_outputs(run_dir: Path, cache_dir: Path) -> None:
    """The two places a training run writes: its folder (under ``--out``) with each file it writes there, and the
    token cache."""
    checked_output(run_dir, "--out")
    for name in RUN_FILES:  # a link among them; anything else in a file's place is named by the run folder's checks
        _no_link(run_dir / name, "--out")
    checked_output(cache_dir, "data.cache_dir")


def checked_output(path: str | os.PathLike, option: str, kind: str = FOLDER, beside: tuple[str, ...] = ()) -> Path:
    """``path`` as a place ``option`` may write a ``kind`` (a folder, or a file with the ``beside`` suffixes next
    to it), or one ConfigError sentence; returns the path. Nothing is made or written here."""
    if not str(path).strip():
        raise ConfigError(f"{option} is empty; give it a path (relative to the current folder) or leave it out for "
                          f"the default")
    path = Path(path)
    targets = [path, *(path.with_suffix(suffix) for suffix in beside)]
    for target in targets:
        _no_link(target, option)
        there = _kind(target, option)
        if there == "other":
            raise ConfigError(f"cannot write {target}: {target} {NEVER_WRITTEN}; give {option} another path")
        if kind == FILE and there == FOLDER:
            raise ConfigError(f"cannot write {target}: it is a folder; give {option} the path of a file")
    folder = path if kind == FOLDER else path.parent
    for existing in (folder, *folder.parents):
        there = _kind(existing, option)
        if there is None:
            continue
        if there == "other":
            raise ConfigError(f"cannot write {path}: {existing} {NEVER_WRITTEN}; give {option} another path")
        if there != FOLDER:
            raise ConfigError(f"cannot write {path}: {existing} is a file, not a folder; give {option} a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(f"cannot write {path}: {existing} is not writable here (a read-only disk, or another "
                              f"user's folder); give {option} a folder you can write")
        break
    return path
