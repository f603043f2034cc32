"""Notebook 01 runs headless (papermill, as the report runs it) three times in a row with its live controls.

Its controls once drew through ipywidgets.interact, whose Output widget made the headless client send on the
kernel's shell socket while it waited there for the cell's reply: now and then the reply was missed and the
build sat idle until the cell timeout. Each run here must finish well inside the timeout, with every cell run.
"""
import nbformat
import pytest

from rrlib.report.build import execute
from rrlib.report.notebooks import NOTEBOOKS, notebook_source
from rrlib.report.render import WIDGET_VIEW

RUNS = 3
CELL_TIMEOUT = 300  # seconds; a cell of the quick notebook takes a few

pytestmark = pytest.mark.slow  # an end-to-end check: .ci/run runs it, `pytest -q` leaves it out


@pytest.fixture(scope="module")
def mechanism_runs(tmp_path_factory, data):
    nb = next(n for n in NOTEBOOKS if n.name == "01_mechanism")
    root = tmp_path_factory.mktemp("headless")
    parameters = {**nb.quick, "out_root": str(root / "runs"), "local_out_root": str(root / "local")}
    executed = []
    for k in range(RUNS):
        path = root / f"run{k}.ipynb"
        execute(notebook_source(nb), parameters, path, log_output=False, cell_timeout=CELL_TIMEOUT)
        executed.append(nbformat.read(path, as_version=4))
    return executed


def test_notebook_01_runs_headless_three_times_with_its_controls(mechanism_runs):
    assert len(mechanism_runs) == RUNS
    for k, notebook in enumerate(mechanism_runs):
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(c.execution_count is not None for c in code), f"run {k}: not every cell ran"
        live = [c for c in code if "live" in c.metadata.get("tags", [])]
        assert len(live) == 1
        views = [o for o in live[0].outputs if WIDGET_VIEW in o.get("data", {})]
        assert views, f"run {k}: the live cell shows no widget"
        state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        assert any(m["model_name"] == "ImageModel" for m in state.values()), f"run {k}: no figure widget"
        assert not any(m["model_name"] == "OutputModel" for m in state.values()), \
            f"run {k}: an Output widget is back (the headless hang's cause)"
