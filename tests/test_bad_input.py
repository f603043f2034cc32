"""A user's mistake is one sentence and exit status 2 before any work: nothing printed as if it would go on, and
nothing written (compare's plan, its --out, a run folder)."""
import pytest

pytestmark = pytest.mark.usefixtures("registry_as_it_was")
COMPARE = ["compare", "--variants", "review", "--against", "standard", "--size", "tiny", "--steps", "2"]


def cli(tmp_path, monkeypatch, capsys, *argv) -> tuple[int, str, str]:
    from rrlib.__main__ import main

    monkeypatch.chdir(tmp_path)
    try:
        status = main(list(argv))
    except SystemExit as stop:  # a usage mistake, answered by the parser
        status = stop.code
    out = capsys.readouterr()
    return status, out.out, out.err


def one_sentence(status, err) -> bool:
    return status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flags, said", [
    (["--seeds", "100000000"], "--seeds takes a count from 1 to 1,000, got 100,000,000"),
    (["--detect", "0.01", "--max-seeds", "100000000"], "--max-seeds asks for 100,000,000 seeds, more than the 1,000"),
])
def test_compare_asking_for_more_seeds_than_one_comparison_may_train_is_one_sentence(tmp_path, monkeypatch, capsys,
                                                                                     flags, said):
    status, out, err = cli(tmp_path, monkeypatch, capsys, *COMPARE, *flags, "--out", "verdict")
    assert one_sentence(status, err) and said in err, err
    assert not out and not (tmp_path / "verdict").exists()


@pytest.mark.parametrize("case", ["no data", "runs a file"])
def test_compare_refuses_its_data_or_runs_before_it_says_its_plan_or_makes_its_out(tmp_path, monkeypatch, capsys,
                                                                                   case):
    if case == "no data":
        flags, said = ["--set", "data.data_path=nowhere/stories.txt"], "stories.txt not found"
    else:
        (tmp_path / "taken").write_text("a file of the user's")
        flags, said = ["--runs", "taken"], "is a file, not a folder; give --runs a folder"
    status, out, err = cli(tmp_path, monkeypatch, capsys, *COMPARE, "--seeds", "2", *flags, "--out", "verdict")
    assert one_sentence(status, err) and said in err, err
    assert "[compare]" not in out and not (tmp_path / "verdict").exists()
