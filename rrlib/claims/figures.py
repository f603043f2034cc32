"""Page 07's figures of its probes: what each sublayer reads over depth, how sharply the depth-attention rules
route, and what training did to the scales over depth against standard's; and of its depth studies, how far below
the unigram level each deep model ends and LayerScale's gap over depth. Each returns a matplotlib figure for
``rrlib.views.plots.show_figure``."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from rrlib.views import plots
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


def depth_reach(trained: dict, layerscale: pd.DataFrame | None):
    """One panel per finished depth study: ``trained`` maps a study's name to its runs' threshold − final loss
    (rrlib.claims.reach_rows.trained_values: arm, blocks, below, status), a diverged run drawn open at its initial
    loss; ``layerscale`` (reach_rows.layerscale_seed_gaps, or None) is standard − layerscale per seed and depth."""
    panels = list(trained.items()) + ([("layerscale_depth", layerscale)] if layerscale is not None else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (name, runs) in zip(axes[0], panels):
        if name == "layerscale_depth":
            ax.scatter(runs["blocks"], runs["gap"], color=plots.color("layerscale"), alpha=0.6, label="a seed")
            mean = runs.groupby("blocks")["gap"].mean()
            ax.plot(mean.index, mean.values, color=plots.color("layerscale"), marker=plots.marker("layerscale"),
                    label="mean")
            ax.set(ylabel="standard − layerscale fixed_loss (nats)", title="LayerScale against standard")
        else:
            drawn = set()
            for index, (arm, part) in enumerate(runs.groupby("arm", sort=False)):
                variant = part["variant"].iloc[0]
                # two arms of one rule (Highway's carry and neutral gates) land on the same losses: each arm gets
                # its own jitter, and the second its own marker, so that neither hides the other
                marker = plots.marker(variant) if variant not in drawn else "X"
                drawn.add(variant)
                jitter = np.exp(np.random.default_rng(index).uniform(-0.04, 0.04, len(part)))
                done = part["status"] == "finished"
                ax.scatter(part["blocks"][done] * jitter[done], part["below"][done], color=plots.color(variant),
                           marker=marker, label=arm)
                ax.scatter(part["blocks"][~done] * jitter[~done], part["below"][~done], facecolors="none",
                           edgecolors=plots.color(variant), marker=marker,
                           label=f"{arm}, diverged" if (~done).any() else None)
            ax.set(ylabel="unigram level − 0.05 − final fixed_loss (nats)", title=f"{name}: trained above 0")
        ax.axhline(0, color="grey", linewidth=0.8)
        depths = sorted(set(runs["blocks"]))
        ax.set(xscale="log", xlabel="blocks", xticks=depths, xticklabels=[str(b) for b in depths])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.legend(fontsize=8)
    fig.suptitle("The depth studies, one point a run")
    return fig
