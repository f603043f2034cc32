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
# # 3 · The sweep: one size, every variant and seed
#
# **Question.** At this size, on this size's recipe, how does Review compare with the Highway and standard
# residuals, seed by seed?
#
# **Method.** One execution of this notebook is one size (the parameter `size`): every variant at every seed,
# trained through `rrlib.run_sweep`, which reads finished runs from their result files and trains only what
# is missing. Baselines are widened until they have at least Review's parameters, and a seed fixes the batches
# and evaluation windows for every variant, so the comparison is paired by seed. We read the training curves at
# equal compute, each seed's final loss, and the table of results.

# %% tags=["parameters"]
size = "tiny"  # one preset from params/
variants = None  # None means the preset's variants
rules = None  # rule files or modules of your own, as --rules: e.g. "my_rules.py" or ["a.py", "mypkg.rules"]
seeds = None  # None means the preset's seeds
steps = None  # training steps per run; None means the preset's
device = None  # e.g. "cpu" or "cuda"; None means the preset's (auto)
workers = None  # worker processes, one device each, sharing the runs; None means one per visible GPU (1 on a CPU)
precision = None  # fp32, tf32 or bf16; None means the preset's (auto)
settings = {}  # any other setting by section, as --set: e.g. {"model": {"highway_gate_init": "zero"}}
out_root = "outputs/runs"  # run folders; finished runs are read, not retrained
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from rrlib import count_params, load_preset, resolve_run
from rrlib.views import plots, tables
from rrlib.results import sweep as sweep_results
from rrlib.runs import loading
from rrlib.runs.arguments import loaded_rules, seed_list, variant_list
from rrlib.speed.workers import spread_sweep

plots.use_style()
loaded_rules(rules)  # before the variants are read: they may name its rules
preset = load_preset(size)
variants = variant_list(variants, default=preset.variants)  # -p variants review is one variant, -p seeds 0 one seed
seeds = seed_list(seeds, default=preset.seeds)
overrides = {section: dict(values) for section, values in settings.items()}
overrides["train"] = {**overrides.get("train", {}), **{k: v for k, v in {"steps": steps, "device": device,
                                                                          "precision": precision}.items()
                                                       if v is not None}}
print(f"{size}: {preset.description}")

# %% [markdown]
# ## The models
#
# The resolved configuration of each variant at this size: Review's width, and each baseline widened in steps of
# the head count until its parameter count reaches Review's.

# %%
runs = {v: resolve_run(size, v, seeds[0], overrides, out_root) for v in variants}
pd.DataFrame.from_dict({v: {"d_model": r.model.d_model, "blocks": r.model.n_layers, "heads": r.model.n_heads,
                            "parameters (M)": round(count_params(r.model) / 1e6, 3), "steps": r.train.steps,
                            "batch (sequences)": r.train.batch_size, "context": r.model.seq_len}
                        for v, r in runs.items()}, orient="index")

# %% [markdown]
# ## Training
#
# Finished runs are read back; the others train now. With several devices they are shared among worker processes
# (the parameter `workers`: by default one per GPU, one on a CPU), each `rrlib sweep --shard k/n` on its own device.
# A run too large for one GPU is named before any training, with the `torchrun` line that trains it on several.

# %%
table = spread_sweep(size, variants, seeds, overrides, out_root, workers)
table = table[table["variant"].isin(variants) & table["seed"].isin(seeds)].reset_index(drop=True)

# %% [markdown]
# ## Training curves at equal compute
#
# Training loss against training FLOPs (a widened baseline costs more per step), mean over seeds with the
# spread across seeds as a band.

# %%
curves = loading.loss_curves(out_root, size, variants, seeds)
fig, ax = plt.subplots(figsize=(7, 4.2))
sns.lineplot(data=curves, x="flops", y="loss", hue="variant", style="variant", palette=plots.palette(variants),
             markers=plots.markers(variants), dashes=False, markevery=0.1, errorbar=("pi", 100), ax=ax)
ax.set(xlabel="training FLOPs", ylabel="training loss", title=f"{size}: training curves")
plots.legend_outside(ax)
plots.show_figure(fig, f"03_{size}_loss_curves", figures_dir)

# %% [markdown]
# ## Final loss, seed by seed
#
# Held-out loss on the fixed evaluation set (the same windows for every run). Lines join the runs of one seed:
# the paired design shows as lines that move together.

# %%
fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(variants)), 4))
order = {v: k for k, v in enumerate(variants)}
for seed, runs_of_seed in table.groupby("seed"):
    runs_of_seed = runs_of_seed.sort_values("variant", key=lambda s: s.map(order))
    ax.plot(runs_of_seed["variant"].map(order), runs_of_seed["fixed_loss"], color="grey", alpha=0.5, lw=1)
for variant, runs_of_variant in table.groupby("variant"):
    ax.scatter(runs_of_variant["variant"].map(order), runs_of_variant["fixed_loss"], s=60, zorder=3,
               color=plots.color(variant), marker=plots.marker(variant))
ax.set_xticks(range(len(variants)), variants, rotation=35 if len(variants) > 4 else 0,
              ha="right" if len(variants) > 4 else "center")
ax.set(xlabel="", ylabel="held-out loss (fixed set)", title=f"{size}: final loss per seed")
plots.show_figure(fig, f"03_{size}_final_loss", figures_dir)

# %% [markdown]
# ## Results table
#
# One row per run: the paper's columns first (`val_loss` and `ece` by the paper's evaluation protocol), then the
# fixed-set loss and ECE; the linked CSV adds what each run cost (tokens, minutes, device, precision).

# %%
tables.reader_table(table, f"03_{size}_results", figures_dir, index=False,
                    columns=["variant", "seed", "params_M", "val_loss", "ece", "fixed_loss", "fixed_ece", "status"],
                    formats={c: "{:.4f}" for c in ("val_loss", "ece", "fixed_loss", "fixed_ece")},
                    rename={"params_M": "params (M)", "val_loss": "val loss (nats)",
                            "fixed_loss": "fixed-set loss (nats)", "fixed_ece": "fixed-set ECE"})

# %% [markdown]
# ## Provenance
#
# What produced these results, read from the result files: code commit, device, precision, data.

# %%
tables.reader_table(loading.provenance(table), f"03_{size}_provenance", figures_dir)

# %% [markdown]
# ## Recap

# %%
summary = sweep_results.recap(table, variants)
losses = summary.losses
print(f"{size}: {len(table)} runs ({', '.join(f'{v} {n}' for v, n in losses['count'].items())}); "
      f"{int((table['status'] != 'finished').sum())} did not finish.")
scored = losses[losses["count"] > 0]  # a variant whose every run diverged has no held-out loss to compare
print("Mean held-out loss (fixed set): " + (", ".join(
    f"{v} {row['mean']:.4f}" + (f" ± {row['std']:.4f}" if row["count"] > 1 else "")
    for v, row in scored.iterrows()) or "none, as no run finished") + ".")
for _, row in (summary.verdicts if summary.verdicts is not None else pd.DataFrame()).iterrows():
    print(f"Against each baseline (gap = baseline − review, paired by seed where possible): {row['verdict']}.")
