"""Shared fixtures: rrlib's data, found as the library finds it, CPU-only determinism, and a rule of one's own."""
import os
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# A test skipped for want of the data says these words: .ci/run fails on them where RRLIB_DATA names the data
NO_DATA = "for want of rrlib's data"
NOT_HERE = "not on this machine"  # the library's sentence for data it can neither find nor fetch (rrlib.runs.data.sources)
DATA_NAMED = bool(os.environ.get("RRLIB_DATA"))  # as the session starts: a test may unset it for itself
# GPT-2's BPE files as tiktoken's own gpt2 encoding fetches them (tiktoken_ext.openai_public)
GPT2_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"

# The records' quotes are checked against the papers' texts ($RRLIB_PAPERS, rrlib.claims.quotes). Where it is unset,
# a papers/ folder beside the data folder that $RRLIB_DATA names is read: one setting reaches both. Set here,
# before any test starts a subprocess, so that every command it starts inherits it.
if os.environ.get("RRLIB_DATA") and not os.environ.get("RRLIB_PAPERS"):
    papers = Path(os.environ["RRLIB_DATA"]).expanduser().resolve().parent / "papers"
    if papers.is_dir():
        os.environ["RRLIB_PAPERS"] = str(papers)


@pytest.fixture(scope="session")
def data(tmp_path_factory) -> Path:
    """rrlib's data folder (``tinystories/`` with both samples, ``gpt2/`` with the BPE files), found as the library
    finds it (rrlib.runs.data.sources): ``$RRLIB_DATA``, each file checked against its recorded SHA-256; else the samples
    cut earlier into the library's cache, or cut from the hub now, and GPT-2's BPE through tiktoken's download,
    gathered into a folder of the test session's; else the test is skipped in a sentence that names RRLIB_DATA.
    Commands the tests start find the data the same way: through $RRLIB_DATA, else the library's cache."""
    from rrlib.home import project_path
    from rrlib.runs.config import DataConfig
    from rrlib.runs.data import GPT2_FILES, DataError, data_root, gpt2_folder
    from rrlib.runs.data.sources import SAMPLES, locate

    try:
        root = data_root()
        samples = {name: locate(name, project_path(DataConfig().cache_dir))[0] for name in SAMPLES}
        if root is not None:
            gpt2_folder(None)  # its two files, checked
            return root
        from tiktoken.load import read_file_cached

        bpe = {name: read_file_cached(GPT2_URL + name, sha256) for name, sha256 in GPT2_FILES.items()}
    except DataError as err:
        pytest.skip(f"{NO_DATA}: {err}")
    except (OSError, ValueError) as err:  # tiktoken's download: no connection, or other bytes than GPT-2's
        pytest.skip(f"{NO_DATA}: GPT-2's BPE files could not be fetched ({type(err).__name__}); set RRLIB_DATA to a "
                    f"local copy of rrlib's data folder")
    folder = tmp_path_factory.mktemp("data")
    for name, path in samples.items():
        (folder / SAMPLES[name].folder).mkdir(exist_ok=True)
        shutil.copy(path, folder / SAMPLES[name].folder / name)
    (folder / "gpt2").mkdir()
    for name, body in bpe.items():
        (folder / "gpt2" / name).write_bytes(body)
    return folder


@pytest.fixture(scope="session")
def data_copy(data) -> Path:
    """The data folder where ``$RRLIB_DATA`` names it: for a test that points RRLIB_DATA at it. (A train sample cut
    from the hub holds the sample's stories but not its bytes, which $RRLIB_DATA's check asks for.)"""
    if not DATA_NAMED:
        pytest.skip(f"{NO_DATA}: this test points RRLIB_DATA at a copy of rrlib's data folder; set RRLIB_DATA")
    return data


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that met the library's own sentence for data it cannot find (a run of a preset that trains on the
    samples, in this process or in a command it started) is skipped for want of the data where RRLIB_DATA is unset,
    as the data fixture is: it cannot check what it checks on this machine. Where RRLIB_DATA is set it fails."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None and not DATA_NAMED \
            and NOT_HERE in f"{report.longrepr}{report.capstderr}{report.capstdout}":
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: {NO_DATA}: the library found none, and the hub could not be reached; set "
                           f"RRLIB_DATA to a local copy of rrlib's data folder, or run online")


def pytest_collection_modifyitems(items):
    """A test that reads the quick report (a build of every notebook, minutes on a CPU) is one of the slow
    end-to-end checks: `pytest -q` leaves them out, .ci/run runs them (`-m slow`)."""
    for item in items:
        if "quick_report" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory, data) -> Path:
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
    # set, not deleted: monkeypatch then removes it afterwards whatever a command exported into it meanwhile (--rules
    # does), so no later test's subprocess loads this test's rule files; empty, it names none
    monkeypatch.setenv(external.ENV, "")
    yield
    for live, kept in zip((protocol.RULES, protocol.SOURCES, external._LOADED), saved):
        live.clear()
        live.update(kept)


@pytest.fixture
def kernels():
    """rrlib's compiled CPU kernels (rrlib.rules.native): skipped where they could not be built, a failure in CI."""
    from rrlib.rules import native

    built = native.kernels()
    if built is None:
        if os.environ.get("CI"):
            pytest.fail("rrlib's CPU kernels did not build in CI (a C++ compiler and ninja are needed)")
        pytest.skip("rrlib's CPU kernels could not be built here")
    return built
