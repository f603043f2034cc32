"""Each study's result, read from its run folders: one function per study, returning a DataFrame whose columns are
documented names (never a page's display labels) or a dataclass of them. Pages draw these, the claims' ledger reads
them, and nothing reads a page's table back.

A result is computed once per set of input runs: ``@result(roots)`` keys it on its arguments and on the run files
under the folders ``roots(*args, **kwargs)`` names (each file's path, size and modification time), so a second
call in the same process over unchanged runs returns a copy of the first answer, and a run written in between is
read. The package sits above the runs, the statistics and the studies it reads, and below the report and the
claims that show it.
"""
from __future__ import annotations

import copy
import functools
import hashlib
from pathlib import Path

# the files a result may read from a run folder (rrlib.runs.folders.runfiles writes them; compare writes verdict.csv)
RUN_FILES = ("result.json", "metrics.jsonl", "config.json", "probes.json", "conversion.json", "verdict.csv")


def runs_fingerprint(folders) -> str:
    """A digest of every run file under ``folders`` (path, size, modification time): it changes when a run is
    written, moved or removed, and costs a directory walk, not a read."""
    digest = hashlib.sha256()
    for folder in sorted({Path(f) for f in folders}):
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.name in RUN_FILES:
                stat = path.stat()
                digest.update(f"{path.as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def result(roots):
    """Memoise a result function on its arguments and the runs under ``roots(*args, **kwargs)`` (an iterable of
    folders). Each call gets its own copy, so a page that edits a table for display leaves the next page's alone."""
    def wrap(fn):
        memo: dict = {}

        @functools.wraps(fn)
        def cached(*args, **kwargs):
            key = (repr(args), repr(sorted(kwargs.items())), runs_fingerprint(roots(*args, **kwargs)))
            if key not in memo:
                memo[key] = fn(*args, **kwargs)
            return copy.deepcopy(memo[key])

        cached.uncached = fn
        return cached
    return wrap
