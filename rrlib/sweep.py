"""A grid of runs (one size × variants × seeds), skip-done, sharding, and the results table.

Runs are independent folders, so a sweep is a loop: a run with a ``result.json`` is skipped, a run that another
process holds (its lock) is skipped, a run that diverges is recorded and the loop goes on. ``shard=(k, n)``
takes every n-th run of the grid starting at k, so n machines given k = 0..n-1 split one grid without talking.
"""
from __future__ import annotations

import json

import pandas as pd

from .config import ConfigError, load_preset, resolve_run
from .residuals import rule_class
from .train import RunBusy, project_path, read_result, train_run

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
    """The (variant, seed) pairs of this size's sweep, in a fixed order, restricted to one shard."""
    preset = load_preset(size)
    variants = list(variants or preset.variants)
    for v in variants:
        rule_class(v)
    seeds = [int(s) for s in (seeds if seeds is not None else preset.seeds)]
    cells = [(v, s) for s in seeds for v in variants]  # seed-major: a partial sweep is still paired
    k, n = shard
    return cells[k::n]


def run_sweep(size: str, variants=None, seeds=None, overrides: dict | None = None, out_root: str = "outputs/runs",
              shard: tuple[int, int] = (0, 1), progress: bool = True, log=print) -> pd.DataFrame:
    """Run what is not done yet; return this size's results table (also written as results.csv)."""
    cells = grid(size, variants, seeds, shard)
    runs = [resolve_run(size, v, s, overrides, out_root) for v, s in cells]  # every error before any training
    for i, run in enumerate(runs, 1):
        tag = f"[sweep {i}/{len(runs)}] {size}/{run.variant}/seed{run.seed}"
        if read_result(run.run_dir) is not None:
            log(f"{tag}: done already")
            continue
        try:
            result = train_run(run, progress=progress)
        except RunBusy:
            log(f"{tag}: running in another process, skipped")
            continue
        log(f"{tag}: {result['status']}, val_loss {_fmt(result['val_loss'])}, fixed_loss "
            f"{_fmt(result['fixed_loss'])}, {result['minutes']:.2f} min")
    table = results_table(out_root, size)
    if len(table):
        table.to_csv(project_path(out_root) / size / "results.csv", index=False)
    return table


def results_table(out_root: str = "outputs/runs", size: str | None = None) -> pd.DataFrame:
    """Every result.json under ``out_root`` (one size, or all) as a tidy table in the paper's schema."""
    root = project_path(out_root)
    pattern = f"{size}/*/seed*/result.json" if size else "*/*/seed*/result.json"
    rows = [json.loads(p.read_text()) for p in sorted(root.glob(pattern))]
    if not rows:
        return pd.DataFrame(columns=PAPER_COLUMNS)
    table = pd.DataFrame(rows)
    extra = [c for c in table.columns if c not in PAPER_COLUMNS]
    return table[PAPER_COLUMNS + extra].sort_values(["size", "variant", "seed"]).reset_index(drop=True)


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4f}"
