"""An executed notebook as a static page: formulas drawn as SVG, no scripts fetched, no progress and no machine
paths, the same bytes for the same notebook; rendered with code (``NN_topic.html``) and without
(``NN_topic.reader.html``)."""
from __future__ import annotations

import html
import os
import re
import sysconfig
from pathlib import Path

from ..runs.config import PROJECT_ROOT

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# nbconvert's lab template without its two fetched scripts: require.js (nothing here is an AMD module) and
# MathJax (formulas are drawn at build time by math_as_svg); a figure's title becomes its image's alt text
# (rrlib.views.plots.show_figure puts it in the output's metadata); printed text becomes paragraphs (as_text).
TEMPLATE = {"rrlib_report.html.j2": """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{% block extra_css %}<style>.jp-RenderedImage img { max-width: 100%; height: auto; }
.rrlib-live { border-left: 3px solid #1f77b4; padding: 0.3em 0.8em; background: #f3f7fb; }
.rrlib-text p { margin: 0.3em 0; } .rrlib-text p.rrlib-indent { margin-left: 1.5em; }</style>{% endblock extra_css %}
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
    Colab setup cell, no progress (stderr), no bare object reprs, no machine paths, and nothing that changes from build to build
    (cell ids are numbered, execution times dropped, printed text in one piece, as paragraphs)."""
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
        # a value a cell ends with that has no form but its repr (a path a helper returned) is the code's, not
        # the reader's: left out, as progress is
        cell.outputs = [as_text(o) if o.output_type == "stream" else o for o in
                        joined_streams([o for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})
                                        and not (o.output_type == "stream" and o.name == "stderr")
                                        and not (o.output_type == "execute_result" and set(o.data) == {"text/plain"})])]
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


def as_text(stream):
    """A cell's printing as HTML text, one paragraph per printed line (an indented line indented), so that a page's
    recaps and verdicts wrap between words like the rest of its prose rather than standing as preformatted
    blocks. Notebooks print sentences only: a table is shown with ``rrlib.views.tables.reader_table``."""
    import nbformat

    lines = [line for line in stream.text.splitlines() if line.strip()]
    body = "\n".join(("<p class=\"rrlib-indent\">" if line.startswith(" ") else "<p>") + html.escape(line.strip())
                     + "</p>" for line in lines)
    return nbformat.v4.new_output("display_data", {"text/html": f'<div class="rrlib-text">\n{body}\n</div>',
                                                   "text/plain": stream.text})


def joined_streams(outputs: list) -> list:
    """``outputs`` with each run of consecutive prints to one stream joined into one output.

    The kernel sends a cell's printing in pieces, one per flush (every 0.2 s): a slow step between two prints
    cuts them apart on a busy machine and not on an idle one, and each piece is a box of its own on the page.
    """
    joined = []
    for output in outputs:
        last = joined[-1] if joined else None
        if last is not None and output.output_type == last.output_type == "stream" and output.name == last.name:
            last.text += output.text
        else:
            joined.append(output)
    return joined


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
