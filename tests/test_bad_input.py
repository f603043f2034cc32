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


@pytest.mark.parametrize("line, said", [('{"step": "ten", "loss": 2.5}', "line 2 is not a record with a whole-number step"),
                                        ("Traceback (most recent call last):", "line 2 is not a JSON record"),
                                        ('{"step": 20, "loss": "2.5"}', "line 2: loss must be a number")])
def test_a_garbage_line_in_a_run_s_log_is_one_sentence_naming_the_file_and_the_line(tmp_path, line, said):
    from rrlib.runs.loading import read_metrics
    from rrlib.runs.folders.runfiles import StateError

    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 10, "loss": 3.0, "lr": 0.001}\n' + line + "\n")
    with pytest.raises(StateError) as caught:
        read_metrics(tmp_path)
    assert str(caught.value).startswith(f"{log} cannot be read ({said}") and "\n" not in str(caught.value)
    log.write_text('{"step": 10, "loss": NaN, "lr": 0.001}\n')  # a diverged run's log reads
    assert read_metrics(tmp_path)["step"].tolist() == [10]


@pytest.mark.parametrize("variant, options, said", [
    ("attnres", "{recompute: maybe}", "model.rule_options recompute of variant 'attnres' must be true or false, got "
                                      "'maybe'"),
    ("delta_attnres", "{identity_gate: 'yes'}", "model.rule_options identity_gate of variant 'delta_attnres' must be "
                                                "true or false, got 'yes'"),
    ("scaled", "{lam: true}", "model.rule_options lam of variant 'scaled' must be a number, got True"),
    ("denseformer", "{dilation: 9}", "denseformer's dilation 9 lies beyond the model's 2 blocks, where it averages no "
                                     "two blocks' outputs and so is the standard residual"),
    ("denseformer", "{period: 3}", "denseformer's period 3 lies beyond the model's 2 blocks"),
])
def test_a_rule_option_of_the_wrong_kind_or_that_undoes_the_rule_is_one_sentence(tmp_path, monkeypatch, capsys,
                                                                                  variant, options, said):
    status, _, err = cli(tmp_path, monkeypatch, capsys, "train", "--size", "tiny", "--variant", variant, "--steps",
                         "1", "--set", f"model.rule_options={options}", "--out", "runs")
    assert one_sentence(status, err) and said in err, err
    assert not (tmp_path / "runs").exists()
