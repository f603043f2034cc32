"""Page 06's results: does Review's gap follow model size or tokens per parameter? Read from the size × tokens grid
(two widths, micro and mini, each trained for 100, 300 and 1,200 steps: sizes ``<width>_steps<S>``) under
``<out_root>/<size>/<variant>/seed<k>``, and from the paper's own runs (its CSV) on the same axes.

A cell is one grid size (a width at a budget). Gaps are ``baseline − review`` (positive favours Review), paired by
seed, every test and fit from ``rrlib.stats``.

Columns:

- ``grid_runs``: one row per finished run of the grid (``rrlib.stats.load_results`` of the results table) and
  ``width`` (the size's name before ``_steps``).
- ``grid_cells``: index ``size``; ``width``; ``params_M`` and ``tokens_per_param`` (Review's, mean over seeds);
  ``steps``; ``seeds`` (Review's); one column per variant (its name): its mean ``metric`` over seeds; ``passes``
  (tokens trained on over the tokens of the sample's train stream: above 1 the runs see it more than once). Rows by
  steps, then by size name.
- ``paired_gaps``: one row per (size, baseline): ``rrlib.stats.compare_metrics``' columns (``paired_gap``,
  ``ci_low``, ``ci_high``, ``paired_p``, ``p_holm``, ``significant``, ``p_<secondary>``, ``p_holm_<secondary>``,
  ``significant_<secondary>``, ``metrics_note``, ...) and ``width``, ``tokens_per_param`` (the cell's).
- ``gap_factors``: ``rrlib.stats.gap_factors`` on the primary metric, then on the secondary: one row per (metric,
  baseline, term): ``baseline``, ``metric``, ``term`` (``intercept``, ``log10_size``, ``log10_tokens_per_param``),
  ``coef`` (nats per decade), ``stderr``, ``ci_low``, ``ci_high``, ``p``, ``n_cells``, ``df``, ``note``.
- ``paper_gaps``: a ``PaperGaps``: the paper's sizes compared as ``rrlib.stats.compare`` does on its ``val_loss``
  (index ``size``, with Review's ``tokens_per_param``), and how far its log size and log tokens per parameter
  move together.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .. import stats
from ..runs.config import project_path
from ..runs.presets import load_preset, resolve_run
from ..runs.data.rundata import load_run_data
from ..runs.sweep import results_table
from . import result

GRID_SIZES = ("micro_steps100", "micro_steps300", "micro_steps1200",
              "mini_steps100", "mini_steps300", "mini_steps1200")
VARIANTS = ("review", "highway", "standard")
OUT_ROOT = "outputs/runs"
METRIC = "fixed_loss"  # the primary metric: the fixed held-out set, identical for every run
SECONDARY_METRIC = "val_loss"  # the paper's evaluation, tested beside it
ALPHA = 0.05
PAPER_CSV = "outputs/reference/scaling_v8.csv"
PAPER_TOKENS_PER_STEP = 64 * 256  # the paper's batch × context at every size


def _roots(grid_sizes=GRID_SIZES, variants=VARIANTS, *args, out_root=OUT_ROOT, **_):
    return [project_path(out_root) / size for size in grid_sizes]


@result(_roots)
def grid_runs(grid_sizes=GRID_SIZES, variants=VARIANTS, *, out_root=OUT_ROOT) -> pd.DataFrame:
    """The grid's finished runs of ``variants``; one sentence naming the command that trains them when none has a
    result yet."""
    found = [results_table(out_root, size) for size in sorted(set(grid_sizes))]
    runs = pd.concat(found, ignore_index=True)
    runs = runs[runs["variant"].isin(variants)]
    if runs.empty:
        raise RuntimeError(f"no results of the grid under {out_root}: `rrlib study run size_tokens` trains them")
    grid = stats.load_results(runs)
    return grid.assign(width=grid["size"].map(lambda s: s.split("_steps")[0]))


@result(_roots)
def grid_cells(grid_sizes=GRID_SIZES, variants=VARIANTS, metric: str = METRIC, *, out_root=OUT_ROOT) -> pd.DataFrame:
    """One row per cell: its width, Review's size and tokens per parameter, each variant's mean ``metric``, and how
    many times its runs pass over the training text."""
    grid = grid_runs(grid_sizes, variants, out_root=out_root)
    cells = (grid[grid["variant"] == "review"].groupby("size")
             .agg(width=("width", "first"), params_M=("params_M", "mean"), steps=("steps", "first"),
                  tokens_per_param=("tokens_per_param", "mean"), seeds=("seed", "nunique")))
    means = grid.pivot_table(index="size", columns="variant", values=metric, aggfunc="mean")
    cells = cells.join(means[[v for v in variants if v in means.columns]]).sort_values("steps", kind="stable")
    # the sample's train stream is finite: the longest runs see it more than once (random windows, no fixed order)
    presets = {size: load_preset(size) for size in cells.index}
    cells["passes"] = [presets[s].train.steps * presets[s].train.batch_size * presets[s].model.seq_len
                       / len(load_run_data(resolve_run(s, "review", 0)).train) for s in cells.index]
    return cells


@result(_roots)
def paired_gaps(grid_sizes=GRID_SIZES, variants=VARIANTS, metric: str = METRIC,
                secondary_metric: str = SECONDARY_METRIC, alpha: float = ALPHA, *, out_root=OUT_ROOT) -> pd.DataFrame:
    """Review's paired gap against each baseline in every cell, with Holm over all the grid's comparisons, the
    secondary metric's tests beside it, and the cell's width and tokens per parameter."""
    grid = grid_runs(grid_sizes, variants, out_root=out_root)
    cells = grid_cells(grid_sizes, variants, metric, out_root=out_root)
    comparison = stats.compare_metrics(grid, metric, secondary_metric, alpha=alpha, n_boot=0).set_index("size")
    return comparison.join(cells[["width", "tokens_per_param"]]).reset_index()


@result(_roots)
def gap_factors(grid_sizes=GRID_SIZES, variants=VARIANTS, metrics=(METRIC, SECONDARY_METRIC), alpha: float = ALPHA,
                *, out_root=OUT_ROOT) -> pd.DataFrame:
    """Per metric and baseline, the OLS fit of the per-cell gap on log10 size and log10 tokens per parameter
    (``rrlib.stats.gap_factors``: one point per cell, a t-interval on cells − 3 degrees of freedom)."""
    grid = grid_runs(grid_sizes, variants, out_root=out_root)
    return pd.concat([stats.gap_factors(grid, metric=m, alpha=alpha) for m in metrics], ignore_index=True)


@dataclasses.dataclass
class PaperGaps:
    """The paper's runs on the grid's axes."""

    gaps: pd.DataFrame  # stats.compare on val_loss, index size, with Review's tokens_per_param
    log_size_tokens_correlation: float  # Pearson r of log10 params_M and log10 tokens_per_param over its rows


@result(lambda *args, **kwargs: ())
def paper_gaps(paper_csv: str = PAPER_CSV, variants=VARIANTS, alpha: float = ALPHA) -> PaperGaps | None:
    """Review's paired gap in each of the paper's sizes on its own ``val_loss``, at the tokens per parameter its
    recipe gave (steps × 64 × 256 over Review's parameters); None where the CSV is missing."""
    path = project_path(paper_csv)
    if not path.exists():
        return None
    paper = stats.load_results(path)
    paper = paper[paper["variant"].isin(variants)]
    paper = paper.assign(tokens_per_param=paper["steps"] * PAPER_TOKENS_PER_STEP / (paper["params_M"] * 1e6))
    gaps = stats.compare(paper, metric="val_loss", alpha=alpha, n_boot=0).set_index("size")
    gaps = gaps.join(paper[paper["variant"] == "review"].groupby("size")["tokens_per_param"].mean())
    r = np.corrcoef(np.log10(gaps["params_M"]), np.log10(gaps["tokens_per_param"]))[0, 1]
    return PaperGaps(gaps=gaps, log_size_tokens_correlation=r)


def _excludes_zero(row) -> bool:
    return row["ci_low"] > 0 or row["ci_high"] < 0


def factor_sentence(factors: pd.DataFrame, baseline: str) -> str:
    """One sentence on one baseline's fit (a ``gap_factors`` table of one metric): each coefficient with its
    interval, and whether the interval excludes 0."""
    rows = factors[(factors["baseline"] == baseline) & (factors["term"] != "intercept")].set_index("term")
    if rows["coef"].isna().all():
        return f"against {baseline}: no fit ({rows['note'].iloc[0]})"
    parts = []
    for term, name in (("log10_size", "size"), ("log10_tokens_per_param", "tokens per parameter")):
        r = rows.loc[term]
        parts.append(f"{name} {r['coef']:+.3f} nats/decade [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
                     f"{' (interval excludes 0)' if _excludes_zero(r) else ''}")
    return f"against {baseline}: " + "; ".join(parts)


def undertraining_sentence(factors: pd.DataFrame) -> str:
    """What a fit of one metric says of the two readings: undertraining predicts a gap that shrinks as tokens per
    parameter grow (a negative coefficient); scale predicts one that grows with size at fixed tokens per
    parameter."""
    tpp = factors[factors["term"] == "log10_tokens_per_param"].dropna(subset=["coef"])
    size = factors[factors["term"] == "log10_size"].dropna(subset=["coef"])
    if tpp.empty:
        return "Too few cells to fit the two factors."
    shrinks = tpp[tpp["ci_high"] < 0]["baseline"].tolist()
    grows_with_tokens = tpp[tpp["ci_low"] > 0]["baseline"].tolist()
    grows_with_size = size[size["ci_low"] > 0]["baseline"].tolist()
    signs = ", ".join(f"{r.baseline} {r.coef:+.3f}" for r in tpp.itertuples())
    if shrinks:
        return (f"The gap follows undertraining against {', '.join(shrinks)}: it shrinks as tokens per parameter "
                f"grow (tokens coefficients: {signs} nats/decade).")
    words = ("grows with tokens per parameter against " + ", ".join(grows_with_tokens) if grows_with_tokens
             else "no interval of the tokens coefficient excludes 0")
    more = (f"; it grows with size at fixed tokens per parameter against {', '.join(grows_with_size)}"
            if grows_with_size else "; no interval of the size coefficient excludes 0 either")
    return ("The gap does not follow undertraining here: the undertraining reading predicts negative tokens "
            f"coefficients, and they are {signs} nats/decade ({words}){more}.")
