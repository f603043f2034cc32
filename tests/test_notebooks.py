"""The notebooks: jupytext sources with paired, stripped .ipynb files, executed end to end by the report build."""
import json
import re

import jupytext
import nbformat
import pytest

from rrlib.report import colab
from rrlib.report.notebooks import NOTEBOOK_DIR, NOTEBOOKS, declared_parameters, notebook_source
from rrlib.report.render import math_as_svg

NAMES = [nb.name for nb in NOTEBOOKS]
PNG = b"\x89PNG\r\n\x1a\n"


def percent_cells(name):
    return notebook_source(next(nb for nb in NOTEBOOKS if nb.name == name)).cells


@pytest.mark.parametrize("name", NAMES)
def test_source_is_jupytext_percent_with_one_parameters_cell(name):
    text = (NOTEBOOK_DIR / f"{name}.py").read_text()
    header = text.split("# ---", 2)[1]
    assert "format_name: percent" in header
    assert re.search(r"kernelspec:\n(#\s+\w+: .*\n)*#\s+name: python3\n", header)
    assert text.count('# %% tags=["parameters"]') == 1
    assert declared_parameters(notebook_source(next(nb for nb in NOTEBOOKS if nb.name == name)))


@pytest.mark.parametrize("name", NAMES)
def test_paired_ipynb_is_in_sync_and_stripped(name):
    paired = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    source = jupytext.read(NOTEBOOK_DIR / f"{name}.py")
    assert [(c.cell_type, c.source) for c in paired.cells] == [(c.cell_type, c.source) for c in source.cells], \
        f"{name}.ipynb is out of sync: run `jupytext --sync notebooks/{name}.py`"
    # the .ipynb converts back to the .py byte for byte (so no pairing metadata lives in one file only)
    assert jupytext.writes(paired, fmt="py:percent") == (NOTEBOOK_DIR / f"{name}.py").read_text()
    for cell in paired.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}.ipynb has outputs: strip them"
    assert paired.metadata["kernelspec"]["name"] == "python3"
    assert paired.metadata["jupytext"]["formats"] == "ipynb,py:percent"  # paired: JupyterLab saves both
    # what JupyterLab writes into a notebook it opens (its kernel's language_info), so that opening one changes
    # nothing: all of it but the Python version, which is the kernel's (tests/test_jupyterlab.py opens one)
    from ipykernel.ipkernel import IPythonKernel

    def but_version(info):
        return {k: v for k, v in info.items() if k != "version"}

    assert but_version(paired.metadata["language_info"]) == but_version(IPythonKernel.language_info)


def test_an_edit_to_the_ipynb_reaches_the_py_by_sync_and_the_build_refuses_a_pair_that_differs(tmp_path,
                                                                                              monkeypatch):
    import os

    from jupytext.cli import jupytext as jupytext_cli

    from rrlib.report import notebooks
    from rrlib.runs.config import ConfigError

    for suffix in (".py", ".ipynb"):
        (tmp_path / f"03_sweep{suffix}").write_bytes((NOTEBOOK_DIR / f"03_sweep{suffix}").read_bytes())
    monkeypatch.setattr(notebooks, "NOTEBOOK_DIR", tmp_path)
    sweep = next(nb for nb in NOTEBOOKS if nb.name == "03_sweep")
    edited = nbformat.read(tmp_path / "03_sweep.ipynb", as_version=4)
    edited.cells[1].source += "\n\nAn edit saved in the .ipynb."
    nbformat.write(edited, tmp_path / "03_sweep.ipynb")
    os.utime(tmp_path / "03_sweep.py", (1, 1))  # older than the edit
    with pytest.raises(ConfigError, match=r"differ \(03_sweep.ipynb is newer\).*jupytext --sync"):
        notebooks.notebook_source(sweep)
    jupytext_cli(["--sync", str(tmp_path / "03_sweep.ipynb")])
    assert "An edit saved in the .ipynb." in (tmp_path / "03_sweep.py").read_text(encoding="utf-8")
    assert "An edit saved in the .ipynb." in notebooks.notebook_source(sweep).cells[1].source


def test_notebooks_share_one_colab_setup_cell():
    first = [percent_cells(name)[0] for name in NAMES]
    assert all("colab" in c.metadata.get("tags", []) for c in first)
    assert len({c.source for c in first}) == 1, "the Colab setup cell differs between notebooks"
    assert first[0].source == colab.setup_cell()  # made from pyproject.toml (tests/test_colab.py runs it)


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_hold_no_training_logic_and_no_machine_paths(name):
    code = "\n".join(c.source for c in percent_cells(name) if c.cell_type == "code")
    for forbidden in ("torch.optim", "optimizer", ".backward(", ".step()", "/work/", "/root/", "/home/"):
        assert forbidden not in code, f"{name} contains {forbidden!r}"


@pytest.mark.parametrize("name", NAMES)
def test_every_formula_renders_without_mathjax(name):
    for cell in percent_cells(name):
        if cell.cell_type == "markdown":
            drawn = math_as_svg(cell.source)
            assert "$" not in re.sub(r'alt="[^"]*"', "", drawn)


# ---------------------------------------------------------------- the quick build (shared with the browser test)

def pages(report):
    """Every executed page stem: a per-size notebook once per size built."""
    stems = []
    for nb in NOTEBOOKS:
        executed = (report / "build" / "notebooks").glob(f"{nb.name}*.ipynb")
        found = sorted(p.name.removesuffix(".ipynb") for p in executed)
        assert found, f"{nb.name} was not executed"
        stems += found
    return stems


def test_quick_report_executes_every_notebook(quick_report):
    for stem in pages(quick_report):
        executed = nbformat.read(quick_report / "build" / "notebooks" / f"{stem}.ipynb", as_version=4)
        code = [c for c in executed.cells if c.cell_type == "code"]
        assert all(c.execution_count is not None for c in code), f"{stem}: not every cell ran"
        assert any("injected-parameters" in c.metadata.get("tags", []) for c in code), f"{stem}: no parameters"
        errors = [o for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{stem}: {errors[0].ename}: {errors[0].evalue}"
        recap = code[-1].outputs
        assert recap and any(o.get("name") == "stdout" and re.search(r"\d", o.text) for o in recap), \
            f"{stem}: the recap prints no computed sentence"


def test_quick_report_renders_full_and_reader_pages_and_figures(quick_report):
    paper = quick_report / "paper"
    for stem in pages(quick_report):
        full, reader = (paper / f"{stem}.html").read_text(), (paper / f"{stem}.reader.html").read_text()
        assert '<div class="highlight' in full and '<div class="highlight' not in reader, stem
        number = stem.split("_")[0]
        figures = list((paper / "figures").glob(f"{number}_*.png"))
        assert figures, f"{stem}: no figure exported"
        assert all(f.read_bytes().startswith(PNG) for f in figures)
    index = (paper / "index.html").read_text()
    for stem in pages(quick_report):  # the smoke-test size's page too: the index links every page it built
        assert f'href="{stem}.reader.html"' in index and f'href="{stem}.html"' in index
    assert "Abstract" in index and re.search(r"\d", index.split("Abstract")[1].split("Sections")[0])


def test_sweep_page_is_one_size_with_its_table(quick_report):
    executed = nbformat.read(quick_report / "build" / "notebooks" / "03_sweep_tiny.ipynb", as_version=4)
    text = json.dumps([c.outputs for c in executed.cells if c.cell_type == "code"])
    assert "[sweep 1/6] tiny/" in text and "fixed_loss" in text
    result_files = [p for p in (quick_report / "runs" / "tiny").glob("*/seed*/result.json")
                    if p.parts[-3] in ("review", "highway", "standard")]  # 05 adds other rules at tiny
    assert len(result_files) == 6  # the tiny preset: 3 variants x 2 seeds
