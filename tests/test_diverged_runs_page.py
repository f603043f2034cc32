"""A sweep page over runs that all diverged renders and says so: it draws what there is and compares nothing,
instead of saying every run diverged and then failing the report on a comparison with no finished run."""
import nbformat
import pytest

from rrlib.report.notebooks import NOTEBOOK_DIR


def test_the_sweep_page_over_runs_that_all_diverged_says_so_and_compares_nothing(tmp_path, data):
    import papermill

    executed = tmp_path / "03.ipynb"
    papermill.execute_notebook(str(NOTEBOOK_DIR / "03_sweep.ipynb"), str(executed), kernel_name="python3",
                               progress_bar=False, parameters={
                                   "size": "tiny", "steps": 3, "seeds": [0, 1], "out_root": str(tmp_path / "runs"),
                                   "settings": {"train": {"lr": 1e6, "warmup_steps": 0}}})  # a step size that blows up
    said = "".join(output.get("text", "") for cell in nbformat.read(executed, as_version=4).cells
                   for output in cell.get("outputs", []))
    assert "6 did not finish" in said and "Mean held-out loss (fixed set): none, as no run finished." in said
    assert "Against each baseline" not in said
