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
# # 1 · The mechanism: what a Review gate computes
#
# **Question.** A Review residual lets a gate look at each sublayer's proposed update before it is committed,
# per channel and per token, seeing both the current state and the proposal. What does that gate compute when
# training starts, why does the paper keep the identity path (the additive form) rather than the convex form of
# classic Highway layers, and what do trained gates actually do?
#
# **Method.** We write the rules out, read the gate of a freshly initialised model, compute how much of the
# embedding each form carries through depth, and then open a trained model: the gate of every sublayer,
# read on held-out text, against the size and direction of the update it reviews.

# %% tags=["parameters"]
size = "mini"  # the trained run examined below: <out_root>/<size>/review/seed0
out_root = "outputs/runs"  # run folders
local_out_root = "build/runs"  # where the run is trained again when out_root keeps its result but no weights
n_windows = 16  # held-out windows the gates are read on
max_sublayers = 48  # depth range of the carry argument, in sublayers (two per block)
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
import ipywidgets as widgets
from IPython.display import Pretty, display
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from rrlib import GPT, RULES, resolve_run
from rrlib.report import plots, tables
from rrlib.runs import loading
from rrlib.studies import gates

plots.use_style()

# %% [markdown]
# ## The three rules and the convex form
#
# A pre-norm sublayer proposes an update $u_l = f_l(\mathrm{RMSNorm}(h_{l-1}))$. The rules differ only in how
# $u_l$ is committed to the residual stream $h$:
#
# - **standard**: $h_l = h_{l-1} + u_l$
# - **highway**: $h_l = h_{l-1} + g_l \odot u_l$, with $g_l = \sigma(W_g h_{l-1} + b_g)$
# - **review**: $h_l = h_{l-1} + r_l \odot u_l$, with
#   $r_l = \sigma(W_r [\operatorname{rms}(h_{l-1});\ \operatorname{rms}(u_l)] + b_r)$
#
# The highway gate sees only the state; the review gate sees the state *and the proposal*, each put on a common
# scale by a parameter-free RMS normalisation. $W_r \in \mathbb{R}^{d\times 2d}$ and $b_r$ start at zero, one gate
# per sublayer (attention and MLP). The **convex** forms replace the identity path by a blend,
#
# $$h_l = (1-r_l)\odot h_{l-1} + r_l \odot u_l ,$$
#
# which is the classic Highway layer when the gate sees $h$ only (`highway_convex`) and `review_convex` with the
# review gate. The library draws each rule where it is implemented:

# %%
for name in ("standard", "highway", "review", "review_convex"):  # one output each, short enough to read
    display(Pretty(f"── {name} " + "─" * 60 + "\n" + RULES[name].__doc__.strip("\n")))

# %% [markdown]
# ## The gate at initialisation
#
# With $W_r = 0$ and $b_r = 0$ the gate is $\sigma(0) = 0.5$ whatever it sees: every review block starts as
# $h + u/2$, "neutral". We read every gate of a freshly built model on held-out text to check.

# %%
fresh_run = resolve_run(size, "review", 0, out_root=out_root)
torch.manual_seed(0)
fresh = GPT(fresh_run.model).eval()
x, y = loading.heldout_batch(fresh_run, n_windows)
r_init = torch.cat([r.flatten() for r in gates.gate_activity(fresh, x)])
print(f"{fresh.shape.n_steps} gates × {x.numel():,} tokens × {fresh_run.model.d_model} channels = "
      f"{r_init.numel():,} values of r; min {r_init.min():.6f}, max {r_init.max():.6f}")

# %% [markdown]
# ## The depth argument
#
# Unroll the convex form: the embedding $x_0$ reaches sublayer $n$ with weight $\prod_{l\leq n}(1-r_l)$ on its direct
# path, while the additive forms keep it with weight 1 (their identity path is never gated). At the neutral
# $r = 0.5$ the convex carry halves at every sublayer. The gradient that reaches the embedding through that path
# shrinks the same way; notebook 2 measures the whole gradient in real models.

# %%
depth = np.arange(1, max_sublayers + 1)
gate_values = (0.1, 0.3, 0.5, 0.7)
carry = pd.DataFrame({f"convex, r = {r}": np.cumprod(np.full(max_sublayers, 1 - r)) for r in gate_values},
                     index=pd.Index(depth, name="sublayers"))
carry["additive (any r)"] = 1.0
tables.reader_table(carry.loc[[8, 16, 24, 40, 48]], "01_carry_product", formats={c: "{:.2e}" for c in carry.columns})

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for r in gate_values:
    ax.semilogy(depth, carry[f"convex, r = {r}"], label=f"convex, r = {r}", color=plt.cm.Blues(0.3 + r))
ax.semilogy(depth, carry["additive (any r)"], color=plots.color("review"), lw=2.5, label="additive (any r)")
ax.axvline(40, color="grey", ls=":", lw=1)
ax.text(40.5, 1e-12, "20 blocks", color="grey")
ax.set(xlabel="sublayers (2 per block)", ylabel=r"weight of $x_0$ on its direct path",
       title="What the identity path keeps: ∏ (1 − r) against 1")
plots.legend_outside(ax)
plots.show_figure(fig, "01_carry_product", figures_dir)

# %% [markdown]
# ## What trained gates do
#
# We load the trained Review run of this size (seed 0) from its kept weights (for `mini`, a 4.5 MB fp32 file committed
# with its result, so nothing is retrained) and read every gate on held-out
# windows: the distribution of $r$ per sublayer, then, token by token, the mean $r$ against the relative size of
# the update $\Vert u\Vert/\Vert h\Vert$ and its cosine with the state.

# %%
model, run, folder = loading.trained_model(size, "review", 0, out_root, local_out_root)
# Read in float64: the gates computed in float32 differ between CPUs (other SIMD kernels) by about 1e-7, enough
# to move a Spearman ρ in its 5th digit and a probe curve by an antialiased pixel; in float64 the differences
# (about 1e-16) stay far below the 5 significant digits the page writes, so its files are the same everywhere.
model = model.double()
print(f"{run.size}/review/seed0: d_model {run.model.d_model}, {run.model.n_layers} blocks, "
      f"trained {run.train.steps} steps, {model.n_params() / 1e6:.2f}M parameters")
per_token = tables.rounded(gates.gate_table(model, x))  # rounded as the CSVs are, so another CPU draws the same
r_all = {name: r.flatten() for name, r in zip(gates.sublayer_names(model), gates.gate_activity(model, x))}
per_layer = pd.DataFrame({name: {"mean r": r.mean().item(), "sd r": r.std().item(),
                                 "p10": r.quantile(0.1).item(), "p90": r.quantile(0.9).item()}
                          for name, r in r_all.items()}).T
tables.reader_table(per_layer, "01_gates_per_sublayer", figures_dir, formats=dict.fromkeys(per_layer, "{:.3f}"),
                   digits=tables.SIGNIFICANT)

# %%
draw = torch.Generator().manual_seed(0)  # a fixed sample, so that a rebuilt figure is the same
sample = pd.concat([pd.DataFrame({"sublayer": name,
                                  "r": tables.rounded(r[torch.randperm(len(r), generator=draw)[:20_000]])})
                    for name, r in r_all.items()])
fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(r_all)), 4))
sns.violinplot(data=sample, x="sublayer", y="r", hue="sublayer", palette="Blues", inner="quartile", cut=0,
               legend=False, ax=ax)
ax.axhline(0.5, color="grey", ls=":", lw=1)
ax.set(ylim=(0, 1), title=f"Trained gates per sublayer ({run.size}, every token and channel)")
plots.show_figure(fig, "01_gates_per_sublayer", figures_dir)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for kind, marker in (("attn", "o"), ("mlp", "s")):
    part = per_token[per_token["kind"] == kind]
    axes[0].scatter(part["update_norm"], part["r_mean"], s=4, alpha=0.25, marker=marker, label=kind)
    axes[1].scatter(part["cosine"], part["r_mean"], s=4, alpha=0.25, marker=marker, label=kind)
plots.log_axis(axes[0], "x")
axes[0].set(xlabel=r"$\|u\| / \|h\|$", ylabel="mean r over channels (one point per token)")
axes[1].set(xlabel=r"$\cos(u, h)$")
plots.legend_outside(axes[1], markerscale=4)
fig.suptitle("What the trained gates respond to")
plots.show_figure(fig, "01_gate_response", figures_dir)

# %%
correlation = per_token.groupby("sublayer", sort=False)[["r_mean", "update_norm", "cosine"]].corr(method="spearman")
correlation = correlation.xs("r_mean", level=1)[["update_norm", "cosine"]].rename(
    columns={"update_norm": "ρ(r, ‖u‖/‖h‖)", "cosine": "ρ(r, cos)"})
tables.reader_table(correlation, "01_gate_correlation", figures_dir, formats=dict.fromkeys(correlation, "{:+.2f}"),
                   digits=tables.SIGNIFICANT)

# %% [markdown]
# ## Exploring one gate
#
# Both inputs of the gate pass through $\operatorname{rms}(\cdot)$, so the gate cannot see how large a proposal is,
# only its direction: whatever correlation $r$ shows with $\Vert u\Vert$ above comes through the direction. To
# see the response itself, we keep a real state $h$ from the held-out text and feed the trained gate synthetic
# proposals $u$ at a chosen cosine with $h$ and a chosen size (the rest of $u$'s direction is the real update's).
# In a live notebook (JupyterLab or Colab, see the README) three sliders move the sublayer, the cosine and the
# size; a static page cannot run them, and shows the same probe on a grid instead, in the figure after them.

# %%
records = gates.gate_records(model, x)
names = gates.sublayer_names(model)
token = (0, x.shape[1] // 2)  # one held-out position, halfway through the first window


def gate_histogram(sublayer, cosine, log10_scale) -> bytes:
    """The probe's r per channel at one setting of the controls, as a PNG."""
    i = names.index(sublayer)
    h, u, _ = records[i]
    r = gates.probe_gate(model, i, h[token], u[token], cosine, 10**log10_scale)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(r.numpy(), bins=30, range=(0, 1), color=plots.color("review"))
    ax.set(xlabel="r per channel", ylabel="channels",
           title=f"{sublayer}: cos(u, h) = {cosine:+.2f}, ‖u‖/‖h‖ = {10**log10_scale:.2g}, mean r = {r.mean():.3f}")
    return plots.figure_png(fig)


# %% tags=["live"]
# The figure is an Image widget that the controls redraw, not ipywidgets.interact: interact draws into an Output
# widget, and a headless run (papermill, nbclient) answers each Output-widget update with a message on the
# kernel's shell socket while it waits on that socket for the cell's reply, which it can then miss: the run
# sat idle until its cell timeout. An Image widget's value changes only in the kernel.
controls = {"sublayer": widgets.Dropdown(options=names, description="sublayer"),
            "cosine": widgets.FloatSlider(value=0.5, min=-1, max=1, step=0.05, description="cos(u, h)"),
            "log10_scale": widgets.FloatSlider(value=0.0, min=-2, max=2, step=0.1, description="log10 ‖u‖/‖h‖")}
histogram = widgets.Image(format="png", value=gate_histogram(**{k: c.value for k, c in controls.items()}))


def redraw(_change):
    histogram.value = gate_histogram(**{k: c.value for k, c in controls.items()})


for control in controls.values():
    control.observe(redraw, names="value")
widgets.VBox([*controls.values(), histogram])

# %%
cosines = torch.linspace(-1, 1, 41, dtype=torch.float64)  # float32 linspace differs in its last bit between kernels
scales = (0.1, 1.0, 10.0)
n_cols = min(4, len(names))  # at most four panels a row, so each stays readable at the page's width
n_rows = -(-len(names) // n_cols)
fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.4 * n_cols, 2.9 * n_rows + 0.6), sharex=True, sharey=True,
                         squeeze=False)
for i, (name, ax) in enumerate(zip(names, axes.flat)):
    h, u, _ = records[i]
    for scale, ls in zip(scales, ("-", "--", ":")):
        r = tables.rounded(gates.probe_gate(model, i, h[token], u[token], cosines, scale).mean(-1))
        ax.plot(cosines, r, ls=ls, lw=2, color=plots.color("review"), label=f"‖u‖/‖h‖ = {scale:g}")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_title(name)
for ax in axes.flat[len(names):]:
    ax.set_visible(False)
for ax in axes[-1]:
    ax.set_xlabel("cos(u, h)")
for ax in axes[:, 0]:
    ax.set_ylabel("mean r")
fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="upper center", bbox_to_anchor=(0.5, 0), ncol=len(scales),
           frameon=False)  # below the panels, off the curves
fig.suptitle("The trained gate's response to the proposal's direction and size (one held-out token)")
plots.show_figure(fig, "01_gate_probe", figures_dir)

# %%
probe = torch.stack([gates.probe_gate(model, i, records[i][0][token], records[i][1][token], cosines, s).mean(-1)
                     for i in range(len(names)) for s in scales]).view(len(names), len(scales), -1)
scale_effect = (probe.max(1).values - probe.min(1).values).max().item()
direction_effect = (probe.max(2).values - probe.min(2).values).mean().item()

# %% [markdown]
# ## Recap

# %%
strongest = correlation["ρ(r, cos)"].abs().idxmax()
print(f"At initialisation all {r_init.numel():,} gate values read {r_init.min():.4f}–{r_init.max():.4f}: every "
      "review block starts as h + u/2.")
neutral = carry["convex, r = 0.5"]
print(f"At r = 0.5 the convex form keeps {neutral.loc[40]:.1e} of the embedding's direct path after 40 sublayers "
      f"(20 blocks) and {neutral.loc[max_sublayers]:.1e} after {max_sublayers}; the additive form keeps all of it.")
print(f"Trained ({run.size}, {run.train.steps} steps): mean r per sublayer runs from "
      f"{per_layer['mean r'].min():.3f} ({per_layer['mean r'].idxmin()}) to {per_layer['mean r'].max():.3f} "
      f"({per_layer['mean r'].idxmax()}), with a within-sublayer SD of {per_layer['sd r'].mean():.3f} on average.")
print(f"Token by token, r follows the update's direction most in {strongest} "
      f"(Spearman ρ = {correlation.loc[strongest, 'ρ(r, cos)']:+.2f} with cos(u, h)). Probing the gate, "
      f"changing the update's size 100-fold moves mean r by at most {scale_effect:.4f}, while sweeping its "
      f"direction moves it by {direction_effect:.3f} on average"
      + (": the gate reviews what an update says, not how loudly it says it." if scale_effect < direction_effect / 10
         else "."))
