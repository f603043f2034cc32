"""Whether a claim is within the CPU's reach: the CPU-hours its cheapest test would take, against a stated budget.

A GPU-only record names what its test needs (``needs``: a preset, the variants and seeds, and for a scaling fit the
budgets); its cost is that many runs of the preset's recipe, in training FLOPs counted by the model code
(``GPT.flops_per_token`` × the recipe's tokens), at the FLOP rate this harness's committed CPU runs reached. A claim
at a scale beyond the largest preset (the paper's 3B–27B, 220M–7.6B) is priced at the largest preset it needs at
least, so its cost is a lower bound. A record that needs hardware (several devices, the paper's accelerators)
names it: no CPU-hours buy it.
"""
from __future__ import annotations

import math

import torch

BUDGET_CPU_HOURS = 50.0  # what one study here may spend; past it a claim is out of reach


def preset_train_flops(preset: str) -> float:
    """Training FLOPs of one run of ``preset``'s recipe (Review's model; its baselines are matched to it)."""
    from rrlib.model import GPT
    from rrlib.runs.presets import resolve_run

    run = resolve_run(preset, "review", 0)
    with torch.device("meta"):
        per_token = GPT(run.model).flops_per_token()
    return float(per_token * run.train.steps * run.train.batch_size * run.model.seq_len)


def cpu_hours(needs: dict, flops_per_second: float) -> float:
    """CPU-hours of the runs ``needs`` names at ``flops_per_second``; NaN where it needs hardware, not hours."""
    if "preset" not in needs or not (flops_per_second > 0):
        return math.nan
    runs = needs.get("variants", 1) * needs.get("seeds", 1) * needs.get("budgets", 1)
    return runs * preset_train_flops(needs["preset"]) / flops_per_second / 3600


def reason(needs: dict, flops_per_second: float, budget: float = BUDGET_CPU_HOURS) -> str:
    """Why a GPU-only claim is out of reach, in one phrase with its cost."""
    if "preset" not in needs:
        return f"needs {needs['hardware']}"
    hours = cpu_hours(needs, flops_per_second)
    runs = needs.get("variants", 1) * needs.get("seeds", 1) * needs.get("budgets", 1)
    if not math.isfinite(hours):
        return f"needs {runs} runs of the {needs['preset']} recipe (no CPU runs here to price them by)"
    return (f"needs {runs} runs of the {needs['preset']} recipe: {hours:,.0f} CPU-hours at this harness's measured "
            f"rate (at least), above the {budget:g}-hour budget")
