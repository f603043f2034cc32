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
# # 5 · The family in one harness
#
# **Question.** Review Residuals is one of several 2024–2026 proposals to replace the fixed `h + u` residual: on the
# same data, tokens, seeds and parameters, how do they compare with standard, with Review and with each other? For
# looped (weight-tied) models: does ε = λ/(N·√(L/12)) make the best learning rate independent of N (arXiv:2606.18524)?
#
# **Method.** Every method is a rule behind the same stream protocol (`rrlib.rules`), so the model code is the same
# for all; methods with fewer parameters than Review are widened to its count, as the paper does for its baselines.
# A seed fixes the batches and evaluation windows for every method, so differences are paired by seed (Holm over all
# methods). The looped models apply L = 2 unique blocks N ∈ {1, 2, 4, 8} times, each sublayer's update scaled by
# ε = λ/(N·√(L/12)) (`scaled`, the paper's rule, λ = 1, output projections at N(0, 0.02)), by λ/(√N·√(L/12))
# (`scaled_loops`, the 1/√N rule it is tested against), or gated by Review; not followed: the paper's per-group
# learning rates, one constant factor at our fixed L, which cannot move an optimum.

# %% tags=["parameters"]
size = "family"  # the preset of the comparison (params/)
wide_size = "family_mini"  # the same comparison at mini's width, read from finished runs; None skips it
bench_file = "outputs/bench/cpu-family.json"  # `python -m rrlib bench` at both widths: each rule's speed and memory
variants = None  # None means the preset's: every method
rules = None  # rule files or modules of your own, as --rules: e.g. "my_rules.py" or ["a.py", "mypkg.rules"]
seeds = None  # None means the preset's
steps = None  # training steps per run; None means the preset's
out_root = "outputs/runs"  # run folders; finished runs are read, not retrained
primary_metric = "fixed_loss"  # the fixed held-out set (notebook 04 says why); the paper's val_loss stands beside it
secondary_metric = "val_loss"
power_root = None  # the powered family study's run folders; None: <out_root>/../power/runs
power_size = "family_power"  # the powered design's size
power_seeds = 47  # the design's seeds, 0 to power_seeds - 1, fixed before its runs (below)
power_target = 0.017  # nats: the gap the powered family study must detect (80 % power, paired)
loop_size = "looped"  # the looped preset: sizes looped<N>
loop_root = "outputs/looped_grid"  # the looped study's runs, one folder per learning rate (rrlib.studies.looped_study)
edge_root = "outputs/looped_edges"  # a supplementary extension of the cells where one seed's optimum sat on an edge
power_loop_root = "outputs/looped_power"  # the powered looped study's runs (looped_study.POWER); None skips it
loops = [1, 2, 4, 8]  # N
loop_variants = ["scaled", "scaled_loops", "review"]
loop_seeds = None  # None means the study's five
train_looped = False  # train the looped runs here on `lrs` (the quick build's); else the study's finished runs are read
lrs = None  # learning rates trained when train_looped; the study's own grid is rrlib.studies.looped_study's
loop_steps = None  # None means the preset's
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import HTML

from rrlib import load_preset
from rrlib.views import plots, power_tables, tables
from rrlib.results import family, looped, looped_power, power
from rrlib.runs import loading
from rrlib.runs.arguments import loaded_rules, seed_list, variant_list

plots.use_style()
loaded_rules(rules)  # before the variants are read: they may name its rules
preset = load_preset(size)
variants = variant_list(variants, default=preset.variants)  # -p variants review is one variant, -p seeds 0 one seed
seeds, overrides = seed_list(seeds, default=preset.seeds), {"train": {"steps": steps}} if steps else {}
study = {"variants": variant_list(loop_variants, "loop_variants"), "loops": loops, "seeds": loop_seeds,
         "metric": primary_metric, "prefix": loop_size}  # loop_seeds None: the study's
print(f"{size}: {preset.description}")

# %% [markdown]
# ## The methods, and every one trained
#
# Per rule its docstring's first line and its model's counts (parameters after matching, the rule's own, FLOPs per
# token: 6 × matmul weights + attention). Then, missing runs trained: held-out loss on the fixed evaluation set (mean
# ± SD over seeds); the paired gap `standard − method` (positive: the method is better), its Holm p over all methods
# (the CSV adds the unadjusted p and `val_loss`'s), the gap the design detects (80 % power); speed and peak memory
# over standard's from the benchmark (every rule in the same interleaved rounds).

# %%
methods = family.methods(size, variants, seeds[0], overrides, out_root).set_index("variant").rename_axis(None)
display(tables.reader_table(methods.rename(columns={"description": "method", "params_M": "parameters (M)",
                                                    "rule_params": "rule parameters", "mflops_per_token":
                                                    "FLOPs/token (M)"}), "05_methods", figures_dir,
                            formats={"parameters (M)": "{:.3f}", "FLOPs/token (M)": "{:.2f}"}))
loading.quiet_sweep(size, variants, seeds, overrides, out_root)
table = family.family_runs(size, variants, seeds, out_root)
LABELS = {"gap": "gap vs standard", "detectable": "detectable gap", "p": "p (paired)", "p_holm": "p (Holm)",
          "p_secondary": f"p (paired, {secondary_metric})", "p_holm_secondary": f"p (Holm, {secondary_metric})",
          "tokens_per_s_vs_standard": "tokens/s vs standard", "peak_memory_vs_standard": "memory vs standard"}


def summary_at(at, at_seeds):
    summary = family.family_summary(at, variants, at_seeds, out_root, bench_file, primary_metric, secondary_metric)
    if "standard" not in set(summary["variant"]):  # (a benchmark without this size leaves speed and memory empty)
        return print(f"No finished {at} runs under {out_root}; `rrlib study run {at}` trains them.")
    summary = summary.drop(columns=["ci_low", "ci_high"]).rename(columns=LABELS).set_index("variant")
    loss = [f"{m:.4f}" + ("" if np.isnan(s) else f" ± {s:.4f}") for m, s in zip(summary["loss"], summary["sd"])]
    display(tables.reader_table(
        summary.assign(**{"loss (nats, mean ± SD)": loss}), f"05_{at}_summary", figures_dir, full=summary.reset_index(),
        columns=["loss (nats, mean ± SD)", "gap vs standard", "p (Holm)", "detectable gap", "tokens/s vs standard",
                 "memory vs standard"], formats={"gap vs standard": "{:+.4f}", "detectable gap": "{:.4f}",
                                                 "tokens/s vs standard": "{:.2f}", "memory vs standard": "{:.2f}"}))
    return summary


summary = summary_at(size, seeds)
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
# ## At mini's width: does a method's gap against standard hold, grow or vanish wider and trained longer?
#
# The same methods, seeds and recipe at `mini`'s width (`family_mini`: d = 128 for Review, 600 steps), read from
# finished runs (`rrlib study run family_mini` trains them), side by side with the above.

# %%
wide = summary_at(wide_size, None) if wide_size is not None else None
if wide is not None:
    measures = {"gap vs standard": "{:+.4f}", "p (Holm)": "{:.3f}", "tokens/s vs standard": "{:.2f}",
                "memory vs standard": "{:.2f}"}
    sides = {size: summary, wide_size: wide}
    display(tables.reader_table(pd.DataFrame({f"{n}: {c}": f[c] for c in measures for n, f in sides.items()}),
                                f"05_{size}_vs_{wide_size}", figures_dir,
                                formats={f"{n}: {c}": f for c, f in measures.items() for n in sides}))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    common = [v for v in summary.index if v in wide.index and v != "standard"]
    for v in common:
        ax.scatter(summary.loc[v, "gap vs standard"], wide.loc[v, "gap vs standard"], s=48,
                   color=plots.color(v), marker=plots.marker(v), label=v, zorder=3)
    lim = np.nanmax(np.abs([summary.loc[common, "gap vs standard"], wide.loc[common, "gap vs standard"]])) * 1.15
    ax.plot([-lim, lim], [-lim, lim], color="0.6", lw=1, ls="--", zorder=1)
    ax.axhline(0, color="0.8", lw=1, zorder=0), ax.axvline(0, color="0.8", lw=1, zorder=0)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), xlabel=f"gap vs standard at {size} (nats)",
           ylabel=f"gap vs standard at {wide_size} (nats)", title="Each method's gap at two widths")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    plots.show_figure(fig, "05_gap_two_widths", figures_dir)

# %% [markdown]
# ## The powered family study: its design, fixed before its runs
#
# The comparison above (300 steps, 3 seeds) sees only gaps of several hundredths of a nat. `family_power` (1,200
# steps) is sized for **0.017 nats** (about the Delta paper's smallest gain; 80 % power) for Delta AttnRes against
# standard and AttnRes, and MGR against standard. Its **pilot** (seeds 0–3, commit 4de8d85) fixed the seeds each
# question needs (below); the largest, **47**, sets the design, two `rrlib compare` calls (Holm within each, a TOST
# at ±0.010 nats beside) whose **verdict** is read once every run has finished; the ledger then reads it.

# %%
power_root = power_root or power.root_beside(out_root)
power_questions = {"delta_attnres": ["standard", "attnres"], "mgr": ["standard"]}  # the two compare calls
for question, against in power_questions.items():
    shown, sentence = power_tables.pilot(power_root, power_size, question, against, power_target,
                                         f"05_pilot_{question}", figures_dir)
    display(*[shown] * (shown is not None), HTML(f"<p>{sentence}</p>"))
_, shown, lines = power_tables.design_verdict(power_root, power_size, power_questions, power_seeds, "05_power_tests",
                                              figures_dir, target=power_target)
display(*[shown] * (shown is not None), HTML("".join(f"<p>{line}</p>" for line in lines)))

# %% [markdown]
# ## Looped models: does λ/(N·√(L/12)) transfer the learning rate across N?
#
# Per rule and N, the held-out loss over the learning rate: where a scaling transfers it, the minimum sits at one rate
# for every N (dashed: the unigram entropy, where a run stalled). **The estimator, fixed before the runs** (in full in
# `rrlib.studies.looped_study`): per seed and cell the grid argmin and, primary, the parabola vertex in log₂ lr; per
# seed and rule the slope of log₂(optimum) on log₂ N; over seeds its mean: *moves with N* if its 95 % interval
# excludes 0, *transfers* if a TOST puts it within ±1/6 per doubling, else *undecided*; again without stalled runs.
# Trainability: 1/N's loss at each seed's optimum against 1/√N's, per N. Beside them: the edge cells extended.

# %%
for lr, n in [(lr, n) for lr in lrs for n in loops] if train_looped else []:  # the quick build's seconds-long runs
    loading.quiet_sweep(f"{loop_size}{n}", study["variants"], loop_seeds, {"train": {"lr": lr} | (
        {"steps": loop_steps} if loop_steps else {})}, f"{loop_root}/lr{lr:g}")
state = looped.progress(loop_root, lrs=lrs if train_looped else None, **study)
if not state.finished:
    raise RuntimeError(f"no finished looped runs under {loop_root}: `rrlib study run looped_grid` trains them")
curves = looped.cells(loop_root, **study)
display(tables.reader_table(curves, "05_looped_cells", figures_dir, index=False, formats={"lr": "{:.3g}"},
                            rename={"loops": "N", "loss": f"{primary_metric} (mean)", "stalled": "stalled runs"}),
        HTML(f"<p>{state.finished} finished runs, {state.missing} to come; whole seeds: {state.complete}; stalled: "
             f"{state.stalled}; diverged: {state.diverged}; commits: {', '.join(state.commits)}</p>"))
fig, axes = plt.subplots(1, k := len(study["variants"]), figsize=(4.2 * k, 3.6), sharey=True, squeeze=False)
loop_colors = dict(zip(loops, sns.color_palette("viridis", len(loops))))  # named in the legend as drawn
for ax, variant in zip(axes[0], study["variants"]):
    sns.lineplot(data=curves[curves["variant"] == variant], x="lr", y="loss", hue="loops", hue_order=loops,
                 palette=loop_colors, marker="o", legend="full" if ax is axes[0, -1] else False, ax=ax)
    ax.axhline(state.unigram_entropy, color="grey", linestyle="--", linewidth=1, label="unigram entropy")
    plots.log_axis(ax, "x")
    ax.set(xlabel="learning rate", ylabel="held-out loss (fixed set)", title=variant)
plots.legend_outside(axes[0, -1], title="loops N")
fig.suptitle("Looped models: held-out loss over the learning rate, per residual scaling and loop count N")
plots.show_figure(fig, "05_looped_lr_transfer", figures_dir)
grid = looped.reading(loop_root, edge_root, lrs=lrs if train_looped else None, **study)
TRANSFER = {"columns": ["runs", "variant", "estimator", "seeds", "slope", "ci_low", "ci_high", "p", "p_equivalent",
                        "fold_change", "verdict"], "formats": {"slope": "{:+.2f}", "fold_change": "{:.2g}"},
            "rename": {"slope": "slope per doubling of N", "p_equivalent": "TOST p", "fold_change": "N=8 / N=1"}}
TRAINABLE = {"formats": {"gap": "{:+.4f}"}, "rename": {"loops": "N", "gap": "scaled_loops − scaled (nats)"}}
display(tables.reader_table(grid.cell_optima, "05_looped_optima", figures_dir, index=False, full=grid.optima, rename={
    "loops": "N", "grid_lr": "grid optimum (median)", "parabola_lr": "parabola optimum (geometric mean)"}),
        tables.reader_table(grid.transfer, "05_looped_transfer", figures_dir, index=False, **TRANSFER),
        tables.reader_table(grid.trainability, "05_looped_trainability", figures_dir, index=False, **TRAINABLE),
        HTML(f"<p>supplementary: {grid.edge_runs} runs extend {grid.edge_cells}</p>" * bool(grid.edge_runs)))

# %% [markdown]
# ## The powered looped study: its design, pilot and verdict
#
# At 200 steps half the N = 8 runs still sit on the unigram plateau at step 100. `looped_study.POWER` trains **1,000
# steps** of `scaled` and `scaled_loops` for the **contrast** (per seed 1/N's slope minus 1/√N's; target 0.25 per
# doubling); its **pilot** (seeds 0–3) fixes the seeds (at least 8); once all have finished, its verdicts are read.

# %%
loop_design = {"root": power_loop_root, "metric": primary_metric}
state = looped_power.progress(**loop_design) if power_loop_root else None
fixed, powered = (looped_power.pilot(**loop_design), looped_power.reading(**loop_design)) if state else (None, None)
if state is not None:
    print(f"{state.finished} of {state.total} runs finished; seeds done under both rules: {state.whole_seeds}; cells "
          "grown beyond the pilot's grid: " + ("; ".join(f"{r} N={n} ({a} → {b} rates)" for r, n, a, b in state.grown)))
if fixed is not None:
    display(tables.reader_table(fixed, "05_looped_power_pilot", figures_dir, index=False, columns=[
        "estimator", "n", "effect", "sd", "seeds_needed", "pilot_cpu_hours", "design_seeds", "design_cpu_hours"]))
if powered is not None:
    regime = looped_power.regime(**loop_design)
    tables.reader_table(powered.optima, "05_looped_power_optima", figures_dir, index=False)
    display(tables.reader_table(powered.transfer, "05_looped_power_transfer", figures_dir, index=False, **TRANSFER),
            tables.reader_table(powered.contrast, "05_looped_power_contrast", figures_dir, index=False,
                                columns=["estimator", "n", "effect", "ci_low", "ci_high", "p", "mde"]),
            tables.reader_table(powered.trainability, "05_looped_power_trainability", figures_dir, index=False,
                                **TRAINABLE),
            HTML(f"<p>{regime.runs} runs of {regime.steps:,} steps, {regime.passes:.1f} passes, {regime.cpu_hours:.1f} "
                 f"CPU-h; stalled: {regime.stalled}; the held-out loss fell over the last {regime.late_steps} steps in "
                 f"{regime.falling} of {regime.measured} runs ({regime.fall_min:+.3f} to {regime.fall_max:+.3f})</p>"))

# %% [markdown]
# ## Provenance (commit, device, precision, data) and recap

# %%
display(tables.reader_table(loading.provenance(table), f"05_{size}_provenance", figures_dir))
loss = summary["loss"]
print(f"{size}, {len(seeds)} seeds, {int(summary['seeds'].sum())} runs. Lowest held-out loss: {loss.idxmin()} "
      f"({loss.min():.4f}); highest: {loss.idxmax()} ({loss.max():.4f}); standard {loss['standard']:.4f}.")
for name, frame in [(n, f) for n, f in ((size, summary), (wide_size, wide)) if f is not None]:
    held, gap = frame["p (Holm)"] < 0.05, frame["gap vs standard"]
    print(f"{name}: significantly better than standard after Holm: {', '.join(frame.index[held & (gap > 0)]) or 'none'}"
          f"; significantly worse: {', '.join(frame.index[held & (gap < 0)]) or 'none'}.")
verdicts = grid.transfer.query("estimator == 'parabola' and runs == 'all runs'").set_index("variant")["verdict"]
print(f"Looped, by the parabola optimum on all runs: {verdicts.to_dict()}.")
