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
# On Colab, fetch and install the project first; anywhere else rrlib is already installed.
import sys

REPO_URL = "https://github.com/rrlib-project/rrlib"
if "google.colab" in sys.modules:
    import os
    import subprocess

    if not os.path.isdir("rrlib"):
        subprocess.run(["git", "clone", "--depth", "1", REPO_URL, "rrlib"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "rrlib"], check=True)
    os.chdir("rrlib")
    sys.path.insert(0, os.getcwd())

# %% [markdown]
# # 0 · The claims ledger: which of the papers' claims hold here
#
# **Question.** The report reruns one paper and compares its family across five pages. Which headline claims of
# Review Residuals (Kramer 2026), Attention Residuals (Kimi), Delta Attention Residuals (arXiv 2605.18855),
# Multi-Gate Residuals (arXiv 2605.23259) and the looped-transformer scaling (arXiv 2606.18524), and of the
# family's older members (Highway networks, ReZero, LayerScale, Hyper-Connections, mHC), does the evidence here
# support, which does it contradict, which can its designs not decide (and what could they have seen), and
# which are out of its reach? The ledger comes first; how each row is tested follows it.

# %% tags=["parameters"]
out_root = "outputs/runs"  # the committed run folders (the depth ablation's and the family's results)
paper_csv = "../shared/reference/scaling_v8.csv"  # the paper's 42 runs
family_size = "family"  # the family page's size, whose table (05_<size>_summary) and runs the ledger reads
wide_size = "family_mini"  # the family at mini's width, read where its table exists
claims_size = "family"  # the size of this page's own runs
claims_variants = None  # the methods probed; None means the family's (the preset of claims_size)
claims_root = None  # the family retrained with its weights, and Review's gate halves; None: <out_root>/../claims
convert_root = None  # the conversion of standard into Delta AttnRes; None: <out_root>/../convert
seeds = [0, 1, 2]
train_missing = False  # train this page's runs when missing (the quick build's seconds-long ones); else they are read
alpha = 0.05
margin = 0.02  # nats: the equivalence margin of the conversion's TOST, the recipe ablation's (page 04)
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
import dataclasses
from pathlib import Path

from IPython.display import HTML, display
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.stats import t as t_dist
import torch

from rrlib.model import GPT, count_params
from rrlib.report import claims_study, gates, ledger, loading, plots, stats, tables
from rrlib.runs.arguments import seed_list
from rrlib.runs.config import project_path
from rrlib.runs.presets import load_preset, resolve_run
from rrlib.runs.sweep import results_table

plots.use_style()
seeds = seed_list(seeds)  # -p seeds 0 is one seed
tables_dir = project_path(figures_dir).parent / "tables" if figures_dir else project_path("paper/tables")
claims_root = claims_root or str(Path(out_root).parent / "claims")
convert_root = convert_root or str(Path(out_root).parent / "convert")
family = list(claims_variants or load_preset(claims_size).variants)
probed = family + claims_study.GATE_HALVES
if train_missing:
    claims_study.run_study(claims_size, seeds, claims_root, variants=family)


def page_table(name):
    """Another page's full table, or None when that page has not been built with it."""
    path = tables_dir / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def link(page, *items):
    """The evidence: the page, then its tables and figures, as paths relative to the report."""
    return "; ".join([f"{page}.reader.html"] + [f"tables/{i}.csv" if not i.endswith(".png") else f"figures/{i}"
                                                for i in items])


def missing(name):
    return ledger.untested(f"page table {name}.csv not built")


def unfinished(what, n):
    """The reason of a row whose own runs are not all in: no verdict from fewer seeds than the design's."""
    return ledger.untested(f"{what} runs not finished ({n} of {len(seeds)} seeds)")


rows = []
DELTA_GAIN = float(np.log(1.017))  # nats: the Delta paper's smallest gain, 1.7 % lower perplexity
paper_tests, ours_tests = page_table("04_paper_tests"), page_table("04_ours_tests")
# the Review paper's own effects: the gap of the means (the paper's reading) at the sizes where it reports a gain;
# the smallest is the margin of every "no gain" claim (a gain smaller than the paper's is no gain in its sense)
review_gains = (None if paper_tests is None else
                paper_tests[paper_tests["size"].isin(["590M", "1B"])].set_index(["size", "baseline"])["gap"])
review_margin = np.nan if review_gains is None else float(review_gains.min())

# %% [markdown]
# ## The ledger
#
# One row per claim: its verdict, the effect signed so that positive is what the claim says, a 95 % interval, the
# test and the page, table or figure it rests on (the full text of each test in the CSV beneath the table). The
# rows are built below, claim by claim; the page's last cell writes them here.

# %%
ledger_shown = display(HTML("<p>The ledger appears here when the page's last cell has run.</p>"), display_id=True)

# %% [markdown]
# ## How each claim is tested
#
# Every number is read from files the code wrote: the other pages' tables (`paper/tables/*.csv`), result files
# under `outputs/`, and the probe files of this page's own runs. **One verdict rule** turns each row's numbers into
# its word (`rrlib.report.ledger.judge`, unit-tested on constructed cases), at α = 0.05 on the p-value after the
# correction the row names in its `correction` column:
#
# - a **directional** claim (a gain, less growth, sharper routing) is *supported* when its effect is positive and
#   significant, *contradicted* when it is negative and significant, or, on the paper's own runs, when a one-sided
#   test puts it below the paper's own effect; otherwise *inconclusive*, and the row states the smallest effect
#   its design detects at 80 % power (`detectable`) beside the paper's (`paper_effect`);
# - a **null** claim ("no gain at ≤ 320M") is *contradicted* by a significant gain, and *supported* only when a
#   one-sided test puts every comparison's gain below a `margin` tied to the paper's own effect (the smallest gain
#   the Review paper reports, 590M against Highway); otherwise *inconclusive*;
# - an **equivalence** claim ("the optimum does not move with N") is *supported* when a TOST puts the effect
#   within its margin, *contradicted* when the effect is significant, otherwise *inconclusive*;
# - a **measured** claim ("about 7 %") is *supported* or *contradicted* by the tolerance its row states;
# - *out of reach* names what a claim needs (a size beyond a CPU, model-parallel training, a measurement the
#   studies do not make).
#
# A claim about comparisons that must all hold ("over both baselines", "at every N") takes the largest of their
# unadjusted p-values (the intersection-union test, which needs no correction), and its effect and interval are
# that same comparison's. Holm spans the comparisons a claim picks one from (a family's rules against standard,
# the depths of page 02).
#
# Four claims needed measurements no other page makes, so this page runs them (`rrlib.report.claims_study`,
# `bash scripts/claims_study.sh`): the routing contrast of the depth-attention rules, the scale of what every
# sublayer reads over depth, Review's gate fed only one of its two inputs, and a trained standard model converted
# into Delta AttnRes. They run at `family` (d 64, 4 blocks, 300 steps, the family page's own size), for two
# reasons: the page's runs then cost a few hours of training, where `family_mini` (d 128, 600 steps) costs
# several times the training FLOPs per run (both counted below, from the committed results); and at `family`
# every method already has three committed seeds, which a retrained run
# reproduces closely (trained at a later commit, whose kernels round differently; how closely is measured below),
# so the probes read, to that precision, the models the family page compares.


# %% [markdown]
# ## Review Residuals (Kramer 2026)
#
# **(a) Depth.** The convex form `(1 − r) h + r u` stalls in deep stacks; the additive form trains at every depth.
# Page 02's runs (depths 2 to 24 blocks, three seeds each): the gap convex − additive at the deepest depth, paired
# by seed with Holm over every depth; and the additive form's loss at the shallowest depth minus the deepest
# (Welch: different models), which is positive if it keeps learning as the stack deepens.

# %%
depth_runs = page_table("02_runs")
if depth_runs is None:
    rows += [ledger.row("Review", "(a) the convex form stalls in deep stacks", "", missing("02_runs"), ""),
             ledger.row("Review", "(a) the additive form trains at every depth", "", missing("02_runs"), "")]
else:
    depth_runs = depth_runs.assign(size=depth_runs["n_layers"].map(lambda n: f"{n:02d} blocks"))
    convex = stats.compare(depth_runs[depth_runs["variant"].isin(["review", "review_convex"])], "fixed_loss",
                           n_boot=0)
    deepest = convex.iloc[-1]
    onset = convex.loc[convex["significant"] & (convex["paired_gap"] > 0.1), "size"]
    rows.append(ledger.row(
        "Review", "(a) the convex form stalls in deep stacks",
        f"review_convex − review, fixed_loss, at {deepest['size']} ({int(deepest['paired_n'])} seeds, paired; "
        f"Holm over {len(convex)} depths); more than 0.1 nats behind from "
        f"{onset.iloc[0] if len(onset) else 'no depth'} on",
        ledger.judge("directional", deepest["paired_gap"], deepest["p_holm"], alpha=alpha),
        link("02_depth_stability", "02_runs", "02_final_loss"), deepest["paired_gap"], deepest["ci_low"],
        deepest["ci_high"], deepest["p_holm"], f"Holm over the {len(convex)} depths", detectable=deepest["mde"]))
    additive = depth_runs[depth_runs["variant"] == "review"]
    shallow, deep = additive["n_layers"].min(), additive["n_layers"].max()
    fall = ledger.welch(additive.loc[additive["n_layers"] == shallow, "fixed_loss"],
                        additive.loc[additive["n_layers"] == deep, "fixed_loss"], alpha)
    rows.append(ledger.row(
        "Review", "(a) the additive form trains at every depth",
        f"review's fixed_loss at {shallow} blocks − at {deep} blocks (Welch, {fall['n']} seeds each)",
        ledger.judge("directional", fall["effect"], fall["p"], alpha=alpha), link("02_depth_stability", "02_final_loss"),
        fall["effect"], fall["ci_low"], fall["ci_high"], fall["p"], "none: one comparison", detectable=fall["mde"]))

# %% [markdown]
# **(b) The gate starts neutral and learns how much to trust each update.** At init, r = σ(0) = 0.5 exactly: read
# here off a fresh `review` model at this page's size on held-out windows. Trained: the spread of r over tokens
# and channels per sublayer in page 01's trained model (one seed: no interval). The rule for this row: supported
# when r is exactly 0.5 at init and the trained gate's standard deviation is at least 0.05 (a tenth of the
# distance from neutral to either end) in every sublayer, i.e. the gate treats tokens differently.

# %%
run = resolve_run(claims_size, "review", seeds[0])
torch.manual_seed(run.seed)
fresh = GPT(run.model).eval()
idx, _ = loading.heldout_batch(run, claims_study.PROBE_WINDOWS)
init_deviation = max((r - 0.5).abs().max().item() for r in gates.gate_activity(fresh, idx))
per_sublayer = page_table("01_gates_per_sublayer")
if per_sublayer is None:
    rows.append(ledger.row("Review", "(b) the gate starts neutral (r = 0.5) and learns how much to trust each update",
                           "", missing("01_gates_per_sublayer"), ""))
else:
    spread = per_sublayer["sd r"].min()
    rows.append(ledger.row(
        "Review", "(b) the gate starts neutral (r = 0.5) and learns how much to trust each update",
        f"at init max |r − 0.5| = {init_deviation:.1g} ({claims_size}); trained (page 01, one seed): the smallest "
        f"per-sublayer SD of r over tokens and channels, against 0.05",
        ledger.judge("measured", holds=init_deviation == 0 and spread >= 0.05),
        link("01_mechanism", "01_gates_per_sublayer"), spread, correction="none: a measurement"))

# %% [markdown]
# **(c) Which half of the gate matters.** The paper sets Review apart from Highway by the gate's second input: it
# sees the update u, not only the state h. `review_state_only` feeds the gate [rms(h); 0] and
# `review_update_only` [0; rms(u)]: the same W_r ∈ R^{d×2d}, width, parameters and FLOPs as Review (the zeroed
# half gets no gradient), trained at this page's size and seeds and read against the family's committed
# Review, Highway and standard runs (the same settings and seeds; how closely a retrained run reproduces its
# committed result, not bitwise across thread schedules, is measured in the line below). Gap =
# variant − review on the fixed held-out set (positive: the full gate is better), paired by seed, Holm over the
# four comparisons.

# %%
def finished(root, size):
    table = results_table(root, size) if (project_path(root) / size).exists() else pd.DataFrame(columns=["variant"])
    return table[table["seed"].isin(seeds)] if len(table) else table


claims_runs, committed = finished(claims_root, claims_size), finished(out_root, claims_size)
family_runs = finished(out_root, family_size)
plan = claims_study.study_plan(claims_size, seeds, claims_root, family)
planned = sum(len(sweep["variants"]) * len(sweep["seeds"]) for sweep in plan)
cost = {size: finished(out_root, size)["train_flops"].mean() for size in (claims_size, wide_size)
        if size and len(finished(out_root, size))}
print(f"This page's study: {planned} runs at {claims_size} ({len(claims_runs)} of its runs under {claims_root} finished"
      + (f", {claims_runs['minutes'].mean():.1f} min of training each on average" if len(claims_runs) else "") + ")"
      + (f"; a {wide_size} run costs {cost[wide_size] / cost[claims_size]:.1f}× a {claims_size} run's training FLOPs"
         if len(cost) == 2 else "") + ".")
# a retrained method reproduces its committed run (same settings, seeds and machine type): the halves are read
# against the committed Review, Highway and standard
if len(claims_runs) and len(committed):
    again = claims_runs.merge(committed, on=["variant", "seed"], suffixes=("", "_committed"))
    print(f"{len(again)} retrained runs against their committed results: largest |Δ fixed_loss| "
          f"{(again['fixed_loss'] - again['fixed_loss_committed']).abs().max():.1g}")
halves_runs = pd.concat([claims_runs[claims_runs["variant"].isin(claims_study.GATE_HALVES)] if len(claims_runs)
                         else claims_runs, committed[committed["variant"].isin(["review", "highway", "standard"])]
                         if len(committed) else committed], ignore_index=True)
have = set(halves_runs["variant"])
halves_seeds = (min(halves_runs[halves_runs["variant"] == v]["seed"].nunique() for v in ("review", "review_state_only"))
                if {"review", "review_state_only"} <= have else 0)
if halves_seeds == len(seeds):
    halves = stats.compare(halves_runs, "fixed_loss", n_boot=0)
    display(tables.reader_table(halves.set_index("baseline"), "07_gate_halves", figures_dir,
                                columns=["mean_base", "paired_gap", "ci_low", "ci_high", "p", "p_holm", "mde", "paired_n"],
                                formats={c: "{:+.4f}" for c in ("paired_gap", "ci_low", "ci_high")} |
                                {"mean_base": "{:.4f}", "mde": "{:.4f}", "p": "{:.2g}", "p_holm": "{:.2g}"},
                                rename={"mean_base": "loss", "paired_gap": "variant − review", "ci_low": "95 % low",
                                        "ci_high": "95 % high", "p": "paired p", "p_holm": "Holm p",
                                        "mde": "detectable (80 %)", "paired_n": "seeds"},
                                full=halves))
    state_only = halves.set_index("baseline").loc["review_state_only"]
    others = "; ".join(f"{b} − review {r.paired_gap:+.4f}, Holm p {r.p_holm:.2g}"
                       for b, r in halves.set_index("baseline").drop("review_state_only").iterrows())
    rows.append(ledger.row(
        "Review", "(c) conditioning the gate on the update, not only the state, is what makes it work",
        f"review_state_only − review, fixed_loss, {claims_size}, {int(state_only['paired_n'])} seeds paired, Holm "
        f"over 4 (beside it: {others})",
        ledger.judge("directional", state_only["paired_gap"], state_only["p_holm"], alpha=alpha),
        link("07_claims", "07_gate_halves"), state_only["paired_gap"], state_only["ci_low"], state_only["ci_high"],
        state_only["p_holm"], "Holm over the 4 comparisons with review", detectable=state_only["mde"]))
else:
    rows.append(ledger.row("Review", "(c) conditioning the gate on the update, not only the state, is what makes it "
                           "work", "", unfinished("the gate-halves", halves_seeds), ""))

# %% [markdown]
# **(d, e, f) Where the gain appears.** Read from page 04's paired tests of the paper's own runs (val_loss, three
# seeds a size, Holm over its ten comparisons) and of ours (the CPU sizes, fixed_loss, five seeds, Holm over six);
# the trend of the gap over log size (page 04, one point per size); and page 06's fit of the gap on log size and
# log tokens per parameter, which separates scale from training budget (our grid; the paper's sizes cannot).

# %%
def gaps_at(tests, sizes):
    return tests[tests["size"].isin(sizes)]


def no_gain_row(claim, tests, where, correction, evidence):
    """A "no gain" claim over several comparisons: a significant gain (after ``correction``) contradicts it; every
    comparison's gain below the paper's smallest reported gain supports it (the comparison nearest the margin,
    whose one-sided p is the largest, is the row's)."""
    below = [ledger.below_margin_p(r.paired_gap, r.ci_low, r.ci_high, r.paired_n, review_margin, alpha)
             for r in tests.itertuples()]
    gains = tests[(tests["p_holm"] < alpha) & (tests["paired_gap"] > 0)]
    k = ledger.binding(below)
    chosen = gains.loc[gains["p_holm"].idxmin()] if len(gains) else tests.iloc[k]
    p_margin = np.nan if len(gains) else float(below[k])
    return ledger.row(
        "Review", claim,
        f"Review's paired gaps, {len(tests)} comparisons at {where} ({chosen['size']} vs {chosen['baseline']} shown); "
        f"one-sided p that the gain is below {review_margin:.4f} nats: {p_margin:.2g}",
        ledger.judge("null", chosen["paired_gap"], chosen["p_holm"], p_margin, alpha=alpha), evidence,
        chosen["paired_gap"], chosen["ci_low"], chosen["ci_high"], chosen["p_holm"], correction, review_margin,
        chosen["mde"], review_margin)


if ours_tests is None or paper_tests is None:
    rows.append(ledger.row("Review", "(d) no gain at small sizes, at CPU scale", "", missing("04_ours_tests"), ""))
else:
    rows.append(no_gain_row("(d) no gain at small sizes, at CPU scale", ours_tests,
                            ", ".join(ours_tests["size"].unique()) + " (fixed_loss)",
                            f"Holm over {len(ours_tests)} for a gain; every comparison below the margin",
                            link("04_statistics", "04_ours_tests")))
if paper_tests is None:
    rows += [ledger.row("Review", c, "", missing("04_paper_tests"), "") for c in
             ("(d) no gain at ≤ 320M (the paper's runs)", "(d) standard slightly better at 60M",
              "(e) a significant gain over both baselines at 590M", "(e) a significant gain over both at 1B",
              "(e) the gain at 1B is larger than at 590M")]
else:
    rows.append(no_gain_row("(d) no gain at ≤ 320M (the paper's runs)", gaps_at(paper_tests, ["60M", "150M", "320M"]),
                            "60M–320M (the paper's runs, val_loss)",
                            f"Holm over page 04's {len(paper_tests)} tests for a gain; every comparison below the margin",
                            link("04_statistics", "04_paper_tests")))
    sixty = paper_tests.set_index(["size", "baseline"]).loc[("60M", "standard")]
    rows.append(ledger.row(
        "Review", "(d) standard slightly better at 60M",
        "review − standard at 60M (the paper's runs, val_loss, paired)",
        ledger.judge("directional", -sixty["paired_gap"], sixty["paired_p"], alpha=alpha),
        link("04_statistics", "04_paper_tests"), -sixty["paired_gap"], -sixty["ci_high"], -sixty["ci_low"],
        sixty["paired_p"], "none: one comparison", -sixty["gap"], sixty["mde"]))
    for size in ("590M", "1B"):
        both = gaps_at(paper_tests, [size])
        effect, low, high, p = ledger.intersection(both["paired_gap"].to_numpy(), both["ci_low"].to_numpy(),
                                                   both["ci_high"].to_numpy(), both["paired_p"].to_numpy())
        binding = both.iloc[ledger.binding(both["paired_p"])]
        rows.append(ledger.row(
            "Review", f"(e) a significant gain over both baselines at {size}",
            f"Review's paired gaps at {size} (the paper's runs, val_loss: " + ", ".join(
                f"vs {b} {g:+.4f}, p {q:.2g}" for b, g, q in zip(both["baseline"], both["paired_gap"], both["paired_p"]))
            + f"); the comparison with the larger p (vs {binding['baseline']})",
            ledger.judge("directional", effect, p, alpha=alpha), link("04_statistics", "04_paper_tests"), effect, low,
            high, p, ledger.NO_CORRECTION, binding["gap"], binding["mde"]))
    # the per-seed paired gaps at 1B against those at 590M: the growth of the gain, per baseline
    paper = stats.load_results(project_path(paper_csv))
    growth = []
    for baseline in ("highway", "standard"):
        per_size = {s: (paper[(paper["size"] == s) & (paper["variant"] == baseline)].set_index("seed")["val_loss"]
                        - paper[(paper["size"] == s) & (paper["variant"] == "review")].set_index("seed")["val_loss"])
                    for s in ("590M", "1B")}
        growth.append(ledger.welch(per_size["1B"], per_size["590M"], alpha))
    effect, low, high, p = ledger.intersection([g["effect"] for g in growth], [g["ci_low"] for g in growth],
                                               [g["ci_high"] for g in growth], [g["p"] for g in growth])
    binding = growth[ledger.binding([g["p"] for g in growth])]
    grew = review_gains.unstack("size")
    rows.append(ledger.row(
        "Review", "(e) the gain at 1B is larger than at 590M",
        "Review's per-seed gap at 1B − at 590M (Welch over seeds), per baseline; the one with the larger p",
        ledger.judge("directional", effect, p, alpha=alpha), link("04_statistics", "04_paper_tests"), effect, low,
        high, p, ledger.NO_CORRECTION, float((grew["1B"] - grew["590M"]).min()), binding["mde"]))
rows.append(ledger.row("Review", "(e) the gain at 590M, in this harness", "Review against both baselines at the "
                       "paper's 590M recipe (`python -m rrlib sweep --size 590m` on a GPU)",
                       ledger.out_of_reach("590M on a GPU"), link("04_statistics"), paper_effect=review_margin))
# %%
trend = page_table("04_paper_trend")
if trend is None:
    rows.append(ledger.row("Review", "(f) the benefit emerges and grows with scale", "", missing("04_paper_trend"), ""))
else:
    # the slope's t-interval on n_sizes − 2 degrees of freedom, from page 04's standard error
    half = t_dist.ppf(1 - alpha / 2, (trend["n_sizes"] - 2).clip(lower=1)) * trend["stderr"]
    effect, low, high, p = ledger.intersection(trend["slope_per_decade"].to_numpy(),
                                               (trend["slope_per_decade"] - half).to_numpy(),
                                               (trend["slope_per_decade"] + half).to_numpy(), trend["p"].to_numpy())
    binding = trend.iloc[ledger.binding(trend["p"])]
    rows.append(ledger.row(
        "Review", "(f) the benefit emerges and grows with scale",
        "slope of Review's gap on log10 size (nats per decade, the paper's 5 sizes, one point each), the smaller over "
        "the two baselines, the one with the larger p (" + ", ".join(
            f"{b} {s:+.4f}, p {q:.2g}, detectable {ledger.detectable_coefficient(e, n - 2, alpha):.4f}"
            for b, s, q, e, n in zip(trend["baseline"], trend["slope_per_decade"], trend["p"], trend["stderr"],
                                     trend["n_sizes"])) + ")",
        ledger.judge("directional", effect, p, alpha=alpha), link("04_statistics", "04_paper_trend"), effect, low,
        high, p, ledger.NO_CORRECTION,
        detectable=ledger.detectable_coefficient(binding["stderr"], binding["n_sizes"] - 2, alpha)))
factors = page_table("06_gap_factors")
if factors is None:
    rows.append(ledger.row("Review", "(f) the gain follows size, not the training budget", "",
                           missing("06_gap_factors"), ""))
else:
    size_terms = factors[(factors["metric"] == "fixed_loss") & (factors["term"] == "log10_size")]
    effect, low, high, p = ledger.intersection(size_terms["coef"].to_numpy(), size_terms["ci_low"].to_numpy(),
                                               size_terms["ci_high"].to_numpy(), size_terms["p"].to_numpy())
    binding = size_terms.iloc[ledger.binding(size_terms["p"])]
    tpp = factors[(factors["metric"] == "fixed_loss") & (factors["term"] == "log10_tokens_per_param")]
    rows.append(ledger.row(
        "Review", "(f) the gain follows size, not the training budget",
        f"page 06: coefficient of log10 size in the gap's fit on size and tokens per parameter ({int(size_terms['n_cells'].iloc[0])} "
        f"cells, fixed_loss), the baseline with the larger p (detectable " + ", ".join(
            f"{b} {ledger.detectable_coefficient(e, d, alpha):.3f}" for b, e, d in
            zip(size_terms["baseline"], size_terms["stderr"], size_terms["df"])) + "); tokens per parameter: " + ", ".join(
            f"{b} {c:+.3f} [{lo:+.3f}, {hi:+.3f}]" for b, c, lo, hi in
            zip(tpp["baseline"], tpp["coef"], tpp["ci_low"], tpp["ci_high"])),
        ledger.judge("directional", effect, p, alpha=alpha), link("06_size_vs_tokens", "06_gap_factors"), effect, low,
        high, p, ledger.NO_CORRECTION,
        detectable=ledger.detectable_coefficient(binding["stderr"], binding["df"], alpha)))

# %% [markdown]
# **(g) What the gate costs in parameters.** The paper says the gate adds about 7 % parameters. Counted here by
# the model code (`rrlib.model.count_params`, on the meta device) at the paper's five Review configurations, its
# presets `60m` … `1b` (d 512/768/1024/1280/1536, 8/12/16/20/24 blocks, 8/12/16/20/16 heads, GPT-2's vocabulary of
# 50,257, context 256): the gate's parameters are Review's minus those of the same model with the standard
# residual, as a share of all of Review's. The rule for this row: supported when the share is within one point of
# 7 % at every size, contradicted otherwise; the effect is the smallest share.

# %%
PAPER_SIZES = ["60m", "150m", "320m", "590m", "1b"]
STATED_SHARE, SHARE_TOLERANCE = 0.07, 0.01  # "about 7 %", read as 6–8 %
gate_cost = []
for size in PAPER_SIZES:
    model = resolve_run(size, "review", 0).model
    total, without = count_params(model), count_params(dataclasses.replace(model, variant="standard"))
    gate_cost.append({"size": size, "d_model": model.d_model, "blocks": model.n_layers, "heads": model.n_heads,
                      "vocab": model.vocab_size, "context": model.seq_len, "review_params": total,
                      "gate_params": total - without, "gate_share": (total - without) / total})
gate_cost = pd.DataFrame(gate_cost)
display(tables.reader_table(gate_cost.set_index("size"), "07_gate_share", figures_dir,
                            formats={"gate_share": "{:.1%}"},
                            rename={"review_params": "Review's parameters", "gate_params": "the gate's",
                                    "gate_share": "the gate's share"}))
share = gate_cost.set_index("size")["gate_share"]
rows.append(ledger.row(
    "Review", "(g) the gate adds about 7 % parameters",
    "the gate's share of Review's parameters, counted by the model code at the paper's five configurations: "
    + ", ".join(f"{size} {value:.1%}" for size, value in share.items())
    + f"; against {STATED_SHARE:.0%} ± {SHARE_TOLERANCE:.0%}",
    ledger.judge("measured", holds=bool(((share - STATED_SHARE).abs() <= SHARE_TOLERANCE).all())),
    link("07_claims", "07_gate_share"), share.min(), correction="none: a count", paper_effect=STATED_SHARE,
    margin=SHARE_TOLERANCE))

# %% [markdown]
# ## Probes of the family: what each sublayer reads, and how sharply depth attention routes
#
# Every method of the family at this page's size, retrained with its weights kept (the committed family runs stay
# untouched), probed on the first held-out windows at init (the run's own seed) and trained. **Activation scale:**
# the RMS over channels, averaged over tokens, of what each sublayer reads (`rule.read(state, i)` before its
# pre-norm: the residual stream itself for the rules that commit to h; the routed mix for AttnRes, the pooled
# streams for MGR and HC). Growth over depth: log₂ of the last sublayer's read RMS over the first's. **Routing
# contrast:** for the four depth-attention rules, the mean over tokens of the largest routing weight of each read
# (1 where a read has a single source), beside the uniform weight 1/S.

# %%
scales = claims_study.read_probes(claims_root, claims_size, probed, seeds, "scales")
routing = claims_study.read_probes(claims_root, claims_size, claims_study.ROUTED, seeds, "routing")
print(f"probe files: {scales.groupby(['variant', 'seed']).ngroups if len(scales) else 0} runs with read scales, "
      f"{routing.groupby(['variant', 'seed']).ngroups if len(routing) else 0} with routing, "
      f"of {len(probed) * len(seeds)} and {len(claims_study.ROUTED) * len(seeds)}")
if len(scales):
    activation = scales[scales["sublayer"] != "head"].pivot_table(
        index=["variant", "state", "sublayer", "index"], columns="seed", values="read_rms").reset_index()
    tables.reader_table(activation, "07_activation", figures_dir, index=False,
                        formats={s: "{:.3g}" for s in seeds if s in activation.columns})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, state in zip(axes, ("init", "trained")):
        here = scales[(scales["state"] == state) & (scales["sublayer"] != "head")]
        for variant, part in here.groupby("variant", sort=False):
            mean = part.groupby("index")["read_rms"].mean()
            ax.plot(mean.index, mean.values, marker=plots.marker(variant), color=plots.color(variant), label=variant)
        ax.set(yscale="log", xlabel="sublayer (attn, mlp, attn, ...)", ylabel="RMS of what the sublayer reads",
               title=state)
    plots.legend_outside(axes[1], fontsize=8)
    fig.suptitle(f"{claims_size}: the scale of each sublayer's input over depth (mean over {len(seeds)} seeds)")
    plots.show_figure(fig, "07_activation", figures_dir)

# %%
if len(routing):
    contrast = routing.pivot_table(index=["variant", "state", "sublayer", "index", "n_sources", "uniform"],
                                   columns="seed", values="max_weight").reset_index()
    tables.reader_table(contrast, "07_routing", figures_dir, index=False,
                        formats={s: "{:.3f}" for s in seeds if s in contrast.columns} | {"uniform": "{:.3f}"})
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for (variant, state), part in routing.groupby(["variant", "state"], sort=False):
        mean = part.groupby("index")["max_weight"].mean()
        ax.plot(mean.index, mean.values, marker=plots.marker(variant), color=plots.color(variant),
                linestyle="-" if state == "trained" else ":", label=f"{variant} ({state})")
    ax.set(xlabel="read (sublayer index; the last is the head for the AttnRes forms)",
           ylabel="largest routing weight (mean over tokens)", ylim=(0, 1.05),
           title=f"{claims_size}: routing contrast of the depth-attention rules, init (dotted) and trained")
    plots.legend_outside(ax, fontsize=8)
    plots.show_figure(fig, "07_routing", figures_dir)


# %% [markdown]
# **What training changed.** The papers speak of what training does to the scales over depth, so each growth
# test is *trained minus initial*: the growth over depth (log₂ of the last sublayer's value over the first's) in
# the trained model less the same at its init, per seed, on each paper's own metric: the per-sublayer *output*
# magnitude (the RMS of the update u) for Attention Residuals, the *activation* scale (the RMS of what a sublayer
# reads) for MGR. Effect = standard's learned growth − the rule's (positive: training grows the rule's scales
# less), paired by seed, Holm over the two claims.

# %%
MECHANISMS = {"attnres": "update_rms", "mgr": "read_rms"}  # the rule, and the metric its paper speaks of


def learned_growth(variant, metric):
    """Per seed: log2(last/first sublayer) of ``metric`` trained, minus the same at init."""
    part = scales[(scales["variant"] == variant) & (scales["sublayer"] != "head")].sort_values("index")
    ends = part.groupby(["state", "seed"])[metric].agg(["first", "last"])
    growth = np.log2(ends["last"] / ends["first"])
    return growth["trained"] - growth["init"]


growth_tests = {}
for v, metric in MECHANISMS.items():
    if len(scales) and {"standard", v} <= set(scales["variant"]):
        diffs = (learned_growth("standard", metric) - learned_growth(v, metric)).dropna()
        if len(diffs) == len(seeds):  # a test only over the design's seeds
            growth_tests[v] = {**ledger.paired(diffs, alpha), "metric": metric}
holm_growth = dict(zip(growth_tests, stats.holm([t["p"] for t in growth_tests.values()])))
if growth_tests:
    growth_table = pd.DataFrame({v: {**t, "p_holm": holm_growth[v]} for v, t in growth_tests.items()}).T
    display(tables.reader_table(growth_table, "07_growth", figures_dir,
                                columns=["metric", "effect", "ci_low", "ci_high", "p", "p_holm", "mde", "n"],
                                formats={c: "{:+.3f}" for c in ("effect", "ci_low", "ci_high")} |
                                {"p": "{:.2g}", "p_holm": "{:.2g}", "mde": "{:.3f}"},
                                rename={"effect": "standard's learned growth − the rule's (log₂)",
                                        "ci_low": "95 % low", "ci_high": "95 % high", "p": "paired p",
                                        "p_holm": "Holm p", "mde": "detectable (80 %)", "n": "seeds"}))


def growth_row(paper, claim, variant):
    t = growth_tests.get(variant, {"n": 0})
    if t["n"] < len(seeds):
        return ledger.row(paper, claim, "", unfinished(f"the {variant} and standard probe", t["n"]), "")
    return ledger.row(
        paper, claim, f"learned growth over depth of {t['metric']} (log₂ last/first sublayer, trained − init), "
        f"standard's − {variant}'s, {claims_size} (4 blocks), {t['n']} seeds paired",
        ledger.judge("directional", t["effect"], holm_growth[variant], alpha=alpha),
        link("07_claims", "07_growth", "07_activation", "07_activation.png"), t["effect"], t["ci_low"], t["ci_high"],
        holm_growth[variant], f"Holm over the {len(growth_tests)} growth claims", detectable=t["mde"])


# %% [markdown]
# ## Attention Residuals (Kimi)
#
# Softmax attention over earlier layers' outputs in place of the sum is to keep the residual stream from growing
# without bound with depth (the growth test above); Block AttnRes is to keep most of the gain at a fraction of the
# cost (page 05's gaps against standard; the cost from its benchmark). A gain can only be kept where there is one:
# the row's verdict is AttnRes's own gain's.

# %%
summary = page_table(f"05_{family_size}_summary")


def against_standard(variant):
    """standard − variant's paired interval from the family's runs (page 05's table gives the Holm p)."""
    if not len(family_runs) or not {variant, "standard"} <= set(family_runs["variant"]):
        return np.nan, np.nan
    test = stats.compare(family_runs[family_runs["variant"].isin([variant, "standard"])], "fixed_loss",
                         reference=variant, n_boot=0).iloc[0]
    return test["ci_low"], test["ci_high"]



def family_gain_row(paper, claim, variant):
    """A claim that ``variant`` beats the standard residual: standard − variant at the family page's size from its
    table (Holm over the family), the interval from its runs, and the same gap at the wider size beside it."""
    if summary is None:
        return ledger.row(paper, claim, "", missing(f"05_{family_size}_summary"), "")
    if variant not in set(summary["variant"]):
        return ledger.row(paper, claim, "", ledger.untested(f"no {family_size} runs of {variant}"), "")
    r = summary.set_index("variant").loc[variant]
    wide = page_table(f"05_{wide_size}_summary")
    also = ""
    if wide is not None and variant in set(wide["variant"]):
        w = wide.set_index("variant").loc[variant]
        also = f"; at {wide_size} {w['gap vs standard']:+.4f}, Holm p {w['p (Holm)']:.2g}"
    return ledger.row(
        paper, claim,
        f"standard − {variant} at {family_size}, fixed_loss, Holm over the family: Holm p {r['p (Holm)']:.2g}"
        + also,
        ledger.judge("directional", r["gap vs standard"], r["p (Holm)"], alpha=alpha),
        link("05_related_methods", f"05_{family_size}_summary"), r["gap vs standard"], *against_standard(variant),
        r["p (Holm)"], f"Holm over the family's {len(summary) - 1} comparisons with standard (page 05)",
        detectable=r["detectable gap"])


rows.append(growth_row("Attention Residuals", "softmax over depth counters the growth of the residual stream", "attnres"))
if summary is None:
    rows.append(ledger.row("Attention Residuals", "Block AttnRes keeps most of the gain at a fraction of the cost", "",
                           missing(f"05_{family_size}_summary"), ""))
else:
    by = summary.set_index("variant")
    full, block = by.loc["attnres"], by.loc["attnres_block"]
    speed = (f"; speed vs standard (bench) {full['tokens/s vs standard']:.2f} full, {block['tokens/s vs standard']:.2f} "
             "block" if np.isfinite(full["tokens/s vs standard"]) else "")
    rows.append(ledger.row(
        "Attention Residuals", "Block AttnRes keeps most of the gain at a fraction of the cost",
        f"AttnRes's own gain over standard at {family_size} (standard − attnres, Holm over the family): "
        f"{full['gap vs standard']:+.4f}, Holm p {full['p (Holm)']:.2g}; "
        f"Block's {block['gap vs standard']:+.4f}" + speed,
        ledger.judge("directional", full["gap vs standard"], full["p (Holm)"], alpha=alpha),
        link("05_related_methods", f"05_{family_size}_summary"), full["gap vs standard"], *against_standard("attnres"),
        full["p (Holm)"], f"Holm over the family's {len(summary) - 1} comparisons with standard (page 05)",
        detectable=full["detectable gap"]))
rows += [ledger.row("Attention Residuals", "Block AttnRes matches a baseline trained with 1.25× the compute",
                    "compute-matched scaling fits of Block AttnRes and standard over several budgets",
                    ledger.out_of_reach("scaling-law fits over training budgets at the paper's scale (GPUs)"), ""),
         ledger.row("Attention Residuals", "Block AttnRes adds under 2 % inference latency",
                    "inference latency of Block AttnRes against standard at the paper's scale",
                    ledger.out_of_reach("inference timing at the paper's scale on its hardware (the family's benchmark "
                                        "times training steps of small models)"), "")]

# %% [markdown]
# ## Delta Attention Residuals (arXiv 2605.18855)
#
# **(g) Routing contrast.** The paper reports AttnRes's routing collapsing in deeper layers to a largest weight of
# about 0.2, and Delta AttnRes's staying near 0.6. Here: the largest weight averaged over the deeper half of the
# reads (sublayers, not the head), trained, per seed, *less the uniform weight 1/S over the same read's S sources*
# (a read over two sources scores 0.5 by construction: the excess over uniform is what routing adds); effect =
# Delta's excess − AttnRes's, per sublayer and per block form, paired by seed, Holm over the two. In rrlib both per-sublayer forms route over the same sources (x0 and
# every sublayer's output, as Kimi's formula and the Delta paper's per-sublayer deltas read); what differs is that
# AttnRes's mix *replaces* the stream and Delta's is *added* to it, so this tests the contrast the paper measures,
# not its account of why (cumulative states against deltas). **(h)** Delta AttnRes against standard and against
# AttnRes, on the family's committed runs (both must hold: the larger p, and that comparison's gap). **(i)** Conversion:
# below.

# %%
def deep_reads(variant):
    part = routing[(routing["variant"] == variant) & (routing["state"] == "trained") & (routing["sublayer"] != "head")]
    return part[part["index"] >= (part["index"].max() + 1) // 2]


def deep_contrast(variant):
    """Per seed: the largest routing weight's excess over the uniform weight, averaged over the deeper reads."""
    reads = deep_reads(variant)
    return (reads["max_weight"] - reads["uniform"]).groupby(reads["seed"]).mean()


pairs = {"per sublayer": ("attnres", "delta_attnres"), "per block": ("attnres_block", "delta_attnres_block")}
routed = set(routing["variant"]) if len(routing) else set()
contrast_tests = {}
for form, (base, delta) in pairs.items():
    if {base, delta} <= routed:
        shared = deep_contrast(base).index.intersection(deep_contrast(delta).index)
        if len(shared) == len(seeds):
            contrast_tests[form] = {**ledger.paired((deep_contrast(delta) - deep_contrast(base))[shared], alpha),
                                    base: deep_contrast(base)[shared].mean(), delta: deep_contrast(delta)[shared].mean()}
if contrast_tests.get("per sublayer", {"n": 0})["n"] == len(seeds):
    holm_contrast = dict(zip(contrast_tests, stats.holm([t["p"] for t in contrast_tests.values()])))
    t = contrast_tests["per sublayer"]
    rows.append(ledger.row(
        "Delta AttnRes", "(g) over deltas routing stays selective (~0.6) where AttnRes's collapses (~0.2)",
        f"largest routing weight over the uniform one, deeper half of the reads, trained, {claims_size}: delta_attnres "
        f"{t['delta_attnres']:.3f}, attnres {t['attnres']:.3f} (uniform weights over the same reads: "
        f"{deep_reads('attnres')['uniform'].mean():.3f}); delta − attnres, {t['n']} seeds paired" + "".join(
            f"; per block: delta_attnres_block {b['delta_attnres_block']:.3f}, attnres_block {b['attnres_block']:.3f}, "
            f"{b['effect']:+.3f} [{b['ci_low']:+.3f}, {b['ci_high']:+.3f}], Holm p {holm_contrast['per block']:.2g}"
            for b in [contrast_tests[form] for form in contrast_tests if form == "per block"]),
        ledger.judge("directional", t["effect"], holm_contrast["per sublayer"], alpha=alpha),
        link("07_claims", "07_routing", "07_routing.png"), t["effect"], t["ci_low"], t["ci_high"],
        holm_contrast["per sublayer"], f"Holm over the {len(contrast_tests)} forms", detectable=t["mde"]))
else:
    rows.append(ledger.row("Delta AttnRes", "(g) over deltas routing stays selective (~0.6) where AttnRes's collapses "
                           "(~0.2)", "", unfinished("the attnres and delta_attnres probe",
                                                    contrast_tests.get("per sublayer", {"n": 0})["n"]), ""))

# %%
for form, (base, delta) in pairs.items():
    claim = f"(h) Delta AttnRes beats standard and AttnRes, {form}"
    if not len(family_runs) or not {base, delta, "standard"} <= set(family_runs["variant"]):
        rows.append(ledger.row("Delta AttnRes", claim, "", ledger.untested(f"no {family_size} runs of {delta}"), ""))
        continue
    tests = stats.compare(family_runs[family_runs["variant"].isin([base, delta, "standard"])], "fixed_loss",
                          reference=delta, n_boot=0).set_index("baseline")
    effect, low, high, p = ledger.intersection(tests["paired_gap"].to_numpy(), tests["ci_low"].to_numpy(),
                                               tests["ci_high"].to_numpy(), tests["paired_p"].to_numpy())
    binding = tests.iloc[ledger.binding(tests["paired_p"])]
    rows.append(ledger.row(
        "Delta AttnRes", claim,
        f"{family_size}, fixed_loss, paired over {int(tests['paired_n'].min())} seeds: " + "; ".join(
            f"{b} − {delta} {r.paired_gap:+.4f} (p {r.paired_p:.2g})" for b, r in tests.iterrows())
        + "; the comparison with the larger p",
        ledger.judge("directional", effect, p, alpha=alpha), link("05_related_methods", f"05_{family_size}_summary"),
        effect, low, high, p, ledger.NO_CORRECTION, DELTA_GAIN, binding["mde"]))
rows.append(ledger.row("Delta AttnRes", "(h) 1.7–8.2 % lower validation perplexity at 220M–7.6B",
                       "Delta AttnRes against standard and AttnRes at the paper's sizes",
                       ledger.out_of_reach("220M–7.6B models on GPUs; (h) above tests the sign at this page's size"),
                       "", paper_effect=DELTA_GAIN))

# %% [markdown]
# **(i) Conversion by fine-tuning.** The paper fine-tunes a pretrained model into Delta AttnRes. Its code
# (`train_finetune.py`) loads the pretrained weights into the new model, leaves the new routing parameters at
# their init and trains everything with one optimiser; its default (no gate) adds the routed mean of the sources
# from the first step, and its "null source" option does too whenever a read has more than that one source, so
# neither starts at the pretrained function. Its `learnable_alpha` gate, zero at init, does: rrlib's
# `delta_attnres` with `identity_gate=True`, which this page converts into (`train.init_from`: every tensor but
# the rule's from the source run). The converted model's logits at conversion are compared with the source's on
# held-out windows (with and without the gate), then each seed's trained standard is fine-tuned for half its steps
# as Delta AttnRes and, from the same weights, continued as standard for as long, with the same recipe. Effect =
# continued − converted (positive: the converted model ends better, which is what "converts by fine-tuning"
# claims: a conversion that ends equal is the continued model), paired by seed; a TOST at ±`margin` beside it.

# %%
conversions = claims_study.read_conversions(convert_root, claims_size, seeds)
if len(conversions) < len(seeds):
    rows.append(ledger.row("Delta AttnRes", "(i) the converted model starts at the pretrained model's function", "",
                           unfinished("the converted", len(conversions)), ""))
else:
    display(tables.reader_table(conversions.set_index("seed"), "07_conversion", figures_dir,
                                columns=["max_abs_logit_diff", "max_abs_logit_diff_without_gate", "gate_abs_mean_trained"],
                                formats={"max_abs_logit_diff": "{:.3g}", "max_abs_logit_diff_without_gate": "{:.3g}",
                                         "gate_abs_mean_trained": "{:.3g}"},
                                rename={"max_abs_logit_diff": "max |Δ logit| at conversion",
                                        "max_abs_logit_diff_without_gate": "… without the identity gate",
                                        "gate_abs_mean_trained": "mean |g| after fine-tuning"}))
    worst = conversions["max_abs_logit_diff"].max()
    rows.append(ledger.row(
        "Delta AttnRes", "(i) the converted model starts at the pretrained model's function",
        f"largest |logit difference| at conversion over {len(conversions)} seeds' held-out windows, with the identity "
        f"gate (without it: up to {conversions['max_abs_logit_diff_without_gate'].max():.3g}); supported at ≤ 1e-6",
        ledger.judge("measured", holds=worst <= 1e-6), link("07_claims", "07_conversion"), worst,
        correction="none: a measurement"))
convert_runs = results_table(convert_root, claims_size) if project_path(convert_root).exists() else pd.DataFrame()
sides = set(convert_runs["variant"]) if len(convert_runs) else set()
wide_conv = (convert_runs.pivot_table(index="seed", columns="variant", values="fixed_loss").dropna()
             if {"standard", claims_study.CONVERTED} <= sides else pd.DataFrame())
if len(wide_conv) == len(seeds):
    diffs = wide_conv["standard"] - wide_conv[claims_study.CONVERTED]
    t = ledger.paired(diffs, alpha)
    p_equivalent = stats.equivalence_p(diffs, margin)
    opened = (f"; the identity gates opened to a mean |g| of {conversions['gate_abs_mean_trained'].mean():.3g}, so "
              "the converted model routes little" if len(conversions) else "")
    rows.append(ledger.row(
        "Delta AttnRes", "(i) a pretrained checkpoint converts into Delta AttnRes by ordinary fine-tuning",
        f"continued standard − converted, fixed_loss after {int(convert_runs['steps'].iloc[0])} steps, {t['n']} seeds "
        f"paired: TOST p (±{margin}) {p_equivalent:.2g}" + opened,
        ledger.judge("directional", t["effect"], t["p"], alpha=alpha), link("07_claims", "07_conversion"),
        t["effect"], t["ci_low"], t["ci_high"], t["p"], "none: one comparison", detectable=t["mde"]))
else:
    rows.append(ledger.row("Delta AttnRes", "(i) a pretrained checkpoint converts into Delta AttnRes by ordinary "
                           "fine-tuning", "", unfinished("the conversion", len(wide_conv)), ""))

# %% [markdown]
# ## Multi-Gate Residuals (arXiv 2605.23259) and looped transformers (arXiv 2606.18524)
#
# MGR's activation scales: the growth test above. "Without extra communication" is a claim about model-parallel
# training, which a single process cannot test. Its gain: page 05. The looped claims: page 05's study
# (`rrlib.report.looped_study`, `bash scripts/looped_study.sh`), whose verdict on transfer is *transfers* (the
# claim holds), *moves with N* (it fails) or *undecided*, and holds here only if page 05's supplementary
# extension of the edge cells leaves it standing; and its trainability test, `scaled_loops` − `scaled` at
# each seed's optimum, per N: a claim across loop counts holds only if it holds at every N, so no correction (the
# largest unadjusted p, and that N's gap).

# %%
rows.append(growth_row("Multi-Gate Residuals", "MGR stabilises activation scales", "mgr"))
rows.append(ledger.row("Multi-Gate Residuals", "without extra communication", "communication volume under tensor "
                       "or pipeline parallelism", ledger.out_of_reach("multi-device model-parallel training"), ""))
rows.append(family_gain_row("Multi-Gate Residuals", "MGR improves over existing architectures", "mgr"))
rows.append(ledger.row("Multi-Gate Residuals", "MGR is practical for large-scale training and deployment",
                       "training and serving at scale", ledger.out_of_reach("large-scale training on GPUs"), ""))

# %%
transfer, trainable = page_table("05_looped_transfer"), page_table("05_looped_trainability")
in_progress = ledger.untested("study in progress (no seed has finished every cell)")
looped_link = link("05_related_methods", "05_looped_transfer", "05_looped_trainability")
if trainable is None or trainable.dropna(subset=["p"]).empty:
    rows.append(ledger.row("Looped transformers", "1/N scaling gives better loss than 1/√N across loop counts",
                           "scaled_loops − scaled at each seed's optimum, per N", in_progress, looped_link))
else:
    done = trainable.dropna(subset=["p"])  # N = 1 is the same model under both rules: no test there
    effect, low, high, p = ledger.intersection(done["gap"].to_numpy(), done["ci_low"].to_numpy(),
                                               done["ci_high"].to_numpy(), done["p"].to_numpy())
    rows.append(ledger.row("Looped transformers", "1/N scaling gives better loss than 1/√N across loop counts",
                           f"scaled_loops − scaled at each seed's optimum, N = {', '.join(map(str, done['loops']))} "
                           f"(" + ", ".join(f"N = {n}: {g:+.4f}, p {q:.2g}" for n, g, q in
                                            zip(done["loops"], done["gap"], done["p"])) + "); the N with the largest p",
                           ledger.judge("directional", effect, p, alpha=alpha), looped_link, effect, low, high, p,
                           ledger.NO_CORRECTION))
primary = None if transfer is None else transfer[(transfer["variant"] == "scaled") & (transfer["runs"] == "all runs")]
if primary is None or primary.empty or primary["slope"].isna().all():
    rows.append(ledger.row("Looped transformers", "the best learning rate depends on L only, not on N",
                           "slope of log₂(optimal lr) on log₂ N under 1/N scaling, TOST ±1/6", in_progress, looped_link))
else:
    first, second = primary.iloc[0], primary.iloc[1]  # the study's primary estimator first, the grid argmin next

    def as_claim(estimate):  # the slope within ±1/6 (a factor √2 over N = 1 → 8) is the claim
        return ledger.judge("equivalence", estimate["slope"], estimate["p"], estimate["p_equivalent"], alpha=alpha)

    kind = as_claim(first)
    test = (f"slope of log₂(optimal lr) on log₂ N under 1/N scaling ({first['estimator']}, {int(first['seeds'])} "
            f"seeds): p {first['p']:.2g}, TOST p (±1/6) {first['p_equivalent']:.2g}; the study's verdict: "
            f"{first['verdict']}; by the {second['estimator']} optimum ({int(second['seeds'])} seeds) TOST p "
            f"{second['p_equivalent']:.2g}, {second['verdict']}")
    # A verdict that rests on the seeds whose optimum was interior in every cell holds here only if it survives
    # the supplementary extension that gives every seed one; where it does not, the claim is undecided at this
    # scale, and the row says so.
    extended = transfer[(transfer["variant"] == "scaled") & transfer["runs"].str.startswith("edge cells")]
    if len(extended):
        also = extended.iloc[0]
        test += (f"; with the edge cells extended (supplementary, {int(also['seeds'])} seeds) TOST p "
                 f"{also['p_equivalent']:.2g}, {also['verdict']}")
        if as_claim(also) != kind:
            kind = "inconclusive"
            first = also
    rows.append(ledger.row("Looped transformers", "the best learning rate depends on L only, not on N", test,
                           kind, looped_link, first["slope"], first["ci_low"], first["ci_high"], first["p"],
                           "none: one slope (the supplementary extension must agree)", margin=1 / 6))
rows += [ledger.row("Looped transformers", "the best learning rate depends on the number of unique layers L",
                    "optimal learning rate against L at fixed N", ledger.out_of_reach(
                        "a sweep over L (the looped study varies the loop count N at one L)"), looped_link),
         ledger.row("Looped transformers", "under 1/√L scaling the residual stream of a looped model grows with N, "
                    "under 1/N it does not", "residual-stream norm over the loops, per rule and N",
                    ledger.out_of_reach("the residual stream's norm over the loops (the looped runs record losses)"), looped_link)]

# %% [markdown]
# ## The family's older members: Highway networks, ReZero, LayerScale, Hyper-Connections, mHC
#
# Their abstracts' headline claims, read again. Where the family's committed runs can test one (ReZero's faster
# convergence, Hyper-Connections' gain over the residual, mHC's over Hyper-Connections), the test is the family
# page's at its size: equal steps, fixed held-out loss, paired by seed; "converges faster" is read as a lower loss
# after the same number of steps. The others need depths or scales this study does not reach.

# %%
rows.append(ledger.row("Highway networks", "networks with hundreds of layers train directly by gradient descent",
                       "training loss against depth of the convex Highway form, to hundreds of layers",
                       ledger.out_of_reach("depths of hundreds of layers with the paper's negative carry bias (page 02 "
                                           "stops at 24 blocks, its convex gate starting at g = 0.5)"), link("02_depth_stability")))
rows.append(family_gain_row("ReZero", "converges faster than the standard residual (56 % faster on enwik8)",
                            "rezero"))
rows.append(ledger.row("ReZero", "trains 120-layer transformers", "a depth sweep of rezero",
                       ledger.out_of_reach("a depth sweep of rezero (page 02 covers review, highway and standard)"), ""))
rows.append(ledger.row("LayerScale (CaiT)", "improves the accuracy of deeper transformers",
                       "layerscale against standard over depth", ledger.out_of_reach(
                           "a depth sweep of layerscale (the family's runs are 4 blocks deep)"), ""))
rows.append(family_gain_row("Hyper-Connections", "hyper-connections improve over residual connections in language "
                            "model pre-training", "hc"))
if len(family_runs) and {"hc", "mhc"} <= set(family_runs["variant"]):
    over_hc = stats.compare(family_runs[family_runs["variant"].isin(["hc", "mhc"])], "fixed_loss", reference="mhc",
                            n_boot=0).iloc[0]
    rows.append(ledger.row(
        "mHC", "improves over Hyper-Connections",
        f"hc − mhc at {family_size}, fixed_loss, paired over {int(over_hc['paired_n'])} seeds",
        ledger.judge("directional", over_hc["paired_gap"], over_hc["paired_p"], alpha=alpha),
        link("05_related_methods", f"05_{family_size}_summary"), over_hc["paired_gap"], over_hc["ci_low"],
        over_hc["ci_high"], over_hc["paired_p"], "none: one comparison", detectable=over_hc["mde"]))
else:
    rows.append(ledger.row("mHC", "improves over Hyper-Connections", "",
                           ledger.untested(f"no {family_size} runs of hc and mhc"), ""))
rows.append(ledger.row("mHC", "trains stably at scale (3B–27B), where Hyper-Connections become unstable",
                       "training stability of mhc and hc at the paper's sizes",
                       ledger.out_of_reach("3B–27B models on GPUs"), ""))

# %% [markdown]
# ## Recap
#
# Every row above, in one table, goes to the top of the page (the full text of each test in the CSV beneath it).

# %%
claims = ledger.ledger(rows)
counts = claims["verdict"].map(ledger.verdict_kind).value_counts()
summary_line = (f"{len(claims)} claims of {claims['paper'].nunique()} papers: "
                + ", ".join(f"{counts.get(v, 0)} {v}" for v in ledger.VERDICTS) + ".")
table = tables.reader_table(claims, "07_claims", figures_dir, index=False,
                            columns=["paper", "claim", "verdict", "effect", "ci_low", "ci_high", "p", "paper_effect",
                                     "detectable", "correction", "test", "evidence"],
                            formats={c: lambda x: "" if pd.isna(x) else f"{x:+.4g}"
                                     for c in ("effect", "ci_low", "ci_high", "paper_effect")}
                            | {c: lambda x: "" if pd.isna(x) else f"{x:.3g}" for c in ("p", "detectable")},
                            rename={"ci_low": "95 % low", "ci_high": "95 % high", "paper_effect": "paper's effect"})
ledger_shown.update(HTML(f"<p>{summary_line}</p>" + table.data))
print(summary_line)
for verdict in ("supported", "contradicted"):
    chosen = claims[claims["verdict"] == verdict]
    print(f"{verdict.capitalize()}: " + ("; ".join(f"{r.paper} {r.claim}" for r in chosen.itertuples()) or "none") + ".")
