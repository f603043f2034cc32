"""The verdict pages of ``rrlib compare`` that join the report (``report --compare DIR``), one page per folder.

A folder's page is published only as ``rrlib compare`` writes it (``verdict_page``: regular files, verdict.json a
verdict, the page its own), under a name made from the folder's (``comparison_pages``). Two folders of one name in one
build are told apart by the folders above them; a page that an earlier build published from another folder is not
replaced (``SOURCES`` in the report's compare folder keeps, for each page, a fingerprint of the folder it came from,
not the folder's path, which is this machine's).
"""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import stat
from pathlib import Path

from ..runs.config import ConfigError, project_path
from ..runs.folders.disk import write_bytes_atomic
from ..runs.folders.output_paths import FILE, checked_output
from .index import COMPARISONS
from .notebooks import shown

SOURCES = "sources.json"  # in <out>/compare: {page name: the fingerprint of the folder it was published from}


def comparison_page(folder) -> tuple[str, Path]:
    """(the name it is listed under, its verdict.html) of a folder that ``rrlib compare`` wrote; one sentence if not
    (``verdict_page``)."""
    folder = project_path(folder).resolve()
    verdict_page(folder)
    return _page_name(folder.parts[-1:]), folder / "verdict.html"


def verdict_page(folder: Path) -> bytes:
    """The bytes of ``folder``'s verdict.html, published only as what ``rrlib compare`` writes: verdict.html and
    verdict.json regular files (not links: a link could publish any file it points to), verdict.json an object with
    the comparison's question and rows, and the page titled by that question. One sentence otherwise."""
    wrote = "give a folder that `python -m rrlib compare --out` wrote"
    page, summary = (_regular_file(folder / name, wrote) for name in ("verdict.html", "verdict.json"))
    try:
        summary = json.loads(summary)
        question = summary["question"] if isinstance(summary, dict) and isinstance(summary.get("rows"), list) else None
    except (ValueError, UnicodeDecodeError):
        question = None
    if not isinstance(question, str):
        raise ConfigError(f"--compare {shown(folder)}: verdict.json is not a verdict (a JSON object with the "
                          f"comparison's question and rows); {wrote}")
    if f"<title>{html.escape(question)}</title>".encode() not in page:
        raise ConfigError(f"--compare {shown(folder)}: verdict.html is not the page of verdict.json's comparison "
                          f"({question!r}); {wrote}, or run it again there")
    return page


def _regular_file(path: Path, wrote: str) -> bytes:
    """A regular file's bytes, read without following a link; one sentence for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise ConfigError(f"--compare {shown(path.parent)} holds no verdict.html and verdict.json; {wrote}") from None
    except OSError as err:
        what = "is a symbolic link" if path.is_symlink() else f"cannot be read ({err.strerror or err})"
        raise ConfigError(f"--compare {shown(path.parent)}: {path.name} {what}, and the report publishes only the "
                          f"regular files compare writes; {wrote}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ConfigError(f"--compare {shown(path.parent)}: {path.name} is not a regular file; {wrote}")
        return fh.read()


def _page_name(parts) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(parts)).strip("._") or "comparison"


def comparison_pages(folders: list, out: Path | None = None) -> list[tuple[str, Path]]:
    """``comparison_page`` of each folder, each checked before any work. A page is named by its folder; two
    folders of one name are told apart by the folders above them (``a/gate``, ``b/gate``: ``a_gate``, ``b_gate``),
    so that neither page replaces the other. Two folders whose names only differ in what a page's name cannot hold
    (``p/my gate``, ``p/my_gate``) are one sentence: one page would replace the other; so is a folder whose page
    would replace the page an earlier build published into ``out`` from another folder."""
    pages = list(dict.fromkeys(comparison_page(folder) for folder in folders))  # a folder given twice: one page
    folders = [page.parent for _, page in pages]
    for depth in range(2, max((len(f.parts) for f in folders), default=0) + 1):
        if len({name for name, _ in pages}) == len(pages):
            break
        pages = [(_page_name(folder.parts[-depth:]), page) for folder, (_, page) in zip(folders, pages)]
    names = [name for name, _ in pages]
    for name in names:
        if names.count(name) > 1:
            same = [shown(page.parent) for other, page in pages if other == name]
            raise ConfigError(f"--compare {' and '.join(same)} would both be published as {COMPARISONS}/"
                              f"{comparison_page(pages[names.index(name)][1].parent)[0]}.html, one page replacing "
                              f"the other; rename one of the folders")
    earlier = published_from(out) if out is not None else {}
    for name, page in pages:
        mine = source_key(page.parent)
        if earlier.get(name, mine) != mine and (out / COMPARISONS / f"{name}.html").exists():
            raise ConfigError(f"--compare {shown(page.parent)} would replace {COMPARISONS}/{name}.html, which an "
                              f"earlier build published from another folder; rename this folder, or remove that page "
                              f"from the report first")
    return pages


def source_key(folder: Path) -> str:
    """A folder's fingerprint in ``SOURCES``: its path from the project's root (the same in every clone), hashed."""
    return hashlib.sha256(shown(folder).encode()).hexdigest()[:16]


def published_from(out: Path) -> dict[str, str]:
    """``SOURCES`` of the report ``out``: {page name: its folder's fingerprint}; empty where there is none yet (a page
    published before it was kept, as the committed report's, may be replaced by any folder of its name)."""
    path = out / COMPARISONS / SOURCES
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        raise ConfigError(f"{shown(path)} is not what the report writes there (a JSON object of page names); "
                          f"remove it, and the report keeps it afresh") from None
    if not isinstance(found, dict):
        raise ConfigError(f"{shown(path)} is not what the report writes there (a JSON object of page names); "
                          f"remove it, and the report keeps it afresh")
    return found


def publish_comparisons(out: Path, pages: list[tuple[str, Path]]) -> None:
    """Each checked folder's verdict page into ``out``'s compare folder, read and checked again as it is written
    (never a link's target), and the folder it came from kept in ``SOURCES``."""
    if not pages:
        return
    (out / COMPARISONS).mkdir(exist_ok=True)
    sources = published_from(out)
    for name, page in pages:
        target = checked_output(out / COMPARISONS / f"{name}.html", "--out", kind=FILE)
        write_bytes_atomic(target, verdict_page(page.parent))
        sources[name] = source_key(page.parent)
        print(f"[report] {COMPARISONS}/{name}.html: the verdict page of {shown(page.parent)}", flush=True)
    write_bytes_atomic(checked_output(out / COMPARISONS / SOURCES, "--out", kind=FILE),
                       (json.dumps(sources, indent=1, sort_keys=True) + "\n").encode())
