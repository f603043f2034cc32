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
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from rrlib import GPT, RULES, load_preset, resolve_run, results_table
from rrlib.report import plots, power_tables, tables
from rrlib import stats
from rrlib.runs import loading
from rrlib.runs.arguments import loaded_rules, seed_list, variant_list
from rrlib.runs.config import run_folder
from rrlib.runs.data import unigram_entropy
from rrlib.runs.rundata import load_run_data
from rrlib.studies import looped_study, power_study

plots.use_style()
loaded_rules(rules)  # before the variants are read: they may name its rules
preset = load_preset(size)
variants = variant_list(variants, default=preset.variants)  # -p variants review is one variant, -p seeds 0 one seed
seeds = seed_list(seeds, default=preset.seeds)
loop_variants = variant_list(loop_variants, "loop_variants")
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
# Held-out loss on the fixed evaluation set (mean ± SD over seeds; the primary metric, as in notebook 04), and
# against the standard residual the paired gap `standard − method` (positive: the method is better), its paired
# p-value and the Holm-corrected one over all methods, the Holm p of the same test on the paper's own evaluation
# (`val_loss`) beside it, and the smallest gap the design detects at α = 0.05 with 80 % power (at the spread of
# the paired differences it met); then parameters, FLOPs per token, and speed and peak memory relative to
# standard's from the benchmark (`python -m rrlib bench --size family --size family_mini ...`, the README's
# command: every rule in the same interleaved rounds), not from the runs.

# %%
def family_summary(table, variants):
    """Per method: loss (mean, SD over seeds), the paired gap against standard with Holm over the methods, and
    what the runs recorded: parameters, FLOPs per token, tokens/s, peak memory."""
    summary = table.groupby("variant").agg(
        loss=(primary_metric, "mean"), sd=(primary_metric, "std"), seeds=("seed", "count"),
        params_M=("params_M", "first"), flops_per_token=("flops_per_token", "first"),
        tokens_per_s=("tokens_per_s", "mean"), peak_memory_MB=("peak_memory_MB", "mean"),
        device=("device", "first"),
    ).loc[[v for v in variants if v in set(table["variant"])]]
    for metric, suffix in ((primary_metric, ""), (secondary_metric, f", {secondary_metric}")):
        gaps = {v: stats.compare(table[table["variant"].isin(["standard", v])], metric=metric, reference=v, n_boot=0)
                for v in summary.index if v != "standard"}
        if not suffix:
            summary["gap vs standard"] = [gaps[v]["gap"].iloc[0] if v in gaps else np.nan for v in summary.index]
            summary["detectable gap"] = [gaps[v]["mde"].iloc[0] if v in gaps else np.nan for v in summary.index]
        summary[f"p (paired{suffix})"] = [gaps[v]["p"].iloc[0] if v in gaps else np.nan for v in summary.index]
        summary.loc[list(gaps), f"p (Holm{suffix})"] = stats.holm(
            np.array([summary.loc[v, f"p (paired{suffix})"] for v in gaps], dtype=float))
    return summary


def with_bench(summary, size):
    """The summary with speed and memory relative to standard's from the benchmark file at this size (every rule
    in the same interleaved rounds, one thread), or empty where it has none: the runs' own tokens/s come from
    different days, machine loads and code versions, so they are no comparison of speed."""
    measured = bench_ratios(Path(bench_file), size)
    out = summary.copy()
    out["tokens/s vs standard"] = measured["tokens/s vs standard"].reindex(out.index) if measured is not None else np.nan
    out["memory vs standard"] = measured["memory vs standard"].reindex(out.index) if measured is not None else np.nan
    print(f"{size}: speed and memory vs standard " + (f"from {bench_file}" if measured is not None
                                                      else "not shown (the benchmark file has no row for it)"))
    return out


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
        name, figures_dir, full=summary.rename_axis("variant").reset_index(),
        columns=["params_M", "flops_per_token", "loss_sd", "gap vs standard", "p (paired)", "p (Holm)",
                 f"p (Holm, {secondary_metric})", "detectable gap", "tokens/s vs standard", "memory vs standard"],
        formats={"params_M": "{:.3f}", "flops_per_token": lambda x: f"{x / 1e6:.2f}",
                 "gap vs standard": "{:+.4f}", "detectable gap": "{:.4f}", "tokens/s vs standard": "{:.2f}",
                 "memory vs standard": "{:.2f}"},
        rename={"params_M": "params (M)", "flops_per_token": "MFLOPs / token", "loss_sd": "loss (nats, mean ± SD)",
                "gap vs standard": "gap vs standard (nats)", "detectable gap": "detectable gap (80 % power)",
                "tokens/s vs standard": "speed vs standard (bench)",
                "memory vs standard": "peak memory vs standard (bench)"}))


summary = with_bench(family_summary(table, variants), size)
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
# read from finished runs (`SIZE=family_mini bash scripts/family_study.sh` trains them). Side by side with
# the comparison above: does a method's gap against standard hold, grow or vanish when the model is wider and
# trained longer?

# %%
wide = None
if wide_size is not None:
    wide_table = results_table(out_root, wide_size)
    wide_table = wide_table[wide_table["variant"].isin(variants)]
    if len(wide_table) and "standard" in set(wide_table["variant"]):
        wide = with_bench(family_summary(wide_table, variants), wide_size)
        show_summary(wide, f"05_{wide_size}_summary")
    else:
        print(f"No finished {wide_size} runs under {out_root}; `SIZE={wide_size} bash scripts/family_study.sh` "
              "trains them.")

# %%
if wide is not None:
    sides = {size: summary, wide_size: wide}
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
# ## The powered family study: its design, fixed before its runs
#
# The family's comparison above (300 steps, 3 seeds) detects only gaps of several hundredths of a nat. The powered
# study, `family_power` (the same model, **1,200 steps**, 4×; 2.5 M tokens, 1.2 passes over the 2.1 MB sample),
# is sized for a detectable gap of **0.017 nats** (about the Delta paper's smallest gain, 1.7 % lower perplexity;
# 80 % power, α 0.05, paired t) for Delta AttnRes against standard and against AttnRes, and MGR against standard.
# **Pilot** (seeds 0–3 at commit 4de8d85, `scripts/power_study.sh`; the study's runs lie under `outputs/power/runs/`): paired SD on `fixed_loss` 0.0059 (standard −
# delta_attnres), 0.0406 (attnres − delta_attnres), 0.0161 (standard − mgr); the held-out loss still falls by at
# least 0.2 nats between its last two evaluations. **Design:** `rrlib.stats.verdict.seeds_needed(sd, 0.017)` gives
# 4, **47** and 10 seeds; the largest sets the design, **47 seeds** (0–46) of the four rules, 188 runs at about
# 2.3 CPU-minutes each, about 7 CPU-hours. The pilot's seeds are part of the design. The runs go through `rrlib
# compare --size family_power --variants delta_attnres --against standard,attnres --seeds 47` (Holm over its
# two) and `rrlib compare --size family_power --variants mgr --against standard --seeds 47`, which reads the same
# standard runs.

# %% [markdown]
# What the pilot fixes, computed from its runs for each of the two questions (`rrlib.report.power_tables.pilot`,
# as on page 04): each question's paired SDs, the seeds each needs, and its cost at the pilot's median CPU-minutes
# per run, against the 12 CPU-hours a design is given. The design trains the four rules at the larger count.

# %%
power_root = power_root or str(Path(out_root).parent / "power" / "runs")
power_questions = {"delta_attnres": ["standard", "attnres"], "mgr": ["standard"]}  # the two compare calls
for question, against in power_questions.items():
    shown, sentence = power_tables.pilot(power_root, power_size, question, against, power_target,
                                         f"05_pilot_{question}", figures_dir)
    if shown is not None:
        display(shown)
    print(sentence)

# %% [markdown]
# **The design's verdict**, by the compare engine (`rrlib.studies.power_study.tests`, as the two `rrlib compare`
# calls above: Holm over Delta AttnRes's two baselines, MGR's one comparison alone; a TOST at ±0.010 nats), read
# only once every run of the design has finished, with the regime, the CPU-hours, each run's held-out fall over
# its last 400 steps, and whether each comparison detects the 0.017 nats it was sized for. Once it has, the
# ledger (page 07) reads it alone for Delta AttnRes per sublayer and for MGR, in place of the 3-seed family
# comparison above, which could not have seen a gain of 0.017 nats.

# %%
power_tests, shown, lines = power_tables.design_verdict(power_root, power_size, power_questions, power_seeds,
                                                       "05_power_tests", figures_dir, target=power_target)
if shown is not None:
    display(shown)
print("\n".join(lines))

# %% [markdown]
# ## The powered looped study: its pilot and design, fixed before its runs
#
# The looped study below trains 200 steps, where about half of the N = 8 runs are still on the unigram plateau at
# step 100; its optimum partly marks when a run escapes the plateau. The powered study (`rrlib.studies.looped_study`,
# design `POWER`, `DESIGN=power bash scripts/looped_study.sh`, runs under `outputs/looped_power/`) trains **1,000
# steps** (5×; warmup 10 %; 2.0 M tokens, about one pass over the 2.1 MB sample), the two rules the contrast needs
# (`scaled`, 1/N, and `scaled_loops`, 1/√N), at N = 1, 2, 4, 8, five lattice points per cell (0.001 to 0.004, √2
# apart, centred on the first study's optimum of both, 0.002; the same edge extension), seed-major. Its question
# is the **contrast**: per seed, 1/N's slope of log₂(optimum) per doubling of N minus 1/√N's, and per N the loss of
# 1/N against 1/√N at each seed's optimum. **Target:** a contrast of 0.25 per doubling (half the −1/2 that a √N
# larger update would give if the optimal rate scaled as its inverse; the first study measured −0.26 by the grid
# argmin). From the first study's per-seed slopes the contrast's paired SD is 0.213 (grid argmin, 5 seeds), which
# gives `seeds_needed(0.213, 0.25)` = 8 seeds; the **pilot** is the first 4 (0–3), whose paired SD then fixes the
# design's seed count, stated here before the runs beyond the pilot. **Cost**, from the first study's median run
# times at 200 steps (0.19, 0.35, 0.62 and 1.18 CPU-minutes at N = 1, 2, 4, 8) scaled by 5: about 11.7 CPU-minutes
# per (rule, rate, seed) over the four N, so 7.8 CPU-hours for the pilot's 160 runs and 15.6 for 8 seeds (320
# runs), about two thirds of the study budget's 25 CPU-hours; the design's cost is stated beside its seed count.

# %% [markdown]
# ## Looped models: does λ/(N·√(L/12)) transfer the learning rate across N?
#
# For each residual rule and each loop count N, the final held-out loss (mean over seeds) over the
# learning-rate sweep. If a scaling transfers the learning rate, the minimum sits at the same learning rate for
# every N. The dashed line is the unigram entropy of the training tokens: a run that ends there stalled.
#
# **The decisive rerun, and the estimator it is judged by (fixed before its runs).** The 2× grid below, at three
# seeds trained at three commits, cannot decide the question: its verdict changes with the estimator. The rerun
# (`bash scripts/looped_study.sh`, grid and estimator in `rrlib.studies.looped_study`) trains every (rule, N) cell on
# seven learning rates √2 apart (8× around the first grid's optimum; a cell whose optimum sits on an edge for
# two seeds or the seed mean gets two more points there), five seeds, all at one commit. Primary metric: the
# fixed held-out loss. Per seed and cell, the optimum is the grid argmin and, primary, the vertex of the parabola
# in log₂ lr through it and its two neighbours (a minimum on the edge has none). Per seed and rule, the slope of
# log₂(optimum) on log₂ N; over the five seeds, its mean with a t-interval. The rule *moves with N* if the 95 %
# interval excludes 0, *transfers* if a TOST (α = 0.05) puts the slope within ±1/6 per doubling (the optimum at
# N = 8 within √2 of N = 1's), and is *undecided* otherwise. Stalled runs are counted per cell, and the verdict
# is given again with them excluded. Trainability: per N, the loss at each seed's grid optimum, `scaled` (1/N)
# against `scaled_loops` (1/√N), paired over seeds, Holm over N = 2, 4, 8.

# %%
if train_looped:  # the quick build's seconds-long runs; the real study is scripts/looped_study.sh's
    for lr in lrs:
        for n in loops:
            train = {"lr": lr, **({"steps": loop_steps} if loop_steps else {})}
            loading.quiet_sweep(f"{loop_size}{n}", loop_variants, loop_seeds, {"train": train}, f"{loop_root}/lr{lr:g}")
looped = looped_study.study_runs(loop_root)
if looped.empty:
    raise RuntimeError(f"no finished looped runs under {loop_root}: `bash scripts/looped_study.sh` trains them")
wanted_seeds = list(loop_seeds if loop_seeds is not None else looped_study.SEEDS)
looped = looped[looped["variant"].isin(loop_variants) & looped["loops"].isin(loops)
                & looped["seed"].isin(wanted_seeds)].reset_index(drop=True)

# A run that ends at the unigram entropy of its training tokens has learned only byte frequencies: it stalled
# (reached that level early and never learned from context), a different failure from a merely worse loss.
loop_run = resolve_run(f"{loop_size}{loops[0]}", loop_variants[0], 0, {}, f"{loop_root}/lr{looped['lr'].iloc[0]:g}")
floor = unigram_entropy(load_run_data(loop_run).train)
looped["stalled"] = (looped[primary_metric] - floor).abs() < looped_study.STALL_NATS

# The grid each cell should have (the study's, with any extension its runs asked for; the quick build's own),
# and the seeds that finished all of it for a rule: only those give a slope over N.
grid = ({(v, n): sorted(lrs) for v in loop_variants for n in loops} if train_looped
        else {cell: rates for cell, rates in looped_study.current_grid(looped).items()
              if cell[0] in loop_variants and cell[1] in loops})
have = set(zip(looped["variant"], looped["loops"], looped["lr"], looped["seed"]))
complete = {(v, seed) for v in loop_variants for seed in wanted_seeds
            if all((v, n, lr, seed) in have for (rule, n), rates in grid.items() if rule == v for lr in rates)}
missing = sum(1 for (v, n), rates in grid.items() for lr in rates for seed in wanted_seeds if (v, n, lr, seed) not in have)
print(f"{len(looped)} finished runs; {missing} of the grid's {len(looped) + missing} not finished yet"
      + ("" if not missing else " (`bash scripts/looped_study.sh` resumes them)") + ". Seeds complete per rule: "
      + "; ".join(f"{v} {sorted(s for r, s in complete if r == v)}" for v in loop_variants) + ".")
print(f"unigram entropy of the training tokens: {floor:.4f} nats; runs within {looped_study.STALL_NATS} nats of it "
      f"(stalled): {int(looped['stalled'].sum())} of {len(looped)}; diverged (no final loss): "
      f"{int(looped[primary_metric].isna().sum())}")
commits = looped["git_commit"].unique() if "git_commit" in looped else []
print(f"trained at {len(commits)} commit(s): "
      + ", ".join(sorted(c[:12] + ("+dirty" if c.endswith("+dirty") else "") for c in commits)))
curves = looped.groupby(["variant", "loops", "lr"], as_index=False).agg(
    loss=(primary_metric, "mean"), seeds=("seed", "count"), stalled=("stalled", "sum"))
tables.reader_table(curves, "05_looped_cells", figures_dir, index=False,
                    formats={"lr": "{:.3g}", "loss": "{:.4f}"},
                    rename={"loops": "N", "loss": f"{primary_metric} (mean)", "stalled": "stalled runs"})

# %%
fig, axes = plt.subplots(1, len(loop_variants), figsize=(4.2 * len(loop_variants), 3.6), sharey=True, squeeze=False)
# one colour per loop count, named in the legend as drawn (a numeric hue would get a continuous scale's ticks)
loop_colors = dict(zip(loops, sns.color_palette("viridis", len(loops))))
for ax, variant in zip(axes[0], loop_variants):
    sns.lineplot(data=curves[curves["variant"] == variant], x="lr", y="loss", hue="loops", hue_order=loops,
                 palette=loop_colors, marker="o", legend="full" if ax is axes[0, -1] else False, ax=ax)
    ax.axhline(floor, color="grey", linestyle="--", linewidth=1, label="unigram entropy")
    plots.log_axis(ax, "x")
    ax.set(xlabel="learning rate", ylabel="held-out loss (fixed set)", title=variant)
plots.legend_outside(axes[0, -1], title="loops N")
fig.suptitle("Looped models: held-out loss over the learning rate, per residual scaling and loop count N")
plots.show_figure(fig, "05_looped_lr_transfer", figures_dir)

# %% [markdown]
# The estimator stated above, on the seeds that finished every cell of a rule: per seed and cell the grid argmin
# and the parabola vertex through it and its two neighbours; per seed and rule the slope of log₂(optimum) on
# log₂ N; over seeds its mean, 95 % t-interval, p against 0 and the TOST p for a slope within ±1/6 per doubling.
# Then the same with stalled runs left out, and the loss at each seed's optimum, 1/N against 1/√N. Last, beside
# them and not part of the stated rule, the verdict once the cells where one seed's optimum sat on an edge get two
# more rates beyond it for every seed (`outputs/looped_edges/`, trained at the study's commit after it finished).

# %%
usable = looped[[(v, s) in complete for v, s in zip(looped["variant"], looped["seed"])]]
if usable.empty:  # the estimator reads whole seeds; until one is in, the page shows the runs so far
    print(f"No seed has finished every cell of any rule under {loop_root} yet: no optimum or slope is estimated "
          "(`bash scripts/looped_study.sh` resumes the study).")
    usable = looped.iloc[:0]
verdicts = {}
for label, exclude in (("all runs", False), ("stalled runs excluded", True)):
    optima = looped_study.seed_optima(usable, primary_metric, exclude_stalled=exclude)
    verdicts[label] = looped_study.transfer_verdicts(looped_study.seed_slopes(optima))
    if not exclude:
        seed_optima = optima
# Supplementary, not the stated rule: that rule extends a cell whose optimum sits on an edge for two seeds (or the
# seed mean), and no cell had two; but a seed with an edge optimum in any cell has no parabola, so the primary
# estimator lost those seeds. Two more rates beyond each such edge, for all five seeds (same commit, its own
# folder), give every seed an interior optimum; the verdict on the union is shown beside the stated one.
edges = looped_study.study_runs(edge_root) if edge_root else looped.iloc[:0]
edges = edges[edges["variant"].isin(loop_variants) & edges["loops"].isin(loops) & edges["seed"].isin(wanted_seeds)]
if len(edges) and len(usable):
    extended = looped_study.seed_optima(pd.concat([usable, edges], ignore_index=True), primary_metric)
    verdicts["edge cells extended (supplementary)"] = looped_study.transfer_verdicts(
        looped_study.seed_slopes(extended))
    print(f"supplementary: {len(edges)} runs under {edge_root} extend "
          + ", ".join(f"{v} N={n}" for v, n in sorted(set(zip(edges["variant"], edges["loops"])))))
optima_table = seed_optima.groupby(["variant", "loops"], as_index=False).agg(
    seeds=("seed", "count"), grid_lr=("grid_lr", "median"),
    parabola_lr=("parabola_lr", lambda x: float(2 ** np.log2(x.dropna()).mean()) if x.notna().any() else np.nan),
    at_edge=("at_edge", lambda x: int(x.notna().sum())))
tables.reader_table(optima_table, "05_looped_optima", figures_dir, index=False, full=seed_optima,
                    formats={"grid_lr": "{:.3g}", "parabola_lr": "{:.3g}"},
                    rename={"loops": "N", "grid_lr": "grid optimum (median over seeds)",
                            "parabola_lr": "parabola optimum (geometric mean)", "at_edge": "seeds on an edge"})
transfer = pd.concat([t.assign(runs=label) for label, t in verdicts.items()], ignore_index=True)
tables.reader_table(transfer, "05_looped_transfer", figures_dir, index=False,
                    columns=["runs", "variant", "estimator", "seeds", "slope", "ci_low", "ci_high", "p",
                             "p_equivalent", "fold_change", "verdict"],
                    formats={"slope": "{:+.2f}", "ci_low": "{:+.2f}", "ci_high": "{:+.2f}", "fold_change": "{:.2g}"},
                    rename={"slope": "slope (log₂ lr per doubling of N)", "ci_low": "95 % low", "ci_high": "95 % high",
                            "p_equivalent": "TOST p (±1/6)", "fold_change": "optimum N=8 / N=1"})

# %%
trainable = looped_study.trainability(seed_optima) if {"scaled", "scaled_loops"} <= set(seed_optima["variant"]) \
    else pd.DataFrame(columns=["loops", "seeds", "gap", "ci_low", "ci_high", "p", "p_holm", "note"])
tables.reader_table(trainable, "05_looped_trainability", figures_dir, index=False,
                    formats={"gap": "{:+.4f}", "ci_low": "{:+.4f}", "ci_high": "{:+.4f}"},
                    rename={"loops": "N", "gap": "scaled_loops − scaled at the optimum (nats)", "ci_low": "95 % low",
                            "ci_high": "95 % high", "p": "paired p", "p_holm": "Holm p"})

# %% [markdown]
# ## The powered looped study: its pilot, then its verdict
#
# The design stated above, read from the finished runs under `power_loop_root`. Once the pilot's four seeds have
# finished every cell under both rules (the edge extension they call for included; an extension that later seeds
# call for runs for them too but is not part of the pilot's reading), its contrast fixes the design's seed count:
# the most seeds at which either estimator's paired SD detects the target contrast of 0.25 per doubling (80 %
# power, α 0.05), never fewer than the eight stated beforehand, with the cost measured from the pilot's runs.
# Once every seed of the design has finished, the stated estimator (the same as the first study's) gives the
# transfer verdicts, the contrast and the loss of 1/N against 1/√N per N; the ledger (page 07) then reads this
# design for the three looped claims, in place of the 200-step study above. No verdict is read at fewer seeds
# than the design fixed.

# %%
design = looped_study.POWER
power_loops = looped_study.study_runs(power_loop_root) if power_loop_root else looped.iloc[:0]
if len(power_loops):
    power_loops = power_loops[power_loops["status"] == "finished"].reset_index(drop=True)
power_loops = power_loops.assign(stalled=(power_loops[primary_metric] - floor).abs() < looped_study.STALL_NATS)
power_grid = looped_study.design_grid(power_loops, design)
finished_under = looped_study.complete_seeds(power_loops, power_grid, design.seeds)
whole_seeds = [s for s in design.seeds if all(s in finished_under.get(rule, []) for rule in design.rules)]
print(f"powered looped study: {len(power_loops)} of its {looped_study.grid_runs(power_grid, design.seeds)} runs have "
      f"finished under {power_loop_root}; seeds finished under both rules: {whole_seeds or 'none'}"
      + ("" if set(design.seeds) <= set(whole_seeds) else " (`DESIGN=power bash scripts/looped_study.sh` resumes it)"))
pilot_seeds = list(looped_study.POWER_PILOT_SEEDS)
# the pilot as it stood when it fixed the design: its seeds on the grid they called for, not on extensions that
# later seeds called for (those rates run for the pilot's seeds too, but do not move what the pilot fixed)
pilot_grid, pilot_runs = looped_study.seeds_own_grid(power_loops, pilot_seeds, design)
pilot_whole = looped_study.complete_seeds(pilot_runs, pilot_grid, pilot_seeds)
grown = [f"{rule} at N = {n} ({len(pilot_grid[(rule, n)])} → {len(rates)} rates)"
         for (rule, n), rates in power_grid.items() if len(rates) > len(pilot_grid[(rule, n)])]
if grown:
    print("the extension rule grew cells beyond the pilot's grid, for every seed: " + "; ".join(grown))
if all(pilot_whole.get(rule) == pilot_seeds for rule in design.rules):
    fixed = looped_study.pilot_design(looped_study.readings(pilot_runs, primary_metric)["contrast"], pilot_runs,
                                      len(pilot_seeds), design)
    display(tables.reader_table(
        fixed, "05_looped_power_pilot", figures_dir, index=False,
        columns=["estimator", "n", "effect", "sd", "seeds_needed", "pilot_cpu_hours", "design_seeds", "design_cpu_hours"],
        formats={"effect": "{:+.3f}", "sd": "{:.3f}", "pilot_cpu_hours": "{:.1f}", "design_cpu_hours": "{:.1f}"},
        rename={"n": "pilot seeds used", "effect": "contrast (1/N − 1/√N, per doubling)", "sd": "paired SD",
                "seeds_needed": f"seeds to detect {looped_study.CONTRAST_TARGET:g}", "pilot_cpu_hours": "pilot CPU-h",
                "design_seeds": "design's seeds", "design_cpu_hours": "design CPU-h"}))
    wanted = int(fixed["design_seeds"].iloc[0])
    print(f"The pilot fixes {wanted} seeds, about {fixed['design_cpu_hours'].iloc[0]:.1f} CPU-hours in all"
          + ("." if wanted == len(design.seeds) else
             f"; looped_study.POWER trains {len(design.seeds)}: it must name {wanted} before the runs beyond the pilot."))
if set(design.seeds) <= set(whole_seeds) and len(power_loops):
    power_runs = power_loops[power_loops["seed"].isin(design.seeds)].reset_index(drop=True)
    power_reading = looped_study.readings(power_runs, primary_metric)
    tables.reader_table(power_reading["optima"], "05_looped_power_optima", figures_dir, index=False,
                        columns=["variant", "loops", "seed", "grid_lr", "parabola_lr", "best_loss", "at_edge"],
                        formats={"grid_lr": "{:.3g}", "parabola_lr": "{:.3g}", "best_loss": "{:.4f}"},
                        rename={"loops": "N", "grid_lr": "grid optimum", "parabola_lr": "parabola optimum"})
    display(tables.reader_table(
        power_reading["transfer"], "05_looped_power_transfer", figures_dir, index=False,
        columns=["runs", "variant", "estimator", "seeds", "slope", "ci_low", "ci_high", "p", "p_equivalent", "verdict"],
        formats={"slope": "{:+.2f}", "ci_low": "{:+.2f}", "ci_high": "{:+.2f}"},
        rename={"slope": "slope (log₂ lr per doubling of N)", "ci_low": "95 % low", "ci_high": "95 % high",
                "p_equivalent": "TOST p (±1/6)"}))
    display(tables.reader_table(
        power_reading["contrast"], "05_looped_power_contrast", figures_dir, index=False,
        columns=["estimator", "n", "effect", "ci_low", "ci_high", "p", "mde"],
        formats={c: "{:+.3f}" for c in ("effect", "ci_low", "ci_high")} | {"mde": "{:.3f}"},
        rename={"n": "seeds", "effect": "1/N's − 1/√N's slope", "ci_low": "95 % low", "ci_high": "95 % high",
                "p": "paired p", "mde": "detectable (80 %)"}))
    print("; ".join(f"by the {r.estimator} optimum ({r.n} seeds) the design detects a contrast of {r.mde:.3f} per "
                    f"doubling, {'within' if r.mde <= looped_study.CONTRAST_TARGET else 'beyond'} the "
                    f"{looped_study.CONTRAST_TARGET:g} it was sized for" for r in power_reading["contrast"].itertuples()))
    display(tables.reader_table(
        power_reading["trainability"], "05_looped_power_trainability", figures_dir, index=False,
        formats={"gap": "{:+.4f}", "ci_low": "{:+.4f}", "ci_high": "{:+.4f}"},
        rename={"loops": "N", "gap": "scaled_loops − scaled at the optimum (nats)", "ci_low": "95 % low",
                "ci_high": "95 % high", "p": "paired p", "p_holm": "Holm p"}))
    falls = pd.Series([power_study.late_fall(run_folder(f"{power_loop_root}/lr{r.lr:g}", r.size, r.variant, r.seed))
                       for r in power_runs.itertuples()], dtype=float)
    shape = power_study.regime(power_runs, len(load_run_data(loop_run).train))
    print(f"{shape['runs']} runs of {shape['steps']:,} steps, {shape['tokens'] / 1e6:.1f} M tokens each "
          f"({shape['tokens_per_param'][1]:.1f} tokens per parameter, shared by the N loops; "
          f"{shape['passes']:.1f} passes over the train stream), {shape['cpu_hours']:.1f} CPU-hours in all; "
          f"stalled at the unigram level: {int(power_runs['stalled'].sum())}; the held-out loss fell over the last "
          f"{power_study.LATE_STEPS} steps in {int((falls > 0).sum())} of {falls.notna().sum()} runs "
          f"({falls.min():+.3f} to {falls.max():+.3f} nats)")

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
print(f"{size}, {len(seeds)} seeds, {int(summary['seeds'].sum())} runs. "
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
      + ", ".join(f"{v} {int(stalled.get(v, 0))} of {int((looped['variant'] == v).sum())}" for v in loop_variants) + ".")
for row in transfer[transfer["estimator"] == "parabola"].itertuples():
    if row.verdict == "too few seeds":
        print(f"{row.variant} ({row.runs}): {row.seeds} seed(s) with a slope, too few for a verdict.")
        continue
    print(f"{row.variant} ({row.runs}, {row.seeds} seeds): the optimum moves by {row.fold_change:.2g}x from N = 1 to 8 "
          f"(slope {row.slope:+.2f} per doubling, 95 % [{row.ci_low:+.2f}, {row.ci_high:+.2f}], TOST p "
          f"{row.p_equivalent:.2g}): {row.verdict}.")
for row in trainable.dropna(subset=["p"]).itertuples():
    print(f"N = {row.loops}: 1/N's loss at its optimum is {row.gap:+.4f} nats below 1/√N's (95 % [{row.ci_low:+.4f}, "
          f"{row.ci_high:+.4f}], Holm p {row.p_holm:.2g}).")
