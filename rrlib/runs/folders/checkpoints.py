"""What a run keeps on disk: one checkpoint while it runs, at most its final weights once it is done.

    running    ckpt.pt      model + AdamW state + step + minutes, written beside the old one and renamed over
                            it (atomic: a kill leaves the old or the new file, never half of one)
    finished   weights.pt   only with ``train.keep_weights`` bf16 or fp32: the model's state dict in that dtype;
                            ckpt.pt is deleted once result.json is written (a finished run resumes nothing)

The optimizer state is what fills a disk: AdamW keeps two fp32 moments per parameter, so a checkpoint is
12 bytes a parameter (11.8 GB at 1b) and a finished run that kept it would hold 6x what bf16 weights need.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ...model import count_params
from ..config import KEEP_WEIGHTS, ConfigError, RunConfig, project_path
from .disk import write_atomic
from ..presets import load_preset, resolve_run

CKPT_FILE = "ckpt.pt"
WEIGHTS_FILE = "weights.pt"
WEIGHT_DTYPES = dict(zip(KEEP_WEIGHTS, (None, torch.bfloat16, torch.float32)))  # "none", "bf16", "fp32"
# Bytes per parameter: fp32 weights + AdamW's exp_avg and exp_avg_sq (fp32); the step counters are scalars.
CKPT_BYTES_PER_PARAM = 4 + 4 + 4


def save_atomic(obj, path: Path) -> None:
    """``torch.save(obj)`` as the whole of ``path`` (``disk.write_atomic``), through ``<name>.tmp``: the run's lock
    keeps a second writer out, and a killed write's file is replaced by the next save."""
    path = Path(path)
    write_atomic(path, lambda fh: torch.save(obj, fh), path.with_suffix(path.suffix + ".tmp"))


def save_checkpoint(run_dir: Path, model, optimizer, step: int, minutes: float, **state) -> None:
    """``state``: what else resuming needs (the run's fingerprint, the open log window)."""
    save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                 "minutes": minutes, **state}, Path(run_dir) / CKPT_FILE)


def keep_final(run_dir: Path, model, keep_weights: str) -> None:
    """The final weights, if asked for, before the result is written (so a result never lacks them)."""
    dtype = WEIGHT_DTYPES[keep_weights]
    if dtype is not None:
        state = {k: v.detach().to("cpu", dtype if v.is_floating_point() else v.dtype)
                 for k, v in model.state_dict().items()}
        save_atomic({"model": state, "dtype": keep_weights}, Path(run_dir) / WEIGHTS_FILE)


def drop_checkpoint(run_dir: Path) -> None:
    """After result.json: the optimizer state is of no further use, and at 1b it is 11.8 GB a run."""
    for name in (CKPT_FILE, CKPT_FILE + ".tmp"):
        (Path(run_dir) / name).unlink(missing_ok=True)


def load_weights(run_dir: Path, model) -> None:
    """A finished run's kept weights (weights.pt) into ``model``, cast to the model's own dtype."""
    path = Path(run_dir) / WEIGHTS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the run kept no weights (train with "
                                f"--set train.keep_weights=bf16 or fp32 to keep them)")
    state = torch.load(path, map_location="cpu", weights_only=True)["model"]
    model.load_state_dict({k: v.to(model.state_dict()[k].dtype) for k, v in state.items()})


def init_source(run: RunConfig) -> Path | None:
    """The run folder ``train.init_from`` names for this run (``{seed}`` filled in), or None."""
    template = run.train.init_from
    return None if template is None else project_path(template.format(seed=run.seed))


def start_from(source: Path, model) -> None:
    """Start ``model`` from a finished run's kept weights: a trained model carried over into another rule.

    Every tensor outside the residual rule (embeddings, sublayers, norms) comes from the source run and must
    have the same shape here; the rule's own parameters keep the values its ``reset_parameters`` gave them, and
    the source's rule parameters are not carried (another rule's gates mean nothing to this one). Whether the
    model then computes what the source computed depends on the rule's init: a rule that starts as the standard
    residual (``delta_attnres`` with ``identity_gate``) converts a ``standard`` run without changing a logit.
    """
    path = Path(source) / WEIGHTS_FILE
    if not path.exists():
        raise ConfigError(f"train.init_from names {source}, which holds no {WEIGHTS_FILE}: train that run with "
                          f"--set train.keep_weights=fp32 first")
    state = {k: v for k, v in torch.load(path, map_location="cpu", weights_only=True)["model"].items()
             if not k.startswith("rule.")}
    own = model.state_dict()
    body = [k for k in own if not k.startswith("rule.")]
    differ = [k for k in body if k not in state or state[k].shape != own[k].shape] + sorted(set(state) - set(own))
    if differ:
        k = differ[0]
        there = tuple(state[k].shape) if k in state else "absent"
        here = tuple(own[k].shape) if k in own else "absent"
        raise ConfigError(f"train.init_from {source} cannot start this run: {len(differ)} tensors differ (e.g. {k}: "
                          f"{there} there, {here} here); the two models need the same width, depth and vocabulary")
    model.load_state_dict({**own, **{k: state[k].to(own[k].dtype) for k in body}})


def weights_bytes(n_params: int, keep_weights: str) -> int:
    dtype = WEIGHT_DTYPES[keep_weights]
    return 0 if dtype is None else n_params * dtype.itemsize


def sweep_peak_disk_bytes(size: str, keep_weights: str = "none", variants=None, seeds=None) -> int:
    """The most disk one ``python -m rrlib sweep -p <size>`` process needs for its checkpoints and weights.

    The sweep runs its grid one run at a time, so this is a bound: the largest run's checkpoint twice (the old
    file and the new one just before the rename) plus the kept weights of every run of the grid. The token
    cache and the small JSON files are not counted; n sweep processes sharing one disk need n times this.
    """
    preset = load_preset(size)
    params = [count_params(resolve_run(size, v, 0).model) for v in (variants or preset.variants)]
    n_runs_per_variant = len(seeds if seeds is not None else preset.seeds)
    kept = sum(weights_bytes(p, keep_weights) for p in params) * n_runs_per_variant
    return 2 * CKPT_BYTES_PER_PARAM * max(params) + kept
