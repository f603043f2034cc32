"""The report's figures: one look, one colour and marker per residual rule, and figure export.

Every notebook draws through these so that a rule looks the same in every figure, a figure shows up in a
rendered page whatever matplotlib backend the user's environment selects, and each figure carries its title
as the image's alt text. Reading run folders lives in ``rrlib.runs.loading``, gate probes in
``rrlib.studies.gates``, reader tables in ``rrlib.views.tables``.
"""
from __future__ import annotations

import base64
import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ..runs.config import project_path
from .tables import rounded

# One colour and marker per residual rule, the same in every figure of the report. Families share a hue
# (Review blues, Highway reds, the cross-depth rules warm and purple tones) and differ by marker, so the 14+
# rules stay apart in colour, in shape, and in greyscale print.
RULE_STYLES = {
    "standard": ("#2ca02c", "o"), "review": ("#1f77b4", "s"), "review_convex": ("#6baed6", "D"),
    "highway": ("#d62728", "^"), "highway_convex": ("#fc9272", "v"), "rezero": ("#9467bd", "P"),
    "layerscale": ("#8c564b", "X"), "scaled": ("#7f7f7f", "<"), "scaled_loops": ("#bcbd22", ">"),
    "attnres": ("#ff7f0e", "h"), "attnres_block": ("#ffbb78", "H"), "delta_attnres": ("#e377c2", "*"),
    "mgr": ("#17becf", "p"), "hc": ("#393b79", "d"), "mhc": ("#637939", "8"),
    "denseformer": ("#e6550d", "v"), "dynamic_dense": ("#fdae6b", "<"), "laurel_rw": ("#31a354", "^"),
    "laurel_lr": ("#a1d99b", "v"), "value_residual": ("#de9ed6", "X"),
}
FALLBACK_STYLES = [("#843c39", "o"), ("#7b4173", "s"), ("#5254a3", "^"), ("#8ca252", "D")]  # rules added later


def rule_style(variant: str) -> tuple[str, str]:
    """(colour, marker) of a rule; a rule registered later gets a fixed one from its name."""
    if variant in RULE_STYLES:
        return RULE_STYLES[variant]
    return FALLBACK_STYLES[sum(map(ord, variant)) % len(FALLBACK_STYLES)]


def color(variant: str) -> str:
    return rule_style(variant)[0]


def marker(variant: str) -> str:
    return rule_style(variant)[1]


def palette(variants) -> dict[str, str]:
    """``{variant: colour}`` for seaborn's ``palette=``."""
    return {v: color(v) for v in variants}


def markers(variants) -> dict[str, str]:
    """``{variant: marker}`` for seaborn's ``markers=``."""
    return {v: marker(v) for v in variants}


def use_style() -> None:
    """The report's matplotlib look: seaborn's whitegrid, sizes readable at a page's width."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "figure.autolayout": True, "legend.fontsize": 9})


def legend_outside(ax, **kwargs) -> None:
    """The legend to the right of the axes, where it covers no data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, **kwargs)


def log_axis(ax, which: str = "x") -> None:
    """A log axis labelled in plain numbers (0.1, 1, 10) at its decades, and at 2× and 5× only when it spans
    less than about a decade and a half: matplotlib's default labels minor ticks as 3×10⁻¹, which collide with 10⁰."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")

    def minor(value, _):
        low, high = sorted(axis.get_view_interval())
        mantissa = round(value / 10 ** math.floor(math.log10(value)), 6)
        return f"{value:g}" if high / low < 30 and mantissa in (2, 5) else ""

    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))


def title_of(fig) -> str:
    """The figure's title: its suptitle, else the titles of its axes."""
    if fig._suptitle is not None and fig._suptitle.get_text():
        return fig._suptitle.get_text()
    return "; ".join(t for t in (ax.get_title() for ax in fig.axes) if t)


def save_figure(fig, name: str, figures_dir=None) -> None:
    """Write ``fig`` as ``<figures_dir>/<name>.png`` (the report's figure export; nothing without a folder) and
    close it, so that it is not shown as well. It returns nothing, so that a cell ending with it shows no path."""
    png = figure_png(fig, name)
    if figures_dir is not None:
        _write(png, name, figures_dir)


def show_figure(fig, name: str | None = None, figures_dir=None) -> None:
    """Save ``fig`` (when given a folder), show it as a PNG output with its title as alt text, and close it.

    The PNG is displayed directly rather than through ``plt.show()``, whose output depends on the backend
    (with ``MPLBACKEND=Agg`` exported it shows nothing); closing keeps the inline backend from showing the
    figure a second time.
    """
    from IPython.display import Image, display

    title = title_of(fig)
    png = figure_png(fig, name)
    if name is not None and figures_dir is not None:
        _write(png, name, figures_dir)
    # shown at the figure's own size (savefig writes it at a higher dpi, for zooming and print)
    width = int.from_bytes(png[16:20], "big") * plt.rcParams["figure.dpi"] / plt.rcParams["savefig.dpi"]
    display(Image(png, width=round(width)), metadata={"image/png": {"alt": title}})


def _write(png: bytes, name: str, figures_dir) -> Path:
    folder = project_path(figures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    path.write_bytes(png)
    return path


def figure_png(fig, name: str | None = None) -> bytes:
    """``fig`` as PNG bytes (closed afterwards), the same for the same figure: no software version inside, and
    the figure's title as the PNG's ``Title`` (the index captions each figure with it)."""
    title = title_of(fig)
    if not title:
        raise ValueError(f"figure {name or ''} has no title: give it a suptitle or axes titles")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": None, "Title": title})
    plt.close(fig)
    return buffer.getvalue()



_plotly_shown = 0


def show_plotly(fig) -> None:
    """Display a plotly figure as self-contained HTML: plotly.js is inlined once per kernel, never a CDN.

    Rendered notebooks then work offline, and the figure survives nbconvert as ordinary HTML. The div id is
    numbered, not random, so that a rebuilt page is byte for byte the same, and every float in the figure (its
    data and layout) is rounded by ``rrlib.views.tables.rounded``, so that another CPU's last digits stay out.
    """
    from IPython.display import HTML, display

    global _plotly_shown
    html = plotly_html(fig, _plotly_shown)
    _plotly_shown += 1
    display(HTML(html))


def plotly_html(fig, number: int) -> str:
    """The ``number``-th plotly figure of a page as HTML (plotly.js inlined with the first). Always through
    plotly's ``json`` engine: its default, ``auto``, takes orjson where it happens to be installed, which writes
    non-ASCII text ("−") as itself where ``json`` writes ``\\u2212``, so the page's bytes would depend on more than
    requirements.txt pins."""
    import plotly.io as pio

    pio.json.config.default_engine = "json"
    return pio.to_html(_rounded_tree(fig.to_dict()), validate=False, full_html=False, include_plotlyjs=number == 0,
                       include_mathjax=False, default_width="100%", config={"displaylogo": False},
                       div_id=f"plotly-{number}")


def _rounded_tree(node):
    """A plotly figure's dict with every float rounded: numeric arrays come base64-encoded ({dtype, bdata}), others
    as arrays of objects (customdata of mixed kinds)."""
    if isinstance(node, dict) and set(node) >= {"dtype", "bdata"} and node["dtype"][:1] == "f":
        values = np.frombuffer(base64.b64decode(node["bdata"]), dtype=node["dtype"])
        return {**node, "bdata": base64.b64encode(rounded(values).astype(node["dtype"]).tobytes()).decode("ascii")}
    if isinstance(node, dict):
        return {key: _rounded_tree(value) for key, value in node.items()}
    if isinstance(node, (list, tuple)):
        return type(node)(_rounded_tree(value) for value in node)
    if isinstance(node, np.ndarray) and node.dtype.kind == "O":
        return np.array([_rounded_tree(value) for value in node.ravel().tolist()], dtype=object).reshape(node.shape)
    return rounded(node)


def forest(df, title: str = ""):
    """Each tested claim's effect with its 95 % interval (dot and bar) beside the effect its paper states (a cross),
    one line a claim, on a symmetric-log axis: the rows' units differ (nats, log₂ units, slopes), so the axis is
    for sign and rough size; the numbers are in the ledger. ``df`` has columns label, effect, ci_low, ci_high,
    paper_effect."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.32 * len(df) + 1.2))
    y = list(range(len(df)))[::-1]
    has_ci = df["ci_low"].notna()
    ax.errorbar(df["effect"], y, xerr=[(df["effect"] - df["ci_low"]).where(has_ci, 0),
                                       (df["ci_high"] - df["effect"]).where(has_ci, 0)],
                fmt="o", color="#1f4e79", ecolor="#1f4e79", capsize=2, label="effect here, 95 % interval")
    ax.scatter(df["paper_effect"], y, marker="x", color="#b03a2e", zorder=3, label="the paper's stated effect")
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_yticks(y, df["label"], fontsize=7)
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set(xlabel="effect, signed so that positive is what the claim says (each row in its own units)", title=title)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig
