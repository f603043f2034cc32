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
from pathlib import Path

import pandas as pd
from IPython.display import HTML, display

from rrlib.claims import conversion, family as family_rows, figures, gate, looped, mechanisms, reach_rows, records
from rrlib.claims import review, sources
from rrlib.claims import page as claim_page
from rrlib.claims import rows as claim_rows
from rrlib.claims.rows import link
from rrlib.claims.sources import cpu_rate, depth_probes, finished, page_table as read_table
from rrlib.report import plots, tables
from rrlib import stats
from rrlib.stats import ledger
from rrlib.runs.arguments import seed_list
from rrlib.runs.config import project_path
from rrlib.runs.presets import load_preset
from rrlib.studies import claims_study, looped_reach_study, looped_study, power_study

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
    return read_table(tables_dir, name)


CLAIMS = records.by_id()  # the registered claims (rrlib/claims/records.yaml): each row is looked up by its id
rate = cpu_rate(out_root, family_size)  # the FLOP rate of the committed CPU runs, which prices an out-of-reach claim


def beyond_reach(cid, evidence=""):
    return claim_rows.beyond_reach(CLAIMS[cid], rate, evidence)


# the studies the CPU reaches by itself (rrlib.studies.depth_reach_study, looped_reach_study): their registered
# designs, each read by rrlib.claims.reach_rows once every run of it has ended
REACH = looped_reach_study.REACH
reach_designs = {name: looped_reach_study.reach_design(name) for name in REACH}
reach_link = link("07_claims", "07_reach_runs")


def reach_row(cid, name, read, *args):
    """The row of ``cid`` from study ``name``'s design, by ``read`` (a rrlib.claims.reach_rows reader)."""
    return read(CLAIMS[cid], REACH[name], *args, reach_designs[name], reach_link, alpha=alpha)


rows = []
paper_tests, ours_tests = page_table("04_paper_tests"), page_table("04_ours_tests")
# page 04's powered designs at two widths, each once all its runs have finished: one family for the claim they
# share, Holm over all their comparisons (page 04 shows each design's own)
power_designs = {name: page_table(name) for name in ("04_power_tests", "04_power_tests_mini")}
power_items = [name for name, table in power_designs.items() if table is not None]
power_tests = power_study.pooled(power_designs.values())
family_runs = finished(out_root, family_size, seeds)
summary = page_table(f"05_{family_size}_summary")
family_power_tests = page_table("05_power_tests")  # page 05's powered design, once all its runs have finished

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
# its word (`rrlib.stats.ledger.judge`, unit-tested on constructed cases), at α = 0.05 on the p-value after the
# correction the row names in its `correction` column:
#
# - a **directional** claim (a gain, less growth, sharper routing) is *supported* when its effect is positive and
#   significant, *contradicted* when it is negative and significant, or, on the paper's own runs, when a one-sided
#   test puts it below the paper's own effect; otherwise *inconclusive*, and the row states the smallest effect
#   its design detects at 80 % power (`detectable`) beside the paper's (`paper_effect`), or alone on the paper's
#   own runs (below);
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
# against the effect the paper states (its record's sentence), never against the same data's estimate: a row whose
# scope is the paper's own runs tests the very data its effect was estimated from, so it states its detectable gap
# alone and makes no power statement. The CPU grid's growth with size is set against the slope per decade of the
# paper's runs. Benjamini–Hochberg q over the registered tested rows stands beside each row's p.
#
# A claim about comparisons that must all hold ("over both baselines", "at every N") takes the largest of their
# unadjusted p-values (the intersection-union test, which needs no correction), and its effect and interval are
# that same comparison's. Holm spans the comparisons a claim picks one from (a family's rules against standard,
# the depths of page 02).
#
# Some claims needed measurements no other page makes, so this page runs them (`rrlib.studies.claims_study`,
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
rows += review.depth_rows(CLAIMS, page_table("02_runs"), (link("02_depth_stability", "02_runs", "02_final_loss"),
                                                          link("02_depth_stability", "02_final_loss")), alpha)

# %% [markdown]
# **(b) The gate starts neutral and learns how much to trust each update.** At init, r = σ(0) = 0.5 exactly: read
# here off a fresh `review` model at this page's size on held-out windows. Trained: the spread of r over tokens
# and channels per sublayer in page 01's trained model (one seed: no interval). The rule for this row: supported
# when r is exactly 0.5 at init and the trained gate's standard deviation is at least 0.05 (a tenth of the
# distance from neutral to either end) in every sublayer, i.e. the gate treats tokens differently.

# %%
per_sublayer = page_table("01_gates_per_sublayer")
rows.append(claim_rows.missing(CLAIMS["review-gate-neutral"], "01_gates_per_sublayer") if per_sublayer is None else
            gate.neutral_row(CLAIMS["review-gate-neutral"],
                             gate.init_deviation(claims_size, seeds[0], claims_study.PROBE_WINDOWS), per_sublayer,
                             claims_size, link("01_mechanism", "01_gates_per_sublayer")))

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
claims_runs, committed = finished(claims_root, claims_size, seeds), finished(out_root, claims_size, seeds)
# a retrained method reproduces its committed run (same settings, seeds and machine type): the halves are read
# against the committed Review, Highway and standard
plan = claims_study.study_plan(claims_size, seeds, claims_root, family)
print("\n".join(sources.study_note(plan, claims_size, claims_root, claims_runs, committed, out_root, wide_size, seeds)))
halves_runs = gate.halves_runs(claims_runs, committed, claims_study.GATE_HALVES)
halves_seeds = gate.halves_seeds(halves_runs)
if halves_seeds == len(seeds):
    halves = gate.halves_table(halves_runs, alpha)
    display(tables.reader_table(halves, "07_gate_halves", figures_dir, full=halves.reset_index(), **gate.HALVES_VIEW))
    rows.append(gate.halves_row(CLAIMS["review-update-conditioning"], halves, claims_size,
                                link("07_claims", "07_gate_halves"), alpha))
else:
    rows.append(claim_rows.unfinished(CLAIMS["review-update-conditioning"], "the gate-halves", halves_seeds,
                                      len(seeds)))

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
rows.append(review.no_gain_cpu_row(CLAIMS["review-no-gain-cpu"], power_tests, power_items, ours_tests, paper_tests,
                                   alpha))
rows += review.paper_run_rows(CLAIMS, paper_tests, stats.load_results(project_path(paper_csv)),
                              link("04_statistics", "04_paper_tests"), alpha)
rows.append(beyond_reach("review-gain-590m-harness", link("04_statistics")))

# %%
trend = page_table("04_paper_trend")
rows.append(review.trend_row(CLAIMS, trend, link("04_statistics", "04_paper_trend"), alpha))
rows.append(review.size_row(CLAIMS, page_table("06_gap_factors"), review.paper_slope(trend),
                            link("06_size_vs_tokens", "06_gap_factors"), alpha))

# %% [markdown]
# **(g) What the gate costs in parameters.** The paper says the gate adds about 7 % parameters. Counted here by
# the model code (`rrlib.model.count_params`, on the meta device) at the paper's five Review configurations, its
# presets `60m` … `1b` (d 512/768/1024/1280/1536, 8/12/16/20/24 blocks, 8/12/16/20/16 heads, GPT-2's vocabulary of
# 50,257, context 256): the gate's parameters are Review's minus those of the same model with the standard
# residual, as a share of all of Review's. The rule for this row: supported when the share is within one point of
# 7 % at every size, contradicted otherwise; the effect is the smallest share.

# %%
shares = gate.share_table()
display(tables.reader_table(shares.set_index("size"), "07_gate_share", figures_dir, **gate.SHARE_VIEW))
rows.append(gate.params_row(CLAIMS["review-gate-params"], shares, link("07_claims", "07_gate_share")))

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
    tables.reader_table(mechanisms.activation_table(scales), "07_activation", figures_dir, index=False)
    plots.show_figure(figures.activation(scales, claims_size), "07_activation", figures_dir)

# %%
if len(routing):
    tables.reader_table(mechanisms.routing_table(routing), "07_routing", figures_dir, index=False)
    plots.show_figure(figures.routing(routing, claims_size), "07_routing", figures_dir)

# %% [markdown]
# **What training changed, over depth.** The papers speak of what training does to the scales over depth, in deep
# models, so these tests run on the study's depth part (`claims_study.depth_plan`): `standard`, `attnres`,
# `delta_attnres` and `mgr` at 8, 16 and 24 blocks of the depth series' width (d 64, 4 heads, 64-token windows,
# 300 steps, the recipe of page 02), each seed probed at its own init and trained. The growth over depth of a
# metric is how much its log₂ grows from the first block to the last (`rrlib.studies.probes.depth_growth`: the
# least-squares slope of log₂ on the block index, with a level for each kind of sublayer, times the blocks
# spanned); its *learned* growth is trained minus init, per seed, so a difference the rule's construction already
# makes at init counts for nothing. The first reading of these probes, registered with the claims, is log₂ of the
# last sublayer's value over the first's (`rrlib.claims.mechanisms`); it divides an MLP's scale by an attention's
# (they differ by up to 20× within a block) and reads two of the 2L sublayers, so the fit over every sublayer was
# proposed after the probes had been read. The registered endpoint reading decides each verdict; the fit is shown
# beside it as an exploratory row; a confirmatory study on fresh seeds (seeds 3–17, "The CPU's own studies" below),
# with the trained model's hidden-state scale over depth as its metric, was registered before its runs, and its
# table says how much of each gap the rule had at init. Each paper's own metric:
# the per-sublayer *output* magnitude (the RMS of the update u) for Attention Residuals, the *activation* scale
# (the RMS of what a sublayer reads) for MGR. Effect = standard's learned growth − the rule's (positive: training
# grows the rule's scales over depth less than it grows standard's), paired by seed at each depth. The claims are
# about deep models in general, so each must hold at every depth: the largest p of the three (intersection-union,
# no correction) and that depth's effect.

# %%
MECHANISMS = {"attnres": "update_rms", "mgr": "read_rms"}  # the rule, and the metric its paper speaks of


depth_scales = depth_probes(claims_root, depth_sizes, claims_study.DEPTH_VARIANTS, depth_seeds, "scales")
growth_by_depth = mechanisms.growth_by_depth(depth_scales, MECHANISMS, depth_sizes, alpha)
print(f"depth probes: {depth_scales.groupby(['depth', 'variant', 'seed']).ngroups if len(depth_scales) else 0} of "
      f"{len(depth_sizes) * len(claims_study.DEPTH_VARIANTS) * len(depth_seeds)} runs probed")
if growth_by_depth["n"].max() >= 2:
    display(tables.reader_table(growth_by_depth, "07_growth", figures_dir, index=False, **mechanisms.GROWTH_VIEW))
    plots.show_figure(figures.growth(depth_scales, MECHANISMS, depth_sizes), "07_growth", figures_dir)


def growth_row(cid, variant, reading):
    return mechanisms.growth_row(CLAIMS[cid], growth_by_depth, variant, reading, len(depth_seeds),
                                 link("07_claims", "07_growth", "07_growth.png"), alpha)

# %% [markdown]
# ## Attention Residuals (Kimi)
#
# Softmax attention over earlier layers' outputs in place of the sum is to keep the residual stream from growing
# without bound with depth (the growth test above); Block AttnRes is to keep most of the gain at a fraction of the
# cost (page 05's gaps against standard; the cost from its benchmark). A gain can only be kept where there is one:
# the row's verdict is AttnRes's own gain's.

# %%
def family_gain_row(cid, variant):
    """A claim that ``variant`` beats the standard residual at the family page's size."""
    return family_rows.gain_over_standard(CLAIMS[cid], variant, summary, family_runs, family_size,
                                          link("05_related_methods", f"05_{family_size}_summary"),
                                          page_table(f"05_{wide_size}_summary"), wide_size, alpha)


rows += [growth_row("attnres-growth", "attnres", "endpoint"), growth_row("attnres-growth-fit", "attnres", "fit"),
         reach_row("attnres-growth-confirm", "mechanisms", reach_rows.mechanism_row, "attnres"),
         reach_row("attnres-outputs-confirm", "attnres_outputs", reach_rows.output_growth_row, "attnres")]
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
depth_routing = depth_probes(claims_root, depth_sizes, ["attnres", "delta_attnres"], depth_seeds, "routing")
contrast_by_depth = mechanisms.routing_by_depth(depth_routing, depth_sizes, alpha)
if int(contrast_by_depth["n"].min()) == len(depth_seeds):
    display(tables.reader_table(contrast_by_depth, "07_routing_depth", figures_dir, index=False,
                                **mechanisms.ROUTING_DEPTH_VIEW))
rows.append(mechanisms.routing_row(CLAIMS["delta-routing"], contrast_by_depth,
                                   mechanisms.block_contrast(routing, alpha), claims_size,
                                   load_preset(claims_size).model.n_layers, len(depth_seeds),
                                   link("07_claims", "07_routing_depth", "07_routing"), alpha))

# %%
rows += [family_rows.beats_both(CLAIMS[cid], delta, base, family_power_tests, family_runs, family_size, alpha)
         for cid, base, delta in (("delta-beats-per-sublayer", "attnres", "delta_attnres"),
                                  ("delta-beats-per-block", "attnres_block", "delta_attnres_block"))]
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
# (`rrlib.studies.claims_study`, whose CONVERSION notes list every choice): each seed's `standard` pretrained at
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
if len(conversions) == len(convert_seeds):
    display(tables.reader_table(conversions.set_index("seed"), "07_conversion", figures_dir, **conversion.START_VIEW))
rows.append(conversion.start_row(CLAIMS["delta-conversion-start"], conversions, len(convert_seeds),
                                 link("07_claims", "07_conversion")))
arm_tests = conversion.arm_tests(finished(convert_root, convert_size, convert_seeds),
                                 finished(convert_gated_root, convert_size, convert_seeds), margin, alpha)
if len(arm_tests) == 2 and conversion.seeds_done(arm_tests) == len(convert_seeds):
    display(tables.reader_table(conversion.arms_table(arm_tests), "07_conversion_arms", figures_dir,
                                **conversion.arms_view(margin)))
    rows.append(conversion.ends_better(CLAIMS["delta-conversion"], arm_tests, convert_size, conversions, margin,
                                       link("07_claims", "07_conversion_arms", "07_conversion"), alpha))
else:
    rows.append(claim_rows.unfinished(CLAIMS["delta-conversion"], "the conversion", conversion.seeds_done(arm_tests),
                                      len(convert_seeds)))

# %% [markdown]
# ## Multi-Gate Residuals (arXiv 2605.23259) and looped transformers (arXiv 2606.18524)
#
# MGR's activation scales: the growth test above. "Without extra communication" is a claim about model-parallel
# training, which a single process cannot test. Its gain: page 05. The looped claims: page 05's powered design
# (1,000 steps, its seeds fixed by a pilot) once all its runs have finished, the 200-step study until then
# (`rrlib.studies.looped_study`, `bash scripts/looped_study.sh`), whose verdict on transfer is *transfers* (the
# claim holds), *moves with N* (it fails) or *undecided*, and holds here only if page 05's supplementary
# extension of the edge cells leaves it standing; and its trainability test, `scaled_loops` − `scaled` at
# each seed's optimum, per N: a claim across loop counts holds only if it holds at every N, so no correction (the
# largest unadjusted p, and that N's gap).

# %%
rows += [growth_row("mgr-activation-scales", "mgr", "endpoint"), growth_row("mgr-activation-scales-fit", "mgr", "fit"),
         reach_row("mgr-activation-scales-confirm", "mechanisms", reach_rows.mechanism_row, "mgr")]
rows.append(beyond_reach("mgr-communication"))
# the powered design, sized for 0.017 nats, reads alone once it has finished (page 05)
rows.append(family_rows.powered_gain(CLAIMS["mgr-gain"], "mgr", family_power_tests, alpha)
            or family_gain_row("mgr-gain", "mgr"))
rows.append(beyond_reach("mgr-large-scale"))

# %%
# The powered design (1,000 steps, its seeds fixed by its pilot) reads alone once page 05 has all its runs; until
# then the 200-step study does. Both write the same tables, under their own prefix.
looped_tables = looped_study.ledger_tables(tables_dir)
rows += looped.ledger_rows(CLAIMS, *(page_table(f"{looped_tables}_{part}")
                                     for part in ("trainability", "transfer", "optima")),
                           looped_tables == "05_looped_power", link("05_related_methods", f"{looped_tables}_transfer",
                                                                    f"{looped_tables}_trainability"), alpha)
rows += [reach_rows.unique_layers_row(CLAIMS["looped-depends-on-l"], reach_link, alpha),
         reach_row("looped-stream-norm", "loop_norms", reach_rows.loop_norm_row)]

# %% [markdown]
# ## The family's older members: Highway networks, ReZero, LayerScale, Hyper-Connections, mHC
#
# Their abstracts' headline claims, read again. Where the family's committed runs can test one (ReZero's faster
# convergence, Hyper-Connections' gain over the residual, mHC's over Hyper-Connections), the test is the family
# page's at its size: equal steps, fixed held-out loss, paired by seed; "converges faster" is read here as a lower
# loss after the same number of steps, with the pre-norm kept and one shared learning rate, which is not how the
# ReZero paper runs it. The claims as their papers run them (Highway and ReZero to hundreds of layers, ReZero's
# speed without the pre-norm and at each rule's own learning rate, LayerScale over depth) were registered before
# their runs, with their metrics, tests and margins in their records (`rrlib.studies.depth_reach_study` holds the
# designs and the choices where the papers are not this harness); each row reads its design once every run of it
# has ended (`rrlib.claims.reach_rows`), and until then says how many seeds are in. ReZero's rate of 8e-3, the
# lowest mean loss of its pilot but with one seed diverged there, is the exploratory reading beside the registered
# one.
#
# What the CPU cannot match. ReZero's Transformers train on enwik8 characters at widths and for step counts far
# beyond a CPU's; here every model is d 64 and trains 300 steps on the byte-level TinyStories sample, at the
# recipe's rate for the depth claims. Highway's networks are fully connected and convolutional, without attention;
# here each sublayer of a transformer is one highway layer, its transform gate's bias at −3 (carry at init); the
# same depth without that bias runs at 100 blocks only, because its gate halves the gradient at every sublayer and
# deeper down the gradients fall into float32's subnormal range, where the CPU's steps slow several-fold (the
# study's docstring gives the timings; every model fits the machine's 24 GiB, `step_times.json`). CaiT
# measures ImageNet top-1; here the held-out loss, with a trend target of this harness's own (0.01 nats per
# doubling of depth). A "trained" deep model is one whose loss ends 0.05 nats below the training text's unigram
# entropy, the level a model that ignores its context reaches; a run that diverged counts at its initial loss.

# %%
rows.append(reach_row("highway-hundreds-of-layers", "highway_depth", reach_rows.trained_row))
rows.append(family_gain_row("rezero-converges-faster", "rezero"))
rows += [reach_row("rezero-converges-faster-as-run", "rezero_speed", reach_rows.speed_row),
         reach_rows.speed_row(CLAIMS["rezero-converges-faster-8e-3"], REACH["rezero_speed"],
                              reach_designs["rezero_speed"], reach_link, rezero_lr=0.008, alpha=alpha),
         reach_row("rezero-120-layers", "rezero_depth", reach_rows.trained_row),
         reach_row("layerscale-deeper", "layerscale_depth", reach_rows.layerscale_row)]
rows.append(family_gain_row("hc-gain", "hc"))
rows.append(family_rows.over(CLAIMS["mhc-over-hc"], "mhc", "hc", family_runs, family_size, alpha))
rows.append(beyond_reach("mhc-stable-at-scale"))

# %% [markdown]
# ## The CPU's own studies: their runs and what each found
#
# Every study the ledger's reach rows read: the runs that have ended, the CPU-hours they took (their own training
# minutes, one thread each) and the commits they ran at; below it, each finished design's table.

# %%
display(tables.reader_table(reach_rows.runs_table(REACH), "07_reach_runs", figures_dir, index=False,
                            **reach_rows.VIEWS["runs"]))
for name in ("highway_depth", "rezero_depth"):
    if reach_rows.design_done(REACH[name], reach_designs[name]):
        display(tables.reader_table(reach_rows.trained_table(REACH[name], reach_designs[name]["seeds"], alpha),
                                    f"07_{name}", figures_dir, index=False, **reach_rows.VIEWS["trained"]))
layerscale_done = reach_rows.design_done(REACH["layerscale_depth"], reach_designs["layerscale_depth"])
if layerscale_done:
    display(tables.reader_table(reach_rows.layerscale_gaps(REACH["layerscale_depth"],
                                                           reach_designs["layerscale_depth"]["seeds"], alpha),
                                "07_layerscale_depth", figures_dir, index=False, **reach_rows.VIEWS["layerscale"]))
trained_runs = {name: reach_rows.trained_values(REACH[name], reach_designs[name]["seeds"])
                for name in ("highway_depth", "rezero_depth") if reach_rows.design_done(REACH[name], reach_designs[name])}
if trained_runs or layerscale_done:
    plots.show_figure(figures.depth_reach(trained_runs, reach_rows.layerscale_seed_gaps(
        REACH["layerscale_depth"], reach_designs["layerscale_depth"]["seeds"]) if layerscale_done else None),
        "07_depth_reach", figures_dir)
if reach_rows.design_done(REACH["mechanisms"], reach_designs["mechanisms"]):
    growth_confirm = pd.concat([reach_rows.growth_by_depth(REACH["mechanisms"], rule,
                                                           reach_designs["mechanisms"]["seeds"], alpha)
                                for rule in ("attnres", "mgr")])
    if growth_confirm["n"].min() == len(reach_designs["mechanisms"]["seeds"]):  # every run probed
        display(tables.reader_table(growth_confirm, "07_mechanisms", figures_dir, index=False,
                                    **reach_rows.VIEWS["mechanisms"]))
        print(reach_rows.growth_note(growth_confirm, alpha))

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
forest = plots.forest(claim_page.forest_rows(claims),
                      "Each tested claim: the effect here and its 95 % interval, beside the paper's stated effect")
ledger_shown.update(HTML(f"<p>{summary_line}</p>" + claim_page.ledger_html(claims)))
plots.show_figure(forest, "07_forest", figures_dir)
print(summary_line)
