"""Held-out evaluation: mean next-token loss and expected calibration error (ECE).

ECE follows the paper: 15 equal-width bins of top-1 confidence; ECE = Σ_b (n_b/N)·|acc_b − conf_b|.
Counts are accumulated over all tokens of all windows before the ratio is taken, so the result does not
depend on how the windows are batched.
"""
from __future__ import annotations

from typing import Iterable

import torch

ECE_BINS = 15


@torch.no_grad()
def evaluate(model, batches: Iterable, device: torch.device, autocast) -> dict:
    """Loss and ECE of ``model`` over (x, y) batches; ``autocast`` is a context-manager factory."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    count = torch.zeros(ECE_BINS, dtype=torch.float64, device=device)
    conf_sum = torch.zeros_like(count)
    correct_sum = torch.zeros_like(count)
    n_tokens = 0
    for x, y in batches:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with autocast():
            logits, _ = model(x)
        logp = torch.log_softmax(logits.float(), dim=-1)
        loss_sum += -logp.gather(-1, y.unsqueeze(-1)).sum(dtype=torch.float64)
        conf, pred = logp.max(dim=-1)
        conf = conf.exp().flatten()
        # a NaN confidence (a diverged model) has no bin: it is counted in the first, and the loss and ECE it
        # makes NaN mark the run diverged (rrlib.runs.train), instead of a negative index failing bincount
        bins = (conf * ECE_BINS).nan_to_num(0.0).long().clamp_(min=0, max=ECE_BINS - 1)
        count += torch.bincount(bins, minlength=ECE_BINS).double()
        conf_sum += torch.bincount(bins, weights=conf.double(), minlength=ECE_BINS)
        correct_sum += torch.bincount(bins, weights=(pred.flatten() == y.flatten()).double(),
                                      minlength=ECE_BINS)
        n_tokens += y.numel()
    model.train(was_training)
    if n_tokens == 0:
        raise ValueError("evaluation got no windows: the held-out split is shorter than one window")
    ece = ((correct_sum - conf_sum).abs().sum() / n_tokens).item()
    return {"loss": (loss_sum / n_tokens).item(), "ece": ece, "tokens": n_tokens}
