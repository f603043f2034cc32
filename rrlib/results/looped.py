"""The looped learning-rate study (page 05), read from its run folders: outputs/looped_grid/lr<lr>/looped<N>/<rule>/
seed<k>, and the supplementary edge extension under outputs/looped_edges. The grid and the estimator, stated before
the runs, are rrlib.studies.looped_study's; this module applies them to the finished runs.

``study_runs`` is one row per run (the results table's schema, with ``lr``, ``loops`` and ``stalled``: the final
loss within ``looped_study.STALL_NATS`` of the training tokens' unigram entropy). Every function reads the runs of
``variants`` at the loop counts ``loops`` and ``seeds`` (None: the study's five) under ``root``. ``cells`` is the loss over the
learning rate per cell:

    variant, loops, lr   the rule, the loop count N and the learning rate
    loss                 the primary metric's mean over the cell's seeds
    seeds, stalled       how many runs the cell has, and how many of them stalled

``progress`` (a ``Progress``) says how far the study is: the grid each cell should have, the seeds that finished a
rule's every cell (the only ones that give a slope over N), the runs still missing, stalls and divergences.
``reading`` (a ``LoopedReading``) is the stated estimator on those whole seeds:

    optima        per (variant, loops, seed): points (rates run), grid_lr (the grid argmin), parabola_lr (the
                  parabola's vertex; none on an edge), best_loss (the loss at grid_lr), at_edge ("low", "high" or none)
    cell_optima   per (variant, loops): seeds, grid_lr (median over seeds), parabola_lr (geometric mean over the
                  seeds that have one) and at_edge (how many seeds' optimum sat on an edge)
    transfer      per variant and estimator ("parabola", "grid"): seeds, slope (the mean slope of log2(optimum) on
                  log2 N), ci_low, ci_high (its 95 % t-interval), p (slope 0), p_equivalent (TOST at ±1/6 per
                  doubling), fold_change (the optimum at N = 8 over N = 1), mde (the detectable slope), verdict; one
                  block per ``runs``: "all runs", "stalled runs excluded" and, where the edge extension has runs,
                  "edge cells extended (supplementary)"
    trainability  per N (``loops``): seeds, gap (scaled_loops − scaled at each seed's grid optimum, paired), ci_low,
                  ci_high, p, p_holm (Holm over the N where the rules differ), note (why an N has no test)
    contrast      per estimator: effect (1/N's slope − 1/√N's, paired by seed), ci_low, ci_high, p, mde, n (seeds),
                  sd (of the paired differences)

rrlib.results.looped_power reads the powered design into the same ``LoopedReading``.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..home import project_path
from ..runs.data import unigram_entropy
from ..runs.presets import resolve_run
from ..runs.data.rundata import load_run_data
from ..studies import looped_study
from . import result

OUT_ROOT = looped_study.OUT_ROOT
EDGE_ROOT = "outputs/looped_edges"
PRIMARY = "fixed_loss"
CELL_COLUMNS = ["variant", "loops", "lr", "loss", "seeds", "stalled"]
TRAINABILITY_COLUMNS = ["loops", "seeds", "gap", "ci_low", "ci_high", "p", "p_holm", "note"]


@dataclass
class TrainStream:
    """The training tokens a looped size reads: how many, and their unigram entropy in nats (a model that learned
    only how often each token occurs sits there)."""
    tokens: int
    unigram_entropy: float


@dataclass
class Progress:
    """How far the 200-step study is (``progress``)."""
    grid: dict  # (rule, N) -> the learning rates the cell should have
    complete: dict  # rule -> the seeds with a finished run at every rate of every cell of the rule
    finished: int  # runs
    missing: int  # runs of the grid at the study's seeds not finished yet
    stalled: int  # runs at the unigram level
    diverged: int  # runs with no final loss
    unigram_entropy: float
    commits: list  # the code commits the runs were trained at
    stalled_by_rule: dict = field(default_factory=dict)  # rule -> (stalled runs, runs)


@dataclass
class LoopedReading:
    """A looped study's stated estimator on its whole seeds (the module's docstring names the tables)."""
    optima: pd.DataFrame
    transfer: pd.DataFrame
    trainability: pd.DataFrame
    contrast: pd.DataFrame
    cell_optima: pd.DataFrame
    edge_cells: list = field(default_factory=list)  # (rule, N) the supplementary extension adds rates to
    edge_runs: int = 0


@result(lambda size, variant: ())
def train_stream(size: str, variant: str) -> TrainStream:
    """The training tokens of ``size`` (a looped preset's member, e.g. looped1) as ``variant``'s run reads them."""
    with contextlib.redirect_stdout(sys.stderr):  # a first load's tokenising line is progress, not a result
        tokens = load_run_data(resolve_run(size, variant, 0, {}, OUT_ROOT)).train
    return TrainStream(len(tokens), unigram_entropy(tokens))


def with_stalls(runs: pd.DataFrame, stream: TrainStream, metric: str = PRIMARY) -> pd.DataFrame:
    """``runs`` with ``stalled``: the final ``metric`` within looped_study.STALL_NATS of the unigram entropy."""
    return runs.assign(stalled=(runs[metric] - stream.unigram_entropy).abs() < looped_study.STALL_NATS)


def _selected(runs: pd.DataFrame, variants, loops, seeds) -> pd.DataFrame:
    seeds = looped_study.SEEDS if seeds is None else seeds
    return runs[runs["variant"].isin(list(variants)) & runs["loops"].isin(list(loops))
                & runs["seed"].isin(list(seeds))].reset_index(drop=True)


def _roots(root=OUT_ROOT, *args, **kwargs):
    return [project_path(root)]


@result(_roots)
def study_runs(root: str = OUT_ROOT, variants=looped_study.RULES, loops=looped_study.LOOPS,
               seeds=looped_study.SEEDS, metric: str = PRIMARY, prefix: str = "looped") -> pd.DataFrame:
    """Every run under ``root`` of the ``variants`` at the loop counts ``loops`` and ``seeds``, with ``stalled``
    (measured on the training tokens of <prefix><first loop count>)."""
    runs = _selected(looped_study.study_runs(root), variants, loops, seeds)
    return with_stalls(runs, train_stream(f"{prefix}{list(loops)[0]}", list(variants)[0]), metric)


@result(_roots)
def cells(root: str = OUT_ROOT, variants=looped_study.RULES, loops=looped_study.LOOPS, seeds=looped_study.SEEDS,
          metric: str = PRIMARY, prefix: str = "looped") -> pd.DataFrame:
    """Per (variant, loops, lr): the mean final loss over seeds, the seeds and the stalled runs (``CELL_COLUMNS``)."""
    runs = study_runs(root, variants, loops, seeds, metric, prefix)
    return runs.groupby(["variant", "loops", "lr"], as_index=False).agg(
        loss=(metric, "mean"), seeds=("seed", "count"), stalled=("stalled", "sum"))[CELL_COLUMNS]


def _grid(runs: pd.DataFrame, variants, loops, lrs) -> dict:
    """The grid each cell should have: ``lrs`` for every cell where given (a quick build's own), else the study's
    with any extension its runs asked for."""
    if lrs is not None:
        return {(v, n): sorted(lrs) for v in variants for n in loops}
    return {cell: rates for cell, rates in looped_study.current_grid(runs).items()
            if cell[0] in variants and cell[1] in loops}


@result(_roots)
def progress(root: str = OUT_ROOT, variants=looped_study.RULES, loops=looped_study.LOOPS,
             seeds=looped_study.SEEDS, lrs=None, metric: str = PRIMARY, prefix: str = "looped") -> Progress:
    """How far the study under ``root`` is (a ``Progress``); ``lrs``: the grid's rates for every cell, else the
    study's own."""
    runs = study_runs(root, variants, loops, seeds, metric, prefix)
    seeds = list(looped_study.SEEDS if seeds is None else seeds)
    grid = _grid(runs, list(variants), list(loops), lrs)
    have = set(zip(runs["variant"], runs["loops"], runs["lr"], runs["seed"]))
    missing = sum(1 for (v, n), rates in grid.items() for lr in rates for seed in seeds if (v, n, lr, seed) not in have)
    stream = train_stream(f"{prefix}{list(loops)[0]}", list(variants)[0])
    commits = sorted(runs["git_commit"].unique()) if "git_commit" in runs else []
    return Progress(grid, looped_study.complete_seeds(runs, grid, seeds), len(runs), missing,
                    int(runs["stalled"].sum()), int(runs[metric].isna().sum()), stream.unigram_entropy, commits,
                    {v: (int(runs.loc[runs["variant"] == v, "stalled"].sum()), int((runs["variant"] == v).sum()))
                     for v in variants})


def cell_optima(optima: pd.DataFrame) -> pd.DataFrame:
    """Per (variant, loops) over seeds: their count, the median grid optimum, the geometric mean of the parabola
    optima (over the seeds that have one) and how many seeds' optimum sat on an edge."""
    return optima.groupby(["variant", "loops"], as_index=False).agg(
        seeds=("seed", "count"), grid_lr=("grid_lr", "median"),
        parabola_lr=("parabola_lr", lambda x: float(2 ** np.log2(x.dropna()).mean()) if x.notna().any() else np.nan),
        at_edge=("at_edge", lambda x: int(x.notna().sum())))


def contrast(optima: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """1/N's slope of log2(optimum) per doubling of N minus 1/√N's, paired by seed, one row per estimator."""
    slopes = looped_study.seed_slopes(optima)
    return pd.DataFrame([{"estimator": e, **looped_study.slope_contrast(slopes, e, alpha=alpha)}
                         for e in ("parabola", "grid")])


def trainability(optima: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """looped_study.trainability where both scalings have optima, else its columns and no row."""
    if {"scaled", "scaled_loops"} <= set(optima["variant"]):
        return looped_study.trainability(optima, alpha=alpha)
    return pd.DataFrame(columns=TRAINABILITY_COLUMNS)


@result(lambda root=OUT_ROOT, edge_root=EDGE_ROOT, *args, **kwargs:
        [project_path(r) for r in (root, edge_root) if r])
def reading(root: str = OUT_ROOT, edge_root: str | None = EDGE_ROOT, variants=looped_study.RULES,
            loops=looped_study.LOOPS, seeds=looped_study.SEEDS, lrs=None, metric: str = PRIMARY,
            prefix: str = "looped") -> LoopedReading:
    """The stated estimator on the seeds that finished every cell of their rule (a ``LoopedReading``), with stalled
    runs and without, and, beside it (not the stated rule), on those seeds' runs joined by the edge extension's under
    ``edge_root`` (None: no extension)."""
    runs = study_runs(root, variants, loops, seeds, metric, prefix)
    done = progress(root, variants, loops, seeds, lrs, metric, prefix).complete
    usable = runs[[seed in done.get(v, []) for v, seed in zip(runs["variant"], runs["seed"])]]
    transfer, optima = {}, None
    for label, exclude in (("all runs", False), ("stalled runs excluded", True)):
        seed_optima = looped_study.seed_optima(usable, metric, exclude_stalled=exclude)
        transfer[label] = looped_study.transfer_verdicts(looped_study.seed_slopes(seed_optima))
        optima = seed_optima if optima is None else optima
    # A seed with an edge optimum in any cell has no parabola, so the stated estimator loses it; two more rates
    # beyond each such edge, for every seed (same commit, its own folder), give every seed an interior optimum.
    edges = _selected(looped_study.study_runs(edge_root), variants, loops, seeds) if edge_root else runs.iloc[:0]
    if len(edges) and len(usable):
        extended = looped_study.seed_optima(pd.concat([usable, edges], ignore_index=True), metric)
        transfer["edge cells extended (supplementary)"] = looped_study.transfer_verdicts(
            looped_study.seed_slopes(extended))
    return LoopedReading(optima, pd.concat([t.assign(runs=label) for label, t in transfer.items()], ignore_index=True),
                         trainability(optima), contrast(optima), cell_optima(optima),
                         sorted(set(zip(edges["variant"], edges["loops"]))), len(edges))
