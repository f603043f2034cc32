"""A grid of runs (one size × variants × seeds), skip-done, sharding, and the results table.

Runs are independent folders, so a sweep is a loop: a run with a ``result.json`` is skipped, a run that another
process holds (its lock) is skipped, a run that diverges is recorded, counted and the loop goes on (a rerun
answers it ``done already (diverged)``: a diverged run is a result, not a fault). A cell whose folder
holds a run with other settings (a conflict) or a file that cannot be read is reported and the loop goes on;
the sweep then ends in ``SweepIncomplete`` naming them. ``shard=(k, n)`` takes every n-th run of the grid
starting at k, so n machines given k = 0..n-1 split one grid without talking. The table a sweep returns holds
the cells it was asked for; its ``results.csv`` holds every result of the size.
"""
from __future__ import annotations

import sys

import pandas as pd

from ..rules.external import known_rule
from .folders.disk import write_bytes_atomic
from .config import ConfigError, project_path
from .device import pick_device
from .folders import RunBusy, claimed
from .folders.output_paths import checked_run_outputs
from .pace import check_cpu_reach
from .presets import load_preset, resolve_run, size_name
from .folders.runfiles import RESULT_KEYS, RunConflict, StateError, read_result
from .validate import check_seed
from .train import train_run

# The paper's CSV columns first, then what rrlib adds.
PAPER_COLUMNS = ["size", "variant", "seed", "params_M", "steps", "val_loss", "ece", "minutes"]


def parse_shard(text: str) -> tuple[int, int]:
    """'k/n' → (k, n) with 0 ≤ k < n."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ConfigError(f"bad shard {text!r}; write k/n with 0 <= k < n, e.g. 0/2") from None
    if not 0 <= k < n:
        raise ConfigError(f"bad shard {text!r}; write k/n with 0 <= k < n, e.g. 0/2")
    return k, n


def grid(size: str, variants=None, seeds=None, shard: tuple[int, int] = (0, 1)) -> list[tuple[str, int]]:
    """The (variant, seed) pairs of this size's sweep, in a fixed order, restricted to one shard.

    A grid that holds no cell (no variant or no seed given, a shard past its end) is refused: a sweep that would do
    nothing says so instead of ending as if it had finished.
    """
    preset = load_preset(size)
    variants = list(preset.variants if variants is None else variants)
    for v in variants:
        known_rule(v)
    seeds = [check_seed(s) for s in (seeds if seeds is not None else preset.seeds)]
    for name, given in (("variants", variants), ("seeds", seeds)):
        if not given:
            raise ConfigError(f"the sweep names no {name}; give at least one (--{name}, comma-separated), or leave "
                              f"it out for the preset's")
    cells = [(v, s) for s in seeds for v in variants]  # seed-major: a partial sweep is still paired
    k, n = shard
    if k >= len(cells):
        raise ConfigError(f"shard {k}/{n} holds no run: the grid has {len(cells)} runs ({len(variants)} variants x "
                          f"{len(seeds)} seeds), so only shards 0/{n} to {len(cells) - 1}/{n} have any; use at most "
                          f"{len(cells)} shards")
    return cells[k::n]


class SweepIncomplete(ConfigError):
    """Some cells of a sweep could not run (conflicts, unreadable files); ``table`` holds the others' results."""

    def __init__(self, message: str, table: pd.DataFrame):
        super().__init__(message)
        self.table = table


def run_sweep(size: str, variants=None, seeds=None, overrides: dict | None = None, out_root: str = "outputs/runs",
              shard: tuple[int, int] = (0, 1), progress: bool = True, log=print, move_aside: bool = False,
              allow_slow: bool | None = None, cells: list[tuple[str, int]] | None = None) -> pd.DataFrame:
    """Run what is not done yet; return this size's results table (also written as results.csv).

    ``cells``, (variant, seed) pairs, replaces the grid of ``variants`` x ``seeds`` and its ``shard`` (the compare
    engine passes its share of the runs still missing). Raises SweepIncomplete at the end, after every other cell
    has run, if any cell could not run.
    """
    cells = grid(size, variants, seeds, shard) if cells is None else cells
    runs = [resolve_run(size, v, s, overrides, out_root) for v, s in cells]  # every error before any training
    size = size_name(size)  # a preset file's runs are filed under its name
    for run in runs:
        checked_run_outputs(run.run_dir, project_path(run.data.cache_dir))
    problems, todo, statuses = [], [], []
    for i, run in enumerate(runs, 1):
        tag = f"[sweep {i}/{len(runs)}] {size}/{run.variant}/seed{run.seed}"
        try:
            settled, done = claimed(run, move_aside)
        except (RunConflict, StateError) as err:
            log(f"{tag}: not run: {err}")
            problems.append((f"{run.variant}/seed{run.seed}", err))
            continue
        if done is not None:
            log(f"{tag}: done already" + ("" if done["status"] == "finished" else f" ({done['status']})"))
            statuses.append(done["status"])
        else:
            todo.append((tag, settled))
    if todo:  # the whole remaining grid is priced at once: a sweep far beyond a CPU stops before its first run
        check_cpu_reach([r for _, r in todo], pick_device(todo[0][1].train.device), allow_slow)
    for tag, run in todo:
        try:
            result = train_run(run, progress=progress, allow_slow=True, skip_done=True)
        except RunBusy:
            log(f"{tag}: running in another process, skipped")
            continue
        except (RunConflict, StateError) as err:  # written meanwhile by another process, or damaged
            log(f"{tag}: not run: {err}")
            problems.append((f"{run.variant}/seed{run.seed}", err))
            continue
        if result is None:  # another sweep over the same folder finished it meanwhile
            log(f"{tag}: done already")
            continue
        log(f"{tag}: {result['status']}, val_loss {_fmt(result['val_loss'])}, fixed_loss "
            f"{_fmt(result['fixed_loss'])}, {result['minutes']:.2f} min"
            + (f" ({result['diverged_because']})" if "diverged_because" in result else ""))
        statuses.append(result["status"])
    if "diverged" in statuses:
        log(f"[sweep] {statuses.count('diverged')} of {len(runs)} {size} runs diverged (status diverged in the table)")
    table = write_results(out_root, size, results_table(out_root, size, log=log))
    if len(table):
        asked = {(run.variant, run.seed) for run in runs}
        table = table[[cell in asked for cell in zip(table["variant"], table["seed"])]].reset_index(drop=True)
    if problems:
        # the first reason in full: where the sweep ran inside a notebook, its log lines are not where this is read
        raise SweepIncomplete(f"{len(problems)} of {len(runs)} {size} runs did not run "
                              f"({', '.join(cell for cell, _ in problems)}); the first: {problems[0][1]}", table)
    return table


def write_results(out_root: str, size: str, table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (every result of ``size``) written as the size's results.csv when it holds any; ``table``.

    Sweeps that run at once each write it as they end: the caller that has waited for all of them writes it last."""
    if len(table):
        write_bytes_atomic(project_path(out_root) / size / "results.csv", table.to_csv(index=False).encode())
    return table


def results_table(out_root: str = "outputs/runs", size: str | None = None, log=None) -> pd.DataFrame:
    """Every result.json under ``out_root`` (one size, or all) as a tidy table in the paper's schema.

    A result that cannot be read, or that records another cell than its folder's (a folder copied to another
    seed's place), is left out of the table and named (on stderr unless ``log`` is given).
    """
    root = project_path(out_root)
    pattern = f"{size}/*/seed*/result.json" if size else "*/*/seed*/result.json"
    say = log or (lambda m: print(m, file=sys.stderr))
    rows = []
    for path in sorted(root.glob(pattern)):
        try:
            result = read_result(path.parent)
        except StateError as err:
            say(f"[results] left out: {err}")
            continue
        cell = (result["size"], result["variant"], f"seed{result['seed']}")
        if cell != path.parent.parts[-3:]:
            say(f"[results] left out: {path} holds the result of {'/'.join(cell)}, not of its own folder "
                f"{'/'.join(path.parent.parts[-3:])}; move it back where it belongs")
            continue
        rows.append(result)
    if not rows:  # the columns every result holds, so a filter on any of them (status, fixed_loss) finds no run
        return pd.DataFrame(columns=PAPER_COLUMNS + [k for k in RESULT_KEYS if k not in PAPER_COLUMNS])
    table = pd.DataFrame(rows)
    extra = [c for c in table.columns if c not in PAPER_COLUMNS]
    return table[PAPER_COLUMNS + extra].sort_values(["size", "variant", "seed"]).reset_index(drop=True)


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4f}"
