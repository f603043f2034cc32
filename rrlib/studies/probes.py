"""Probing any trained model, whatever its rule: the scale of what each sublayer reads, and how sharply a
depth-attention rule routes.

The model always runs its own forward; the probes only watch it. ``read_scales`` wraps the model's two step
functions (every sublayer's input passes through one of them) and the final norm's input (what the head reads);
``routing_contrast`` wraps the softmax over depth of rrlib.rules.depth_mixing.attention for one pass, because
the routing weights exist only inside a read and no rule keeps them. ``depth_growth`` reads a probe table back:
how much a scale grows from the first block to the last; ``loop_norms`` reads the residual stream's scale after
each loop of a looped model out of the same table.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import torch

from ..model import GPT
from ..rules.depth_mixing import attention
from .gates import sublayer_names


def _rms(x: torch.Tensor) -> float:
    """Mean over tokens of each token's RMS over channels."""
    return x.float().pow(2).mean(-1).sqrt().mean().item()


def read_scales(model: GPT, idx: torch.Tensor) -> pd.DataFrame:
    """One row per sublayer application, then the head: the RMS of what it reads (``rule.read(state, i)``,
    before its pre-norm; for the rules whose state is h, the residual stream itself) and of the update it
    proposes. The head's row is the input of the final norm (``rule.end(state)``)."""
    reads, updates = [], []
    step_fn, proposal_fn = model.step_fn, model.proposal_fn

    def watched_step(sub, rule, h, params):  # a rule that commits reads h itself
        reads.append(_rms(h))
        updates.append(_rms(sub(h)))
        return step_fn(sub, rule, h, params)

    def watched_proposal(sub, h):
        u = proposal_fn(sub, h)
        reads.append(_rms(h))
        updates.append(_rms(u))
        return u

    head = []
    hook = model.norm_f.register_forward_pre_hook(lambda module, args: head.append(_rms(args[0])))
    model.step_fn, model.proposal_fn = watched_step, watched_proposal
    try:
        with torch.no_grad():
            model(idx)
    finally:
        model.step_fn, model.proposal_fn = step_fn, proposal_fn
        hook.remove()
    names = sublayer_names(model)
    return pd.DataFrame({"sublayer": names + ["head"], "index": range(len(names) + 1),
                         "read_rms": reads + head, "update_rms": updates + [float("nan")]})


@contextlib.contextmanager
def _recorded_routing(records: list, step: list):
    softmax_mix = attention.depth_attention

    def recording(scores, values):
        records.append((step[0], torch.stack(scores, -1).float().softmax(-1)))
        return softmax_mix(scores, values)

    attention.depth_attention = recording
    try:
        yield
    finally:
        attention.depth_attention = softmax_mix


def routing_contrast(model: GPT, idx: torch.Tensor) -> pd.DataFrame:
    """One row per read that routes over depth (every sublayer, and the head for the AttnRes forms): how many
    sources it sees, the mean over tokens of its largest routing weight, and that weight's uniform value 1/S.

    A read with a single source gives it weight 1 without a softmax, so its row says 1. Only the depth-attention
    rules (``attnres``, ``attnres_block``, ``delta_attnres``, ``delta_attnres_block``) route this way.
    """
    rule = model.rule
    if not hasattr(rule, "n_sources"):
        raise ValueError(f"the {model.cfg.variant!r} rule does not route over depth; probe attnres, "
                         "attnres_block, delta_attnres or delta_attnres_block")
    records, step = [], [0]
    read = rule.read

    def watched_read(state, i):
        step[0] = i
        return read(state, i)

    rule.read = watched_read  # an instance attribute shadows the method for this pass only (end() reads too)
    try:
        with _recorded_routing(records, step), torch.no_grad():
            model(idx)
    finally:
        del rule.read
    by_step = {i: w for i, w in records}
    names = sublayer_names(model) + ["head"]
    rows = []
    for i, name in enumerate(names):
        if name == "head" and i not in by_step:
            continue  # Delta AttnRes's head reads h and routes nothing
        weights = by_step.get(i)
        n = weights.shape[-1] if weights is not None else 1
        rows.append({"sublayer": name, "index": i, "n_sources": n,
                     "max_weight": weights.max(-1).values.mean().item() if weights is not None else 1.0,
                     "uniform": 1.0 / n})
    return pd.DataFrame(rows)


def depth_growth(scales: pd.DataFrame, metric: str) -> float:
    """How much ``metric`` grows over depth in one probe (rows of ``read_scales``, one state of one run), in log₂
    units from the first block to the last: the least-squares slope of log₂(metric) on the block index, with a
    level of its own for each kind of sublayer (attention, MLP), times the blocks spanned.

    Why not log₂(last sublayer / first): that divides an MLP's value by an attention's, whose scales differ by up
    to 20× in the same block, and reads two of the 2L sublayers; the fit compares like with like and reads all.
    The head's row is left out (it is no sublayer). NaN with fewer than two blocks or a non-positive value."""
    part = scales[scales["sublayer"] != "head"]
    kinds = part["sublayer"].str.extract(r"^([a-z_]+?)(\d+)$")
    if kinds.isna().any().any() or len(part) < 2:
        return np.nan
    block, kind = kinds[1].astype(int).to_numpy(), kinds[0].to_numpy()
    values = part[metric].to_numpy(dtype=float)
    span = block.max() - block.min()
    if span < 1 or (values <= 0).any():
        return np.nan
    levels = [(kind == k).astype(float) for k in sorted(set(kind))]
    design = np.column_stack([block.astype(float), *levels])
    slope = np.linalg.lstsq(design, np.log2(values), rcond=None)[0][0]
    return float(slope * span)


def loop_norms(scales: pd.DataFrame, n_layers: int) -> pd.DataFrame:
    """The residual stream's RMS after each loop of a looped model (L = ``n_layers`` unique blocks), from one
    ``read_scales`` table of a rule whose state is h: loop 0 is the embedding (what the first sublayer reads), loop
    k < N what the first sublayer of loop k + 1 reads, loop N the head's input (the stream after the last loop)."""
    reads = scales["read_rms"].to_numpy(dtype=float)
    per_loop = 2 * n_layers
    if (len(reads) - 1) % per_loop:
        raise ValueError(f"a probe of {len(reads) - 1} sublayer applications is no whole number of loops of "
                         f"{n_layers} blocks")
    values = list(reads[:-1:per_loop]) + [reads[-1]]
    return pd.DataFrame({"loop": range(len(values)), "stream_rms": values})
