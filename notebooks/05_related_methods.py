# ---
# jupyter:
#   jupytext:
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
# On Colab, fetch and install the project first; anywhere else rrlib is already installed.
import sys

REPO_URL = "https://github.com/OWNER/rrlib"
if "google.colab" in sys.modules:
    import os
    import subprocess

    if not os.path.isdir("rrlib"):
        subprocess.run(["git", "clone", "--depth", "1", REPO_URL, "rrlib"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "rrlib"], check=True)
    os.chdir("rrlib")
    sys.path.insert(0, os.getcwd())

# %% [markdown]
# # 5 · The family in one harness
#
# **Question.** Review Residuals is one of several 2024–2026 proposals to replace the fixed `h + u` residual.
# On the same data, tokens, seeds and parameter budget, how do they compare — with the standard residual, with
# Review, and with each other? And for looped (weight-tied) models: does scaling the residual by λ/(N·√L)
# make the best learning rate independent of the number of loops N, as arXiv:2606.18524 claims?
#
# **Method.** Every method is a rule behind the same stream protocol (`rrlib.residuals`, `rrlib.cross_depth`):
# the model code is identical for all of them. Methods that add fewer parameters than Review are widened until
# they reach Review's count, as the paper does for its baselines. Each seed fixes the batches and the
# evaluation windows for every method, so differences are tested paired by seed (Holm-corrected over all
# methods). The looped experiment trains L = 2 unique blocks applied N ∈ {1, 2, 4, 8} times at several learning
# rates, with the residual scaled by λ/(N·√L) (`scaled`), by 1/√N (`scaled_loops`), or gated by Review.

# %% tags=["parameters"]
size = "family"  # the preset of the comparison (params/); "family_mini" for mini's width, on a GPU
variants = None  # None means the preset's: every method
seeds = None  # None means the preset's
steps = None  # training steps per run; None means the preset's
out_root = "outputs/runs"  # run folders; finished runs are read, not retrained
loop_size = "looped"  # the looped preset: sizes looped<N>
loops = [1, 2, 4, 8]  # N
lrs = [0.001, 0.003, 0.01, 0.03]  # the learning-rate sweep of the looped experiment (scripts/family_study.sh)
loop_variants = ["scaled", "scaled_loops", "review"]
loop_seeds = None  # None means the preset's
loop_steps = None  # None means the preset's
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from rrlib import plots, stats
from rrlib.config import load_preset, resolve_run
from rrlib.data import unigram_entropy
from rrlib.model import GPT
from rrlib.residuals import RULES
from rrlib.sweep import run_sweep
from rrlib.train import load_run_data

plots.use_style()
preset = load_preset(size)
variants = list(variants) if variants is not None else preset.variants
seeds = list(seeds) if seeds is not None else preset.seeds
overrides = {"train": {"steps": steps}} if steps else {}
print(f"{size}: {preset.description}")

# %% [markdown]
# ## The methods
#
# One line per rule (the first line of its docstring), and what the harness counts from each model: parameters
# after matching, the rule's own parameters, and training FLOPs per token (6 × matmul weights + attention).

# %%
def describe(variant):
    run = resolve_run(size, variant, seeds[0], overrides, out_root)
    model = GPT(run.model)
    return {"method": RULES[variant].__doc__.strip().splitlines()[0], "d_model": run.model.d_model,
            "parameters (M)": model.n_params() / 1e6, "rule parameters": sum(p.numel() for p in model.rule.parameters()),
            "FLOPs/token (M)": model.flops_per_token() / 1e6}


methods = pd.DataFrame({v: describe(v) for v in variants}).T
methods.style.format({"parameters (M)": "{:.3f}", "FLOPs/token (M)": "{:.2f}"})

# %% [markdown]
# ## Training every method
#
# Finished runs are read back from their result files; missing ones train now.

# %%
table = run_sweep(size, variants, seeds, overrides, out_root)
table = table[table["variant"].isin(variants) & table["seed"].isin(seeds)].reset_index(drop=True)

# %% [markdown]
# ## One table
#
# Held-out loss on the fixed evaluation set (mean ± SD over seeds), and against the standard residual the
# paired gap `standard − method` (positive: the method is better), its paired p-value and the Holm-corrected
# one over all methods; then parameters, FLOPs per token, measured tokens/s and peak memory of the runs.

# %%
summary = table.groupby("variant").agg(
    loss=("fixed_loss", "mean"), sd=("fixed_loss", "std"), seeds=("seed", "count"),
    params_M=("params_M", "first"), flops_per_token=("flops_per_token", "first"),
    tokens_per_s=("tokens_per_s", "mean"), peak_memory_MB=("peak_memory_MB", "mean"), device=("device", "first"),
).loc[[v for v in variants if v in set(table["variant"])]]
gaps = {v: stats.compare(table[table["variant"].isin(["standard", v])], metric="fixed_loss", reference=v)
        for v in summary.index if v != "standard"}
summary["gap vs standard"] = [gaps[v]["gap"].iloc[0] if v in gaps else np.nan for v in summary.index]
summary["p (paired)"] = [gaps[v]["p"].iloc[0] if v in gaps else np.nan for v in summary.index]
family_p = [summary.loc[v, "p (paired)"] for v in gaps]
summary.loc[list(gaps), "p (Holm)"] = stats.holm(np.array(family_p, dtype=float))
summary["tokens/s vs standard"] = summary["tokens_per_s"] / summary.loc["standard", "tokens_per_s"]
summary.style.format(precision=4, na_rep="–")

# %%
fig, ax = plt.subplots(figsize=(8, 4))
order = list(summary.sort_values("loss").index)
sns.pointplot(data=table, x="variant", y="fixed_loss", order=order, errorbar="sd", linestyle="none",
              color="black", ax=ax)
sns.stripplot(data=table, x="variant", y="fixed_loss", order=order, hue="variant",
              palette={v: plots.color(v) for v in order}, size=6, jitter=0.1, legend=False, ax=ax)
ax.set(xlabel="", ylabel="held-out loss (fixed set)", title=f"{size}: every method, {len(seeds)} seeds")
ax.tick_params(axis="x", rotation=30)
plots.save_figure(fig, "05_family_loss", figures_dir)
plt.show()

# %% [markdown]
# ## Looped models: does λ/(N·√L) transfer the learning rate across N?
#
# For each residual rule and each loop count N, the final held-out loss (mean over seeds) over the
# learning-rate sweep. If a scaling transfers the learning rate, the minimum sits at the same learning rate for
# every N. The dashed line is the unigram entropy of the training tokens: a run that ends there stalled.

# %%
def looped_root(lr):
    """One folder of runs per learning rate, beside the main run folders (a run folder does not name its lr)."""
    return str(Path(out_root).parent / f"looped-lr{lr:g}")


loop_overrides = {"train": {"steps": loop_steps}} if loop_steps else {}
loop_rows = []
for lr in lrs:
    for n in loops:
        result = run_sweep(f"{loop_size}{n}", loop_variants, loop_seeds,
                           {"train": {**loop_overrides.get("train", {}), "lr": lr}}, looped_root(lr))
        loop_rows.append(result.assign(lr=lr, loops=n))
looped = pd.concat(loop_rows, ignore_index=True)
looped = looped[looped["variant"].isin(loop_variants)]
curves = looped.groupby(["variant", "loops", "lr"], as_index=False)["fixed_loss"].mean()

# A run that ends at the unigram entropy of its training tokens has learned only byte frequencies: it stalled
# (reached that level early and never learned from context), a different failure from a merely worse loss.
loop_run = resolve_run(f"{loop_size}{loops[0]}", loop_variants[0], 0, {}, looped_root(lrs[0]))
floor = unigram_entropy(load_run_data(loop_run).train)
looped["stalled"] = (looped["fixed_loss"] - floor).abs() < 0.05
print(f"unigram entropy of the training tokens: {floor:.4f} nats; runs that ended within 0.05 nats of it "
      f"(stalled): {int(looped['stalled'].sum())} of {len(looped)}; diverged (no final loss): "
      f"{int(looped['fixed_loss'].isna().sum())}")
looped.groupby(["variant", "lr"])["stalled"].sum().unstack("lr").loc[loop_variants]

# %%
fig, axes = plt.subplots(1, len(loop_variants), figsize=(4.2 * len(loop_variants), 3.6), sharey=True)
for ax, variant in zip(np.atleast_1d(axes), loop_variants):
    sns.lineplot(data=curves[curves["variant"] == variant], x="lr", y="fixed_loss", hue="loops", marker="o",
                 palette="viridis", ax=ax)
    ax.axhline(floor, color="grey", linestyle="--", linewidth=1, label="unigram entropy")
    ax.set(xscale="log", xlabel="learning rate", ylabel="held-out loss (fixed set)", title=variant)
plots.save_figure(fig, "05_looped_lr_transfer", figures_dir)
plt.show()

# %%
finite = curves.dropna(subset=["fixed_loss"])
best = finite.loc[finite.groupby(["variant", "loops"])["fixed_loss"].idxmin()]
best_lr = best.pivot(index="variant", columns="loops", values="lr").loc[loop_variants]
best_lr

# %% [markdown]
# ## Provenance
#
# What produced these results, read from the result files: code commit, device, precision, data.

# %%
plots.provenance(table)

# %% [markdown]
# ## Recap

# %%
ranked = summary.sort_values("loss")
print(f"{size}, {len(seeds)} seeds, {int(summary['seeds'].sum())} runs on {summary['device'].iloc[0]}. "
      f"Lowest held-out loss: {ranked.index[0]} ({ranked['loss'].iloc[0]:.4f}); highest: {ranked.index[-1]} "
      f"({ranked['loss'].iloc[-1]:.4f}); standard {summary.loc['standard', 'loss']:.4f}.")
better = [v for v in gaps if summary.loc[v, "gap vs standard"] > 0 and summary.loc[v, "p (Holm)"] < 0.05]
worse = [v for v in gaps if summary.loc[v, "gap vs standard"] < 0 and summary.loc[v, "p (Holm)"] < 0.05]
print("Significantly better than standard after Holm: " + (", ".join(better) or "none") +
      "; significantly worse: " + (", ".join(worse) or "none") + ".")
slowest = summary["tokens/s vs standard"].idxmin()
print(f"Cost: the slowest rule here is {slowest} at {summary.loc[slowest, 'tokens/s vs standard']:.2f}× "
      "standard's tokens/s.")
stalled = looped.groupby("variant")["stalled"].sum()
print("Looped runs that stalled at the unigram level: "
      + ", ".join(f"{v} {int(stalled[v])} of {int((looped['variant'] == v).sum())}" for v in loop_variants) + ".")
for variant, row in best_lr.iterrows():
    spread = row.max() / row.min()
    print(f"{variant}: best learning rate per N {({n: float(lr) for n, lr in row.items()})} — "
          + ("the same for every N." if spread == 1 else f"moves by a factor of {spread:.3g} across N."))
