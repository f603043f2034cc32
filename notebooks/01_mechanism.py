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
import seaborn as sns

from rrlib import RULES
from rrlib.views import plots, tables
from rrlib.results import mechanism

plots.use_style()
reading = {"size": size, "seed": 0, "n_windows": n_windows, "out_root": out_root, "local_out_root": local_out_root}

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
init = mechanism.init_gates(size, n_windows=n_windows, out_root=out_root)
print(f"{init.gates} gates × {init.tokens:,} tokens × {init.channels} channels = {init.values:,} values of r; "
      f"min {init.r_min:.6f}, max {init.r_max:.6f}")

# %% [markdown]
# ## The depth argument
#
# Unroll the convex form: the embedding $x_0$ reaches sublayer $n$ with weight $\prod_{l\leq n}(1-r_l)$ on its direct
# path, while the additive forms keep it with weight 1 (their identity path is never gated). At the neutral
# $r = 0.5$ the convex carry halves at every sublayer. The gradient that reaches the embedding through that path
# shrinks the same way; notebook 2 measures the whole gradient in real models.

# %%
gate_values = (0.1, 0.3, 0.5, 0.7)
carry = mechanism.carry_product(max_sublayers, gate_values)
shown = carry.rename(columns=lambda r: f"convex, r = {r}")
shown["additive (any r)"] = 1.0  # the identity path is never gated
tables.reader_table(shown.loc[[8, 16, 24, 40, 48]], "01_carry_product", formats={c: "{:.2e}" for c in shown.columns})

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for r in gate_values:
    ax.semilogy(carry.index, carry[r], label=f"convex, r = {r}", color=plt.cm.Blues(0.3 + r))
ax.semilogy(shown.index, shown["additive (any r)"], color=plots.color("review"), lw=2.5, label="additive (any r)")
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
# windows, in float64 (so that another CPU gives the same digits): the distribution of $r$ per sublayer, then, token
# by token, the mean $r$ against the relative size of the update $\Vert u\Vert/\Vert h\Vert$ and its cosine with the
# state.

# %%
trained = mechanism.probed_run(size, out_root=out_root, local_out_root=local_out_root)
print(f"{trained.size}/review/seed0: d_model {trained.d_model}, {trained.n_layers} blocks, "
      f"trained {trained.steps} steps, {trained.params / 1e6:.2f}M parameters")
per_layer = mechanism.gates_per_sublayer(**reading)
shown = per_layer.rename(columns={"r_mean": "mean r", "r_sd": "sd r", "r_p10": "p10", "r_p90": "p90"})
tables.reader_table(shown.rename_axis(None), "01_gates_per_sublayer", figures_dir,
                    formats=dict.fromkeys(shown, "{:.3f}"), digits=tables.SIGNIFICANT)

# %%
sample = mechanism.gate_sample(**reading)
sample["r"] = tables.rounded(sample["r"])  # drawn as the CSVs store values, so that another CPU draws the same
fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(per_layer)), 4))
sns.violinplot(data=sample, x="sublayer", y="r", hue="sublayer", palette="Blues", inner="quartile", cut=0,
               legend=False, ax=ax)
ax.axhline(0.5, color="grey", ls=":", lw=1)
ax.set(ylim=(0, 1), title=f"Trained gates per sublayer ({trained.size}, every token and channel)")
plots.show_figure(fig, "01_gates_per_sublayer", figures_dir)

# %%
per_token = tables.rounded(mechanism.gate_tokens(**reading))
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
correlation = mechanism.gate_correlation(**reading)
shown = correlation.rename(columns={"rho_update_norm": "ρ(r, ‖u‖/‖h‖)", "rho_cosine": "ρ(r, cos)"})
tables.reader_table(shown, "01_gate_correlation", figures_dir, formats=dict.fromkeys(shown, "{:+.2f}"),
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
explorer = mechanism.GateExplorer(**reading)  # one held-out position, halfway through the first window
names = explorer.sublayers


def gate_histogram(sublayer, cosine, log10_scale) -> bytes:
    """The probe's r per channel at one setting of the controls, as a PNG."""
    r = explorer.r(names.index(sublayer), cosine, 10**log10_scale)
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
probe = mechanism.gate_probe(**reading)
scales = mechanism.SCALES
n_cols = min(4, len(names))  # at most four panels a row, so each stays readable at the page's width
n_rows = -(-len(names) // n_cols)
fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.4 * n_cols, 2.9 * n_rows + 0.6), sharex=True, sharey=True,
                         squeeze=False)
for i, (name, ax) in enumerate(zip(names, axes.flat)):
    for scale, ls in zip(scales, ("-", "--", ":")):
        curve = probe[(probe["index"] == i) & (probe["scale"] == scale)]
        ax.plot(curve["cosine"], tables.rounded(curve["r_mean"]), ls=ls, lw=2, color=plots.color("review"),
                label=f"‖u‖/‖h‖ = {scale:g}")
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

# %% [markdown]
# ## Recap

# %%
summary = mechanism.gate_summary(**reading)
print(f"At initialisation all {init.values:,} gate values read {init.r_min:.4f}–{init.r_max:.4f}: every "
      "review block starts as h + u/2.")
neutral = carry[0.5]
print(f"At r = 0.5 the convex form keeps {neutral.loc[40]:.1e} of the embedding's direct path after 40 sublayers "
      f"(20 blocks) and {neutral.loc[max_sublayers]:.1e} after {max_sublayers}; the additive form keeps all of it.")
print(f"Trained ({trained.size}, {trained.steps} steps): mean r per sublayer runs from "
      f"{summary.r_mean_low:.3f} ({summary.r_mean_low_sublayer}) to {summary.r_mean_high:.3f} "
      f"({summary.r_mean_high_sublayer}), with a within-sublayer SD of {summary.r_sd_average:.3f} on average.")
print(f"Token by token, r follows the update's direction most in {summary.strongest_sublayer} "
      f"(Spearman ρ = {summary.strongest_rho_cosine:+.2f} with cos(u, h)). Probing the gate, "
      f"changing the update's size 100-fold moves mean r by at most {summary.scale_effect:.4f}, while sweeping its "
      f"direction moves it by {summary.direction_effect:.3f} on average"
      + (": the gate reviews what an update says, not how loudly it says it." if summary.reviews_direction else "."))
