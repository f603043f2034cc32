"""Probing what a trained gate does: record (h, u, r) at every sublayer, summarise per token, probe synthetic updates.

The model always runs its own forward and the gate is always the rule's own ``gate`` method, so what is
recorded is what the model computes.
"""
from __future__ import annotations

import pandas as pd
import torch

from ..model import GPT


def gate_records(model: GPT, idx: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(h, u, r) at every sublayer application of one forward pass of ``model`` on ``idx``.

    The model runs its own forward; the rule's ``review(gate, h, u)``, through which every r is computed (the
    forward commits through one compiled step that never sees the step index), is wrapped for the pass, so
    whatever the gate computes is what is recorded. Only rules with a gate (``review``, ``review_convex``) can be
    probed.
    """
    rule = model.rule
    if not hasattr(rule, "review"):
        raise ValueError(f"the {model.cfg.variant!r} rule has no review gate; probe review or review_convex")
    records = []
    review = rule.review

    def recording_review(gate, h, u):
        r = review(gate, h, u)
        records.append((h.detach(), u.detach(), r.detach()))
        return r

    rule.review = recording_review  # an instance attribute shadows the method for this pass only
    try:
        with torch.no_grad():
            model(idx)
    finally:
        del rule.review
    return records


def gate_activity(model: GPT, idx: torch.Tensor) -> list[torch.Tensor]:
    """r, shaped like the residual stream (B, T, d), at every sublayer application."""
    return [r for _, _, r in gate_records(model, idx)]


def sublayer_names(model: GPT) -> list[str]:
    """attn0, mlp0, attn1, ... for every sublayer application (loops repeat the names)."""
    return [f"{'attn' if i % 2 == 0 else 'mlp'}{model.shape.unique(i) // 2}" for i in range(model.shape.n_steps)]


def gate_table(model: GPT, idx: torch.Tensor) -> pd.DataFrame:
    """One row per (sublayer, token): mean r over channels, ‖u‖/‖h‖ and cos(u, h)."""
    frames = []
    for i, (name, (h, u, r)) in enumerate(zip(sublayer_names(model), gate_records(model, idx))):
        h, u = h.flatten(0, -2), u.flatten(0, -2)
        frames.append(pd.DataFrame({
            "sublayer": name, "index": i, "kind": name.rstrip("0123456789"),
            "r_mean": r.flatten(0, -2).mean(-1).numpy(), "r_std": r.flatten(0, -2).std(-1).numpy(),
            "update_norm": (u.norm(dim=-1) / h.norm(dim=-1)).numpy(),
            "cosine": torch.nn.functional.cosine_similarity(u, h, dim=-1).numpy(),
        }))
    return pd.concat(frames, ignore_index=True)


def probe_gate(model: GPT, i: int, h: torch.Tensor, v: torch.Tensor, cosine, scale) -> torch.Tensor:
    """r of sublayer ``i``'s own gate for synthetic proposals u beside a real state h, shape (..., d).

    u = scale·‖h‖·(c·ĥ + √(1−c²)·ŵ), with c = ``cosine`` and ŵ the unit part of ``v`` orthogonal to h (e.g. the
    update the model really proposed there). ``cosine`` and ``scale`` broadcast against each other.
    """
    h_hat = h / h.norm()
    w = v - (v @ h_hat) * h_hat
    w_hat = w / w.norm()
    c = torch.as_tensor(cosine, dtype=h.dtype)[..., None]
    s = torch.as_tensor(scale, dtype=h.dtype)[..., None]
    u = s * h.norm() * (c * h_hat + torch.sqrt(torch.clamp(1 - c**2, min=0)) * w_hat)
    with torch.no_grad():
        return model.rule.gate(h.expand_as(u), i, u)


def position_grad_norm(model: GPT, x: torch.Tensor, y: torch.Tensor) -> float:
    """‖∂loss/∂W_pos‖ for one batch: the gradient that reaches the bottom of the network.

    Position embeddings, not token embeddings: the token table is tied to the head, so its gradient is
    mostly the head's and says nothing about what flows down through depth.
    """
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    norm = model.wpe.weight.grad.norm().item()
    model.zero_grad(set_to_none=True)
    return norm
