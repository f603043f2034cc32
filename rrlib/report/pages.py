"""A page is built in a scratch folder and replaces the report's files only once it has succeeded.

A page's notebook writes its figures into ``<scratch>/figures`` and its tables into ``<scratch>/tables`` (the
notebooks write tables beside their figure folder, rrlib.report.tables). The scratch tables folder starts with a
copy of every other page's tables, which a summary page reads. When the notebook has run and the page has been
rendered, ``publish`` moves what the page wrote into the report: each file replaced atomically, the page's own
files that it no longer writes removed. A page that fails, or a build that is interrupted, leaves the report as
it was.

Which files are a page's own: those named ``<number>_`` for a page of its own (``01_mechanism``: ``01_*``), and
``<number>_<size>_`` for one execution of a per-size page (``03_sweep`` at ``family``: ``03_family_*``), but not
those of another size whose name extends it (``03_family_mini_*`` belongs to ``family_mini``).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..runs.disk import write_bytes_atomic

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


def prepare(scratch: Path, out: Path, mine) -> dict[str, bytes]:
    """A fresh scratch folder for a page, its tables folder holding the other pages' tables; returns those."""
    if scratch.exists():
        shutil.rmtree(scratch)  # the build's own folder, left by an earlier attempt at this page
    copied = {}
    for folder in FOLDERS:
        (scratch / folder).mkdir(parents=True)
    for path in sorted((out / "tables").glob("*.csv")):
        if not mine(path.name):
            copied[path.name] = path.read_bytes()
            (scratch / "tables" / path.name).write_bytes(copied[path.name])
    return copied


def publish(scratch: Path, out: Path, stem: str, mine, copied: dict[str, bytes]) -> None:
    """Move the page's rendered HTML, figures and tables from ``scratch`` into the report ``out``."""
    written = {folder: [p for p in sorted((scratch / folder).glob(f"*{suffix}"))
                        if copied.get(p.name) != p.read_bytes()] for folder, suffix in FOLDERS.items()}
    for folder, suffix in FOLDERS.items():
        (out / folder).mkdir(parents=True, exist_ok=True)
        names = {p.name for p in written[folder]}
        for old in sorted((out / folder).glob(f"*{suffix}")):
            if mine(old.name) and old.name not in names:
                old.unlink()  # the page no longer writes it
        for path in written[folder]:
            _replace(path, out / folder / path.name)
    for suffix in (".html", ".reader.html"):
        _replace(scratch / f"{stem}{suffix}", out / f"{stem}{suffix}")


def _replace(source: Path, target: Path) -> None:
    """``target`` replaced by ``source``'s bytes in one step (the build refused a link there before any page ran:
    output_paths.checked_no_links)."""
    write_bytes_atomic(target, source.read_bytes())
