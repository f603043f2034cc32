"""Colab, from one setting: the repository's address in ``pyproject.toml`` (``[project.urls] Repository``, read as
``rrlib.home.REPO_URL``) makes every notebook's first cell, which installs rrlib on Colab, and the badges that open
each notebook there (the README's and docs/notebooks.md's ``<!-- rrlib:colab -->`` block).

The cell clones the repository and installs rrlib without its dependencies, then the ones it needs besides torch
(``pyproject.toml``'s, read from the clone): Colab's own torch, built for its GPU, stays (a plain install would
replace it with PyPI's build, 2.7 GB or more). A repository that cannot be cloned, or a failed install, is one
sentence; anywhere but Colab the cell does nothing. ``python -m rrlib report`` rewrites the cells (both files of each
pair) and the badges when the address changes; a page's fingerprint leaves the cell out (rrlib.report.inputs), as
its rendering does.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..home import REPO_URL
from .notebooks import NOTEBOOK_DIR, NOTEBOOKS

TAG = "colab"  # the first cell of every notebook carries it
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
SETUP = '''# On Colab: clone rrlib and install it beside Colab's own torch; anywhere else rrlib is installed already.
# (Made from pyproject.toml's [project.urls] Repository by rrlib.report.colab: edit that, not this cell.)
import sys

REPO_URL = "{url}"
if "google.colab" in sys.modules:
    import os
    import re
    import subprocess
    import tomllib

    class SetupError(Exception):
        def _render_traceback_(self):  # IPython shows the sentence alone, without a traceback
            return [str(self)]

    def why(done):  # git's or pip's own line saying what failed
        lines = done.stderr.strip().splitlines() or [f"exit status {{done.returncode}}"]
        return next((line for line in lines if line.startswith(("fatal: ", "ERROR: "))), lines[-1]).split(": ", 1)[-1]

    if not os.path.isdir("rrlib"):
        done = subprocess.run(["git", "clone", "-q", "--depth", "1", REPO_URL, "rrlib"], capture_output=True, text=True)
        if done.returncode:
            raise SetupError(f"rrlib could not be fetched from {{REPO_URL}} ({{why(done)}}); check that the "
                             f"repository is reachable from here, or upload a copy of it as the folder rrlib/")
    with open("rrlib/pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    needs = [d for d in project["dependencies"] + project["optional-dependencies"]["report"]
             if not re.match(r"torch\\b", d)]
    for args in (["--no-deps", "-e", "rrlib"], needs):  # rrlib without torch, then what it needs besides
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        if done.returncode:
            raise SetupError(f"pip could not install {{' '.join(args)}} ({{why(done)}})")
    os.chdir("rrlib")
    sys.path.insert(0, os.getcwd())'''


def setup_cell(url: str | None = None) -> str:
    """The source of every notebook's first cell, for the repository at ``url`` (default ``REPO_URL``)."""
    return SETUP.format(url=url or REPO_URL)


def badges(tables: Path | None = None) -> str:
    """The Colab badge of every notebook, four to a line (a generated block of rrlib.report.readme; no table)."""
    owner_and_name = REPO_URL.removeprefix("https://github.com/")
    links = [f"[![Open {nb.name} in Colab]({BADGE})](https://colab.research.google.com/github/{owner_and_name}/blob/"
             f"main/notebooks/{nb.name}.ipynb) `{nb.name}`" for nb in sorted(NOTEBOOKS, key=lambda nb: nb.name)]
    return "".join(" ".join(links[k:k + 4]) + "  \n" for k in range(0, len(links), 4))


def _setup_cell_in(text: str, name: str) -> re.Match:
    """Where the setup cell's source lies in a notebook's jupytext text (group 1)."""
    cell = re.search(rf'^# %% tags=\["{TAG}"\]\n(.*?)\n\n(?=# %%)', text, re.S | re.M)
    if cell is None:
        raise ValueError(f"{name} has no first cell tagged {TAG!r}")
    return cell


def without_setup_cell(text: str, name: str) -> str:
    """A notebook's jupytext text without its setup cell's source: what its page is built from."""
    cell = _setup_cell_in(text, name)
    return text[:cell.start(1)] + text[cell.end(1):]


def update_notebooks(folder: Path = NOTEBOOK_DIR) -> list[str]:
    """Give every notebook pair in ``folder`` the setup cell of ``REPO_URL``, in both files, changing nothing else
    (the .ipynb keeps its metadata); the names of the notebooks changed."""
    import nbformat

    changed = []
    for nb in NOTEBOOKS:
        py, paired = folder / f"{nb.name}.py", folder / f"{nb.name}.ipynb"
        text = py.read_text(encoding="utf-8")
        cell = _setup_cell_in(text, py.name)
        if cell.group(1) == setup_cell():
            continue
        py.write_text(text[:cell.start(1)] + setup_cell() + text[cell.end(1):], encoding="utf-8")
        notebook = nbformat.read(paired, as_version=4)
        notebook.cells[0].source = setup_cell()
        nbformat.write(notebook, paired)
        changed.append(nb.name)
    return changed
