"""Page 02's results: the depth ablation (sizes ``depth<L>``: one small recipe, only the number of blocks changes),
read from ``<out_root>/depth<L>/<variant>/seed<k>``.

Every function takes ``depths`` (blocks; None: every depth of the ``depth`` preset), ``variants``, ``seeds`` (None:
the preset's) and ``out_root``. None of them trains: a run not in its folder is not in the result (``python -m
rrlib report`` trains a page's missing runs before the page, with ``--train-missing``).

Columns:

- ``depth_runs``: one row per run, the columns of ``rrlib.runs.sweep.results_table`` (the paper's CSV columns
  first, then rrlib's: ``size, variant, seed, params_M, steps, val_loss, ..., fixed_loss, ..., n_layers, status,
  ...``) and ``sublayers`` (2 per block); depths in the order given, each sorted by variant and seed.
- ``runs_per_depth``: index ``blocks``; ``sublayers``, ``runs``, ``finished`` (runs whose status is finished),
  ``params_M`` (the largest variant's, parameter-matched), ``steps`` (the most any run trained).
- ``loss_curves``: one row per logged training step of every finished run: the log's ``step``, ``loss``, ``lr``,
  ``grad_norm`` (before clipping) and ``tokens_per_s``; ``size``, ``variant``, ``seed``, ``flops`` (training FLOPs so
  far, ``rrlib.runs.loading.loss_curves``) and ``blocks``.
- ``final_loss``: one row per (variant, sublayers): ``variant``, ``sublayers``, ``fixed_loss_mean``,
  ``fixed_loss_sd`` (n − 1, NaN for one run) and ``runs``: the held-out loss on the fixed set over seeds, every run
  counted whatever its status.
- ``mean_final_loss``: index ``sublayers``; one column per variant (its name, in the order given): ``final_loss``'s
  ``fixed_loss_mean``.
- ``embedding_grad``: index ``sublayers``; one column per variant: ‖∂loss/∂W_pos‖ at initialisation (torch seed =
  the run's seed) on the first ``grad_windows`` held-out windows of the shallowest depth, mean over seeds.
- ``convex_against_additive``: one row per convex rule whose additive twin is among the variants: ``convex``,
  ``additive``, ``shallow_sublayers``, ``deep_sublayers``, ``loss_gap_shallow`` and ``loss_gap_deep`` (convex −
  additive ``fixed_loss_mean``: > 0 when the convex form is behind), ``grad_ratio_shallow`` and ``grad_ratio_deep``
  (convex / additive ``embedding_grad``).
- ``provenance``: index ``size``; ``git_commit``, ``device``, ``precision``, ``data_source``, ``torch_version``
  (each the distinct values, comma-separated) and ``runs`` (``rrlib.runs.loading.provenance``).
"""
from __future__ import annotations

import pandas as pd
import torch

from ..model import GPT
from ..runs import loading
from ..runs.config import project_path
from ..runs.presets import available_sizes, load_preset, resolve_run
from ..runs.sweep import results_table
from ..studies import gates
from . import result

DEPTH_PRESET = "depth"
VARIANTS = ("review", "review_convex", "highway", "highway_convex", "standard")
OUT_ROOT = "outputs/runs"
GRAD_WINDOWS = 8
TWINS = (("review_convex", "review"), ("highway_convex", "highway"))  # each convex rule and its additive form


def available_depths() -> list[int]:
    """Every depth (blocks) of the depth preset, shallowest first."""
    rest = [s[len(DEPTH_PRESET):] for s in available_sizes() if s.startswith(DEPTH_PRESET)]
    return sorted(int(r) for r in rest if r.isdigit())


def design(depths=None, seeds=None) -> tuple[list[int], list[int]]:
    """The depths and seeds a call reads: those given, else every depth and the preset's seeds."""
    depths = list(depths) if depths is not None else available_depths()
    seeds = list(seeds) if seeds is not None else list(load_preset(f"{DEPTH_PRESET}{depths[0]}").seeds)
    return depths, seeds


def _ablation(depths, variants, seeds, out_root) -> dict:
    """One call's arguments as keywords, so that a result that reads another hits the page's own call in memo."""
    return {"depths": depths, "variants": variants, "seeds": seeds, "out_root": out_root}


def _roots(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT, *_, **__):
    return [project_path(out_root) / f"{DEPTH_PRESET}{L}" for L in design(depths, seeds)[0]]


@result(_roots)
def depth_runs(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT) -> pd.DataFrame:
    """Every run of the ablation that has a result file, one row each."""
    depths, seeds = design(depths, seeds)
    tables = [results_table(out_root, f"{DEPTH_PRESET}{L}") for L in depths]
    # a depth without runs gives an empty table, which would turn every column of the concatenation into objects
    picked = [t[t["variant"].isin(variants) & t["seed"].isin(seeds)] for t in tables]
    runs = pd.concat([t for t in picked if len(t)] or picked[:1], ignore_index=True)
    return runs.assign(sublayers=2 * runs["n_layers"])


@result(_roots)
def runs_per_depth(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT) -> pd.DataFrame:
    """How many runs each depth has, how many finished, and their size and length."""
    runs = depth_runs(**_ablation(depths, variants, seeds, out_root))
    return runs.groupby("n_layers").agg(
        sublayers=("sublayers", "first"), runs=("seed", "size"),
        finished=("status", lambda s: int((s == "finished").sum())), params_M=("params_M", "max"),
        steps=("steps", "max")).rename_axis("blocks")


@result(_roots)
def loss_curves(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT) -> pd.DataFrame:
    """Training loss against steps and training FLOPs, every finished run of every depth."""
    depths, seeds = design(depths, seeds)
    return pd.concat([loading.loss_curves(out_root, f"{DEPTH_PRESET}{L}", variants, seeds).assign(blocks=L)
                      for L in depths], ignore_index=True)


@result(_roots)
def final_loss(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT) -> pd.DataFrame:
    """The held-out loss on the fixed set per variant and depth: mean, SD and count over seeds."""
    runs = depth_runs(**_ablation(depths, variants, seeds, out_root))
    return (runs.groupby(["variant", "sublayers"])["fixed_loss"].agg(["mean", "std", "count"]).reset_index()
            .rename(columns={"mean": "fixed_loss_mean", "std": "fixed_loss_sd", "count": "runs"}))


@result(_roots)
def mean_final_loss(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT) -> pd.DataFrame:
    """``final_loss``'s mean, one row per depth and one column per variant."""
    final = final_loss(**_ablation(depths, variants, seeds, out_root))
    wide = final.pivot(index="sublayers", columns="variant", values="fixed_loss_mean")
    return wide[[v for v in variants if v in wide.columns]]


@result(_roots)
def embedding_grad(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT,
                   grad_windows: int = GRAD_WINDOWS) -> pd.DataFrame:
    """The gradient that reaches the position embeddings of a freshly initialised model, per depth and variant.

    Position embeddings, not token embeddings: the token table is tied to the head (``gates.position_grad_norm``).
    Every model reads the same batch, so the depths differ only in the model.
    """
    depths, seeds = design(depths, seeds)
    variants = list(variants)
    batch = loading.heldout_batch(resolve_run(f"{DEPTH_PRESET}{depths[0]}", variants[0], seeds[0],
                                              out_root=str(out_root)), grad_windows)
    rows = []
    for L in depths:
        for variant in variants:
            for seed in seeds:
                torch.manual_seed(seed)
                model = GPT(resolve_run(f"{DEPTH_PRESET}{L}", variant, seed, out_root=str(out_root)).model)
                rows.append({"sublayers": 2 * L, "variant": variant, "seed": seed,
                             "grad_norm": gates.position_grad_norm(model, *batch)})
    return pd.DataFrame(rows).pivot_table(index="sublayers", columns="variant", values="grad_norm")[variants]


@result(_roots)
def convex_against_additive(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT,
                            grad_windows: int = GRAD_WINDOWS) -> pd.DataFrame:
    """Each convex form against its additive twin at the shallowest and the deepest depth: the gap in held-out
    loss and the ratio of the gradient reaching the embeddings at initialisation."""
    loss = mean_final_loss(**_ablation(depths, variants, seeds, out_root))
    grad = embedding_grad(**_ablation(depths, variants, seeds, out_root), grad_windows=grad_windows)
    shallow, deep = loss.index.min(), loss.index.max()
    rows = [{"convex": convex, "additive": additive, "shallow_sublayers": shallow, "deep_sublayers": deep,
             "loss_gap_shallow": loss.loc[shallow, convex] - loss.loc[shallow, additive],
             "loss_gap_deep": loss.loc[deep, convex] - loss.loc[deep, additive],
             "grad_ratio_shallow": grad.loc[grad.index.min(), convex] / grad.loc[grad.index.min(), additive],
             "grad_ratio_deep": grad.loc[grad.index.max(), convex] / grad.loc[grad.index.max(), additive]}
            for convex, additive in TWINS if convex in loss and additive in loss]
    return pd.DataFrame(rows, columns=["convex", "additive", "shallow_sublayers", "deep_sublayers", "loss_gap_shallow",
                                       "loss_gap_deep", "grad_ratio_shallow", "grad_ratio_deep"])


@result(_roots)
def provenance(depths=None, variants=VARIANTS, seeds=None, out_root=OUT_ROOT) -> pd.DataFrame:
    """What produced the ablation's runs, per depth: commit, device, precision, data, torch."""
    return loading.provenance(depth_runs(**_ablation(depths, variants, seeds, out_root)))
