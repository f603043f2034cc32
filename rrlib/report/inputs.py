"""Whether a page must be built again: a fingerprint of what it is built from (``inputs.json`` in the report's
folder keeps the one each page was last built from), the runs it reads that its run folders lack, and whether
every run file the pages can read is one rrlib wrote (``check_run_files``, before any page runs)."""
from __future__ import annotations

import json
from pathlib import Path

from .colab import without_setup_cell
from .notebooks import NOTEBOOK_DIR, NOTEBOOKS, QUICK_SIZES, SIDE_ROOTS, SWEEPS, Notebook

INPUTS = "inputs.json"  # in the report's folder: what each page was built from
# verdict.csv: a design's verdict written by `rrlib compare` (page 08 reads the leaderboard's board call)
RUN_FILES = ("result.json", "metrics.jsonl", "config.json", "weights.pt", "probes.json", "conversion.json",
             "verdict.csv")


def page_inputs(nb: Notebook, parameters: dict, runs: Path, size: str | None, paper_csv: Path,
                tables: Path | None = None) -> str:
    """A fingerprint of what a page is built from: its notebook, its parameters, the run files it can read, and
    for a summary page (``nb.summary``) the tables in ``tables`` of the pages built before it.

    The notebook is its jupytext source without the Colab setup cell, which its page leaves out and which does
    nothing off Colab (rrlib.report.colab). A per-size page reads its size's runs; the others read the runs under
    ``runs`` but the smoke-test size's, whose runs the main job trains afresh, the run roots beside it that some page
    reads (``SIDE_ROOTS``) but the ``own_roots`` of other pages that it does not name itself, and the benchmark
    results (``outputs/bench/*.json``: notebook 05 shows the family's measured speed and memory). Nothing else beside
    ``runs`` is read, so a user's folder there (``outputs/compare/``, where the README's example writes) rebuilds no
    page. The library's own code is not part of it: after a change there, ``--force`` rebuilds every page.
    """
    import hashlib

    source = NOTEBOOK_DIR / f"{nb.name}.py"
    digest = hashlib.sha256(without_setup_cell(source.read_text(encoding="utf-8"), source.name).encode())
    digest.update(json.dumps(parameters, sort_keys=True).encode())
    if paper_csv.exists():
        digest.update(paper_csv.read_bytes())
    root = _root(runs, size)
    for path in input_files(nb, runs, size):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    # the tables of the pages built before it (the build goes in NOTEBOOKS' order, so a later page's tables are not
    # what it read), not the smoke-test page's, which every clone makes afresh
    position = next((k for k, other in enumerate(NOTEBOOKS) if other.name == nb.name), len(NOTEBOOKS))
    earlier = tuple(other.name.split("_")[0] + "_" for other in NOTEBOOKS[:position] if other.name != nb.name)
    for path in sorted(tables.glob("*.csv")) if nb.summary and tables is not None else []:
        if path.name.startswith(earlier) and not any(f"_{s}_" in path.name for s in QUICK_SIZES):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _root(runs: Path, size: str | None) -> Path:
    return runs / size if size else runs.parent


def input_files(nb: Notebook, runs: Path, size: str | None) -> list[Path]:
    """The run and benchmark files a page can read (``page_inputs`` says which), in a fixed order."""
    if size:
        return sorted(p for p in (runs / size).rglob("*") if p.name in RUN_FILES)
    others = {r for other in NOTEBOOKS if other.name != nb.name for r in other.own_roots} - set(nb.own_roots)
    roots = [runs] + [runs.parent / r for r in SIDE_ROOTS if r not in others]
    skipped = [runs / s for s in QUICK_SIZES]
    bench = sorted((runs.parent / "bench").glob("*.json"))
    return sorted([p for root in roots for p in root.rglob("*")
                   if p.name in RUN_FILES and not any(p.is_relative_to(s) for s in skipped)] + bench)


def read_inputs(out: Path) -> dict:
    path = out / INPUTS
    return json.loads(path.read_text()) if path.exists() else {}


def write_inputs(out: Path, inputs: dict) -> None:
    """Replaced whole or not at all: a half-written file would stop every later build at its first read."""
    from ..runs.folders.disk import write_bytes_atomic

    write_bytes_atomic(out / INPUTS, (json.dumps(inputs, indent=1, sort_keys=True) + "\n").encode())


def missing_runs(nb: Notebook, values: dict, runs: Path) -> list:
    """The runs a page reads that its run folders do not hold finished (including ones they cannot answer for)."""
    from ..runs.presets import resolve_run
    from ..runs.folders.runfiles import RunConflict, StateError
    from ..runs.sweep import grid
    from ..runs.folders import claimed

    missing = []
    for size, variants, seeds, overrides in SWEEPS.get(nb.name, lambda _: [])(values):
        for variant, seed in grid(size, variants, seeds):
            run = resolve_run(size, variant, seed, overrides, str(runs))
            try:
                missing += [] if claimed(run)[1] is not None else [run]
            except (RunConflict, StateError):
                missing.append(run)
    return missing


def check_run_files(runs: Path, side_roots=None) -> int:
    """Every result.json and config.json the pages can read: the run folders under ``runs``
    (``<runs>/<size>/<variant>/seed<k>``) and under each root beside it that a page reads (``side_roots``,
    default notebooks.SIDE_ROOTS; one level deeper too, as the looped sweep's ``lr<rate>`` roots and
    outputs/power/runs), read as the pages will read them. A file that is not what rrlib writes is one StateError
    sentence naming it, before any page runs (a page that met it would fail with a formatting error naming no
    file, or leave the run out unsaid). Other folders beside ``runs`` are not read. Returns how many run folders
    were read.
    """
    from ..runs.folders.runfiles import read_config, read_result

    runs = Path(runs)
    roots = [runs] + [runs.parent / r for r in (SIDE_ROOTS if side_roots is None else side_roots)]
    found = {p.parent for root in roots if root.is_dir() for depth in ("*/*", "*/*/*", "*/*/*/*")
             for p in root.glob(f"{depth}/seed*/result.json")}
    for folder in sorted(found):
        root = next(r for r in roots if folder.is_relative_to(r))
        fix = f"restore it from a copy, or move the folder {folder} out of {root} (a sweep's --move-aside does this)"
        read_result(folder, fix)
        read_config(folder, fix)
    return len(found)


def cost_text(runs: list) -> str:
    """'12 runs (depth2: 3, ...), at least 2.1 h on this CPU' from their FLOP count and the CPU's measured speed."""
    from collections import Counter

    from ..runs.device import pick_device, training_flops
    from ..runs.pace import matmul_peak

    by_size = ", ".join(f"{size}: {n}" for size, n in Counter(r.size for r in runs).items())
    flops = sum(training_flops(r) for r in runs)
    seconds = flops / matmul_peak(runs[0].data.cache_dir)  # the figure the CPU guard keeps: the same from call to call
    took = (f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 60
            else f"{seconds:.0f} s")
    where = (f"at least {took} on this CPU at its full matmul speed"
             if pick_device(runs[0].train.device).type == "cpu" else "on this GPU")
    return f"{len(runs)} runs ({by_size}), {flops:.1e} training FLOPs, {where}"
