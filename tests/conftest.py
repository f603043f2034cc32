"""Shared fixtures: where the offline data lives, CPU-only determinism, and a residual rule of one's own."""
import os
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The offline data folder: $RRLIB_SHARED, else ../shared beside the checkout."""
    return Path(os.environ.get("RRLIB_SHARED", REPO.parent / "shared")).resolve()


# The suite reads rrlib's data from the local copy (rrlib.runs.sources), as a machine without internet does; the
# tests that check the other ways unset it or point it elsewhere themselves. Set here, before any test starts a
# subprocess, so that every command and notebook kernel the tests start inherits it.
os.environ.setdefault("RRLIB_DATA", str(shared_dir() / "data"))
os.environ.setdefault("RRLIB_PAPERS", str(shared_dir() / "papers"))  # where the records' quotes are checked


@pytest.fixture(scope="session")
def shared() -> Path:
    path = shared_dir()
    if not path.is_dir():
        pytest.skip(f"offline data folder {path} not found (set RRLIB_SHARED)")
    return path


THREADS = max(1, min(2, os.cpu_count() or 1))


@pytest.fixture(scope="session", autouse=True)
def _session_threads():
    """Session fixtures, made before any test's own, compute at the tests' thread count too: one is the run that
    resumed runs must equal bit for bit, and a sum split over another number of threads rounds otherwise."""
    torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    torch.set_num_threads(THREADS)
    yield


def pytest_collection_modifyitems(items):
    """A test that reads the quick report (a build of every notebook, minutes on a CPU) is one of the slow
    end-to-end checks: `pytest -q` leaves them out, .ci/run runs them (`-m slow`)."""
    for item in items:
        if "quick_report" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory, shared) -> Path:
    """One `python -m rrlib report --quick` build in a temporary folder, shared by the notebook and browser tests.

    The folder holds paper/ (the rendered report), runs/ (the run folders) and build/ (executed notebooks).
    """
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("report")
    command = [sys.executable, "-m", "rrlib", "report", "--quick", "--out", str(root / "paper"), "--runs",
               str(root / "runs"), "--build", str(root / "build")]  # the paper's table: the committed copy
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, f"report build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return root


USER_RULE = textwrap.dedent('''
    import torch
    from rrlib import ResidualRule, register


    @register("{name}")
    class Scalar(ResidualRule):
        """h + sigmoid(a) u, one scalar a per sublayer."""

        def __init__(self, shape):
            super().__init__(shape)
            self.a = torch.nn.Parameter(torch.zeros(shape.n_unique))

        def step_params(self, i):
            return (self.a[self.shape.unique(i)],)

        def commit(self, h, u, a):
            return h + torch.sigmoid(a) * u
    ''')


@pytest.fixture
def user_rule():
    """``user_rule(folder, name=..., file=..., extra=...)`` writes a small rule file of one's own; its path."""
    def write(folder: Path, name: str = "sigmoid_scalar", file: str = "my_rules.py", extra: str = "") -> Path:
        path = Path(folder) / file
        path.write_text(USER_RULE.format(name=name) + extra)
        return path

    return write


@pytest.fixture
def registry_as_it_was(monkeypatch):
    """A test that loads rules into this process's registry gets it back as it was, and $RRLIB_RULES with it."""
    from rrlib.rules import external, protocol

    saved = dict(protocol.RULES), dict(protocol.SOURCES), dict(external._LOADED)
    monkeypatch.delenv(external.ENV, raising=False)
    yield
    for live, kept in zip((protocol.RULES, protocol.SOURCES, external._LOADED), saved):
        live.clear()
        live.update(kept)
