"""Speed and memory as the benchmark measured them (``python -m rrlib bench``, committed as outputs/bench/*.json), per
rule at one size, relative to the standard residual's.

The benchmark runs every rule in the same interleaved rounds on one thread, so its ratios compare rules; the runs'
own tokens/s come from different days, machine loads and code versions, and do not. ``bench_ratios`` reads the eager
rows with default rule options; its columns, indexed by ``variant``:

    tokens_per_s_vs_standard   the rule's tokens per second over standard's, as the benchmark recorded it
    peak_memory_vs_standard    the rule's peak memory (peak_memory_bytes) over standard's

A benchmark file is no run folder, so the memo keys on the file itself (path, size, modification time), passed
along as an argument: a file rewritten in the same process is read again.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..home import project_path
from . import result

RATIO_COLUMNS = ["tokens_per_s_vs_standard", "peak_memory_vs_standard"]
BENCH_FILE = "outputs/bench/cpu-family.json"  # the family's benchmark at both its widths (family, family_mini)


def file_stamp(path) -> tuple | None:
    """What a memo keys a single file on: its path, size and modification time; None when there is no such file."""
    if path is None or not project_path(path).is_file():
        return None
    stat = project_path(path).stat()
    return str(project_path(path)), stat.st_size, stat.st_mtime_ns


def bench_ratios(path, size: str) -> pd.DataFrame:
    """Per rule at ``size``, from the benchmark file ``path``: tokens/s and peak memory relative to standard's
    (eager, default rule options), indexed by ``variant``; no rows when the file, the size or standard's row at it
    is missing."""
    return _bench_ratios(size, file_stamp(path))


@result(lambda size, stamp: ())
def _bench_ratios(size: str, stamp: tuple | None) -> pd.DataFrame:
    empty = pd.DataFrame(columns=RATIO_COLUMNS, index=pd.Index([], name="variant"), dtype=float)
    if stamp is None:
        return empty
    rows = pd.DataFrame(json.loads(Path(stamp[0]).read_text())["results"])
    rows = rows[(rows["size"] == size) & ~rows["compile"] & (rows["rule_options"].map(len) == 0)]
    if "standard" not in set(rows["variant"]):
        return empty
    rows = rows.set_index("variant")
    return pd.DataFrame({"tokens_per_s_vs_standard": rows["tokens_per_s_vs_standard"],
                         "peak_memory_vs_standard": rows["peak_memory_bytes"]
                         / rows.loc["standard", "peak_memory_bytes"]})
