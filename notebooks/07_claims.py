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
paper_csv = "outputs/reference/scaling_v8.csv"  # the paper's 42 runs (the committed copy)
family_size = "family"  # the family page's size, whose table (05_<size>_summary) and runs the ledger reads
wide_size = "family_mini"  # the family at mini's width, read where its table exists
claims_size = "family"  # the size of this page's own runs
claims_variants = None  # the methods probed; None means the family's (the preset of claims_size)
claims_root = None  # the family retrained with its weights, and Review's gate halves; None: <out_root>/../claims
convert_root = None  # the conversion into Delta AttnRes, continued and ungated; None: <out_root>/../convert
convert_gated_root = None  # the conversion with the identity gate; None: <out_root>/../convert_gated
convert_size = "family_power"  # the conversion's source size (rrlib.report.claims_study.CONVERT_SIZE)
convert_seeds = [0, 1, 2, 3, 4]
depth_sizes = ["depth8", "depth16", "depth24"]  # the mechanism probes' depths (claims_study.DEPTH_SIZES)
depth_seeds = [0, 1, 2]
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
import torch

from rrlib.claims import page as claim_page
from rrlib.claims import family as family_rows
from rrlib.claims import looped, mechanisms, records, review
from rrlib.claims import rows as claim_rows
from rrlib.model import GPT, count_params
from rrlib.report import (claims_study, gates, ledger, loading, looped_study, plots, power_study, probes, stats,
                          tables, verdict)
from rrlib.runs.arguments import seed_list
from rrlib.runs.config import project_path
from rrlib.runs.presets import load_preset, resolve_run
from rrlib.runs.sweep import results_table

plots.use_style()
seeds = seed_list(seeds)  # -p seeds 0 is one seed
tables_dir = project_path(figures_dir).parent / "tables" if figures_dir else project_path("paper/tables")
claims_root = claims_root or str(Path(out_root).parent / "claims")
convert_root = convert_root or str(Path(out_root).parent / "convert")
convert_gated_root = convert_gated_root or str(Path(out_root).parent / "convert_gated")
convert_seeds, depth_seeds = seed_list(convert_seeds), seed_list(depth_seeds)
family = list(claims_variants or load_preset(claims_size).variants)
probed = family + claims_study.GATE_HALVES
if train_missing:
    claims_study.run_study(claims_size, seeds, claims_root, variants=family)
    claims_study.run_plan(claims_study.depth_plan(claims_root, depth_seeds, depth_sizes))
    claims_study.run_plan(claims_study.conversion_plan(claims_root, convert_root, convert_gated_root, convert_seeds,
                                                       convert_size))


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


def unfinished(what, n, design=None):
    """The reason of a row whose own runs are not all in: no verdict from fewer seeds than the design's."""
    return ledger.untested(f"{what} runs not finished ({n} of {len(design or seeds)} seeds)")


rows = []
CLAIMS = records.by_id()  # the registered claims (rrlib/claims/records.yaml): each row is looked up by its id


def claim(cid):
    """(paper, label) of a registered claim, the first two fields of its ledger row."""
    return CLAIMS[cid].paper, CLAIMS[cid].label


def stated(cid):
    """The effect the paper states for claim ``cid``, from its record (NaN where it states none)."""
    return CLAIMS[cid].stated_effect


def beyond_reach(cid, evidence=""):
    return claim_rows.beyond_reach(CLAIMS[cid], cpu_rate, evidence)


def pending(cid, evidence=""):
    return claim_rows.pending(CLAIMS[cid], evidence)


# the FLOP rate this harness's committed CPU runs reached (the family's), which prices an out-of-reach claim
committed_family = (results_table(out_root, family_size) if (project_path(out_root) / family_size).exists()
                    else pd.DataFrame())
cpu_rate = (committed_family["train_flops"].sum() / (committed_family["minutes"].sum() * 60) if len(committed_family)
            else np.nan)
paper_tests, ours_tests = page_table("04_paper_tests"), page_table("04_ours_tests")
# page 04's powered designs at two widths, each once all its runs have finished: one family for the claim they
# share, Holm over all their comparisons (page 04 shows each design's own)
power_designs = {name: page_table(name) for name in ("04_power_tests", "04_power_tests_mini")}
power_items = [name for name, table in power_designs.items() if table is not None]
power_tests = power_study.pooled(power_designs.values())

# %% [markdown]
# ## The ledger
#
# One line per claim: its verdict, the effect signed so that positive is what the claim says with its 95 % interval,
# and whether the design could have seen the paper's effect. Under each line, the paper's words and where they
# stand, the test, p with Benjamini–Hochberg q, when the claim was registered, and the evidence (all of it in
# `tables/07_claims.csv`). The rows are built below, claim by claim; the page's last cell writes them here, and the
# forest plot of every tested row follows at the end.

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
# - a **null** claim ("no advantage through 320M") is judged at its `margin`, the paper's smallest reported gain
#   (+0.009, 590M against Highway, quoted in its record): *supported* when a one-sided test puts every comparison's
#   gain below the margin, *contradicted* only when a gain is shown above it (a significant gain inside the margin
#   is no gain in the claim's sense), otherwise *inconclusive*;
# - an **equivalence** claim ("the optimum does not move with N") is *supported* when a TOST puts the effect
#   within its margin (looked at first), *contradicted* only when the effect is shown beyond it, otherwise
#   *inconclusive*;
# - a **measured** claim ("about 7 %") is *supported* or *contradicted* by the tolerance its row states;
# - *out of reach* only where the claim's cheapest test would take more than 50 CPU-hours, counted by the model
#   code at this harness's measured FLOP rate (`rrlib.claims.reach`), or needs hardware a CPU is not; a claim the
#   CPU can reach whose runs have not been made is *untested*, registered before its runs.
#
# **The claims are records.** Each row's claim, quoted word for word from its paper (or marked as a paraphrase),
# with its kind, metric, test, margin, scope and design and when they were fixed, is an entry of
# `rrlib/claims/records.yaml`. A reading chosen after the data (the growth rows' fit over every sublayer) is a
# later, *exploratory* record shown beside the registered one, which decides the verdict. The detectable gap is set
# against the effect the paper states (its record's sentence), never against the same data's estimate; for the
# Review paper's growth with size, the slope per decade of its own runs. Benjamini–Hochberg q over the registered
# tested rows stands beside each row's p.
#
# A claim about comparisons that must all hold ("over both baselines", "at every N") takes the largest of their
# unadjusted p-values (the intersection-union test, which needs no correction), and its effect and interval are
# that same comparison's. Holm spans the comparisons a claim picks one from (a family's rules against standard,
# the depths of page 02).
#
# Some claims needed measurements no other page makes, so this page runs them (`rrlib.report.claims_study`,
# `bash scripts/claims_study.sh`, one part each):
#
# - **family**: every method of the family page's size (`family`: d 64, 4 blocks, 300 steps) retrained with its
#   weights kept, and Review's gate fed only one of its two inputs. At `family` every method already has three
#   committed seeds, which a retrained run reproduces closely (how closely is measured below), so the probes read,
#   to that precision, the models the family page compares; `family_mini` (d 128, 600 steps) would cost several
#   times the training FLOPs per run (both counted below, from the committed results);
# - **depth**: `standard`, `attnres`, `delta_attnres` and `mgr` at 8, 16 and 24 blocks, 3 seeds, probed at init
#   and trained, for the claims about what training does over depth (growth of the scales, routing);
# - **conversion**: a trained `standard` converted into Block Delta AttnRes by the Delta paper's own fine-tuning
#   recipe, 5 seeds, against the same checkpoint continued.


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
    rows += [ledger.row(*claim("review-convex-stalls"), "", missing("02_runs"), ""),
             ledger.row(*claim("review-additive-trains"), "", missing("02_runs"), "")]
else:
    rows += review.depth_rows(CLAIMS, depth_runs, (link("02_depth_stability", "02_runs", "02_final_loss"),
                                                   link("02_depth_stability", "02_final_loss")), alpha)

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
    rows.append(ledger.row(*claim("review-gate-neutral"),
                           "", missing("01_gates_per_sublayer"), ""))
else:
    spread = per_sublayer["sd r"].min()
    rows.append(ledger.row(
        *claim("review-gate-neutral"),
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
    halves = family_rows.paired(halves_runs, "review", sorted(set(halves_runs["variant"]) - {"review"}), alpha)
    display(tables.reader_table(halves, "07_gate_halves", figures_dir,
                                columns=["mean_baseline", "gap", "ci_low", "ci_high", "p", "p_holm", "detectable",
                                         "seeds"],
                                formats={c: "{:+.4f}" for c in ("gap", "ci_low", "ci_high")} |
                                {"mean_baseline": "{:.4f}", "detectable": "{:.4f}", "p": "{:.2g}", "p_holm": "{:.2g}"},
                                rename={"mean_baseline": "loss", "gap": "variant − review", "ci_low": "95 % low",
                                        "ci_high": "95 % high", "p": "paired p", "p_holm": "Holm p",
                                        "detectable": "detectable (80 %)"},
                                full=halves.reset_index()))
    state_only = halves.loc["review_state_only"]
    others = "; ".join(f"{b} − review {r.gap:+.4f}, Holm p {r.p_holm:.2g}"
                       for b, r in halves.drop("review_state_only").iterrows())
    rows.append(ledger.row(
        *claim("review-update-conditioning"),
        f"review_state_only − review, fixed_loss, {claims_size}, {int(state_only['seeds'])} seeds paired, Holm "
        f"over {len(halves)} (beside it: {others})",
        ledger.judge("directional", state_only["gap"], state_only["p_holm"], alpha=alpha),
        link("07_claims", "07_gate_halves"), state_only["gap"], state_only["ci_low"], state_only["ci_high"],
        state_only["p_holm"], f"Holm over the {len(halves)} comparisons with review", detectable=state_only["detectable"]))
else:
    rows.append(ledger.row(*claim("review-update-conditioning"), "", unfinished("the gate-halves", halves_seeds), ""))

# %% [markdown]
# **(d, e, f) Where the gain appears.** Read from page 04's paired tests of the paper's own runs (val_loss, three
# seeds a size, Holm over its ten comparisons) and of ours (the CPU sizes, fixed_loss, five seeds, Holm over six);
# the trend of the gap over log size (page 04, one point per size); and page 06's fit of the gap on log size and
# log tokens per parameter, which separates scale from training budget (our grid; the paper's sizes cannot).
# Once page 04's powered design has finished (sized for a detectable gap of 0.010 nats, where the 5-seed sizes
# detect 0.019–0.046), the CPU row reads it alone: the 5-seed sizes could not have seen the paper's effect, and
# adding them to its Holm family would only weaken the test.
#
# A "no gain" row is tested against each baseline, not against the pair: the paper's result paragraph says that
# "through 320M the differences from both baselines are within noise". It is judged at the paper's smallest reported
# gain, +0.009: supported when every comparison's gain is shown below it, contradicted only when a gain over either
# baseline is shown above it (Highway as much as standard, even where Review loses to the other). The CPU row carries
# the paper's words below its smallest size (0.3M parameters against its 60M), which its record says. At 1B the
# paper's own test (Welch's t on the per-seed losses) gives p ≈ 0.08, which the paper calls "a strong trend
# ($p\approx0.07$) rather than fully significant"; the row states the claim so, and shows the paired p beside it.

# %%
def no_gain_row(cid, tests, where, evidence):
    return claim_rows.no_gain(CLAIMS[cid], tests, where, evidence, alpha)


if power_tests is not None and paper_tests is not None:
    fewest, most = int(power_tests["paired_n"].min()), int(power_tests["paired_n"].max())
    designs = "designs" if len(power_items) > 1 else "design"
    rows.append(no_gain_row("review-no-gain-cpu", power_tests,
                            f"{', '.join(power_tests['size'].unique())}, the powered {designs} "
                            f"({fewest if fewest == most else f'{fewest}–{most}'} seeds, fixed_loss)",
                            link("04_statistics", *power_items)))
elif ours_tests is None or paper_tests is None:
    rows.append(ledger.row(*claim("review-no-gain-cpu"), "", missing("04_ours_tests"), ""))
else:
    rows.append(no_gain_row("review-no-gain-cpu", ours_tests, ", ".join(ours_tests["size"].unique()) + " (fixed_loss)",
                            link("04_statistics", "04_ours_tests")))
if paper_tests is None:
    rows += [ledger.row(*claim(c), "", missing("04_paper_tests"), "") for c in
             ("review-no-gain-paper", "review-standard-better-60m", "review-gain-590m", "review-gain-1b",
              "review-gain-grows-1b")]
else:
    rows += review.paper_run_rows(CLAIMS, paper_tests, stats.load_results(project_path(paper_csv)),
                                  link("04_statistics", "04_paper_tests"), alpha)
rows.append(beyond_reach("review-gain-590m-harness", link("04_statistics")))
# %%
trend = page_table("04_paper_trend")
rows.append(ledger.row(*claim("review-grows-with-scale"), "", missing("04_paper_trend"), "") if trend is None else
            review.trend_row(CLAIMS, trend, link("04_statistics", "04_paper_trend"), alpha))
factors = page_table("06_gap_factors")
rows.append(ledger.row(*claim("review-size-not-budget"), "", missing("06_gap_factors"), "") if factors is None else
            review.size_row(CLAIMS, factors, review.paper_slope(trend), link("06_size_vs_tokens", "06_gap_factors"),
                            alpha))

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
    *claim("review-gate-params"),
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
# **What training changed, over depth.** The papers speak of what training does to the scales over depth, in deep
# models, so these tests run on the study's depth part (`claims_study.depth_plan`): `standard`, `attnres`,
# `delta_attnres` and `mgr` at 8, 16 and 24 blocks of the depth series' width (d 64, 4 heads, 64-token windows,
# 300 steps, the recipe of page 02), each seed probed at its own init and trained. The growth over depth of a
# metric is how much its log₂ grows from the first block to the last (`rrlib.report.probes.depth_growth`: the
# least-squares slope of log₂ on the block index, with a level for each kind of sublayer, times the blocks
# spanned); its *learned* growth is trained minus init, per seed, so a difference the rule's construction already
# makes at init counts for nothing. The first reading of these probes, registered with the claims, is log₂ of the
# last sublayer's value over the first's (`rrlib.claims.mechanisms`); it divides an MLP's scale by an attention's
# (they differ by up to 20× within a block) and reads two of the 2L sublayers, so the fit over every sublayer was
# proposed after the probes had been read. The registered endpoint reading decides each verdict; the fit is shown
# beside it as an exploratory row, and a confirmatory study on fresh seeds, with the trained model's hidden-state
# scale over depth as its registered metric, is registered before its runs. Each paper's own metric:
# the per-sublayer *output* magnitude (the RMS of the update u) for Attention Residuals, the *activation* scale
# (the RMS of what a sublayer reads) for MGR. Effect = standard's learned growth − the rule's (positive: training
# grows the rule's scales over depth less than it grows standard's), paired by seed at each depth. The claims are
# about deep models in general, so each must hold at every depth: the largest p of the three (intersection-union,
# no correction) and that depth's effect.

# %%
MECHANISMS = {"attnres": "update_rms", "mgr": "read_rms"}  # the rule, and the metric its paper speaks of


def probes_over_depth(kind, variants):
    """Every depth's probe files in one table, with the depth's name in a column."""
    frames = [claims_study.read_probes(claims_root, size, variants, depth_seeds, kind).assign(depth=size)
              for size in depth_sizes]
    return pd.concat(frames, ignore_index=True)


depth_scales = probes_over_depth("scales", claims_study.DEPTH_VARIANTS)
growth_by_depth = mechanisms.growth_by_depth(depth_scales, MECHANISMS, depth_sizes, alpha)
print(f"depth probes: {depth_scales.groupby(['depth', 'variant', 'seed']).ngroups if len(depth_scales) else 0} of "
      f"{len(depth_sizes) * len(claims_study.DEPTH_VARIANTS) * len(depth_seeds)} runs probed")
if growth_by_depth["n"].max() >= 2:
    display(tables.reader_table(growth_by_depth, "07_growth", figures_dir, index=False,
                                columns=["rule", "depth", "metric", "standard's learned", "rule's learned", "effect",
                                         "ci_low", "ci_high", "p", "mde", "n", "endpoint_effect", "endpoint_p"],
                                formats={c: "{:+.3f}" for c in ("standard's learned", "rule's learned", "effect",
                                                                "ci_low", "ci_high", "endpoint_effect")} |
                                {"p": "{:.2g}", "mde": "{:.3f}", "endpoint_p": "{:.2g}"},
                                rename={"effect": "standard's − the rule's (log₂)", "ci_low": "95 % low",
                                        "ci_high": "95 % high", "p": "paired p", "mde": "detectable (80 %)",
                                        "n": "seeds", "endpoint_effect": "first reading: last/first sublayer",
                                        "endpoint_p": "its p"}))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (v, metric) in zip(axes, MECHANISMS.items()):
        for variant in ("standard", v):
            means = [mechanisms.learned_growth(depth_scales[depth_scales["depth"] == size], variant, metric).mean()
                     for size in depth_sizes]
            ax.plot([load_preset(size).model.n_layers for size in depth_sizes], means, marker=plots.marker(variant),
                    color=plots.color(variant), label=variant)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set(xlabel="blocks", ylabel=f"learned growth of {metric} (log₂)",
               title=f"{v} against standard ({metric})")
        ax.legend(fontsize=8)
    fig.suptitle("What training did to the scales over depth: growth from the first block to the last, trained − "
                 f"init (mean over {len(depth_seeds)} seeds)")
    plots.show_figure(fig, "07_growth", figures_dir)


def growth_row(cid, variant, reading):
    """The growth claim of ``variant`` by one reading of the depth probes: ``endpoint`` (log2 of the last sublayer's
    scale over the first's, the registered metric) or ``fit`` (the slope over every sublayer, chosen after the probes
    had been read: exploratory). The claim holds only if it holds at every depth (the largest p)."""
    parts = growth_by_depth[growth_by_depth["rule"] == variant]
    done = int(parts["n"].min()) if len(parts) else 0
    if done < len(depth_seeds):
        return ledger.row(*claim(cid), "", unfinished(f"the {variant} and standard depth-probe", done, depth_seeds), "")
    prefix = "endpoint_" if reading == "endpoint" else ""
    effect, low, high, p = ledger.intersection(*(parts[prefix + c].to_numpy()
                                                 for c in ("effect", "ci_low", "ci_high", "p")))
    binding = parts.iloc[ledger.binding(parts[prefix + "p"])]
    how = ("log₂ of the last sublayer's over the first's" if reading == "endpoint"
           else "first to last block, fitted over every sublayer")
    return ledger.row(
        *claim(cid), f"learned growth over depth of {binding['metric']} (log₂, {how}; trained − init), "
        f"standard's − {variant}'s, {done} seeds paired at each depth: " + "; ".join(
            f"{r.depth} {getattr(r, prefix + 'effect'):+.3f} (p {getattr(r, prefix + 'p'):.2g})"
            for r in parts.itertuples()) + "; the depth with the largest p",
        ledger.judge("directional", effect, p, alpha=alpha), link("07_claims", "07_growth", "07_growth.png"),
        effect, low, high, p, ledger.NO_CORRECTION, detectable=binding[prefix + "mde"])


# %% [markdown]
# ## Attention Residuals (Kimi)
#
# Softmax attention over earlier layers' outputs in place of the sum is to keep the residual stream from growing
# without bound with depth (the growth test above); Block AttnRes is to keep most of the gain at a fraction of the
# cost (page 05's gaps against standard; the cost from its benchmark). A gain can only be kept where there is one:
# the row's verdict is AttnRes's own gain's.

# %%
summary = page_table(f"05_{family_size}_summary")


def family_gain_row(cid, variant):
    """A claim that ``variant`` beats the standard residual at the family page's size (rrlib.claims.family)."""
    if summary is None:
        return ledger.row(*claim(cid), "", missing(f"05_{family_size}_summary"), "")
    return family_rows.gain_over_standard(CLAIMS[cid], variant, summary, family_runs, family_size,
                                     link("05_related_methods", f"05_{family_size}_summary"),
                                     page_table(f"05_{wide_size}_summary"), wide_size, alpha)


rows += [growth_row("attnres-growth", "attnres", "endpoint"), growth_row("attnres-growth-fit", "attnres", "fit"),
         pending("attnres-growth-confirm")]
if summary is None:
    rows.append(ledger.row(*claim("attnres-block-keeps-gain"), "",
                           missing(f"05_{family_size}_summary"), ""))
else:
    rows.append(family_rows.block_keeps_gain(CLAIMS["attnres-block-keeps-gain"], summary, family_runs, family_size,
                                        link("05_related_methods", f"05_{family_size}_summary"), alpha))
rows += [beyond_reach("attnres-compute"), beyond_reach("attnres-latency")]

# %% [markdown]
# ## Delta Attention Residuals (arXiv 2605.18855)
#
# **(g) Routing contrast.** The paper reports AttnRes's routing collapsing in deeper layers to a largest weight of
# about 0.2, and Delta AttnRes's staying near 0.6. Here, on the depth part's runs (8, 16 and 24 blocks, where a
# deep read sees up to 48 sources): per read, the largest routing weight (mean over tokens) *less the uniform
# weight 1/S over the same read's S sources* (a read over two sources scores 0.5 by construction: the excess over
# uniform is what routing adds), averaged over the deeper half of the sublayers' reads, trained minus init (both
# rules' queries start at zero, so at init every read is uniform and the init term is 0 to rounding); effect =
# Delta's excess − AttnRes's, paired by seed at each depth; the claim is about deep models, so it must hold at
# every depth (the largest p, no correction). In rrlib both per-sublayer forms route over the same sources (x0 and
# every sublayer's output, as Kimi's formula and the Delta paper's per-sublayer deltas read); what differs is that
# AttnRes's mix *replaces* the stream and Delta's is *added* to it, so this tests the contrast the paper measures,
# not its account of why (cumulative states against deltas). The per-block forms at `family` (4 blocks, reads over
# at most 3 sources) are shown beside it. **(h)** Delta AttnRes against standard and against AttnRes, on the
# family's committed runs (both must hold: the larger p, and that comparison's gap). **(i)** Conversion: below.

# %%
depth_routing = probes_over_depth("routing", ["attnres", "delta_attnres"])
contrast_by_depth = pd.DataFrame([{"depth": size, **mechanisms.routing_contrast(
                                      depth_routing[depth_routing["depth"] == size], "attnres", "delta_attnres", alpha)}
                                  for size in depth_sizes]) if len(depth_routing) else pd.DataFrame({"n": [0]})
block_contrast = (mechanisms.routing_contrast(routing, "attnres_block", "delta_attnres_block", alpha)
                  if {"attnres_block", "delta_attnres_block"} <= (set(routing["variant"]) if len(routing) else set())
                  else {"n": 0})
done = int(contrast_by_depth["n"].min())
if done == len(depth_seeds):
    display(tables.reader_table(contrast_by_depth, "07_routing_depth", figures_dir, index=False,
                                columns=["depth", "attnres", "delta_attnres", "uniform", "effect", "ci_low",
                                         "ci_high", "p", "mde", "n"],
                                formats={c: "{:+.3f}" for c in ("attnres", "delta_attnres", "effect", "ci_low",
                                                                "ci_high")} |
                                {"uniform": "{:.3f}", "p": "{:.2g}", "mde": "{:.3f}"},
                                rename={"attnres": "attnres's learned excess", "delta_attnres": "delta's learned excess",
                                        "uniform": "mean uniform weight of the reads", "effect": "delta − attnres",
                                        "ci_low": "95 % low", "ci_high": "95 % high", "p": "paired p",
                                        "mde": "detectable (80 %)", "n": "seeds"}))
    effect, low, high, p = ledger.intersection(contrast_by_depth["effect"].to_numpy(),
                                               contrast_by_depth["ci_low"].to_numpy(),
                                               contrast_by_depth["ci_high"].to_numpy(), contrast_by_depth["p"].to_numpy())
    binding = contrast_by_depth.iloc[ledger.binding(contrast_by_depth["p"])]
    beside = (f"; per block at {claims_size} ({load_preset(claims_size).model.n_layers} blocks): delta_attnres_block "
              f"{block_contrast['delta_attnres_block']:+.3f}, attnres_block {block_contrast['attnres_block']:+.3f}, {block_contrast['effect']:+.3f} "
              f"[{block_contrast['ci_low']:+.3f}, {block_contrast['ci_high']:+.3f}], p {block_contrast['p']:.2g}"
              if block_contrast["n"] >= 2 else "")
    rows.append(ledger.row(
        *claim("delta-routing"),
        "largest routing weight over the uniform one, deeper half of the reads, trained − init, delta_attnres − "
        f"attnres, {done} seeds paired at each depth: " + "; ".join(
            f"{r.depth} delta {r.delta_attnres:+.3f}, attnres {r.attnres:+.3f} (uniform {r.uniform:.3f}), "
            f"{r.effect:+.3f} (p {r.p:.2g})" for r in contrast_by_depth.itertuples())
        + "; the depth with the larger p" + beside,
        ledger.judge("directional", effect, p, alpha=alpha), link("07_claims", "07_routing_depth", "07_routing"),
        effect, low, high, p, ledger.NO_CORRECTION, stated("delta-routing"), binding["mde"]))
else:
    rows.append(ledger.row(*claim("delta-routing"), "", unfinished("the attnres and delta_attnres depth-probe", done, depth_seeds),
                           ""))

# %%
family_power_tests = page_table("05_power_tests")  # page 05's powered design, once all its runs have finished


def powered(variant):
    """The powered family design's tests of ``variant`` (page 05), under compare_pairs' names, or None."""
    if family_power_tests is None:
        return None
    part = family_power_tests[family_power_tests["variant"] == variant]
    return part.set_index("baseline") if len(part) else None


pairs = {"delta-beats-per-sublayer": ("attnres", "delta_attnres"),
         "delta-beats-per-block": ("attnres_block", "delta_attnres_block")}
for cid, (base, delta) in pairs.items():
    tests = powered(delta)
    if tests is not None:  # the design sized for the paper's smallest gain reads alone (page 05 says why)
        where, evidence = f"{tests['size'].iloc[0]}, the powered design", link("05_related_methods", "05_power_tests")
    elif len(family_runs) and {base, delta, "standard"} <= set(family_runs["variant"]):
        tests = family_rows.paired(family_runs, delta, [base, "standard"], alpha)
        where, evidence = family_size, link("05_related_methods", f"05_{family_size}_summary")
    else:
        rows.append(ledger.row(*claim(cid), "", ledger.untested(f"no {family_size} runs of {delta}"), ""))
        continue
    rows.append(family_rows.beats_all(CLAIMS[cid], tests, delta, where, evidence, alpha))
rows.append(beyond_reach("delta-at-scale"))

# %% [markdown]
# **(i) Conversion by fine-tuning.** The paper fine-tunes a pretrained Qwen3-0.6B into Block Delta AttnRes and
# reports it ending better than the same checkpoint fine-tuned as it is (its Table 5: 55.6 % against 55.0 %
# downstream). Its code (`train_finetune.py`) loads the pretrained weights into the new model, leaves the new
# routing parameters at their init, and trains everything with AdamW in two groups: the routing parameters at 100×
# the base rate (its documented command: `--mode delta_block --lr 5e-5 --lr_attnres 5e-3 --steps 20000`, warmup
# 500, both groups decaying to one floor, 3e-5). Its default gate is none, so the routed mean of the sources is
# added from the first step and the converted model does not start at the pretrained one's function; its
# `learnable_alpha` gate, zero at init, does. This page runs that recipe as closely as a CPU can
# (`rrlib.report.claims_study`, whose CONVERSION notes list every choice): each seed's `standard` pretrained at
# `family_power` (1,200 steps), then from the same weights, for as many steps again and on the same batches,
# *continued* as `standard` at the base rate, and *converted* into `delta_attnres_block` (the code's 4 blocks of
# one layer each, its timing) with the routing parameters at 100×: once with the code's default (no gate) and once
# with the identity gate. The base rate is the paper's share of its pretraining rate (5e-5 of 6e-4, 1/12); the
# schedule its shape (warmup 2.5 %, floor 0.6 of the base peak). What differs: the source is a 0.3M-parameter
# model trained 1,200 steps, not a pretrained LLM, and the fine-tuning is as long as the pretraining, where the
# paper's 20,000 steps are a small share of Qwen3's. Effect = continued − converted on `fixed_loss` (positive: the
# converted model ends better, which is what the claim says: a conversion that ends equal is the continued model),
# paired by seed. The claim is judged as the paper states it, on its default recipe (no gate): the identity-gated
# form, which starts at the pretrained function by construction, is shown beside it (Holm over the two forms in the
# table) but does not decide the row; a TOST at ±`margin` beside each.

# %%
conversions = claims_study.read_conversions(convert_gated_root, convert_size, convert_seeds)
if len(conversions) < len(convert_seeds):
    rows.append(ledger.row(*claim("delta-conversion-start"), "",
                           unfinished("the gated converted", len(conversions), convert_seeds), ""))
else:
    display(tables.reader_table(conversions.set_index("seed"), "07_conversion", figures_dir,
                                columns=["max_abs_logit_diff", "max_abs_logit_diff_without_gate", "gate_abs_mean_trained"],
                                formats={"max_abs_logit_diff": "{:.3g}", "max_abs_logit_diff_without_gate": "{:.3g}",
                                         "gate_abs_mean_trained": "{:.3g}"},
                                rename={"max_abs_logit_diff": "max |Δ logit| at conversion",
                                        "max_abs_logit_diff_without_gate": "… without the identity gate",
                                        "gate_abs_mean_trained": "mean |g| after fine-tuning"}))
    # judged on the paper's default recipe (no gate); the identity gate, which starts at the function by
    # construction, is shown beside it
    worst = conversions["max_abs_logit_diff_without_gate"].max()
    rows.append(ledger.row(
        *claim("delta-conversion-start"),
        f"largest |logit difference| at conversion over {len(conversions)} seeds' held-out windows, by the paper's "
        f"default recipe (no gate); with the identity gate (not the default): up to "
        f"{conversions['max_abs_logit_diff'].max():.3g}; supported at ≤ 1e-6",
        ledger.judge("measured", holds=worst <= 1e-6), link("07_claims", "07_conversion"),
        worst, correction="none: a measurement"))


def conversion_runs(root):
    runs = results_table(root, convert_size) if (project_path(root) / convert_size).exists() else pd.DataFrame()
    return runs[runs["seed"].isin(convert_seeds)] if len(runs) else pd.DataFrame(columns=["variant", "seed"])


continued = conversion_runs(convert_root)
arms = {"without a gate (the code's default)": continued,
        "with the identity gate": pd.concat([continued[continued["variant"] == "standard"],
                                             conversion_runs(convert_gated_root)], ignore_index=True)}
arm_tests = {}
for name, runs in arms.items():
    if {"standard", claims_study.CONVERTED} <= set(runs["variant"]):
        arm_tests[name] = verdict.compare_pairs(runs, [claims_study.CONVERTED], ["standard"], margin=margin,
                                                alpha=alpha).iloc[0]
n_done = min((int(t["seeds"]) for t in arm_tests.values()), default=0)
if len(arm_tests) == 2 and n_done == len(convert_seeds):
    p_holm = dict(zip(arm_tests, stats.holm([t["p"] for t in arm_tests.values()])))
    conversion_table = pd.DataFrame({name: {**t, "p_holm": p_holm[name]} for name, t in arm_tests.items()}).T
    display(tables.reader_table(conversion_table, "07_conversion_arms", figures_dir,
                                columns=["mean_baseline", "mean_variant", "gap", "ci_low", "ci_high", "p", "p_holm",
                                         "p_equivalent", "detectable", "seeds"],
                                formats={c: "{:+.4f}" for c in ("gap", "ci_low", "ci_high")} |
                                {"mean_baseline": "{:.4f}", "mean_variant": "{:.4f}", "p": "{:.2g}", "p_holm": "{:.2g}",
                                 "p_equivalent": "{:.2g}", "detectable": "{:.4f}"},
                                rename={"mean_baseline": "continued", "mean_variant": "converted",
                                        "gap": "continued − converted", "ci_low": "95 % low", "ci_high": "95 % high",
                                        "p": "paired p", "p_holm": "Holm p", "p_equivalent": f"TOST p (±{margin})",
                                        "detectable": "detectable (80 %)"}))
    # the paper's own recipe (the first arm) decides; the gated form is shown beside it
    rows.append(family_rows.conversion(CLAIMS["delta-conversion"], arm_tests, convert_size, conversions, margin,
                                  link("07_claims", "07_conversion_arms", "07_conversion"), alpha))
else:
    rows.append(ledger.row(*claim("delta-conversion"), "", unfinished("the conversion", n_done, convert_seeds), ""))

# %% [markdown]
# ## Multi-Gate Residuals (arXiv 2605.23259) and looped transformers (arXiv 2606.18524)
#
# MGR's activation scales: the growth test above. "Without extra communication" is a claim about model-parallel
# training, which a single process cannot test. Its gain: page 05. The looped claims: page 05's powered design
# (1,000 steps, its seeds fixed by a pilot) once all its runs have finished, the 200-step study until then
# (`rrlib.report.looped_study`, `bash scripts/looped_study.sh`), whose verdict on transfer is *transfers* (the
# claim holds), *moves with N* (it fails) or *undecided*, and holds here only if page 05's supplementary
# extension of the edge cells leaves it standing; and its trainability test, `scaled_loops` − `scaled` at
# each seed's optimum, per N: a claim across loop counts holds only if it holds at every N, so no correction (the
# largest unadjusted p, and that N's gap).

# %%
rows += [growth_row("mgr-activation-scales", "mgr", "endpoint"), growth_row("mgr-activation-scales-fit", "mgr", "fit"),
         pending("mgr-activation-scales-confirm")]
rows.append(beyond_reach("mgr-communication"))
mgr_power = powered("mgr")
if mgr_power is not None:  # the powered design, sized for 0.017 nats, reads alone (page 05)
    t = mgr_power.loc["standard"]
    rows.append(family_rows.one_comparison(
        CLAIMS["mgr-gain"], t, f"standard − mgr at {t['size']}, the powered design, fixed_loss, paired over "
        f"{int(t['seeds'])} seeds", link("05_related_methods", "05_power_tests"), alpha))
else:
    rows.append(family_gain_row("mgr-gain", "mgr"))
rows.append(beyond_reach("mgr-large-scale"))

# %%
# The powered design (1,000 steps, its seeds fixed by its pilot) reads alone once page 05 has all its runs; until
# then the 200-step study does. Both write the same tables, under their own prefix.
looped_tables = looped_study.ledger_tables(tables_dir)
looped_study_name = ("the powered design (1,000 steps)" if looped_tables == "05_looped_power"
                     else "the 200-step study")
transfer, trainable = page_table(f"{looped_tables}_transfer"), page_table(f"{looped_tables}_trainability")
in_progress = ledger.untested("study in progress (no seed has finished every cell)")
looped_link = link("05_related_methods", f"{looped_tables}_transfer", f"{looped_tables}_trainability")
steps = {"looped-trainability": (looped.trainability_row, trainable),
         "looped-transfer": (looped.transfer_row, transfer)}
for cid, (build, table) in steps.items():
    made = None if table is None else build(CLAIMS[cid], table, looped_study_name, looped_link, alpha)
    rows.append(made or ledger.row(*claim(cid), CLAIMS[cid].metric, in_progress, looped_link))
made = looped.contrast_row(CLAIMS["looped-contrast"], page_table(f"{looped_tables}_optima"), looped_study_name,
                           looped_tables == "05_looped_power", looped_link, alpha)
rows.append(made or ledger.row(*claim("looped-contrast"), CLAIMS["looped-contrast"].metric, in_progress, looped_link))
rows += [pending("looped-depends-on-l"), pending("looped-stream-norm")]

# %% [markdown]
# ## The family's older members: Highway networks, ReZero, LayerScale, Hyper-Connections, mHC
#
# Their abstracts' headline claims, read again. Where the family's committed runs can test one (ReZero's faster
# convergence, Hyper-Connections' gain over the residual, mHC's over Hyper-Connections), the test is the family
# page's at its size: equal steps, fixed held-out loss, paired by seed; "converges faster" is read here as a lower
# loss after the same number of steps, with the pre-norm kept and one shared learning rate, which is not how the
# ReZero paper runs it. The claims as their papers run them (Highway and ReZero to hundreds of layers, ReZero's
# speed without the pre-norm and at each rule's own learning rate, LayerScale over depth) are registered before
# their runs, with their metrics, tests and margins in their records; their designs have not run yet.

# %%
rows.append(pending("highway-hundreds-of-layers"))
rows.append(family_gain_row("rezero-converges-faster", "rezero"))
rows += [pending("rezero-converges-faster-as-run"), pending("rezero-120-layers"), pending("layerscale-deeper")]
rows.append(family_gain_row("hc-gain", "hc"))
if len(family_runs) and {"hc", "mhc"} <= set(family_runs["variant"]):
    over_hc = family_rows.paired(family_runs, "mhc", ["hc"], alpha).loc["hc"]
    rows.append(family_rows.one_comparison(
        CLAIMS["mhc-over-hc"], over_hc, f"hc − mhc at {family_size}, fixed_loss, paired over "
        f"{int(over_hc['seeds'])} seeds", link("05_related_methods", f"05_{family_size}_summary"), alpha))
else:
    rows.append(ledger.row(*claim("mhc-over-hc"), "",
                           ledger.untested(f"no {family_size} runs of hc and mhc"), ""))
rows.append(beyond_reach("mhc-stable-at-scale"))

# %% [markdown]
# ## Recap
#
# Every row above goes to the top of the page, one line a claim, the paper's words, the test and the evidence folded
# under it; the full table is `tables/07_claims.csv`. Beneath, the forest plot of every tested row.

# %%
claims = claim_page.attach(ledger.ledger(rows), CLAIMS.values())
summary_line = claim_page.counts(claims)
tables.reader_table(claims, "07_claims", figures_dir, index=False,
                    columns=["id", "paper", "claim", "verdict", "status", "effect", "ci_low", "ci_high", "p", "q_bh"])
tested = claims[claims["verdict"].isin(claim_page.TESTED) & claims["ci_low"].notna()]
forest = plots.forest(tested.assign(label=tested["id"] + tested["status"].map({"exploratory": " (exploratory)"})
                                    .fillna("")),
                      "Each tested claim: the effect here and its 95 % interval, beside the paper's stated effect")
ledger_shown.update(HTML(f"<p>{summary_line}</p>" + claim_page.ledger_html(claims)))
plots.show_figure(forest, "07_forest", figures_dir)
