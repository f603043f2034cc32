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
# Review, and with each other? And for looped (weight-tied) models: does scaling the residual by
# ε = λ/(N·√(L/12)) make the best learning rate independent of the number of loops N, as arXiv:2606.18524
# claims?
#
# **Method.** Every method is a rule behind the same stream protocol (`rrlib.rules`):
# the model code is identical for all of them. Methods that add fewer parameters than Review are widened until
# they reach Review's count, as the paper does for its baselines. Each seed fixes the batches and the
# evaluation windows for every method, so differences are tested paired by seed (Holm-corrected over all
# methods). The looped experiment trains L = 2 unique blocks applied N ∈ {1, 2, 4, 8} times at eight learning
# rates in steps of 2×, with each sublayer's update scaled by ε = λ/(N·√(L/12)) (`scaled`, the paper's
# factored rule, λ = 1, its reference depth 12), by λ/(√N·√(L/12)) (`scaled_loops`, the 1/√N rule it is
# tested against), or gated by Review. As in that paper, ε owns the depth scaling: under `scaled` and
# `scaled_loops` the output projections start at N(0, 0.02) rather than also shrinking by 1/√(2·L·N); Review
# keeps GPT-2's shrink. Not followed: the paper's per-group learning rates (its looped stack at η·(L/12)^(−1/2)),
# one constant factor at our fixed L, which shifts every curve alike and so cannot move an optimum with N.
# The results of the first parameterisation (ε = λ/(N·√L) on top of the shrunk init, a 3×-step grid) are
# in the project's history (commit ffc6b50), not here.

# %% tags=["parameters"]
size = "family"  # the preset of the comparison (params/)
wide_size = "family_mini"  # the same comparison at mini's width, read from finished runs; None skips it
bench_file = "outputs/bench/cpu-family.json"  # `python -m rrlib bench` at both widths: each rule's speed and memory
variants = None  # None means the preset's: every method
seeds = None  # None means the preset's
steps = None  # training steps per run; None means the preset's
out_root = "outputs/runs"  # run folders; finished runs are read, not retrained
loop_size = "looped"  # the looped preset: sizes looped<N>
loops = [1, 2, 4, 8]  # N
lrs = [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064]  # the looped learning-rate sweep, steps of 2x (scripts/family_study.sh)
loop_variants = ["scaled", "scaled_loops", "review"]
loop_seeds = None  # None means the preset's
loop_steps = None  # None means the preset's
loop_boot = 2000  # bootstrap resamples of the seeds for the learning-rate optima
train_looped = False  # train missing looped runs here (the quick build's); else only finished ones are read
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from rrlib import GPT, RULES, load_preset, resolve_run, results_table
from rrlib.report import loading, plots, stats, tables
from rrlib.runs.data import unigram_entropy
from rrlib.runs.train import load_run_data

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
    first_line = RULES[variant].__doc__.strip().splitlines()[0]
    return {"method": re.sub(r"\*(\w[^*]*)\*", r"\1", first_line), "d_model": run.model.d_model,  # RST emphasis out
            "parameters (M)": model.n_params() / 1e6, "rule parameters": sum(p.numel() for p in model.rule.parameters()),
            "FLOPs/token (M)": model.flops_per_token() / 1e6}


methods = pd.DataFrame({v: describe(v) for v in variants}).T
tables.reader_table(methods, "05_methods", figures_dir,
                    formats={"parameters (M)": "{:.3f}", "FLOPs/token (M)": "{:.2f}"})

# %% [markdown]
# ## Training every method
#
# Finished runs are read back from their result files; missing ones train now.

# %%
table = loading.quiet_sweep(size, variants, seeds, overrides, out_root)
table = table[table["variant"].isin(variants) & table["seed"].isin(seeds)].reset_index(drop=True)

# %% [markdown]
# ## One table
#
# Held-out loss on the fixed evaluation set (mean ± SD over seeds), and against the standard residual the
# paired gap `standard − method` (positive: the method is better), its paired p-value and the Holm-corrected
# one over all methods; then parameters, FLOPs per token, measured tokens/s and peak memory of the runs.

# %%
def family_summary(table, variants):
    """Per method: loss (mean, SD over seeds), the paired gap against standard with Holm over the methods, and
    what the runs recorded: parameters, FLOPs per token, tokens/s, peak memory."""
    summary = table.groupby("variant").agg(
        loss=("fixed_loss", "mean"), sd=("fixed_loss", "std"), seeds=("seed", "count"),
        params_M=("params_M", "first"), flops_per_token=("flops_per_token", "first"),
        tokens_per_s=("tokens_per_s", "mean"), peak_memory_MB=("peak_memory_MB", "mean"),
        device=("device", "first"),
    ).loc[[v for v in variants if v in set(table["variant"])]]
    gaps = {v: stats.compare(table[table["variant"].isin(["standard", v])], metric="fixed_loss", reference=v)
            for v in summary.index if v != "standard"}
    summary["gap vs standard"] = [gaps[v]["gap"].iloc[0] if v in gaps else np.nan for v in summary.index]
    summary["p (paired)"] = [gaps[v]["p"].iloc[0] if v in gaps else np.nan for v in summary.index]
    summary.loc[list(gaps), "p (Holm)"] = stats.holm(np.array([summary.loc[v, "p (paired)"] for v in gaps],
                                                              dtype=float))
    summary["tokens/s vs standard"] = summary["tokens_per_s"] / summary.loc["standard", "tokens_per_s"]
    summary["memory vs standard"] = summary["peak_memory_MB"] / summary.loc["standard", "peak_memory_MB"]
    return summary


def bench_ratios(path, size):
    """tokens/s and peak memory relative to standard's, per rule at ``size``, from a benchmark file (eager,
    default options); None when the file or the size is missing."""
    if not path.exists():
        return None
    rows = pd.DataFrame(json.loads(path.read_text())["results"])
    rows = rows[(rows["size"] == size) & ~rows["compile"] & (rows["rule_options"].map(len) == 0)]
    if "standard" not in set(rows["variant"]):
        return None
    rows = rows.set_index("variant")
    return pd.DataFrame({"tokens/s vs standard": rows["tokens_per_s_vs_standard"],
                         "memory vs standard": rows["peak_memory_bytes"] / rows.loc["standard", "peak_memory_bytes"]})


def show_summary(summary, name):
    display(tables.reader_table(
        summary.assign(loss_sd=[f"{m:.4f}" + ("" if np.isnan(s) else f" ± {s:.4f}")  # no SD from one seed
                                for m, s in zip(summary["loss"], summary["sd"])]),
        name, figures_dir, full=summary,
        columns=["params_M", "flops_per_token", "loss_sd", "gap vs standard", "p (paired)", "p (Holm)",
                 "tokens/s vs standard", "memory vs standard"],
        formats={"params_M": "{:.3f}", "flops_per_token": lambda x: f"{x / 1e6:.2f}",
                 "gap vs standard": "{:+.4f}", "tokens/s vs standard": "{:.2f}", "memory vs standard": "{:.2f}"},
        rename={"params_M": "params (M)", "flops_per_token": "MFLOPs / token", "loss_sd": "loss (nats, mean ± SD)",
                "gap vs standard": "gap vs standard (nats)", "tokens/s vs standard": "speed vs standard (runs)",
                "memory vs standard": "peak memory vs standard (runs)"}))


summary = family_summary(table, variants)
show_summary(summary, f"05_{size}_summary")

# %%
fig, ax = plt.subplots(figsize=(8, 4))
order = list(summary.sort_values("loss").index)
sns.pointplot(data=table, x="variant", y="fixed_loss", order=order, errorbar="sd", linestyle="none",
              color="black", ax=ax)
for variant, runs_of_variant in table.groupby("variant"):
    ax.scatter(runs_of_variant["variant"].map(order.index), runs_of_variant["fixed_loss"], s=36, zorder=3,
               color=plots.color(variant), marker=plots.marker(variant))
ax.set(xlabel="", ylabel="held-out loss (fixed set)", title=f"{size}: every method, {len(seeds)} seeds")
plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
plots.show_figure(fig, "05_family_loss", figures_dir)

# %% [markdown]
# ## At mini's width
#
# The same methods, seeds and recipe at `mini`'s width (d = 128 for Review, 600 steps; preset `family_mini`),
# read from finished runs (`SIZE=family_mini LRS= bash scripts/family_study.sh` trains them). Side by side with
# the comparison above: does a method's gap against standard hold, grow or vanish when the model is wider and
# trained longer? In the side-by-side table, speed and memory relative to standard's at the same width come
# from the benchmark (`python -m rrlib bench --size family --size family_mini ...`, the README's command) where
# it measured that size, and from the runs otherwise.

# %%
wide = None
if wide_size is not None:
    wide_table = results_table(out_root, wide_size)
    wide_table = wide_table[wide_table["variant"].isin(variants)]
    if len(wide_table) and "standard" in set(wide_table["variant"]):
        wide = family_summary(wide_table, variants)
        show_summary(wide, f"05_{wide_size}_summary")
    else:
        print(f"No finished {wide_size} runs under {out_root}; `SIZE={wide_size} LRS= bash scripts/family_study.sh` "
              "trains them.")

# %%
if wide is not None:
    # speed and memory from the benchmark where it measured this size: every rule in the same interleaved rounds
    # at one thread. The runs' own tokens/s (the tables above) come from different days, loads and code
    # versions (the cross-depth rules got faster since the family runs), so they are no comparison of speed.
    sides = {}
    for name, frame in ((size, summary), (wide_size, wide)):
        sides[name], measured = frame.copy(), bench_ratios(Path(bench_file), name)
        if measured is not None:
            sides[name][["tokens/s vs standard", "memory vs standard"]] = measured.reindex(frame.index).to_numpy()
        print(f"{name}: speed and memory from " + (bench_file if measured is not None else "its runs"))
    measures = {"gap vs standard": "{:+.4f}", "p (Holm)": "{:.3f}", "tokens/s vs standard": "{:.2f}",
                "memory vs standard": "{:.2f}"}
    both = pd.DataFrame({f"{name}: {column}": frame[column] for column in measures
                         for name, frame in sides.items()})
    display(tables.reader_table(both, f"05_{size}_vs_{wide_size}", figures_dir,
                                formats={f"{name}: {c}": f for c, f in measures.items() for name in (size, wide_size)}))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    common = [v for v in summary.index if v in wide.index and v != "standard"]
    for v in common:
        ax.scatter(summary.loc[v, "gap vs standard"], wide.loc[v, "gap vs standard"], s=48,
                   color=plots.color(v), marker=plots.marker(v), label=v, zorder=3)
    lim = np.nanmax(np.abs([summary.loc[common, "gap vs standard"], wide.loc[common, "gap vs standard"]])) * 1.15
    ax.plot([-lim, lim], [-lim, lim], color="0.6", lw=1, ls="--", zorder=1)
    ax.axhline(0, color="0.8", lw=1, zorder=0)
    ax.axvline(0, color="0.8", lw=1, zorder=0)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), xlabel=f"gap vs standard at {size} (nats)",
           ylabel=f"gap vs standard at {wide_size} (nats)", title="Each method's gap at two widths")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    plots.show_figure(fig, "05_gap_two_widths", figures_dir)

# %% [markdown]
# ## Looped models: does λ/(N·√(L/12)) transfer the learning rate across N?
#
# For each residual rule and each loop count N, the final held-out loss (mean over seeds) over the
# learning-rate sweep. If a scaling transfers the learning rate, the minimum sits at the same learning rate for
# every N. The dashed line is the unigram entropy of the training tokens: a run that ends there stalled.

# %%
def looped_root(lr):
    """One folder of runs per learning rate, beside the main run folders (a run folder does not name its lr)."""
    return str(Path(out_root).parent / "looped" / f"lr{lr:g}")


loop_overrides = {"train": {"steps": loop_steps}} if loop_steps else {}
loop_rows, missing_cells = [], []
for lr in lrs:
    for n in loops:
        size_n = f"{loop_size}{n}"
        if train_looped:  # the quick build's seconds-long runs; the real sweep is scripts/family_study.sh's
            result = loading.quiet_sweep(size_n, loop_variants, loop_seeds,
                                         {"train": {**loop_overrides.get("train", {}), "lr": lr}}, looped_root(lr))
        else:
            result = results_table(looped_root(lr), size_n)
        wanted = loop_seeds if loop_seeds is not None else load_preset(size_n).seeds
        have = set(zip(result["variant"], result["seed"]))
        missing_cells += [(v, n, lr, s) for v in loop_variants for s in wanted if (v, s) not in have]
        loop_rows.append(result.assign(lr=lr, loops=n))
looped = pd.concat(loop_rows, ignore_index=True)
if looped.empty:
    raise RuntimeError(f"no finished looped runs under {looped_root(lrs[0])} and the other lr folders: "
                       "`SIZE= bash scripts/family_study.sh` trains them")
looped = looped[looped["variant"].isin(loop_variants) & looped["seed"].isin(
    loop_seeds if loop_seeds is not None else load_preset(f"{loop_size}{loops[0]}").seeds)]
if missing_cells:
    by_seed = pd.Series([s for *_, s in missing_cells]).value_counts().sort_index()
    print(f"{len(missing_cells)} looped runs not finished yet (by seed: "
          + ", ".join(f"seed {s}: {k}" for s, k in by_seed.items())
          + "); `SIZE= bash scripts/family_study.sh` trains them. Below: the finished runs.")
curves = looped.groupby(["variant", "loops", "lr"], as_index=False)["fixed_loss"].mean()

# A run that ends at the unigram entropy of its training tokens has learned only byte frequencies: it stalled
# (reached that level early and never learned from context), a different failure from a merely worse loss.
loop_run = resolve_run(f"{loop_size}{loops[0]}", loop_variants[0], 0, {}, looped_root(lrs[0]))
floor = unigram_entropy(load_run_data(loop_run).train)
looped["stalled"] = (looped["fixed_loss"] - floor).abs() < 0.05
print(f"unigram entropy of the training tokens: {floor:.4f} nats; runs that ended within 0.05 nats of it "
      f"(stalled): {int(looped['stalled'].sum())} of {len(looped)}; diverged (no final loss): "
      f"{int(looped['fixed_loss'].isna().sum())}")
stalled_runs = looped.groupby(["variant", "lr"])["stalled"].sum().unstack("lr").loc[loop_variants]
tables.reader_table(stalled_runs.rename(columns=lambda lr: f"lr {lr:g}"), "05_looped_stalled", figures_dir, full=looped)

# %%
fig, axes = plt.subplots(1, len(loop_variants), figsize=(4.2 * len(loop_variants), 3.6), sharey=True, squeeze=False)
for ax, variant in zip(axes[0], loop_variants):
    sns.lineplot(data=curves[curves["variant"] == variant], x="lr", y="fixed_loss", hue="loops", marker="o",
                 palette="viridis", legend="brief" if ax is axes[0, -1] else False, ax=ax)
    ax.axhline(floor, color="grey", linestyle="--", linewidth=1, label="unigram entropy")
    plots.log_axis(ax, "x")
    ax.set(xlabel="learning rate", ylabel="held-out loss (fixed set)", title=variant)
plots.legend_outside(axes[0, -1], title="loops N")
fig.suptitle("Looped models: held-out loss over the learning rate, per residual scaling and loop count N")
plots.show_figure(fig, "05_looped_lr_transfer", figures_dir)

# %%
finite = curves.dropna(subset=["fixed_loss"])
best = finite.loc[finite.groupby(["variant", "loops"])["fixed_loss"].idxmin()]
best_lr = best.pivot(index="variant", columns="loops", values="lr").loc[loop_variants]
tables.reader_table(best_lr.rename(columns=lambda n: f"N = {n}"), "05_looped_best_lr", figures_dir,
                    formats=dict.fromkeys((f"N = {n}" for n in best_lr), "{:g}"))

# %% [markdown]
# The grid steps by 2×, so the best grid point alone says little. Below, each optimum is the vertex of a
# parabola in log₂(lr) fitted to the seed-mean curve around its minimum, with a 95 % bootstrap interval over
# seeds (the same seeds resampled for every lr and N), and per rule the slope of log₂(optimum) against log₂(N):
# 0 means the learning rate transfers across loop counts, −1 that it halves each time N doubles.

# %%
# only seeds that finished the whole lr × N grid of every rule: a bootstrap over seeds needs each seed complete
cells_per_seed = looped.groupby("seed").size()
complete_seeds = cells_per_seed[cells_per_seed == len(loop_variants) * len(loops) * len(lrs)].index.tolist()
print(f"seeds with the whole grid: {complete_seeds}"
      + (f" (left out, unfinished: {sorted(set(cells_per_seed.index) - set(complete_seeds))})"
         if len(complete_seeds) < len(cells_per_seed) else ""))
optima, transfer = stats.lr_transfer(looped[looped["seed"].isin(complete_seeds)], n_boot=loop_boot)
tables.reader_table(optima, "05_looped_optima", figures_dir, index=False,
                    columns=["variant", "loops", "best_lr", "best_lr_low", "best_lr_high", "at_edge", "seeds"],
                    formats={"best_lr": "{:.2g}", "best_lr_low": "{:.2g}", "best_lr_high": "{:.2g}"},
                    rename={"loops": "N", "best_lr": "optimum lr", "best_lr_low": "95 % low",
                            "best_lr_high": "95 % high", "at_edge": "at grid edge"})
tables.reader_table(transfer, "05_looped_transfer", figures_dir, index=False,
                    columns=["variant", "slope", "slope_low", "slope_high", "fold_change"],
                    formats={"slope": "{:+.2f}", "slope_low": "{:+.2f}", "slope_high": "{:+.2f}",
                             "fold_change": "{:.2g}"},
                    rename={"slope": "slope (log₂ lr per doubling of N)", "slope_low": "95 % low",
                            "slope_high": "95 % high", "fold_change": "optimum N=8 / N=1"})

# %% [markdown]
# ## Provenance
#
# What produced these results, read from the result files: code commit, device, precision, data.

# %%
tables.reader_table(loading.provenance(table), f"05_{size}_provenance", figures_dir)

# %% [markdown]
# ## Recap

# %%
ranked = summary.sort_values("loss")
print(f"{size}, {len(seeds)} seeds, {int(summary['seeds'].sum())} runs on {summary['device'].iloc[0]}. "
      f"Lowest held-out loss: {ranked.index[0]} ({ranked['loss'].iloc[0]:.4f}); highest: {ranked.index[-1]} "
      f"({ranked['loss'].iloc[-1]:.4f}); standard {summary.loc['standard', 'loss']:.4f}.")


def significant(summary, sign):
    return [v for v in summary.index if v != "standard" and sign * summary.loc[v, "gap vs standard"] > 0
            and summary.loc[v, "p (Holm)"] < 0.05]


for name, frame in ((size, summary), (wide_size, wide)):
    if frame is None:
        continue
    print(f"{name}: significantly better than standard after Holm: {', '.join(significant(frame, 1)) or 'none'}; "
          f"significantly worse: {', '.join(significant(frame, -1)) or 'none'}.")
if wide is not None:  # `common`: the methods at both widths, from the side-by-side cell
    same_sign = [v for v in common if np.sign(summary.loc[v, "gap vs standard"]) == np.sign(wide.loc[v, "gap vs standard"])]
    print(f"At both widths the gap against standard has the same sign for {len(same_sign)} of {len(common)} methods; "
          f"{wide_size}'s lowest loss: {wide['loss'].idxmin()} ({wide['loss'].min():.4f}), standard "
          f"{wide.loc['standard', 'loss']:.4f}.")
stalled = looped.groupby("variant")["stalled"].sum()
print("Looped runs that stalled at the unigram level: "
      + ", ".join(f"{v} {int(stalled[v])} of {int((looped['variant'] == v).sum())}" for v in loop_variants) + ".")
for row in transfer.itertuples():
    moves = row.slope_low > 1e-6 or row.slope_high < -1e-6  # the interval excludes 0 (beyond fit rounding)
    edges = optima[(optima["variant"] == row.variant) & optima["at_edge"]]["loops"].tolist()
    print(f"{row.variant}: the optimum changes by {row.fold_change:.2g}x over N = {row.loops} (slope "
          f"{row.slope:+.2f} per doubling, 95 % [{row.slope_low:+.2f}, {row.slope_high:+.2f}]): "
          + ("it moves with N" if moves else "consistent with a learning rate that transfers across N")
          + (f"; at the grid's edge for N = {edges}, so the grid does not span that optimum." if edges else "."))
