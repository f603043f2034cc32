"""rrlib.results' memo: a result is computed once per set of input runs, read again when a run file changes, and
each caller gets its own copy."""
import os

import pandas as pd

from rrlib.results import result, runs_fingerprint


def test_a_result_is_computed_once_per_set_of_runs_and_again_when_a_run_changes(tmp_path):
    run = tmp_path / "mini" / "review" / "seed0"
    run.mkdir(parents=True)
    (run / "result.json").write_text('{"val_loss": 3.0}')
    calls = []

    @result(lambda root: [root])
    def table(root):
        calls.append(root)
        return pd.DataFrame({"runs": [len(list(root.rglob("result.json")))]})

    first = table(tmp_path)
    first.loc[0, "runs"] = 99  # a caller editing its copy leaves the next caller's alone
    assert table(tmp_path)["runs"].tolist() == [1] and len(calls) == 1
    (run / "notes.txt").write_text("not a run file")  # a file no result reads changes nothing
    assert table(tmp_path)["runs"].tolist() == [1] and len(calls) == 1
    other = tmp_path / "mini" / "standard" / "seed0"
    other.mkdir(parents=True)
    (other / "result.json").write_text('{"val_loss": 3.1}')
    assert table(tmp_path)["runs"].tolist() == [2] and len(calls) == 2
    assert table.uncached(tmp_path)["runs"].tolist() == [2]


def test_the_fingerprint_sees_a_rewritten_file_and_a_missing_folder(tmp_path):
    path = tmp_path / "a" / "result.json"
    path.parent.mkdir()
    path.write_text("1")
    before = runs_fingerprint([tmp_path])
    path.write_text("22")
    os.utime(path, ns=(1, 1))
    assert runs_fingerprint([tmp_path]) != before
    assert runs_fingerprint([tmp_path / "absent"]) == runs_fingerprint([])
