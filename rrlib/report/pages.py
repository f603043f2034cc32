"""A page is built in a scratch folder and replaces the report's files only once it has succeeded.

A page's notebook writes its figures into ``<scratch>/figures`` and its tables into ``<scratch>/tables`` (the
notebooks write tables beside their figure folder, rrlib.views.tables); the folders start empty, as no page reads
another's tables (its numbers come from rrlib.results and the claims ledger). When the notebook has run and the
page has been rendered, ``publish`` moves what the page wrote into the report, and refuses a file the page wrote
under another page's name: every file written in full beside its place
first, then each renamed over it, the page's own files that it no longer writes removed. A page that fails, while
it runs or while it is published (a read-only folder, a full disk), or a build that is interrupted, leaves the
report as it was.

Which files are a page's own: those named ``<number>_`` for a page of its own (``01_mechanism``: ``01_*``), and
``<number>_<size>_`` for one execution of a per-size page (``03_sweep`` at ``family``: ``03_family_*``), but not
those of another size whose name extends it (``03_family_mini_*`` belongs to ``family_mini``).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..runs.folders.disk import disk_full, full_disk, tmp_beside

FOLDERS = {"figures": ".png", "tables": ".csv"}


def page_prefix(number: str, size: str | None) -> str:
    return f"{number}_{size}_" if size else f"{number}_"


def owned_by(prefix: str, prefixes: set[str]):
    """Whether a file name is the page's of ``prefix``: it starts so, and with no longer prefix of ``prefixes``."""
    longer = [p for p in prefixes if len(p) > len(prefix) and p.startswith(prefix)]
    return lambda name: name.startswith(prefix) and not any(name.startswith(p) for p in longer)


def size_prefixes(number: str, sizes) -> set[str]:
    """The prefixes of every execution of a per-size page, over ``sizes`` (every preset and the build's sizes)."""
    return {page_prefix(number, s) for s in sizes}


def prepare(scratch: Path) -> None:
    """A fresh scratch folder for a page, with its empty figures and tables folders."""
    if scratch.exists():
        shutil.rmtree(scratch)  # the build's own folder, left by an earlier attempt at this page
    for folder in FOLDERS:
        (scratch / folder).mkdir(parents=True)


def publish(scratch: Path, out: Path, stem: str, mine) -> None:
    """Move the page's rendered HTML, figures and tables from ``scratch`` into the report ``out``, all or nothing.

    Every file is first written in full under a temporary name beside its place, and a folder the page only removes
    from is tried the same way; a write that fails (a read-only folder, a full disk) removes what was written and
    raises, the report as it was. Only then is each renamed over its place and the page's old files removed, what
    was there kept aside until all have moved: a rename that fails puts every file back as it was, and raises."""
    written = {folder: sorted((scratch / folder).glob(f"*{suffix}")) for folder, suffix in FOLDERS.items()}
    others = [f"{folder}/{p.name}" for folder, paths in written.items() for p in paths if not mine(p.name)]
    if others:
        raise ValueError(f"page {stem} wrote {', '.join(others)}, named as another page's files; nothing of it "
                         f"is published")
    moves = [(path, out / folder / path.name) for folder in FOLDERS for path in written[folder]]
    moves += [(scratch / f"{stem}{suffix}", out / f"{stem}{suffix}") for suffix in (".html", ".reader.html")]
    gone = []
    for folder, suffix in FOLDERS.items():
        names = {p.name for p in written[folder]}
        if (out / folder).is_dir():
            gone += [old for old in sorted((out / folder).glob(f"*{suffix}"))
                     if mine(old.name) and old.name not in names]
    staged = []
    try:
        for folder in FOLDERS:
            (out / folder).mkdir(parents=True, exist_ok=True)
        for source, target in moves:
            staged.append((_staged(target, source.read_bytes()), target))
        for folder in {old.parent for old in gone} - {target.parent for _, target in moves}:
            _staged(folder / ".publish", b"").unlink()  # can its files be removed: can one be made there
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    kept = []  # (a file of the report, what it was before this page, or None where there was none)
    try:
        for tmp, target in staged:
            kept.append((target, _kept_aside(target) if target.exists() else None))
            os.replace(tmp, target)
        for old in gone:  # the page no longer writes it
            aside = _aside(old)
            os.replace(old, aside)
            kept.append((old, aside))
    except BaseException:
        for target, before in reversed(kept):
            if before is None:
                target.unlink(missing_ok=True)
            elif target.exists() and os.path.samefile(before, target):
                # its own rename failed, so the old file is still there: renaming one of a file's names onto
                # another does nothing (POSIX), so the second name is removed instead
                before.unlink()
            else:
                os.replace(before, target)
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for _, before in kept:
        if before is not None:
            before.unlink()


def _aside(path: Path) -> Path:
    """Where ``path``'s old version waits while a page is published: beside it, under a name no page globs for."""
    return tmp_beside(path).with_suffix(".old")


def _kept_aside(path: Path) -> Path:
    """A second name for ``path``'s file (a hard link; a copy where the disk has none), so that renaming a new file
    over ``path`` can be undone; that name."""
    aside = _aside(path)
    aside.unlink(missing_ok=True)  # left by a build that was killed while it published
    try:
        os.link(path, aside)
    except OSError:
        shutil.copyfile(path, aside)
    return aside


def _staged(target: Path, data: bytes) -> Path:
    """``data`` written and synced under a temporary name beside ``target`` (never through a link there: the build
    refused one before any page ran, output_paths.checked_no_links); that name."""
    tmp = tmp_beside(target)
    tmp.unlink(missing_ok=True)
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if disk_full(err):
            raise full_disk(target, err) from None
        raise
    return tmp
