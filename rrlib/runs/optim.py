"""The optimiser step a run trains with, and the benchmark times: AdamW and its weight-decay groups, the
learning-rate schedule, and one step over a batch in micro-batches."""
from __future__ import annotations

import contextlib
import math

import torch


def lr_at(step: int, cfg) -> float:
    """Linear warmup over ``warmup_steps``, then cosine from lr down to ``min_lr_frac``·lr at the last step."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def make_optimizer(model: torch.nn.Module, cfg, device: torch.device) -> torch.optim.AdamW:
    """AdamW. ``weight_decay_on="all"`` decays every tensor, as the paper's ``AdamW(model.parameters())``
    (biases, norm gains and gate biases too); ``"matrices"`` decays tensors with dim ≥ 2 only (embeddings
    included), the usual GPT practice."""
    every = cfg.weight_decay_on == "all"
    decay = [p for p in model.parameters() if every or p.dim() >= 2]
    no_decay = [p for p in model.parameters() if not every and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}] + \
        ([{"params": no_decay, "weight_decay": 0.0}] if no_decay else [])
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), fused=device.type == "cuda")


def optimizer_step(model, fwd, optimizer, x, y, lr: float, accum: int, autocast, grad_clip: float,
                   distributed: bool = False):
    """One optimizer step over (x, y) in ``accum`` micro-batches; returns (mean loss, grad norm) on the device.

    ``fwd`` is what runs the forward pass (the model, its compiled form, or its DDP wrapper); gradients are
    synchronised only on the last micro-batch.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
    micro = x.shape[0] // accum
    step_loss = torch.zeros((), device=x.device)
    for k in range(accum):
        last = k == accum - 1
        with (contextlib.nullcontext() if last or not distributed else fwd.no_sync()), autocast():
            _, loss = fwd(x[k * micro:(k + 1) * micro], y[k * micro:(k + 1) * micro])
        (loss / accum).backward()
        step_loss += loss.detach() / accum
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return step_loss, grad_norm
