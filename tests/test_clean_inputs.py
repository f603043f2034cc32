"""Every result a page of the committed report reads was produced by a clean commit: its ``git_commit`` names a
commit that holds the code it ran (no ``+dirty``), so that checking out that commit reproduces it."""
import json
from pathlib import Path

import pytest

from rrlib.report.build import sizes_with_results
from rrlib.report.inputs import input_files
from rrlib.report.notebooks import NOTEBOOKS, QUICK_SIZES

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "outputs" / "runs"

# Inputs recorded from a checkout with uncommitted changes that a page may still read; each would be named here,
# and only these: any other dirty input fails the test. (The 9 family runs and the family benchmark once listed
# here were retrained and measured again at a clean commit.)
KNOWN_DIRTY_RUNS: set[str] = set()
KNOWN_DIRTY_BENCH: set[str] = set()


def recorded_commit(path: Path) -> str | None:
    """The ``git_commit`` a run's config or result, or a benchmark, records; None for a file without one."""
    if path.suffix != ".json":
        return None
    return json.loads(path.read_text()).get("git_commit")


def known(path: Path) -> bool:
    name = path.relative_to(ROOT).as_posix()
    return name in KNOWN_DIRTY_BENCH or path.parent.relative_to(ROOT).as_posix() in KNOWN_DIRTY_RUNS


def pages():
    """(page, its inputs) for every page of the committed report: each sweep size with results, once each (not the
    smoke-test size, whose runs and page every build makes afresh and the repository does not keep)."""
    sizes = [size for size in sizes_with_results(RUNS) if size not in QUICK_SIZES]
    for nb in NOTEBOOKS:
        for size in sizes if nb.per_size else [None]:
            yield f"{nb.name}_{size}" if size else nb.name, input_files(nb, RUNS, size)


@pytest.mark.parametrize("page, files", list(pages()), ids=lambda item: item if isinstance(item, str) else "")
def test_every_result_a_page_reads_records_a_clean_commit(page, files):
    commits = {path: recorded_commit(path) for path in files}
    assert any(commits.values()), f"{page} reads no result that records its commit"
    dirty = [path.relative_to(ROOT).as_posix() for path, commit in commits.items()
             if commit and commit.endswith("+dirty") and not known(path)]
    assert dirty == [], f"{page} reads results from a checkout with uncommitted changes: {dirty}"


def test_the_known_dirty_inputs_are_still_there_and_still_dirty():
    """The exceptions name real files that are still dirty: a retrained run leaves this list, not a stale entry."""
    for name in KNOWN_DIRTY_RUNS:
        for file in ("config.json", "result.json"):
            assert recorded_commit(ROOT / name / file).endswith("+dirty"), f"{name} is clean now: drop it from the list"
    for name in KNOWN_DIRTY_BENCH:
        assert recorded_commit(ROOT / name).endswith("+dirty"), f"{name} is clean now: drop it from the list"
