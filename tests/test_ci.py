"""CI as .ci/run runs it: the README's test command, and what it skipped, read by .ci/skips: how many and why, and a
failure where a test was skipped for want of the data that RRLIB_DATA names."""
import os
import subprocess
import sys

from conftest import NO_DATA, REPO

LOG = """....s [100%]
=========================== short test summary info ============================
SKIPPED [3] tests/test_claim_records.py:53: no copy of review_residuals.tex at hand (set RRLIB_PAPERS to check a)
SKIPPED [1] tests/test_claim_records.py:53: no copy of review_residuals.tex at hand (set RRLIB_PAPERS to check b)
SKIPPED [5] tests/test_jupyterlab.py: needs JupyterLab (requirements.txt) and Chromium (scripts/setup.sh --browser)
"""


def skips(log: str, tmp_path, **env) -> subprocess.CompletedProcess:
    (tmp_path / "log").write_text(log)
    clean = {k: v for k, v in os.environ.items() if k != "RRLIB_DATA"}
    return subprocess.run(["bash", str(REPO / ".ci" / "skips"), str(tmp_path / "log")], capture_output=True,
                          text=True, env={**clean, **env})


def test_ci_runs_the_readme_s_test_command_and_reads_its_skips():
    ci, readme = (REPO / ".ci" / "run").read_text(), (REPO / "README.md").read_text()
    assert "scripts/py -m pytest -q" in readme and "scripts/py -m pytest -q -rs" in ci
    assert ci.count("bash .ci/skips") == 2  # after the quick suite and after the slow checks
    assert NO_DATA in (REPO / ".ci" / "skips").read_text()  # the words the data fixture skips with


def test_the_skips_are_counted_by_reason(tmp_path):
    done = skips(LOG, tmp_path, RRLIB_DATA=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["ci: 9 skipped", "     5  needs JupyterLab (requirements.txt) and Chromium",
                                        "     4  no copy of review_residuals.tex at hand"]


def test_a_skip_for_want_of_the_data_rrlib_data_names_fails_ci(tmp_path):
    """The data fixture's own skip (tests/conftest.py), met in a run where RRLIB_DATA names no data folder."""
    env = {**os.environ, "RRLIB_DATA": str(tmp_path / "nowhere")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          "tests/test_data.py::test_gpt2_offline_matches_reference_ids"], cwd=REPO, capture_output=True,
                         text=True, env=env, timeout=300)
    assert run.returncode == 0 and "1 skipped" in run.stdout, run.stdout[-2000:]
    assert f"{NO_DATA}: RRLIB_DATA={tmp_path / 'nowhere'} is not a folder" in run.stdout
    failed = skips(run.stdout, tmp_path, RRLIB_DATA=str(tmp_path / "nowhere"))
    assert failed.returncode == 1 and "ci: 1 skipped" in failed.stdout
    assert f"although RRLIB_DATA={tmp_path / 'nowhere'} names it" in failed.stderr
    assert skips(run.stdout, tmp_path).returncode == 0  # unset: a skip for want of data is a clone without it


def test_a_test_that_meets_the_library_s_missing_data_sentence_is_skipped_only_where_rrlib_data_is_unset(tmp_path):
    """A run of a preset that trains on the samples, where the library finds no data: skipped for want of it
    (tests/conftest.py) where RRLIB_DATA is unset, a failure where it names a folder."""
    (tmp_path / "test_needs_data.py").write_text(
        "from rrlib.runs.data import DataError\n\nMISSING = \"rrlib's data is not on this machine (offline)\"\n\n\n"
        "def test_a_tiny_run():\n    raise DataError(MISSING)\n\n\n"
        "def test_one_that_unsets_rrlib_data_for_itself(monkeypatch):\n"
        "    monkeypatch.delenv('RRLIB_DATA', raising=False)\n    raise DataError(MISSING)\n")
    env = {k: v for k, v in os.environ.items() if k != "RRLIB_DATA"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "conftest", "-p", "no:cacheprovider",
               str(tmp_path / "test_needs_data.py")]
    unset = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert "2 skipped" in unset.stdout and f"{NO_DATA}: the library found none" in unset.stdout, unset.stdout
    named = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**env, "RRLIB_DATA": str(tmp_path)})
    assert "2 failed" in named.stdout, named.stdout  # as the session began: a test's own unset does not count
