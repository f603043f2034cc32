# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% tags=["colab"]
# On Colab: clone rrlib and install it beside Colab's own torch; anywhere else rrlib is installed already.
# (Made from pyproject.toml's [project.urls] Repository by rrlib.report.colab: edit that, not this cell.)
import sys

REPO_URL = "https://github.com/rrlib-project/rrlib"
if "google.colab" in sys.modules:
    import os
    import re
    import subprocess
    import tomllib

    class SetupError(Exception):
        def _render_traceback_(self):  # IPython shows the sentence alone, without a traceback
            return [str(self)]

    def why(done):  # git's or pip's own line saying what failed
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return next((line for line in lines if line.startswith(("fatal: ", "ERROR: "))), lines[-1]).split(": ", 1)[-1]

    if not os.path.isdir("rrlib"):
        done = subprocess.run(["git", "clone", "-q", "--depth", "1", REPO_URL, "rrlib"], capture_output=True, text=True)
        if done.returncode:
            raise SetupError(f"rrlib could not be fetched from {REPO_URL} ({why(done)}); check that the "
                             f"repository is reachable from here, or upload a copy of it as the folder rrlib/")
    with open("rrlib/pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    needs = [d for d in project["dependencies"] + project["optional-dependencies"]["report"]
             if not re.match(r"torch\b", d)]
    for args in (["--no-deps", "-e", "rrlib"], needs):  # rrlib without torch, then what it needs besides
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        if done.returncode:
            raise SetupError(f"pip could not install {' '.join(args)} ({why(done)})")
    os.chdir("rrlib")
    sys.path.insert(0, os.getcwd())

# %% [markdown]
# # 6 · Scale or undertraining? Model size against tokens per parameter
#
# **Question.** The paper trains every size for 6,000–8,000 steps of 64 × 256 tokens, so its tokens per
# parameter fall from 2.2 (60M) to 0.10 (1B) exactly where Review's gain appears. Our CPU-scale study has the same
# confound (600 steps give micro 4.2 tokens per parameter, midi 0.29). Does Review's gap follow the model's
# **size**, or how **undertrained** it is?
#
# **Method.** A grid that separates the two: two widths (micro, d 64, and mini, d 128, both 4 blocks, byte-level
# TinyStories, the CPU-scale study's recipe, data and held-out set) each trained for 100, 300 and 1,200 steps
# of 16 × 128 tokens (warmup 10 % of each run, as the study's 60 of 600). Mini at 1,200 steps sees about as many
# tokens per parameter as micro at 300, and micro at 100 about as many as mini at 300, so size and tokens per
# parameter vary independently. Review, Highway and standard, parameter-matched, 3 seeds, paired by seed
# (`rrlib study run size_tokens` runs the grid; this page only reads its results). For each cell (a width at a
# budget) we take Review's paired gap against each baseline (`baseline − review`, positive favours Review) with
# its 95 % interval, then regress the per-cell gap on log10 size and log10 tokens per parameter, one point per
# cell. The paper's 42 runs go on the same axes; its design cannot separate the two factors.

# %% tags=["parameters"]
out_root = "outputs/runs"  # run folders; finished runs are read, never retrained here
grid_sizes = ["micro_steps100", "micro_steps300", "micro_steps1200",
              "mini_steps100", "mini_steps300", "mini_steps1200"]  # the size × tokens grid (rrlib study run size_tokens)
paper_csv = "outputs/reference/scaling_v8.csv"  # the paper's runs (the committed copy), relative to the project root
variants = ["review", "highway", "standard"]
metric = "fixed_loss"  # the primary metric (notebook 04 says why): our fixed held-out set, identical for every run
secondary_metric = "val_loss"  # the paper's evaluation, shown beside every test
alpha = 0.05
figures_dir = None  # the report's figure folder; None shows figures without writing them


# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from rrlib import load_preset
from rrlib.views import plots, tables
from rrlib.results import size_tokens
from rrlib.runs.arguments import variant_list

plots.use_style()
variants = variant_list(variants)  # -p variants review is one variant
study = {"grid_sizes": grid_sizes, "variants": variants, "out_root": out_root}

# %% [markdown]
# ## The grid

# %%
grid = size_tokens.grid_runs(**study)
missing = [s for s in grid_sizes if s not in set(grid["size"])]
if missing:
    print(f"no results yet for {', '.join(missing)}: `rrlib study run size_tokens` trains them")
width = {s: load_preset(s).model.d_model for s in grid_sizes}
cells = size_tokens.grid_cells(**study, metric=metric)
tables.reader_table(cells, "06_grid", figures_dir, formats={"tokens_per_param": "{:.2f}", "params_M": "{:.2f}",
                                                            "passes": "{:.2f}"},
                    rename={"params_M": "params (M, Review)", "tokens_per_param": "tokens / param",
                            "passes": "passes over the data", **{v: f"{v} loss" for v in variants}})

# %% [markdown]
# ## Review's paired gap in every cell
#
# Each point is one cell: the mean over seeds of `baseline − review` on the fixed held-out set, with its 95 %
# paired t-interval. Colour is the width; the grey squares are the paper's five sizes (the same paired gap on
# its own `val_loss`), placed at their own tokens per parameter (steps × 64 × 256 / Review's parameters).

# %%
comparison = size_tokens.paired_gaps(**study, metric=metric, secondary_metric=secondary_metric, alpha=alpha)
paper = size_tokens.paper_gaps(paper_csv, variants, alpha)

width_colors = {"micro": "#6baed6", "mini": "#08519c"}
baselines = [v for v in variants if v != "review"]
fig, axes = plt.subplots(1, len(baselines), figsize=(5.2 * len(baselines), 4.0), sharey=False)
for ax, baseline in zip(np.atleast_1d(axes), baselines):
    here = comparison[comparison["baseline"] == baseline].set_index("size")
    for w, part in here.groupby("width"):
        part = part.sort_values("tokens_per_param")  # the line joins a width's budgets in order
        gap = part["paired_gap"]
        ax.errorbar(part["tokens_per_param"], gap, yerr=[gap - part["ci_low"], part["ci_high"] - gap], fmt="o-",
                    color=width_colors.get(w, "#444"), capsize=3, label=f"{w} (d {width[part.index[0]]})")
    if paper is not None:
        theirs = paper.gaps[paper.gaps["baseline"] == baseline]
        gap = theirs["paired_gap"]
        ax.errorbar(theirs["tokens_per_param"], gap, yerr=[gap - theirs["ci_low"], theirs["ci_high"] - gap],
                    fmt="s", color="#7f7f7f", capsize=3, label="the paper (60M–1B)")
        for size, row in theirs.iterrows():
            ax.annotate(size, (row["tokens_per_param"], gap[size]), textcoords="offset points", xytext=(4, 4),
                        fontsize=8, color="#555")
    ax.axhline(0, color="black", lw=0.8)
    plots.log_axis(ax, "x")
    ax.set_xlabel("tokens per parameter")
    ax.set_ylabel(f"{baseline} − review (nats)")
    ax.set_title(f"Review against {baseline}")
plots.legend_outside(np.atleast_1d(axes)[-1])
fig.suptitle("Review's paired gap against tokens per parameter, by model size (95 % intervals)")
plots.show_figure(fig, "06_gap_vs_tokens_per_param", figures_dir)

# %%
shown = comparison[["size", "baseline", "tokens_per_param", "paired_gap", "ci_low", "ci_high", "paired_p", "p_holm",
                    f"p_{secondary_metric}", f"p_holm_{secondary_metric}", "metrics_note"]]
tables.reader_table(shown, "06_paired_gaps", figures_dir, index=False, full=comparison,
                    formats={"tokens_per_param": "{:.2f}", "paired_gap": "{:+.4f}", "ci_low": "{:+.4f}",
                             "ci_high": "{:+.4f}"},
                    rename={"tokens_per_param": "tokens / param", "paired_gap": "gap (nats)",
                            "ci_low": "95 % low", "ci_high": "95 % high", "paired_p": "paired p",
                            "p_holm": "Holm p", f"p_{secondary_metric}": f"paired p ({secondary_metric})",
                            f"p_holm_{secondary_metric}": f"Holm p ({secondary_metric})", "metrics_note": "metrics"})

# %% [markdown]
# ## Which factor does the gap follow?
#
# Per baseline, an ordinary least-squares fit over the cells: `gap = a + b_size · log10(params) + b_tpp ·
# log10(tokens per parameter)`. A coefficient is in nats per decade; its interval is the 95 % t-interval on
# (cells − 3) degrees of freedom, so with six cells it is wide by construction. On the paper's five sizes the
# two logs move together (their correlation is printed below), so no fit there can tell them apart: that is
# the confound this grid exists to break.

# %%
factors = size_tokens.gap_factors(**study, metrics=(metric, secondary_metric), alpha=alpha)
display(tables.reader_table(factors, "06_gap_factors", figures_dir, index=False,
                            columns=["metric", "baseline", "term", "coef", "ci_low", "ci_high", "p", "n_cells"],
                            formats={"coef": "{:+.4f}", "ci_low": "{:+.4f}", "ci_high": "{:+.4f}"},
                            rename={"coef": "coefficient (nats/decade)", "ci_low": "95 % low", "ci_high": "95 % high",
                                    "n_cells": "cells"}))
if paper is not None:
    print(f"the paper's sizes: correlation of log size and log tokens/param = {paper.log_size_tokens_correlation:.3f}")

# %% [markdown]
# ## Recap

# %%
print(f"{len(grid)} runs in {len(cells)} cells ({int(cells['seeds'].min())}–{int(cells['seeds'].max())} seeds each); "
      f"tokens per parameter {cells['tokens_per_param'].min():.2f}–{cells['tokens_per_param'].max():.2f}.")
by_metric = {name: factors[factors["metric"] == name] for name in (metric, secondary_metric)}
for name, fit in by_metric.items():
    for baseline in baselines:
        print(f"{name}, " + size_tokens.factor_sentence(fit, baseline))
for name, fit in by_metric.items():
    print(f"With {name}: " + size_tokens.undertraining_sentence(fit))
for name, column in ((metric, "significant"), (secondary_metric, f"significant_{secondary_metric}")):
    significant = comparison[comparison[column].fillna(False).astype(bool)]
    print(f"cells where Review's gap survives Holm over all {len(comparison)} comparisons, with {name}: "
          + (", ".join(f"{r.size} vs {r.baseline} ({r.paired_gap:+.4f})" for r in significant.itertuples())
             or "none"))
