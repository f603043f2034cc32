"""Reading run folders back: results and training logs, trained models, held-out batches, provenance.

Nothing here trains a model that has been trained before: a kept result is read, and only a missing checkpoint
is made again, under a separate folder (see ``trained_model``).
"""
from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path

import pandas as pd
import torch

from ..model import GPT
from .folders.checkpoints import WEIGHTS_FILE, load_weights
from .config import PARAMS_DIR, RunConfig, run_folder
from .data import fixed_eval_windows
from .presets import resolve_run
from .data.rundata import load_run_data
from .folders.runfiles import read_config, read_log, read_result
from .sweep import run_sweep
from .train import train_run


def quiet_sweep(*args, **kwargs) -> pd.DataFrame:
    """``rrlib.runs.sweep.run_sweep`` with its progress (one line per run, each run's start-up line) on stderr.

    A notebook's stdout is what its rendered page shows; the report leaves stderr out of the page, so a
    reader sees the results table, not a line per run already done.
    """
    def to_stderr(message):
        print(message, file=sys.stderr, flush=True)

    with contextlib.redirect_stdout(sys.stderr):
        return run_sweep(*args, log=to_stderr, **kwargs)


def standalone_sizes(sizes) -> list[str]:
    """The sizes that are presets of their own (``params/<size>.yaml``), in the order given.

    Members of a series preset (``depth<L>``, ``looped<N>``) vary one dial at a fixed width; they are not points
    on the scale axis and belong to their own notebooks.
    """
    own = {p.stem for p in PARAMS_DIR.glob("*.yaml")}
    return [s for s in sizes if s in own]


def read_metrics(run_dir, column: str = "loss") -> pd.DataFrame:
    """The rows of one run folder's log that carry ``column``: ``loss`` for the logged training steps,
    ``fixed_loss`` for the periodic evaluations of the fixed held-out set."""
    kept = [r for r in read_log(run_dir) if column in r]
    return pd.DataFrame(kept) if kept else pd.DataFrame(columns=["step", column])


def loss_curves(out_root, size: str, variants, seeds) -> pd.DataFrame:
    """Training loss of every finished (variant, seed) run of a size, against steps and training FLOPs.

    FLOPs per step come from the run's own result (tokens per step × FLOPs per token), so variants that
    cost different amounts per step are compared at equal compute.
    """
    frames = []
    for variant in variants:
        for seed in seeds:
            folder = run_folder(out_root, size, variant, seed)
            result = read_result(folder)
            if result is None or not result["steps"]:
                continue
            log = read_metrics(folder)
            flops_per_step = result["tokens"] / result["steps"] * result["flops_per_token"]
            frames.append(log.assign(size=size, variant=variant, seed=seed, flops=log["step"] * flops_per_step))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["step", "loss", "size", "variant", "seed", "flops"])


def trained_model(size: str, variant: str = "review", seed: int = 0, out_root="outputs/runs",
                  local_out_root="build/runs") -> tuple[GPT, RunConfig, Path]:
    """A trained model from its run folder's kept weights (weights.pt), training the run first if it has none.

    Results are kept with the project but weights are not: when ``out_root`` has the run's result and
    no weights, the run is trained again under ``local_out_root``, so a kept result is never rewritten.
    Returns (model in eval mode, its resolved config, the run folder).
    """
    # a finished run keeps no checkpoint, so the model is read from the fp32 weights it keeps when asked
    keep = {"train": {"keep_weights": "fp32"}}
    folder = run_folder(out_root, size, variant, seed)
    with contextlib.redirect_stdout(sys.stderr):  # the run's start-up line is progress, not for the page
        if read_result(folder) is None:  # never run, or stopped: train it (resuming from its checkpoint)
            train_run(resolve_run(size, variant, seed, keep, out_root=str(out_root)))
        elif not (folder / WEIGHTS_FILE).exists():
            train_run(resolve_run(size, variant, seed, keep, out_root=str(local_out_root)))
            folder = run_folder(local_out_root, size, variant, seed)
    run = RunConfig.from_dict(read_config(folder)["config"])
    model = GPT(run.model)
    load_weights(folder, model)
    return model.eval(), run, folder


def heldout_batch(run: RunConfig, n_windows: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n_windows`` windows of the run's fixed held-out set, read as the training code reads it."""
    with contextlib.redirect_stdout(sys.stderr):  # a first load's tokenising line is progress (a fresh clone's)
        data = load_run_data(run)
    return next(iter(fixed_eval_windows(data.heldout, run.model.seq_len, batch_size=n_windows)))


def provenance(results: pd.DataFrame) -> pd.DataFrame:
    """What produced a table of runs, per size: commit, device, precision, data, torch (from the result files)."""
    columns = [c for c in ("git_commit", "device", "precision", "data_source", "torch_version") if c in results]
    table = (results.groupby("size")[columns].agg(lambda s: ", ".join(sorted(set(map(str, s.dropna())))))
             .assign(runs=results.groupby("size").size()))
    return table.loc[sorted(table.index, key=natural_key)]


def natural_key(name: str) -> list:
    """depth2 < depth4 < depth12, where plain string order puts depth12 first."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
