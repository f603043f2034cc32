"""Page 07's figures of its probes: what each sublayer reads over depth, how sharply the depth-attention rules
route, and what training did to the scales over depth against standard's. Each returns a matplotlib figure for
``rrlib.report.plots.show_figure``."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from rrlib.report import plots
from rrlib.runs.presets import load_preset

from .mechanisms import learned_growth


def activation(scales: pd.DataFrame, size: str):
    """The RMS of each sublayer's input over depth, at init and trained, mean over seeds, one line per variant."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, state in zip(axes, ("init", "trained")):
        here = scales[(scales["state"] == state) & (scales["sublayer"] != "head")]
        for variant, part in here.groupby("variant", sort=False):
            mean = part.groupby("index")["read_rms"].mean()
            ax.plot(mean.index, mean.values, marker=plots.marker(variant), color=plots.color(variant), label=variant)
        ax.set(yscale="log", xlabel="sublayer (attn, mlp, attn, ...)", ylabel="RMS of what the sublayer reads",
               title=state)
    plots.legend_outside(axes[1], fontsize=8)
    fig.suptitle(f"{size}: the scale of each sublayer's input over depth (mean over {scales['seed'].nunique()} "
                 f"seeds)")
    return fig


def routing(probes: pd.DataFrame, size: str):
    """The largest routing weight of each read, mean over tokens and seeds, init dotted and trained solid."""
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for (variant, state), part in probes.groupby(["variant", "state"], sort=False):
        mean = part.groupby("index")["max_weight"].mean()
        ax.plot(mean.index, mean.values, marker=plots.marker(variant), color=plots.color(variant),
                linestyle="-" if state == "trained" else ":", label=f"{variant} ({state})")
    ax.set(xlabel="read (sublayer index; the last is the head for the AttnRes forms)",
           ylabel="largest routing weight (mean over tokens)", ylim=(0, 1.05),
           title=f"{size}: routing contrast of the depth-attention rules, init (dotted) and trained")
    plots.legend_outside(ax, fontsize=8)
    return fig


def growth(depth_scales: pd.DataFrame, mechanisms: dict, depths):
    """Each rule's learned growth over depth of its paper's metric (``mechanisms``: rule → metric) beside
    standard's, mean over seeds, against the number of blocks."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (v, metric) in zip(axes, mechanisms.items()):
        for variant in ("standard", v):
            means = [learned_growth(depth_scales[depth_scales["depth"] == size], variant, metric).mean()
                     for size in depths]
            ax.plot([load_preset(size).model.n_layers for size in depths], means, marker=plots.marker(variant),
                    color=plots.color(variant), label=variant)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set(xlabel="blocks", ylabel=f"learned growth of {metric} (log₂)", title=f"{v} against standard ({metric})")
        ax.legend(fontsize=8)
    fig.suptitle("What training did to the scales over depth: growth from the first block to the last, trained − "
                 f"init (mean over {depth_scales['seed'].nunique()} seeds)")
    return fig
