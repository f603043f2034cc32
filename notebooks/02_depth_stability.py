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
# # 2 · Depth: convex against additive
#
# **Question.** The paper reports that the convex form $h' = (1-r)\odot h + r\odot u$ stops training beyond about
# 20 blocks, while the additive form $h' = h + r\odot u$ trains at every depth. Notebook 1 gave the argument: the
# convex form carries the embedding through $\prod(1-r)$, which vanishes with depth. Does the failure show up in
# real models at a CPU width, for the Review gate and for the classic Highway gate alike, and is the gradient that
# reaches the embeddings the reason?
#
# **Method.** The depth ablation keeps one small recipe and changes only the number of blocks (sizes
# `depth<L>`). Every rule is trained at every depth and seed, with the same batches at a seed. We read the
# training curves, the final held-out loss against depth, and, in freshly initialised models, the norm of the
# gradient that reaches the position embeddings.

# %% tags=["parameters"]
depths = None  # blocks per model; None means every depth of the depth preset
variants = ["review", "review_convex", "highway", "highway_convex", "standard"]
seeds = None  # None means the preset's seeds
steps = None  # training steps per run; None means the preset's
out_root = "outputs/runs"  # run folders; finished runs are read, not retrained
grad_windows = 8  # held-out windows for the gradient at initialisation
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
import matplotlib.pyplot as plt
import seaborn as sns

from rrlib import load_preset
from rrlib.views import plots, tables
from rrlib.results import depth
from rrlib.runs import loading
from rrlib.runs.arguments import seed_list, variant_list

plots.use_style()
variants = variant_list(variants)  # -p variants review is one variant, -p seeds 0 one seed
depths, seeds = depth.design(depths, seed_list(seeds) if seeds is not None else None)
ablation = {"depths": depths, "variants": variants, "seeds": seeds, "out_root": out_root}
preset = load_preset(f"{depth.DEPTH_PRESET}{depths[0]}")
print(preset.description)
print(f"depths (blocks): {depths}; variants: {', '.join(variants)}; seeds: {seeds}; "
      f"d_model {preset.model.d_model}, {preset.model.n_heads} heads, context {preset.model.seq_len}, "
      f"{steps or preset.train.steps} steps of {preset.train.batch_size} sequences")

# %% [markdown]
# ## The runs
#
# Each depth is one sweep. Finished runs are read from their result files; only missing ones are trained.

# %%
overrides = {"train": {"steps": steps}} if steps is not None else {}
for L in depths:  # trains only what is missing: the report has trained it before this page runs
    loading.quiet_sweep(f"{depth.DEPTH_PRESET}{L}", variants, seeds, overrides, out_root)
results = depth.depth_runs(**ablation)
tables.reader_table(depth.runs_per_depth(**ablation), "02_runs", figures_dir, full=results,
                    rename={"params_M": "params (M, largest)"})

# %% [markdown]
# ## Training curves
#
# Training loss against training compute (FLOPs), mean over seeds, one panel per depth. A rule that cannot train
# shows as a curve that stops falling early.

# %%
grid = sns.relplot(data=depth.loss_curves(**ablation), x="flops", y="loss", hue="variant", col="blocks",
                   col_wrap=min(4, len(depths)), style="variant", kind="line", errorbar=None,
                   markers=plots.markers(variants), dashes=False, markersize=4, markeredgewidth=0,
                   palette=plots.palette(variants), height=2.8, aspect=1.2, facet_kws={"sharex": False})
grid.set_axis_labels("training FLOPs", "training loss")
grid.set_titles("{col_name} blocks")
grid.figure.suptitle("Training loss against compute, one panel per depth", y=1.02)
plots.show_figure(grid.figure, "02_loss_curves", figures_dir)

# %% [markdown]
# ## Final loss against depth
#
# The held-out loss of every run on the fixed evaluation set (the same windows for every run), mean and SD over
# seeds. A cross marks a run that diverged.

# %%
final = depth.final_loss(**ablation)
fig, ax = plt.subplots(figsize=(7, 4.2))
for variant in variants:
    part = final[final["variant"] == variant]
    ax.errorbar(part["sublayers"], part["fixed_loss_mean"], yerr=part["fixed_loss_sd"].fillna(0),
                marker=plots.marker(variant), capsize=3, color=plots.color(variant),
                ls="--" if variant.endswith("convex") else "-", label=variant)
diverged = results[results["status"] != "finished"]
ax.scatter(diverged["sublayers"], diverged["fixed_loss"], marker="x", color="black", zorder=5,
           label="diverged" if len(diverged) else None)
ax.set(xlabel="sublayers (2 per block)", ylabel="held-out loss (fixed set)", title="Final loss against depth")
plots.legend_outside(ax)
plots.show_figure(fig, "02_final_loss_vs_depth", figures_dir)
mean_loss = depth.mean_final_loss(**ablation)
tables.reader_table(mean_loss, "02_final_loss", figures_dir, formats=dict.fromkeys(variants, "{:.3f}"))

# %% [markdown]
# ## The gradient that reaches the embeddings
#
# At initialisation, before any gate has learned anything, we measure $\Vert \partial \mathcal{L} /
# \partial W_{\mathrm{pos}} \Vert$ on held-out windows: the gradient that arrives at the bottom of the network.
# Position embeddings rather than token embeddings, because the token table is tied to the output head and its
# gradient is mostly the head's.

# %%
grad_table = tables.rounded(depth.embedding_grad(**ablation, grad_windows=grad_windows))
tables.reader_table(grad_table, "02_embedding_grad", figures_dir, formats=dict.fromkeys(variants, "{:.2e}"),
                    digits=tables.SIGNIFICANT)

# %%
fig, ax = plt.subplots(figsize=(7, 4.2))
for variant in variants:
    ax.semilogy(grad_table.index, grad_table[variant], marker=plots.marker(variant), color=plots.color(variant),
                ls="--" if variant.endswith("convex") else "-", label=variant)
ax.set(xlabel="sublayers (2 per block)", ylabel=r"$\|\partial L / \partial W_{pos}\|$ at init",
       title="Gradient reaching the position embeddings at initialisation")
plots.legend_outside(ax)
plots.show_figure(fig, "02_embedding_grad_vs_depth", figures_dir)

# %% [markdown]
# ## Provenance
#
# What produced these results, read from the result files: code commit, device, precision, data.

# %%
tables.reader_table(depth.provenance(**ablation), "02_provenance", figures_dir)

# %% [markdown]
# ## Recap

# %%
deep = mean_loss.index.max()
print(f"At {deep // 2} blocks ({deep} sublayers) the held-out loss is "
      + ", ".join(f"{v} {mean_loss.loc[deep, v]:.3f}" for v in mean_loss.columns) + ".")
for pair in depth.convex_against_additive(**ablation, grad_windows=grad_windows).itertuples():
    print(f"{pair.convex} ends {pair.loss_gap_deep:+.3f} against {pair.additive} at {pair.deep_sublayers // 2} "
          f"blocks, and {pair.loss_gap_shallow:+.3f} at {pair.shallow_sublayers // 2} blocks.")
    print(f"  Its embedding gradient at initialisation is {pair.grad_ratio_shallow:.2g}× the additive form's at "
          f"{grad_table.index.min() // 2} blocks and {pair.grad_ratio_deep:.2g}× at {grad_table.index.max() // 2} "
          "blocks.")
print(f"{len(diverged)} of {len(results)} runs diverged.")
