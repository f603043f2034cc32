"""The report in one command: execute the notebooks, render them, export the figures, write the index.

    python -m rrlib report [--sizes tiny mini ...] [--quick] [--out paper] [--runs outputs/runs]

Each notebook in ``NOTEBOOKS`` is read from its jupytext source (``notebooks/NN_topic.py``), executed by
papermill from the project root with its parameters, and rendered twice by nbconvert: ``NN_topic.html`` with
the code and ``NN_topic.reader.html`` without it. A per-size notebook (the sweep) runs once per size and is
rendered as ``NN_topic_<size>.html``. The notebooks save their figures as PNG into ``<out>/figures``; the
index links pages and figures. Rendered pages need no network: plotly.js is inlined and formulas are drawn
as SVG when the page is built.

``--quick`` is the CI build: tiny parameters, and, unless told otherwise, everything under ``build/quick`` so
that the kept report and run results are never touched.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import re
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .config import ConfigError, count_params, load_preset
from .train import PROJECT_ROOT, project_path

NOTEBOOK_DIR = PROJECT_ROOT / "notebooks"
KERNEL = "python3"
PAPER_CSV = "../shared/reference/scaling_v8.csv"  # the paper's 42 runs, beside the project (DESIGN.md)


@dataclass(frozen=True)
class Notebook:
    name: str  # notebooks/<name>.py
    blurb: str  # one line for the index
    per_size: bool = False  # executed once per size, with its parameter `size`
    quick: dict = field(default_factory=dict)  # parameters of a --quick build
    requires: str | None = None  # a size whose results a full build needs; without them it skips the notebook


# The report, in reading order: adding a notebook is one line.
NOTEBOOKS = (
    Notebook("01_mechanism", "What a Review gate computes at initialisation, why the identity path matters, and "
             "what trained gates do.", quick={"size": "tiny", "n_windows": 4}),
    Notebook("02_depth_stability", "Convex against additive residuals from shallow to deep models: training, "
             "final loss and the gradient reaching the embeddings.",
             quick={"depths": [2, 4], "seeds": [0], "steps": 20, "grad_windows": 2}),
    Notebook("03_sweep", "One size: every variant and seed, training curves at equal compute, the results "
             "table.", per_size=True),
    Notebook("04_statistics", "The paper's runs and ours through the same tests: Welch beside paired with Holm, "
             "intervals, the emergence curve, calibration, tokens per parameter.",
             quick={"n_boot": 1000, "exclude_sizes": []}),
    Notebook("05_related_methods", "The family in one harness: AttnRes, Block and Delta AttnRes, MGR, "
             "Hyper-Connections and mHC beside Review and standard, and learning-rate transfer in looped models.",
             quick={"size": "tiny", "variants": ["standard", "review", "attnres", "attnres_block", "delta_attnres",
                                                 "mgr", "hc", "mhc"], "seeds": [0], "loops": [1, 2],
                    "lrs": [0.002, 0.004], "loop_seeds": [0], "loop_steps": 4, "train_looped": True,
                    "wide_size": None},
             requires="family"),
    Notebook("06_size_vs_tokens", "Scale or undertraining: Review's gap over a grid of two model sizes × three "
             "token budgets, regressed on log size and log tokens per parameter, beside the paper's sizes.",
             quick={"grid_sizes": ["tiny"]}, requires="mini_steps1200"),
)
QUICK_SIZES = ["tiny"]  # the smoke-test size: seconds on a CPU, so a build trains its missing runs unasked


def _train_overrides(values: dict) -> dict:
    """A page's overrides as its notebook builds them: ``settings`` by section, then steps/device/precision."""
    overrides = {section: dict(v) for section, v in (values.get("settings") or {}).items()}
    overrides["train"] = {**overrides.get("train", {}),
                          **{k: values[k] for k in ("steps", "device", "precision") if values.get(k) is not None}}
    return overrides


def _size_sweep(values: dict) -> list[tuple]:
    return [(values["size"], values.get("variants"), values.get("seeds"), _train_overrides(values))]


def _depth_sweeps(values: dict) -> list[tuple]:
    from .config import available_sizes

    depths = values.get("depths") or [int(s[5:]) for s in available_sizes()
                                       if s.startswith("depth") and s[5:].isdigit()]
    return [(f"depth{L}", values.get("variants"), values.get("seeds"), _train_overrides(values)) for L in depths]


# The sweeps a page reads, as (size, variants, seeds, overrides), from its parameters: what it would train when
# results are missing. (Notebook 05's looped sweeps and notebook 06 wait for their `requires` size instead.)
SWEEPS = {"02_depth_stability": _depth_sweeps, "03_sweep": _size_sweep, "05_related_methods": _size_sweep}
QUICK_CELL_TIMEOUT = 600  # seconds: a quick build's cells take seconds, so a stuck one fails CI instead of hanging it


# ---------------------------------------------------------------- paths

def _shown(path: Path) -> str:
    """A path as a notebook parameter: relative to the project root, where papermill runs (no machine paths)."""
    return Path(os.path.relpath(os.path.abspath(path), PROJECT_ROOT)).as_posix()


def _folder(text: str) -> Path:
    """A folder named on the command line: relative to the current folder, as a user means it."""
    return Path(os.path.abspath(Path(text).expanduser()))


# ---------------------------------------------------------------- sizes

def sizes_with_results(runs: Path) -> list[str]:
    """Sizes with at least one result under ``runs`` that are presets of their own, smallest model first."""
    from .loading import standalone_sizes

    found = standalone_sizes({p.parts[-4] for p in runs.glob("*/*/seed*/result.json")})
    # ties (family is micro's width) by name: the set's order changes from process to process
    return sorted(found, key=lambda s: (count_params(load_preset(s).model), s))


# ---------------------------------------------------------------- execution

def notebook_source(nb: Notebook):
    import jupytext

    path = NOTEBOOK_DIR / f"{nb.name}.py"
    if not path.exists():
        raise ConfigError(f"notebook source {_shown(path)} is missing; valid notebooks: "
                          f"{', '.join(n.name for n in NOTEBOOKS)}")
    return jupytext.read(path)


def declared_parameters(notebook) -> set[str]:
    """Names assigned in the notebook's one cell tagged ``parameters``."""
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"a notebook needs exactly one cell tagged 'parameters', found {len(cells)}")
    return set(re.findall(r"^(\w+)\s*=", cells[0].source, re.M))


def parameter_values(notebook) -> dict:
    """The values of the parameters cell, as written (literals only: the cell is read, never executed)."""
    import ast

    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    return {t.id: ast.literal_eval(node.value) for node in ast.parse(cell.source).body
            if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}


def missing_runs(nb: Notebook, values: dict, runs: Path) -> list:
    """The runs a page reads that its run folders do not hold finished (including ones they cannot answer for)."""
    from .config import resolve_run
    from .runfiles import RunConflict, StateError
    from .sweep import grid
    from .train import claimed

    missing = []
    for size, variants, seeds, overrides in SWEEPS.get(nb.name, lambda _: [])(values):
        for variant, seed in grid(size, variants, seeds):
            run = resolve_run(size, variant, seed, overrides, str(runs))
            try:
                missing += [] if claimed(run)[1] is not None else [run]
            except (RunConflict, StateError):
                missing.append(run)
    return missing


def cost_text(runs: list) -> str:
    """'12 runs (depth2: 3, ...), at least 2.1 h on this CPU' from their FLOP count and the CPU's measured speed."""
    from collections import Counter

    from .train import cpu_matmul_flops, pick_device, training_flops

    by_size = ", ".join(f"{size}: {n}" for size, n in Counter(r.size for r in runs).items())
    flops = sum(training_flops(r) for r in runs)
    seconds = flops / cpu_matmul_flops()
    took = f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 60 else "seconds"
    where = (f"at least {took} on this CPU at its full matmul speed"
             if pick_device(runs[0].train.device).type == "cpu" else "on this GPU")
    return f"{len(runs)} runs ({by_size}), {flops:.1e} training FLOPs, {where}"


def execute(notebook, parameters: dict, output: Path, log_output: bool, cell_timeout: int | None) -> None:
    import papermill

    output.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(notebook, str(output), parameters=parameters, kernel_name=KERNEL,
                               cwd=str(PROJECT_ROOT), progress_bar=False, log_output=log_output,
                               execution_timeout=cell_timeout)


# ---------------------------------------------------------------- reuse

INPUTS = "inputs.json"  # in the report's folder: what each page was built from
RUN_FILES = ("result.json", "metrics.jsonl", "config.json", "weights.pt")


def page_inputs(nb: Notebook, parameters: dict, runs: Path, size: str | None, paper_csv: Path) -> str:
    """A fingerprint of what a page is built from: its notebook, its parameters, the run files it can read.

    A per-size page reads its size's runs; the others may read any run beside ``runs`` (the looped sweep keeps
    its own roots there) except the smoke-test size, whose runs the main job trains afresh, and any benchmark
    result (``outputs/bench/*.json``: notebook 05 shows the family's measured speed and memory). The library's
    own code is not part of it: after a change there, ``--force`` rebuilds every page.
    """
    import hashlib

    digest = hashlib.sha256((NOTEBOOK_DIR / f"{nb.name}.py").read_bytes())
    digest.update(json.dumps(parameters, sort_keys=True).encode())
    if paper_csv.exists():
        digest.update(paper_csv.read_bytes())
    root = runs / size if size else runs.parent
    skipped = [] if size else [runs / s for s in QUICK_SIZES]
    bench = runs.parent / "bench"
    files = sorted(p for p in root.rglob("*")
                   if (p.name in RUN_FILES or not size and p.parent == bench and p.suffix == ".json")
                   and not any(p.is_relative_to(s) for s in skipped))
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def read_inputs(out: Path) -> dict:
    path = out / INPUTS
    return json.loads(path.read_text()) if path.exists() else {}


def write_inputs(out: Path, inputs: dict) -> None:
    (out / INPUTS).write_text(json.dumps(inputs, indent=1, sort_keys=True) + "\n")


# ---------------------------------------------------------------- rendering

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# nbconvert's lab template without its two fetched scripts: require.js (nothing here is an AMD module) and
# MathJax (formulas are drawn at build time by math_as_svg); a figure's title becomes its image's alt text
# (rrlib.plots.show_figure puts it in the output's metadata); long printed lines wrap instead of running off
# the page.
TEMPLATE = {"rrlib_report.html.j2": """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{% block extra_css %}<style>.jp-OutputArea-output pre { white-space: pre-wrap; }
.jp-RenderedImage img { max-width: 100%; height: auto; }
.rrlib-live { border-left: 3px solid #1f77b4; padding: 0.3em 0.8em; background: #f3f7fb; }</style>{% endblock extra_css %}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}" \
{%- set width = output | get_metadata('width', 'image/png') %}{% if width %} width="{{ width }}"{% endif %} \
alt="{{ (output | get_metadata('alt', 'image/png') or '') | escape_html }}">
</div>
{%- endblock data_png %}
"""}
LIVE_NOTE = ('<p class="rrlib-live">A live widget stands here: open this notebook in JupyterLab '
             '(<code>jupyter lab notebooks/{name}.py</code>) or on Colab to move it.</p>')
MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
MATH_PT = 11  # formula size: the body text of nbconvert's page


def math_as_svg(markdown: str) -> str:
    """Markdown with each $…$ / $$…$$ formula replaced by an inline SVG drawn by matplotlib's mathtext.

    The page then shows formulas with no script and no network; the TeX stays in the alt text. Notebooks
    keep to the TeX that both mathtext and MathJax read (a test renders every formula).
    """
    import base64
    import io

    from matplotlib.font_manager import FontProperties

    def draw(match):
        display, tex = match.group(1) is not None, " ".join((match.group(1) or match.group(2)).split())
        buffer = io.BytesIO()
        depth = _formula_svg(f"${tex}$", buffer, FontProperties(size=MATH_PT))
        src = "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode()
        img = (f'<img class="math" src="{src}" alt="{html.escape(tex)}" '
               f'style="vertical-align: -{depth:.1f}pt; display: inline; margin: 0">')
        return f'\n\n<p style="text-align: center">{img}</p>\n\n' if display else img

    return MATH.sub(draw, markdown)


def _formula_svg(tex: str, buffer, prop) -> float:
    """Draw ``tex`` as a tightly cropped SVG into ``buffer``; return its depth below the baseline (pt).

    As matplotlib's ``mathtext.math_to_image``, but with no date and a fixed hash salt in the SVG, so that the
    same formula gives the same bytes in every build.
    """
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.mathtext import MathTextParser

    width, height, depth, _, _ = MathTextParser("path").parse(tex, dpi=72, prop=prop)
    fig = Figure(figsize=(width / 72, height / 72))
    fig.text(0, depth / height, tex, fontproperties=prop)
    with matplotlib.rc_context({"svg.hashsalt": "rrlib-report"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return depth


def without_machine_paths(text: str) -> str:
    """Output text (a warning's source line, a traceback) with this machine's folders left out."""
    for folder in (str(PROJECT_ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"]):
        text = text.replace(folder + os.sep, "")
    return text


def for_reading(notebook, name: str = "NN_topic"):
    """The executed notebook as a static page shows it: formulas drawn, a note where a live widget stands, no
    Colab setup cell, no progress (stderr), no machine paths, and nothing that changes from build to build
    (cell ids are numbered, execution times dropped)."""
    import nbformat

    notebook.metadata = {k: v for k, v in notebook.metadata.items() if k in ("kernelspec", "language_info")}
    notebook.cells = [c for c in notebook.cells if "colab" not in c.metadata.get("tags", [])]
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number}"
        cell.metadata = {k: v for k, v in cell.metadata.items() if k == "tags"}
        if cell.cell_type == "markdown":
            cell.source = math_as_svg(cell.source)
            continue
        # widget views (sliders, tqdm's bars) need a kernel; a cell tagged "live" holds controls a reader would
        # want to move, so the page says where they work
        cell.outputs = [o for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})
                        and not (o.output_type == "stream" and o.name == "stderr")]
        if "live" in cell.metadata.get("tags", []):
            cell.outputs.insert(0, nbformat.v4.new_output("display_data", {"text/html": LIVE_NOTE.format(name=name)}))
        for output in cell.outputs:
            if "text" in output:
                output.text = without_machine_paths(output.text)
            for mime in ("text/plain", "text/html"):
                if isinstance(output.get("data", {}).get(mime), str):
                    output.data[mime] = without_machine_paths(output.data[mime])
            if "traceback" in output:
                output.traceback = [without_machine_paths(line) for line in output.traceback]
    return notebook


def title_of(notebook) -> str:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^# (.+)$", cell.source, re.M)
            if match:
                return match.group(1).strip()
    return "untitled"


def render(executed: Path, out: Path, stem: str, source: str | None = None) -> str:
    """Write ``<stem>.html`` (with code) and ``<stem>.reader.html`` (without); return the page title.

    ``source`` names the notebook (``notebooks/<source>.py``) where it differs from the page's stem."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    notebook = for_reading(nbformat.read(executed, as_version=4), source or stem)
    title = title_of(notebook)
    for suffix, reader in ((".html", False), (".reader.html", True)):
        exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader(TEMPLATE)],
                                template_file="rrlib_report.html.j2", exclude_input=reader,
                                exclude_input_prompt=reader, exclude_output_prompt=reader)
        body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}})
        (out / f"{stem}{suffix}").write_text(body, encoding="utf-8")
    return title


# ---------------------------------------------------------------- index

def abstract(runs: Path, sizes: list[str], paper_csv: Path) -> list[str]:
    """The index's abstract: what the report asks, then numbers computed from the paper's runs and ours."""
    from . import stats
    from .sweep import results_table

    lines = ["The paper reports that Review residuals, a gate that sees both the residual state and a sublayer's "
             "proposed update, bring no gain at its smaller sizes and a significant gain at its two largest. "
             "This report explains the mechanism, tests the depth argument for its additive form, reruns the "
             "comparison, and re-reads the paper's own runs with a paired test, Holm's correction, intervals, "
             "and the training budget each size got."]
    if paper_csv.exists():
        table = stats.compare(stats.load_results(paper_csv), "val_loss", n_boot=0)
        welch = sorted(set(table.loc[table["welch_p"] < 0.05, "size"]), key=list(table["size"]).index)
        paired = sorted(set(table.loc[table["significant"], "size"]), key=list(table["size"]).index)
        lines.append(f"Of the paper's {len(table)} (size, baseline) comparisons, its Welch test reaches p < 0.05 at "
                     f"{', '.join(welch) or 'no size'}; the paired test with Holm's correction finds Review "
                     f"significantly better at {', '.join(paired) or 'no size'}.")
    everything = results_table(runs)
    if "status" in everything:
        everything = everything[everything["status"] == "finished"]
    lines += depth_finding(everything)
    studied = [s for s in sizes if s not in QUICK_SIZES] or sizes  # the smoke-test size is no evidence
    ours = everything[everything["size"].isin(studied) & everything["variant"].isin(["review", "highway", "standard"])]
    if "review" in set(ours["variant"]) and ours["variant"].nunique() > 1:
        verdicts = stats.verdicts(stats.compare(ours, "fixed_loss", n_boot=0))
        lines.append(f"Our {len(ours)} runs at {', '.join(studied)}, on the fixed held-out set: "
                     + " ".join(f"At {r.size}, {r.verdict}." for r in verdicts.itertuples()))
    return lines


def depth_finding(results) -> list[str]:
    """One sentence on the depth ablation: from which depth each convex form trails its additive twin."""
    depth = results[results["size"].str.startswith("depth")]
    if depth.empty:
        return []
    mean = depth.groupby(["n_layers", "variant"])["fixed_loss"].mean().unstack()
    parts = []
    for convex, additive in (("review_convex", "review"), ("highway_convex", "highway")):
        if {convex, additive} <= set(mean.columns):
            behind = mean.index[(mean[convex] - mean[additive]) > 0.1]  # 0.1 nats: far beyond seed spread here
            parts.append(f"{convex} trails {additive} by more than 0.1 in loss from {behind.min()} blocks on "
                         f"(at {mean.index.max()} blocks: {mean.loc[mean.index.max(), convex]:.3f} against "
                         f"{mean.loc[mean.index.max(), additive]:.3f})" if len(behind) else
                         f"{convex} stays within 0.1 of {additive} at every depth up to {mean.index.max()} blocks")
    return [f"Depth ablation ({len(depth)} runs): " + "; ".join(parts) + "."] if parts else []


def _size_key(page: str, notebook: str) -> int:
    """Parameters of the model a per-size page is about, so pages read from the smallest size up."""
    size = page.removeprefix(notebook + "_").removesuffix(".reader.html")
    try:
        return count_params(load_preset(size).model)
    except ConfigError:
        return 0


def rendered_pages(out: Path) -> list[tuple[Notebook, str, str]]:
    """(notebook, page stem, title) for every page of ``NOTEBOOKS`` found in ``out``, in reading order."""
    pages = []
    for nb in NOTEBOOKS:
        found = (sorted(out.glob(f"{nb.name}_*.reader.html"), key=lambda p: _size_key(p.name, nb.name)) if nb.per_size
                 else [out / f"{nb.name}.reader.html"])
        for reader in found:
            if reader.exists():
                stem = reader.name.removesuffix(".reader.html")
                match = re.search(r"<title>(.*?)</title>", reader.read_text(encoding="utf-8"), re.S)
                title = html.unescape(match.group(1)) if match else stem
                if nb.per_size:
                    title += f" — {stem.removeprefix(nb.name + '_')}"
                pages.append((nb, stem, title))
    return pages


def write_index(out: Path, paragraphs: list[str]) -> Path:
    """``index.html``: abstract, the sections (reader's and full versions), the figures. No scripts."""
    sections = [f'<li><a href="{stem}.reader.html">{html.escape(title)}</a>: {html.escape(nb.blurb)} '
                f'<span class="alt">(<a href="{stem}.html">with code</a>)</span></li>'
                for nb, stem, title in rendered_pages(out)]
    figures = sorted((out / "figures").glob("*.png"))
    gallery = "\n".join(f'<a href="figures/{f.name}"><figure><img src="figures/{f.name}" alt="{f.stem}">'
                        f"<figcaption>{f.stem}</figcaption></figure></a>" for f in figures)
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Review Residuals: a reproduction</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5;
       color: #222; }}
h1 {{ margin-bottom: 0.2rem; }} .sub {{ color: #666; margin-top: 0; }}
li {{ margin: 0.4rem 0; }} .alt {{ color: #666; font-size: 0.9em; }}
.gallery {{ display: flex; flex-wrap: wrap; gap: 1rem; }}
figure {{ margin: 0; width: 17rem; }} figure img {{ width: 100%; border: 1px solid #ddd; }}
figcaption {{ font-size: 0.8em; color: #555; }} a {{ color: #1f5fa8; }}
</style>
</head>
<body>
<h1>Review Residuals: a reproduction</h1>
<p class="sub">Update-conditioned residual gating for transformers (Kramer, 2026), reproduced and re-tested.</p>
<h2>Abstract</h2>
{body}
<h2>Sections</h2>
<ol>
{chr(10).join(sections)}
</ol>
<p class="alt">Each section links its reader's version; "with code" is the executed notebook.</p>
<h2>Figures</h2>
<div class="gallery">
{gallery}
</div>
</body>
</html>
"""
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


# ---------------------------------------------------------------- the command

def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m rrlib report", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=None,
                   help="sizes for the sweep notebook, one execution each (default: every size with results "
                        "under --runs, after tiny; tiny alone with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="tiny parameters for CI; folders default to build/quick/{paper,runs}")
    p.add_argument("--out", default=None, help="where the rendered report goes (default: paper)")
    p.add_argument("--runs", default=None, help="root of the run folders (default: outputs/runs)")
    p.add_argument("--build", default=None, help="executed notebooks and local retraining go here (default: build)")
    p.add_argument("--only", nargs="+", default=None, metavar="NOTEBOOK",
                   help=f"build only these notebooks: {', '.join(nb.name for nb in NOTEBOOKS)}")
    p.add_argument("--paper-csv", default=PAPER_CSV, help="the paper's runs (default: %(default)s)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter for every notebook that declares it (a YAML value), e.g. -p device=cuda")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads per notebook kernel (OMP_NUM_THREADS); --quick uses 1, as tiny models gain "
                        "nothing from more and a shared CPU loses much to oversubscription")
    p.add_argument("--verbose", action="store_true", help="stream the notebooks' output while they run")
    p.add_argument("--train-missing", action="store_true",
                   help="train the runs a page needs and the run folders lack (listed with their cost without "
                        "this flag; only the tiny sweep trains unasked)")
    p.add_argument("--force", action="store_true",
                   help="execute every page, also those whose notebook, parameters and results are unchanged "
                        "since the last build (needed after a change to the library itself)")
    return p.parse_args(argv)


def extra_parameters(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise ConfigError(f"bad parameter {item!r}; write NAME=VALUE, e.g. -p steps=100")
        out[name] = yaml.safe_load(value)
    return out


def main(argv=None) -> int:
    args = parse_args(list(argv or []))
    base = "build/quick" if args.quick else "build"
    out = _folder(args.out) if args.out else project_path(f"{base}/paper" if args.quick else "paper")
    runs = _folder(args.runs) if args.runs else project_path(f"{base}/runs" if args.quick else "outputs/runs")
    build = _folder(args.build) if args.build else project_path(base)
    unknown = set(args.only or []) - {nb.name for nb in NOTEBOOKS}
    if unknown:
        raise ConfigError(f"unknown notebook(s) {sorted(unknown)}; valid: {', '.join(nb.name for nb in NOTEBOOKS)}")
    notebooks = [nb for nb in NOTEBOOKS if args.only is None or nb.name in args.only]
    for nb in [nb for nb in notebooks if nb.requires and not args.quick and args.only is None]:
        if not list((runs / nb.requires).glob("*/seed*/result.json")):
            # training them here would take hours on a CPU: say so instead of starting silently
            print(f"[report] {nb.name}: skipped, no results for size {nb.requires!r} under {_shown(runs)} yet "
                  f"(python -m rrlib sweep --size {nb.requires}, or --only {nb.name} to train them now)", flush=True)
            notebooks.remove(nb)
    # by default the tiny sweep runs (seconds on a CPU), then every size that has results is read back
    sizes = args.sizes or (QUICK_SIZES if args.quick else
                           QUICK_SIZES + [s for s in sizes_with_results(runs) if s not in QUICK_SIZES])
    for size in sizes:
        load_preset(size)  # an unknown size fails here, before anything runs
    paper_csv = project_path(args.paper_csv)
    common = {"out_root": _shown(runs), "local_out_root": _shown(build / "runs"),
              "loop_root": _shown(runs.parent / "looped_grid"),  # the looped study's runs, beside the others
              "figures_dir": _shown(out / "figures"), "paper_csv": _shown(paper_csv),
              **extra_parameters(args.param)}

    threads = args.threads or (1 if args.quick else None)
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read by each kernel's torch at start-up
    (out / "figures").mkdir(parents=True, exist_ok=True)
    built = read_inputs(out)
    start = time.perf_counter()
    for nb in notebooks:
        source = notebook_source(nb)
        declared = declared_parameters(source)
        for size in sizes if nb.per_size else [None]:
            stem = f"{nb.name}_{size}" if size else nb.name
            parameters = {**common, **(nb.quick if args.quick else {}), **({"size": size} if size else {})}
            parameters = {k: v for k, v in parameters.items() if k in declared}
            inputs = page_inputs(nb, parameters, runs, size, paper_csv)
            if not args.force and built.get(stem) == inputs and (out / f"{stem}.reader.html").exists():
                print(f"[report] {stem}: up to date (notebook, parameters and results unchanged)", flush=True)
                continue
            missing = missing_runs(nb, {**parameter_values(source), **parameters}, runs)
            if missing and not (args.quick or args.train_missing or all(r.size in QUICK_SIZES for r in missing)):
                print(f"[report] {stem}: skipped, its run folders under {_shown(runs)} lack {cost_text(missing)}; "
                      f"--train-missing trains them here", flush=True)
                continue
            if missing:
                print(f"[report] {stem}: training {cost_text(missing)}", flush=True)
            number = nb.name.split("_")[0]
            mine = f"{number}_{size}_*" if size else f"{number}_*"
            for old in [*(out / "figures").glob(f"{mine}.png"), *(out / "tables").glob(f"{mine}.csv")]:
                old.unlink()  # figures and tables are the notebook's: a rerun replaces them all
            print(f"[report] {stem}: executing", flush=True)
            t0 = time.perf_counter()
            executed = build / "notebooks" / f"{stem}.ipynb"
            try:
                execute(source, parameters, executed, args.verbose, QUICK_CELL_TIMEOUT if args.quick else None)
            except Exception as err:  # papermill re-raises a cell's error and keeps the notebook up to it
                reason = (str(err).strip().splitlines() or [type(err).__name__])[-1]
                print(f"error: {stem} failed ({reason}); the executed notebook is {_shown(executed)}", flush=True)
                return 1
            render(executed, out, stem, nb.name)
            if size not in QUICK_SIZES:  # the smoke test's runs are trained afresh on every clone: never reused
                built[stem] = inputs
                write_inputs(out, built)
            print(f"[report] {stem}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    index = write_index(out, abstract(runs, sizes, paper_csv))
    if out == project_path("paper"):  # the committed report: the README's result tables follow its tables
        from . import readme
        if readme.update(project_path("README.md"), out / "tables"):
            print("[report] README.md: result tables regenerated from paper/tables", flush=True)
    print(f"[report] {len(rendered_pages(out))} pages, {len(list((out / 'figures').glob('*.png')))} figures, "
          f"{time.perf_counter() - start:.0f} s: {_shown(index)}")
    return 0
