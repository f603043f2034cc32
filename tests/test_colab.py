"""Colab from one setting: every notebook's first cell and every badge are made from the repository's address in
pyproject.toml, and the cell, run as Colab runs it (an IPython shell with google.colab imported), clones a local
stand-in repository and installs rrlib without replacing torch, or says in one sentence that it cannot reach it.
pip is a stand-in too, which writes down what it was asked to install."""
import json
import os
import subprocess
import sys
import tomllib

import pytest

from conftest import REPO
from rrlib.home import REPO_URL
from rrlib.report import colab

RUN_AS_ON_COLAB = """
import sys, types
sys.modules["google.colab"] = types.ModuleType("google.colab")
from IPython.core.interactiveshell import InteractiveShell
InteractiveShell.instance().run_cell(open(sys.argv[1]).read())
import os
print("now in", os.getcwd())
"""
PIP_STAND_IN = """
import json, os, sys
with open(os.environ["PIP_CALLS"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def run_cell(tmp_path, url: str) -> tuple[subprocess.CompletedProcess, list]:
    """The setup cell for ``url``, run in an empty folder as on Colab; its output, and what pip was asked."""
    (tmp_path / "cell.py").write_text(colab.setup_cell(url))
    (tmp_path / "fakes" / "pip").mkdir(parents=True)
    (tmp_path / "fakes" / "pip" / "__init__.py").write_text("")
    (tmp_path / "fakes" / "pip" / "__main__.py").write_text(PIP_STAND_IN)
    (tmp_path / "colab").mkdir()
    calls = tmp_path / "pip_calls.jsonl"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fakes"), "PIP_CALLS": str(calls)}
    done = subprocess.run([sys.executable, "-c", RUN_AS_ON_COLAB, str(tmp_path / "cell.py")], cwd=tmp_path / "colab",
                          capture_output=True, text=True, env=env, timeout=120)
    return done, [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


@pytest.fixture
def stand_in(tmp_path) -> str:
    """A git repository holding the project's pyproject.toml, as a file:// address."""
    repo = tmp_path / "stand_in"
    repo.mkdir()
    (repo / "pyproject.toml").write_bytes((REPO / "pyproject.toml").read_bytes())
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@localhost", "-C", str(repo)]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "stand-in"]):
        subprocess.run(git + command, check=True, capture_output=True)
    return repo.as_uri()


def test_the_cell_clones_and_installs_rrlib_beside_colab_s_torch(tmp_path, stand_in):
    done, pip = run_cell(tmp_path, stand_in)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"now in {tmp_path / 'colab' / 'rrlib'}\n"  # quiet, and in the clone
    assert (tmp_path / "colab" / "rrlib" / "pyproject.toml").is_file()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needs = [d for d in project["dependencies"] + project["optional-dependencies"]["report"]
             if not d.startswith("torch")]
    assert pip == [["install", "-q", "--no-deps", "-e", "rrlib"], ["install", "-q", *needs]]
    assert "numpy" in needs and not any(arg.startswith("torch") for call in pip for arg in call)


def test_a_repository_it_cannot_reach_is_one_sentence(tmp_path):
    nowhere = (tmp_path / "nowhere").as_uri()
    done, pip = run_cell(tmp_path, nowhere)
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == f"now in {tmp_path / 'colab'}", done.stdout
    assert lines[0].startswith(f"rrlib could not be fetched from {nowhere} (") and lines[0].count(". ") == 0
    assert lines[0].endswith("; check that the repository is reachable from here, or upload a copy of it as the "
                             "folder rrlib/") and "Traceback" not in done.stdout + done.stderr
    assert pip == [] and not (tmp_path / "colab" / "rrlib").exists()


def test_every_notebook_s_cell_and_badge_is_made_from_the_one_address():
    for nb in sorted(REPO.glob("notebooks/[0-9]*.py")):
        assert colab.setup_cell() in nb.read_text(encoding="utf-8"), f"{nb.name}: run python -m rrlib report"
    owner_and_name = REPO_URL.removeprefix("https://github.com/")
    for doc in ("README.md", "docs/notebooks.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        for nb in sorted(REPO.glob("notebooks/*.ipynb")):
            assert f"colab.research.google.com/github/{owner_and_name}/blob/main/notebooks/{nb.name}" in text, doc
        assert colab.badges() in text


def test_a_new_address_reaches_both_files_of_every_pair(tmp_path, monkeypatch):
    import shutil

    import jupytext
    import nbformat

    for path in REPO.glob("notebooks/[0-9]*.*"):
        shutil.copy(path, tmp_path)
    monkeypatch.setattr(colab, "REPO_URL", "https://github.com/someone/rrlib")
    assert len(colab.update_notebooks(tmp_path)) == 8 and colab.update_notebooks(tmp_path) == []
    for py in sorted(tmp_path.glob("*.py")):
        paired = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
        assert 'REPO_URL = "https://github.com/someone/rrlib"' in paired.cells[0].source
        assert jupytext.writes(paired, fmt="py:percent") == py.read_text()  # in sync
        assert paired.metadata["language_info"]["name"] == "python"  # the .ipynb keeps its metadata
