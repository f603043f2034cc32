"""A report build on a small notebook: pages rebuild byte for byte, and figures survive MPLBACKEND=Agg."""
import re

import jupytext
import nbformat
import pytest

from rrlib.report.build import PageProgress, execute
from rrlib.report.inputs import page_inputs
from rrlib.report.notebooks import NOTEBOOKS
from rrlib.report.render import for_reading, render

SMALL = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A small page
#
# A formula, drawn at build time: $h' = h + r \\odot u$.

# %% tags=["parameters"]
figures_dir = None

# %%
import sys

import matplotlib.pyplot as plt
import pandas as pd
import plotly.graph_objects as go

from rrlib.views import plots, tables

plots.use_style()
print("[sweep 1/1] tiny/review/seed0: done already", file=sys.stderr)  # progress: not for the page

# %%
fig, ax = plt.subplots()
for variant in ("review", "standard"):
    ax.plot([0, 1], [1, 0], color=plots.color(variant), marker=plots.marker(variant), label=variant)
ax.set(title="Two lines")
plots.legend_outside(ax)
plots.show_figure(fig, "09_two_lines", figures_dir)

# %%
plots.show_plotly(go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"title": "Interactive"}))

# %%
df = pd.DataFrame({"welch_p": [0.00034941], "significant": [True], "loss": [2.24181234]}, index=["review"])
tables.reader_table(df, "09_table", figures_dir)
'''


def build(tmp_path, out_name):
    source = jupytext.reads(SMALL, fmt="py:percent")
    out = tmp_path / out_name
    executed = tmp_path / f"{out_name}.ipynb"
    execute(source, {"figures_dir": str(out / "figures")}, executed, log_output=False, cell_timeout=300)
    render(executed, out, "09_small")
    return out, nbformat.read(executed, as_version=4)


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    """The small notebook built twice into the same folder, with MPLBACKEND=Agg exported (as on headless hosts)."""
    tmp_path = tmp_path_factory.mktemp("small")
    mp = pytest.MonkeyPatch()
    mp.setenv("MPLBACKEND", "Agg")  # the kernel inherits it, as papermill starts it from this process
    try:
        first, executed = build(tmp_path, "paper")
        snapshot = {p.relative_to(first): p.read_bytes() for p in sorted(first.rglob("*")) if p.is_file()}
        second, _ = build(tmp_path, "paper")
    finally:
        mp.undo()
    return snapshot, second, executed


def test_rebuild_is_byte_identical(two_builds):
    snapshot, out, _ = two_builds
    again = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert set(snapshot) == set(again)
    assert {str(p) for p in snapshot} >= {"09_small.html", "09_small.reader.html", "figures/09_two_lines.png",
                                          "tables/09_table.csv"}
    changed = [str(p) for p in snapshot if snapshot[p] != again[p]]
    assert changed == [], f"a rebuild changed {changed}"


def test_figures_survive_agg_backend_with_their_title_as_alt_text(two_builds):
    _, out, executed = two_builds
    images = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1, "the figure did not reach the notebook under MPLBACKEND=Agg (or reached it twice)"
    page = (out / "09_small.reader.html").read_text(encoding="utf-8")
    figures = [tag for tag in re.findall(r"<img\b[^>]*>", page) if "data:image/png" in tag]
    assert [re.search(r'alt="([^"]*)"', tag).group(1) for tag in figures] == ["Two lines"]


def test_page_leaves_progress_out_and_formats_tables(two_builds):
    _, out, _ = two_builds
    page = (out / "09_small.reader.html").read_text(encoding="utf-8")
    assert "[sweep" not in page and "done already" not in page
    assert "0.00035" in page and "✓" in page and "2.242" in page and "0.00034941" not in page
    assert 'href="tables/09_table.csv"' in page
    assert "0.00034941" in (out / "tables" / "09_table.csv").read_text()


def test_a_cells_printing_is_one_box_however_the_kernel_flushed_it():
    out = lambda name, text: nbformat.v4.new_output("stream", name=name, text=text)
    cell = nbformat.v4.new_code_cell("print(1); slow(); print(2)")
    cell.outputs = [out("stdout", "1\n"), out("stderr", "progress\n"), out("stdout", "2\n"),
                    nbformat.v4.new_output("display_data", {"text/plain": "table"}), out("stdout", "3\n")]
    page = for_reading(nbformat.v4.new_notebook(cells=[cell]))
    assert [(o.output_type, o.data.get("text/html")) for o in page.cells[0].outputs] == [
        ("display_data", '<div class="rrlib-text">\n<p>1</p>\n<p>2</p>\n</div>'), ("display_data", None),
        ("display_data", '<div class="rrlib-text">\n<p>3</p>\n</div>')]


def test_a_bare_object_repr_is_left_out_and_a_table_is_kept():
    cell = nbformat.v4.new_code_cell("plots.save_figure(...)")
    cell.outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "PosixPath('paper/figures/x.png')"},
                                           execution_count=1),
                    nbformat.v4.new_output("execute_result", {"text/plain": "df", "text/html": "<table></table>"},
                                           execution_count=1)]
    shown = for_reading(nbformat.v4.new_notebook(cells=[cell])).cells[0].outputs
    assert [o.data.get("text/html") for o in shown] == ["<table></table>"]


def test_printed_text_is_paragraphs_that_wrap_between_words():
    text = "Review <b> after Holm's correction: 0.031\n\n  At 590M, supported.\n"
    cell = nbformat.v4.new_code_cell("print(...)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    shown = for_reading(nbformat.v4.new_notebook(cells=[cell])).cells[0].outputs[0]
    assert shown.data["text/html"] == ('<div class="rrlib-text">\n<p>Review &lt;b&gt; after Holm&#x27;s correction: '
                                       '0.031</p>\n<p class="rrlib-indent">At 590M, supported.</p>\n</div>')
    assert shown.data["text/plain"] == text


def test_a_page_is_reused_until_its_notebook_parameters_or_results_change(tmp_path):
    nb = next(n for n in NOTEBOOKS if n.name == "04_statistics")
    runs = tmp_path / "outputs" / "runs"
    for size in ("mini", "tiny"):
        (runs / size / "review" / "seed0").mkdir(parents=True)
        (runs / size / "review" / "seed0" / "result.json").write_text('{"fixed_loss": 1.5}')
    csv = tmp_path / "paper.csv"
    csv.write_text("size,variant\n")
    first = page_inputs(nb, {"n_boot": 10}, runs, None, csv)
    assert page_inputs(nb, {"n_boot": 10}, runs, None, csv) == first
    # the smoke-test size is trained afresh on every clone: its results must not force a rebuild
    (runs / "tiny" / "review" / "seed0" / "result.json").write_text('{"fixed_loss": 1.6}')
    assert page_inputs(nb, {"n_boot": 10}, runs, None, csv) == first
    assert page_inputs(nb, {"n_boot": 11}, runs, None, csv) != first
    (runs / "mini" / "review" / "seed0" / "result.json").write_text('{"fixed_loss": 1.4}')
    assert page_inputs(nb, {"n_boot": 10}, runs, None, csv) != first


def test_a_compare_beside_the_runs_moves_no_page_s_fingerprint(tmp_path):
    """The README's `rrlib compare ... --out outputs/compare/sigmoid_scalar` writes its verdict and trains its runs
    beside the report's runs; no page reads that folder, so the main job after it rebuilds no page."""
    outputs = tmp_path / "outputs"
    runs = outputs / "runs"
    read = {"power": outputs / "power" / "runs" / "micro" / "review" / "seed0",
            "claims": outputs / "claims" / "depth4" / "review" / "seed0", "runs": runs / "family" / "review" / "seed0"}
    for folder in read.values():
        folder.mkdir(parents=True)
        (folder / "result.json").write_text('{"fixed_loss": 1.5}')
    csv = tmp_path / "paper.csv"
    csv.write_text("size,variant\n")
    pages = [nb for nb in NOTEBOOKS if not nb.per_size]
    before = {nb.name: page_inputs(nb, {}, runs, None, csv) for nb in pages}
    example = outputs / "compare" / "sigmoid_scalar"
    run = example / "runs" / "family" / "sigmoid_scalar" / "seed0"
    run.mkdir(parents=True)
    for name in ("config.json", "result.json", "metrics.jsonl"):
        (run / name).write_text("{}\n")
    for name in ("verdict.csv", "verdict.json", "verdict.html"):
        (example / name).write_text("variant,baseline\n")
    assert {nb.name: page_inputs(nb, {}, runs, None, csv) for nb in pages} == before
    (read["power"] / "result.json").write_text('{"fixed_loss": 1.4}')  # a root pages read still moves theirs
    moved = {nb.name for nb in pages if page_inputs(nb, {}, runs, None, csv) != before[nb.name]}
    assert moved == {nb.name for nb in pages if "power" in nb.own_roots}


def test_a_page_that_may_read_benchmarks_is_rebuilt_when_one_changes(tmp_path):
    nb = next(n for n in NOTEBOOKS if n.name == "05_related_methods")
    runs, bench = tmp_path / "outputs" / "runs", tmp_path / "outputs" / "bench"
    (runs / "family").mkdir(parents=True)
    bench.mkdir()
    (bench / "cpu-family.json").write_text('{"results": []}')
    csv = tmp_path / "paper.csv"
    csv.write_text("size,variant\n")
    first, per_size = page_inputs(nb, {}, runs, None, csv), page_inputs(nb, {}, runs, "family", csv)
    (bench / "cpu-family.md").write_text("a rendering of it, not read by any page")
    assert page_inputs(nb, {}, runs, None, csv) == first
    (bench / "cpu-family.json").write_text('{"results": [{}]}')
    assert page_inputs(nb, {}, runs, None, csv) != first
    assert page_inputs(nb, {}, runs, "family", csv) == per_size  # a per-size page reads its runs only


def test_index_links_the_smoke_test_size_s_page_built_or_not_and_shows_none_of_its_figures(tmp_path):
    from rrlib.report.index import write_index
    (tmp_path / "figures").mkdir()
    for stem in ("03_sweep_mini", "03_sweep_tiny"):  # a per-size page's title is its notebook's, at every size
        (tmp_path / f"{stem}.reader.html").write_text("<title>3 · The sweep</title>", encoding="utf-8")
    for stem in ("03_mini_final_loss", "03_tiny_final_loss", "01_gate_probe"):
        (tmp_path / "figures" / f"{stem}.png").write_bytes(b"")
    with_tiny = write_index(tmp_path, ["abstract"]).read_text(encoding="utf-8")
    assert 'href="03_sweep_mini.reader.html"' in with_tiny and 'src="figures/03_mini_final_loss.png"' in with_tiny
    assert 'src="figures/01_gate_probe.png"' in with_tiny and "03_tiny_final_loss" not in with_tiny
    assert 'href="03_sweep_tiny.reader.html">tiny</a>' in with_tiny and 'href="03_sweep_tiny.html"' in with_tiny
    assert with_tiny.index('href="03_sweep_tiny.reader.html"') < with_tiny.index('href="03_sweep_mini.reader.html"')
    # a fresh clone has neither the smoke test's page nor its figures: the same index
    (tmp_path / "03_sweep_tiny.reader.html").unlink()
    (tmp_path / "figures" / "03_tiny_final_loss.png").unlink()
    assert write_index(tmp_path, ["abstract"]).read_text(encoding="utf-8") == with_tiny


def test_index_lists_pages_under_their_own_numbers_and_captions_figures_by_their_titles(tmp_path):
    import matplotlib.pyplot as plt

    from rrlib.views import plots
    from rrlib.report.index import write_index

    (tmp_path / "figures").mkdir()
    for stem, title in (("07_claims", "0 · The claims ledger"), ("01_mechanism", "1 · The mechanism"),
                        ("03_sweep_micro", "3 · The sweep"), ("03_sweep_mini", "3 · The sweep")):
        (tmp_path / f"{stem}.reader.html").write_text(f"<title>{title}</title>", encoding="utf-8")
    fig, ax = plt.subplots()
    ax.set_title("Final loss against depth")
    plots.save_figure(fig, "02_final_loss", tmp_path / "figures")
    page = write_index(tmp_path, ["abstract"]).read_text(encoding="utf-8")
    assert "<ol>" not in page and page.index("0 · The claims ledger") < page.index("1 · The mechanism")
    assert page.count("3 · The sweep") == 1  # once, with one line per size below it
    assert re.search(r'<li><a href="03_sweep_micro.reader.html">micro</a>: [\d.]+ M parameters', page)
    assert page.index(">micro</a>") < page.index(">mini</a>")  # smallest model first
    assert "<figcaption>Final loss against depth</figcaption>" in page and 'alt="Final loss against depth"' in page


def test_a_pages_stderr_reaches_the_builder_line_by_line_naming_the_page(capsys):
    progress = PageProgress("03_sweep_tiny")
    progress.write("[sweep 1/2] tiny/review/seed0: finished\r\n\n[sweep 2/2] tiny/standard/seed0: done already\n")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["[report] 03_sweep_tiny: [sweep 1/2] tiny/review/seed0: finished",
                                         "[report] 03_sweep_tiny: [sweep 2/2] tiny/standard/seed0: done already"]


def test_the_kernels_own_log_stays_out_of_the_builds(tmp_path, capfd):
    """The kernel's warning at start-up ("running over TCP without encryption") and its log as it is shut down
    are not the build's; a cell's printing to stderr (the runs' progress) still reaches it, naming the page."""
    source = jupytext.reads('# %% tags=["parameters"]\nx = 1\n\n# %%\nimport sys\nprint("step 1/1", file=sys.stderr)\n',
                            fmt="py:percent")
    source.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    execute(source, {}, tmp_path / "run.ipynb", log_output=False, cell_timeout=120, stem="09_quiet")
    err = capfd.readouterr().err
    assert "[report] 09_quiet: step 1/1" in err
    assert "IPKernelApp" not in err and "WARNING" not in err and "KeyboardInterrupt" not in err


def test_a_summary_page_is_fingerprinted_on_the_tables_of_the_pages_built_before_it(tmp_path):
    """Page 07 reads the tables of the pages before it; page 08 is built after it, so 08's tables must not be in 07's
    fingerprint (they were: a build that changed page 08 left page 07 stale, and only a second build settled it)."""
    nb = next(n for n in NOTEBOOKS if n.name == "07_claims")
    runs, tables = tmp_path / "outputs" / "runs", tmp_path / "tables"
    runs.mkdir(parents=True)
    tables.mkdir()
    csv = tmp_path / "paper.csv"
    csv.write_text("size,variant\n")
    (tables / "05_family_summary.csv").write_text("a\n1\n")
    first = page_inputs(nb, {}, runs, None, csv, tables)
    (tables / "08_leaderboard.csv").write_text("a\n1\n")
    (tables / "07_claims.csv").write_text("a\n1\n")
    assert page_inputs(nb, {}, runs, None, csv, tables) == first
    (tables / "05_family_summary.csv").write_text("a\n2\n")
    assert page_inputs(nb, {}, runs, None, csv, tables) != first
