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


def rule_lr_at(step: int, cfg) -> float:
    """The rule's parameters' rate under ``rule_lr_scale`` = s: warmup to s·lr, then cosine down to the *same*
    floor as the rest, ``min_lr_frac``·lr. That is the Delta AttnRes code's two groups (``train_finetune.py``):
    one absolute ``--lr_min`` for both, so each group's floor ratio is lr_min over its own peak."""
    if cfg.rule_lr_scale == 1:
        return lr_at(step, cfg)
    peak, floor = cfg.lr * cfg.rule_lr_scale, cfg.lr * cfg.min_lr_frac
    if step < cfg.warmup_steps:
        return peak * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def group_lrs(step: int, cfg, optimizer: torch.optim.Optimizer) -> list[float]:
    """Each parameter group's rate at ``step``: the rule's groups (``rule_lr_scale`` ≠ 1 only) by rule_lr_at."""
    base, rule = lr_at(step, cfg), None
    lrs = []
    for group in optimizer.param_groups:
        if group.get("rule"):
            rule = rule_lr_at(step, cfg) if rule is None else rule
        lrs.append(rule if group.get("rule") else base)
    return lrs


def make_optimizer(model: torch.nn.Module, cfg, device: torch.device) -> torch.optim.AdamW:
    """AdamW. ``weight_decay_on="all"`` decays every tensor, as the paper's ``AdamW(model.parameters())``
    (biases, norm gains and gate biases too); ``"matrices"`` decays tensors with dim ≥ 2 only (embeddings
    included), the usual GPT practice. Under ``rule_lr_scale`` ≠ 1 the residual rule's parameters
    (``model.rule``) get groups of their own, marked ``rule``, whose rate group_lrs sets; at 1 the groups are
    the two above, as before the setting existed."""
    every = cfg.weight_decay_on == "all"
    separate = getattr(cfg, "rule_lr_scale", 1.0) != 1 and hasattr(model, "rule")
    rule_ids = {id(p) for p in model.rule.parameters()} if separate else set()
    groups = []
    for rule in ((False, True) if separate else (False,)):
        params = [p for p in model.parameters() if (id(p) in rule_ids) == rule]
        decay = [p for p in params if every or p.dim() >= 2]
        no_decay = [p for p in params if not every and p.dim() < 2]
        marks = {"rule": True} if rule else {}
        groups += [{"params": decay, "weight_decay": cfg.weight_decay, **marks}] + \
            ([{"params": no_decay, "weight_decay": 0.0, **marks}] if no_decay else [])
    return torch.optim.AdamW([g for g in groups if g["params"]] if separate else groups, lr=cfg.lr,
                             betas=tuple(cfg.betas), fused=device.type == "cuda")


def optimizer_step(model, fwd, optimizer, x, y, lr: float, accum: int, autocast, grad_clip: float,
                   distributed: bool = False):
    """One optimizer step over (x, y) in ``accum`` micro-batches; returns (mean loss, grad norm) on the device.
    ``lr`` is one rate for every group, or a list of one per group (group_lrs).

    ``fwd`` is what runs the forward pass (the model, its compiled form, or its DDP wrapper); gradients are
    synchronised only on the last micro-batch.
    """
    rates = lr if isinstance(lr, (list, tuple)) else [lr] * len(optimizer.param_groups)
    for group, rate in zip(optimizer.param_groups, rates, strict=True):
        group["lr"] = rate
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
