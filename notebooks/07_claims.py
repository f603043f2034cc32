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
# # 0 · The claims ledger: which of the papers' claims hold here
#
# **Question.** Which headline claims of Review Residuals, Attention, Delta Attention and Multi-Gate Residuals, looped
# scaling, Highway, ReZero, LayerScale, HC and mHC does the evidence here support, contradict, leave undecided, or
# put out of its reach?

# %% tags=["parameters"]
out_root = "outputs/runs"  # the committed run folders (the depth ablation's and the family's results)
paper_csv = "outputs/reference/scaling_v8.csv"  # the paper's 42 runs (the committed copy)
family_size = "family"  # the family page's size, whose summary and runs the ledger reads
wide_size = "family_mini"  # the family at mini's width, read where its runs exist
gate_size = "mini"  # page 01's trained Review run, whose gate the neutral-start claim reads
gate_windows = 16  # the held-out windows page 01 reads that gate on
local_out_root = "build/runs"  # where page 01's run is trained again when out_root keeps no weights
exclude_sizes = None  # the sizes page 04 leaves off its scale axis (None: its default)
loop_root = "outputs/looped_grid"  # page 05's looped study (the 200-step grid)
power_loop_root = "outputs/looped_power"  # its powered design; None: the grid alone (a quick build)
claims_size = "family"  # the size of this page's own runs
claims_variants = None  # the methods probed; None means the family's (the preset of claims_size)
claims_root = None  # the family retrained with its weights, and Review's gate halves; None: <out_root>/../claims
convert_root = None  # the conversion into Delta AttnRes, continued and ungated; None: <out_root>/../convert
convert_gated_root = None  # the conversion with the identity gate; None: <out_root>/../convert_gated
convert_size = "family_power"  # the conversion's source size (rrlib.studies.claims_study.CONVERT_SIZE)
convert_seeds = [0, 1, 2, 3, 4]
depth_sizes = ["depth8", "depth16", "depth24"]  # the mechanism probes' depths (claims_study.DEPTH_SIZES)
depth_seeds = [0, 1, 2]
seeds = [0, 1, 2]
train_missing = False  # train this page's runs when missing (the quick build's seconds-long ones); else they are read
alpha = 0.05
margin = 0.02  # nats: the equivalence margin of the conversion's TOST, the recipe ablation's (page 04)
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
import pandas as pd
from IPython.display import HTML, display

from rrlib.claims import assemble, conversion, figures, gate, mechanisms, page as claim_page, reach_rows
from rrlib.views import plots, tables
from rrlib.runs.arguments import seed_list
from rrlib.studies import looped_reach_study

plots.use_style()
inputs = assemble.inputs_from({**globals(), "seeds": seed_list(seeds), "depth_seeds": seed_list(depth_seeds),
                                    "convert_seeds": seed_list(convert_seeds)})
if train_missing:  # this page's own runs, where missing (the quick build's seconds-long ones)
    assemble.train(inputs)
built = assemble.build(inputs)
claims = built.table

# %% [markdown]
# ## The ledger
#
# One line per claim: its verdict, its effect (positive: what the claim says) with its 95 % interval and whether the
# design could have seen the paper's effect; under it the words, test, q, registration and evidence. Then the forest.

# %%
summary_line = claim_page.counts(claims)
display(HTML(f"<p>{summary_line}</p>" + claim_page.ledger_html(claims)))
tables.reader_table(claims, "07_claims", figures_dir, index=False,
                    columns=["id", "paper", "claim", "verdict", "status", "effect", "ci_low", "ci_high", "p", "q_bh"])
plots.show_figure(plots.forest(claim_page.forest_rows(claims), "Each tested claim: the effect here and its 95 % "
                               "interval, beside the paper's stated effect"), "07_forest", figures_dir)
print(summary_line)

# %% [markdown]
# ## How each claim is tested
#
# Every number is read from files the code wrote: result and probe files under `outputs/` and the paper's run table,
# through `rrlib.claims.assemble.build` (`rrlib.claims.ledger()` returns this table from the run folders alone). **One
# verdict rule** turns each row's numbers into its word (`rrlib.stats.ledger.judge`, unit-tested on constructed
# cases), at α = 0.05 on the p-value after the correction the row names:
#
# - a **directional** claim is *supported* when its effect is positive and significant, *contradicted* when it is
#   negative and significant (on the paper's own runs, also when a one-sided test puts it below the paper's
#   effect); otherwise *inconclusive*, beside the smallest effect its design detects at 80 % power;
# - a **null** claim ("no advantage through 320M") is *supported* when a one-sided test puts every gain below its
#   margin (the paper's smallest reported gain, +0.009), *contradicted* only when a gain is shown above it;
# - an **equivalence** claim is *supported* when a TOST puts the effect within its margin;
# - a **measured** claim ("about 7 %") is judged by the tolerance its row states;
# - *out of reach* only where the cheapest test would take more than 50 CPU-hours at this harness's measured FLOP
#   rate (`rrlib.claims.reach`) or needs hardware a CPU is not; a reachable claim whose runs have not ended is
#   *untested*, registered before its runs.
#
# **The claims are records** (`rrlib/claims/records.yaml`): each quotes its paper word for word and fixes its kind,
# metric, test, margin, scope and design before its runs. A reading chosen after the data is a later, *exploratory*
# record beside the registered one, which decides the verdict. The detectable gap is set against the effect the
# paper states, never against the same data's estimate. A claim whose comparisons must all hold ("over both
# baselines", "at every depth") takes the largest unadjusted p (intersection-union); Holm spans the comparisons a
# claim picks one from. Runs no other page makes come from `rrlib study run claims_family` (the family with its
# weights, Review's gate halves), `claims_depth` (four rules at 8–24 blocks, probed) and `claims_conversion`.

# %% [markdown]
# ## Review Residuals (Kramer 2026)
#
# **(a)** Depth, from page 02's runs. **(b)** The gate starts at r = σ(0) = 0.5 and learns to treat tokens
# differently (page 01's trained gate). **(c) Which half of the gate matters:** `review_state_only` feeds the gate
# [rms(h); 0], `review_update_only` [0; rms(u)]; gap = variant − review, paired by seed, Holm over four comparisons.

# %%
print("\n".join(built.notes))
if built.halves is not None:
    display(tables.reader_table(built.halves, "07_gate_halves", figures_dir, full=built.halves.reset_index(),
                                **gate.HALVES_VIEW))

# %% [markdown]
# **(d, e, f)** Where the gain appears: page 04's paired tests of the paper's runs and of ours, its powered designs,
# the trend over size, and page 06's fit of the gap on size and tokens per parameter. At 1B the paper's own Welch
# test gives p ≈ 0.08, which it calls "a strong trend ($p\approx0.07$) rather than fully significant"; the row
# states the claim so. **(g)** The gate's parameters as a share of Review's at the paper's five presets, counted by
# the model code: supported within one point of 7 % at every size.

# %%
display(tables.reader_table(built.shares.set_index("size"), "07_gate_share", figures_dir, **gate.SHARE_VIEW))

# %% [markdown]
# ## Probes: what each sublayer reads, how sharply depth attention routes, and what training changed
#
# The family at this page's size, probed at init and trained: the RMS of what each sublayer reads, and for the
# depth-attention rules the largest routing weight of each read beside the uniform 1/S. Over depth (8, 16, 24
# blocks) each paper's own metric grows by the least-squares slope of its log₂ over the blocks; its *learned*
# growth is trained minus init, per seed. Effect = standard's learned growth − the rule's, paired by seed at each
# depth, holding at every depth (the largest p). The first registered reading (last sublayer over first) decides;
# the fit over every sublayer, chosen after the data, is exploratory; fresh-seed confirmations are below.

# %%
scales, routing = built.scales, built.routing
print(built.probe_notes[0])
if len(scales):
    tables.reader_table(mechanisms.activation_table(scales), "07_activation", figures_dir, index=False)
    plots.show_figure(figures.activation(scales, claims_size), "07_activation", figures_dir)
if len(routing):
    tables.reader_table(mechanisms.routing_table(routing), "07_routing", figures_dir, index=False)
    plots.show_figure(figures.routing(routing, claims_size), "07_routing", figures_dir)
print(built.probe_notes[1])
if built.growth_by_depth["n"].max() >= 2:
    display(tables.reader_table(built.growth_by_depth, "07_growth", figures_dir, index=False,
                                **mechanisms.GROWTH_VIEW))
    plots.show_figure(figures.growth(built.depth_scales, assemble.MECHANISMS, depth_sizes), "07_growth",
                      figures_dir)
if int(built.contrast_by_depth["n"].min()) == len(depth_seeds):
    display(tables.reader_table(built.contrast_by_depth, "07_routing_depth", figures_dir, index=False,
                                **mechanisms.ROUTING_DEPTH_VIEW))

# %% [markdown]
# ## Delta Attention Residuals: conversion by fine-tuning
#
# The paper says a pretrained checkpoint converts into Delta AttnRes "via standard fine-tuning": judged as
# non-inferiority, the converted model ending less than 0.02 nats above the same checkpoint continued, on fresh seeds
# 5–9 (`rrlib study run conversion_fresh`, registered before its runs); the test of ending *better* on seeds 0–4 is an
# exploratory reading beside it. The code's default has no gate, so the converted model does not start at the
# pretrained function (its identity gate does); routing parameters train at 100× the base rate, as the paper's
# recipe (`rrlib.studies.claims_study` lists every choice). Continued − converted, paired by seed, by both recipes.

# %%
if len(built.conversions) == len(convert_seeds):
    display(tables.reader_table(built.conversions.set_index("seed"), "07_conversion", figures_dir,
                                **conversion.START_VIEW))
for tests, name in ((built.arm_tests, "07_conversion_arms"), (built.fresh_arm_tests, "07_conversion_fresh")):
    if len(tests) == 2 and conversion.seeds_done(tests) == len(convert_seeds):  # both designs have 5 seeds
        display(tables.reader_table(conversion.arms_table(tests), name, figures_dir, **conversion.arms_view(margin)))

# %% [markdown]
# ## The CPU's own studies: their runs and what each found
#
# Highway and ReZero to hundreds of layers, ReZero's speed as its paper runs it, LayerScale over depth, fresh-seed
# confirmations, and the controls that say what each of the first three verdicts holds in (a positive control, a
# bracket of rates, ten times the steps: a control that fails makes its row inconclusive), each registered before
# its runs (`rrlib.studies.depth_reach_study`, `looped_reach_study`, `reach_control_study`). A "trained" deep model
# ends 0.05 nats below the text's unigram entropy. The runs that have ended, the controls, each finished design.

# %%
REACH = looped_reach_study.REACH
designs = {name: looped_reach_study.reach_design(name) for name in REACH}
display(tables.reader_table(reach_rows.runs_table(REACH), "07_reach_runs", figures_dir, index=False,
                            **reach_rows.VIEWS["runs"]))
display(tables.reader_table(built.controls, "07_controls", figures_dir, index=False))
done = {name: reach_rows.design_done(REACH[name], designs[name]) for name in REACH}
for name in ("highway_depth", "rezero_depth"):
    if done[name]:
        display(tables.reader_table(reach_rows.trained_table(REACH[name], designs[name]["seeds"], alpha),
                                    f"07_{name}", figures_dir, index=False, **reach_rows.VIEWS["trained"]))
if done["layerscale_depth"]:
    display(tables.reader_table(reach_rows.layerscale_gaps(REACH["layerscale_depth"],
                                                           designs["layerscale_depth"]["seeds"], alpha),
                                "07_layerscale_depth", figures_dir, index=False, **reach_rows.VIEWS["layerscale"]))
trained_runs = {name: reach_rows.trained_values(REACH[name], designs[name]["seeds"])
                for name in ("highway_depth", "rezero_depth") if done[name]}
if trained_runs or done["layerscale_depth"]:
    plots.show_figure(figures.depth_reach(trained_runs, reach_rows.layerscale_seed_gaps(
        REACH["layerscale_depth"], designs["layerscale_depth"]["seeds"]) if done["layerscale_depth"] else None),
        "07_depth_reach", figures_dir)
if done["mechanisms"]:
    growth_confirm = pd.concat([reach_rows.growth_by_depth(REACH["mechanisms"], rule, designs["mechanisms"]["seeds"],
                                                           alpha) for rule in ("attnres", "mgr")])
    if growth_confirm["n"].min() == len(designs["mechanisms"]["seeds"]):  # every run probed
        display(tables.reader_table(growth_confirm, "07_mechanisms", figures_dir, index=False,
                                    **reach_rows.VIEWS["mechanisms"]))
        print(reach_rows.growth_note(growth_confirm, alpha))
