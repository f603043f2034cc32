"""A user's rule and a user's folder are checked before anything is written: links in the way, a rule's name, a rule
file that changes torch's global state, a verdict that is whole or absent, a diverged rule, the design --detect
sizes, every route to rules failing the same way, and compare keeping its runs out of the committed study."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rrlib import stats
from rrlib.stats import verdict

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("registry_as_it_was")
TINY = ["--size", "tiny", "--steps", "4", "--set", "train.eval_every=4", "--set", "train.fixed_eval_tokens=2048",
        "--set", "train.paper_eval_batches=1"]


def cli(tmp_path, monkeypatch, capsys, *argv) -> tuple[int, str, str]:
    from rrlib.__main__ import main

    monkeypatch.chdir(tmp_path)
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def one_sentence(status: int, err: str) -> bool:
    return status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1


def rule_file(folder: Path, name: str = "gate", head: str = "", commit: str = "h + torch.sigmoid(a) * u") -> Path:
    path = folder / "bad.py"
    path.write_text(f"import torch\nfrom rrlib import ResidualRule, register\n{head}\n\n"
                    f"@register({name!r})\nclass Gate(ResidualRule):\n"
                    f"    def __init__(self, shape):\n        super().__init__(shape)\n"
                    f"        self.a = torch.nn.Parameter(torch.zeros(shape.n_unique))\n\n"
                    f"    def step_params(self, i):\n        return (self.a[self.shape.unique(i)],)\n\n"
                    f"    def commit(self, h, u, a):\n        return {commit}\n")
    return path


# ---------------------------------------------------------------- nothing written through a link

def test_a_link_in_compare_s_out_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    outside = tmp_path / "elsewhere.html"
    outside.write_text("the user's own page")
    (tmp_path / "verdict").mkdir()
    (tmp_path / "verdict" / "verdict.html").symlink_to(outside)
    status, _, err = cli(tmp_path, monkeypatch, capsys, "compare", "--variants", "review", "--against", "standard",
                         "--seeds", "2", *TINY, "--out", "verdict")
    assert one_sentence(status, err) and "verdict.html is a symbolic link" in err, err
    assert outside.read_text() == "the user's own page" and not (tmp_path / "verdict" / "runs").exists()


def test_a_link_among_a_run_s_files_is_refused_before_training(tmp_path, monkeypatch, capsys):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("kept\n")
    run_dir = tmp_path / "runs" / "tiny" / "review" / "seed0"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").symlink_to(outside)
    status, _, err = cli(tmp_path, monkeypatch, capsys, "train", "--variant", "review", *TINY, "--out", "runs")
    assert one_sentence(status, err) and "metrics.jsonl is a symbolic link" in err, err
    assert outside.read_text() == "kept\n" and sorted(p.name for p in run_dir.iterdir()) == ["metrics.jsonl"]


# ---------------------------------------------------------------- a rule's name is a name

@pytest.mark.parametrize("name", ["../../escaped", "team/gate", "", "a,b", "-x", "a b"])
def test_a_rule_name_that_is_not_a_plain_identifier_is_one_sentence_naming_the_file(tmp_path, monkeypatch, capsys,
                                                                                     name):
    from rrlib.rules import RULES

    rule_file(tmp_path, name=name)
    status, _, err = cli(tmp_path, monkeypatch, capsys, "train", "--rules", "bad.py", "--variant", "standard", *TINY,
                         "--out", "runs")
    assert one_sentence(status, err) and "rule file bad.py" in err and "plain identifier" in err, err
    assert name not in RULES and not (tmp_path / "runs").exists() and not (tmp_path / "escaped").exists()


def test_a_plain_name_with_digits_dashes_and_underscores_registers():
    from rrlib.rules import RULES, ResidualRule, register

    @register("my-gate_2")
    class Fine(ResidualRule):
        pass

    assert RULES["my-gate_2"] is Fine


# ---------------------------------------------------------------- a rule file cannot change what a baseline is

@pytest.mark.parametrize("head, named", [
    ("torch.set_default_dtype(torch.float64)", "torch.get_default_dtype()"),
    ("torch.use_deterministic_algorithms(not torch.are_deterministic_algorithms_enabled())",
     "torch.are_deterministic_algorithms_enabled()"),
    ("torch.set_num_threads(torch.get_num_threads() + 1)", "torch.get_num_threads()"),
])
def test_a_rule_file_that_changes_torch_s_global_state_is_refused_and_no_baseline_is_trained_beside_it(
        tmp_path, monkeypatch, capsys, head, named, data):
    from rrlib.rules import RULES
    from rrlib.rules.import_guard import torch_state

    before = torch_state()
    rule_file(tmp_path, head=head)
    status, _, err = cli(tmp_path, monkeypatch, capsys, "compare", "--rules", "bad.py", "--variants", "gate",
                         "--against", "standard", "--seeds", "2", *TINY, "--out", "verdict")
    assert one_sentence(status, err) and "change torch's global state" in err and named in err, err
    assert torch_state() == before and "gate" not in RULES
    assert not (tmp_path / "verdict").exists()  # no standard run was trained in a float64 (or other) process
    # the clean baseline asked for afterwards is trained in the clean state and records it
    status, _, _ = cli(tmp_path, monkeypatch, capsys, "train", "--variant", "standard", *TINY, "--out", "runs")
    assert status == 0 and torch.get_default_dtype() == torch.float32


# ---------------------------------------------------------------- a verdict is whole or absent

@pytest.mark.parametrize("flags, words", [
    (["--variants", "review", "--against", "standard", "--seeds", "1,1"], "--seeds names seed 1 twice"),
    (["--variants", "review,highway", "--against", "highway,review", "--seeds", "2"], "one comparison twice"),
    (["--variants", "review,review", "--against", "standard", "--seeds", "2"], "--variants names review twice"),
])
def test_duplicate_seeds_and_mirrored_pairs_are_refused_before_any_write(tmp_path, monkeypatch, capsys, flags, words):
    status, _, err = cli(tmp_path, monkeypatch, capsys, "compare", *flags, *TINY, "--out", "verdict")
    assert one_sentence(status, err) and words in err, err
    assert not (tmp_path / "verdict").exists()


def test_a_rule_that_fails_a_one_step_trial_is_named_with_its_error_before_any_write(tmp_path, monkeypatch, capsys):
    rule_file(tmp_path, name="narrow", commit="(h + u)[..., :-1]")
    status, _, err = cli(tmp_path, monkeypatch, capsys, "compare", "--rules", "bad.py", "--variants", "narrow",
                         "--against", "standard", "--seeds", "2", *TINY, "--out", "verdict")
    assert one_sentence(status, err) and "the rule narrow fails a one-step trial" in err and "Error" in err, err
    assert not (tmp_path / "verdict").exists()


def constructed(losses: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"variant": v, "seed": s, "fixed_loss": loss, "params": 100, "flops_per_token": 600,
                          "status": "finished" if np.isfinite(loss) else "diverged", "minutes": 0.1}
                         for v, seeds in losses.items() for s, loss in enumerate(seeds)])


def test_a_diverged_rule_is_diverged_in_the_table_the_sentence_and_strict_json(tmp_path):
    from rrlib.compare import engine, files

    table = constructed({"wild": [np.nan, np.nan, np.nan], "standard": [2.0, 2.1, 2.05]})
    req = engine.Request("tiny", ["wild"], ["standard"], seeds=[0, 1, 2])
    design = {"seeds": [0, 1, 2], "sized": False}
    rows = engine.verdict_table(req, table, design, None)
    row = rows.iloc[0]
    assert row["verdict"] == "diverged" and row["diverged_variant"] == 3 and row["diverged_baseline"] == 0
    assert verdict.sentence(row) == "wild against standard: diverged (wild diverged on 3 of 3 seeds), so no test"
    assert "diverged (wild on 3 of 3 seeds)" in files.printed(rows)
    files.write(tmp_path, req, rows, table, design, {"runs": [], "training_minutes": 0.0, "rules": {}}, "rrlib x")
    text = (tmp_path / "verdict.json").read_text()
    summary = json.loads(text, parse_constant=lambda name: pytest.fail(f"verdict.json holds {name}"))
    assert summary["rows"][0]["verdict"] == "diverged" and summary["rows"][0]["gap"] is None
    assert "diverged (wild on 3 of 3 seeds)" in (tmp_path / "verdict.html").read_text()


def test_the_verdict_files_are_written_together_or_not_at_all(tmp_path, monkeypatch):
    from rrlib.compare import engine, files

    table = constructed({"mine": [2.0, 2.1, 2.2], "standard": [2.01, 2.12, 2.19]})
    req = engine.Request("tiny", ["mine"], ["standard"], seeds=[0, 1, 2])
    design = {"seeds": [0, 1, 2], "sized": False}
    rows = engine.verdict_table(req, table, design, None)
    (tmp_path / "verdict.html").write_text("the older page")
    monkeypatch.setattr(files, "page", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        files.write(tmp_path, req, rows, table, design, {"runs": [], "training_minutes": 0.0, "rules": {}}, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdict.html"]  # no new CSV beside the older page
    assert (tmp_path / "verdict.html").read_text() == "the older page"


def test_two_compares_on_one_out_the_second_is_one_sentence(tmp_path):
    from rrlib.compare import engine
    from rrlib.runs.config import ConfigError

    with engine.out_lock(tmp_path):
        with pytest.raises(ConfigError, match="another rrlib compare is writing into --out"):
            with engine.out_lock(tmp_path):
                pass
    assert list(tmp_path.iterdir()) == []  # no lock file left behind


def test_shards_of_one_design_share_out_and_a_plain_call_beside_them_is_refused(tmp_path):
    from rrlib.compare import engine
    from rrlib.runs.config import ConfigError

    with engine.out_lock(tmp_path, shared=True):
        with engine.out_lock(tmp_path, shared=True):  # a second shard trains beside the first
            with pytest.raises(ConfigError, match="another rrlib compare is writing into --out"):
                with engine.out_lock(tmp_path):
                    pass
    with engine.out_lock(tmp_path):
        with pytest.raises(ConfigError, match="another rrlib compare is writing into --out"):
            with engine.out_lock(tmp_path, shared=True):
                pass


def shard_request(monkeypatch, sized):
    """A shard 0/2 request whose checks pass untouched and whose design is ``sized`` (table, design)."""
    from rrlib.compare import engine

    monkeypatch.setattr(engine, "resolved", lambda req, seeds: None)
    monkeypatch.setattr(engine, "trial", lambda req: None)
    monkeypatch.setattr(engine, "checked_inputs", lambda req, runs: None)
    monkeypatch.setattr(engine, "sized_design", lambda req, log: sized)
    return engine.Request("tiny", ["mgr"], ["standard"], seeds=[0, 1], shard=(0, 2))


def test_a_shard_trains_beside_another_shard_in_one_out(tmp_path, monkeypatch):
    """rrlib study run --jobs starts a powered design's shards (and the leaderboard's) side by side into one --out:
    the second trains beside the first, not refused as if it were another comparison."""
    from rrlib.compare import engine

    req = shard_request(monkeypatch, (None, {}))  # its share done, the other shard's runs still missing
    with engine.out_lock(tmp_path / "out", shared=True, design=req.design):  # the other shard, training
        assert engine.run(req, tmp_path / "out", "rrlib compare ...", log=lambda text: None) is None


def test_the_shard_that_finds_every_run_finished_writes_the_verdict_once_the_other_has_let_go(tmp_path, monkeypatch):
    import threading

    from rrlib.compare import engine

    req = shard_request(monkeypatch, ("table", {"seeds": [0, 1]}))
    written = []
    monkeypatch.setattr(engine, "write_verdict", lambda *args: written.append(args[2]) or "rows")
    holding, release = threading.Event(), threading.Event()

    def other_shard():  # between its own last check and its exit
        with engine.out_lock(tmp_path / "out", shared=True, design=req.design):
            holding.set()
            release.wait(10)

    other = threading.Thread(target=other_shard)
    other.start()
    holding.wait(10)
    threading.Timer(0.2, release.set).start()
    assert engine.run(req, tmp_path / "out", "rrlib compare ...", log=lambda text: None) == "rows"
    other.join(10)
    assert written == ["table"] and release.is_set()  # written only after the other shard let go


# ---------------------------------------------------------------- --detect: sized honestly, never from NaN or zero

def test_design_seeds_sizes_at_holm_s_alpha_from_the_sd_s_upper_80_percent_bound():
    from scipy import stats as sp

    sd, n, target = 0.01, 4, 0.012
    upper = verdict.sd_upper_bound(sd, n)
    assert upper == pytest.approx(sd * np.sqrt(3 / sp.chi2.ppf(0.2, 3))) and upper > sd
    # the bound is exceeded by the true SD in 20 % of pilots: a simulation of 4-seed pilots at SD 1
    rng = np.random.default_rng(0)
    pilots = rng.normal(0, 1, (20000, n)).std(axis=1, ddof=1)
    assert np.mean([verdict.sd_upper_bound(s, n) < 1 for s in pilots]) == pytest.approx(0.2, abs=0.01)
    for m in (1, 3):
        k = verdict.design_seeds(sd, n, target, 0.05, comparisons=m)
        assert stats.detectable_gap(upper, k, 0.05 / m) <= target < stats.detectable_gap(upper, k - 1, 0.05 / m)
    assert verdict.design_seeds(sd, n, target, comparisons=3) > verdict.design_seeds(sd, n, target, comparisons=1) \
        > verdict.seeds_needed(sd, target)
    for bad in (np.nan, 0.0):
        with pytest.raises(ValueError):
            verdict.design_seeds(bad, n, target)


def test_paired_power_at_the_detectable_gap_is_the_power_it_was_sized_for():
    gap = stats.detectable_gap(0.02, 9, 0.05)
    assert verdict.paired_power(gap, 0.02, 9, 0.05) == pytest.approx(verdict.POWER, abs=1e-6)
    assert verdict.paired_power(2 * gap, 0.02, 9, 0.05) > verdict.POWER


def sized(monkeypatch, diffs, **request):
    """engine.sized_design without training: 'runs' whose paired differences are ``diffs``; (design, log)."""
    from rrlib.compare import engine

    def fake_train(req, seeds, log):
        return [(None, {"variant": v, "seed": s, "status": "finished",
                        "fixed_loss": 2.0 + (diffs[s] if v == "mine" else 0.0)})
                for s in seeds for v in ("mine", "standard")]

    monkeypatch.setattr(engine, "train", fake_train)
    monkeypatch.setattr(engine, "results_frame", lambda done: pd.DataFrame([r for _, r in done]))
    lines = []
    _, design = engine.sized_design(engine.Request("tiny", ["mine"], ["standard"], **request), lines.append)
    return design, "\n".join(lines)


@pytest.mark.parametrize("diffs, said", [(np.full(64, np.nan), "mine diverged"), (np.zeros(64), "no spread")])
def test_detect_never_reports_a_target_reached_from_a_nan_or_zero_sd(monkeypatch, diffs, said):
    design, log = sized(monkeypatch, diffs, detect=0.01, pilot_seeds=2, max_seeds=8)
    assert design["stopped"].startswith("not sized") and said in design["stopped"] and said in log
    assert "reached" not in design["stopped"] and design["seeds"] == [0, 1]


def test_detect_says_what_max_seeds_would_detect_and_the_power_it_reached(monkeypatch):
    diffs = np.random.default_rng(2).normal(0.0, 0.05, 64)
    design, log = sized(monkeypatch, diffs, detect=0.001, pilot_seeds=4, max_seeds=6)
    assert "needs more than --max-seeds 6, which would detect" in log
    assert design["stopped"] == "--max-seeds 6 reached before the target" and design["seeds"] == list(range(6))
    assert 0 < design["power_reached"] < verdict.POWER and design["detects_at_max"] > 0.001
    reached, _ = sized(monkeypatch, np.random.default_rng(3).normal(0, 0.002, 64), detect=0.01, pilot_seeds=4,
                       max_seeds=40)
    assert reached["stopped"] == "target reached" and reached["power_reached"] >= verdict.POWER


# ---------------------------------------------------------------- every route to rules fails the same way

def python_m_rrlib(cwd: Path, *argv, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rrlib", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{cwd}", **(env or {})})


@pytest.mark.parametrize("content, words", [(None, "cannot read the rule file"),
                                            ("raise ValueError('no')\n", "does not import: line 1: ValueError: no")])
def test_rrlib_rules_naming_a_missing_or_broken_file_is_one_sentence(tmp_path, content, words):
    if content is not None:
        (tmp_path / "broken.py").write_text(content)
    done = python_m_rrlib(tmp_path, "train", "--variant", "standard", *TINY, "--out", "runs",
                          env={"RRLIB_RULES": "broken.py"})
    assert done.returncode == 2 and done.stderr.startswith("error: $RRLIB_RULES names 'broken.py'"), done.stderr
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_a_broken_entry_point_of_another_package_is_named_skipped_and_named_again_when_asked_for(tmp_path):
    dist = tmp_path / "otherpkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: otherpkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[rrlib.rules]\ntheirs = otherpkg_missing.rules\n")
    done = python_m_rrlib(tmp_path, "train", "--variant", "nosuchrule", *TINY, "--out", "runs")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 2, done.stderr
    assert lines[0].startswith("warning: the installed rules 'otherpkg_missing.rules' (entry point 'theirs' of "
                               "package otherpkg") and "skipped" in lines[0]
    assert lines[1].startswith("error: unknown variant 'nosuchrule'") and "otherpkg_missing.rules" in lines[1]
    done = python_m_rrlib(tmp_path, "compare", "--variants", "review", "--against", "standard", "--seeds", "1,1",
                          *TINY, "--out", "v")  # a command that does not ask for its rule goes on to its own answer
    assert done.returncode == 2 and "warning: " in done.stderr and "--seeds names seed 1 twice" in done.stderr


# ---------------------------------------------------------------- compare keeps its runs out of the committed study

def test_compare_trains_under_its_own_root_and_reads_the_study_s_runs_without_writing_there(tmp_path, data):
    from rrlib.compare import engine
    from rrlib.runs.sweep import run_sweep

    overrides = {"train": {"steps": 4, "eval_every": 4, "fixed_eval_tokens": 2048, "paper_eval_batches": 1}}
    study = tmp_path / "study"
    run_sweep("tiny", ["standard"], [0, 1], overrides, str(study), log=lambda text: None)
    before = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()}
    req = engine.Request("tiny", ["review"], ["standard"], seeds=[0, 1], overrides=overrides,
                         runs_root=str(tmp_path / "out" / "runs"), reuse_root=str(study), timing=False)
    lines = []
    rows = engine.run(req, tmp_path / "out", "rrlib compare ...", log=lines.append)
    assert "[compare] 2 runs finished already (reused), 2 to train" in lines and len(rows) == 1
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == before  # not a byte changed there
    assert sorted(p.parent.name for p in (tmp_path / "out" / "runs" / "tiny").glob("*/seed*")) == ["review"] * 2
    provenance = json.loads((tmp_path / "out" / "verdict.json").read_text())["runs"]
    assert sorted(r["variant"] for r in provenance) == ["review", "review", "standard", "standard"]


def test_compare_s_runs_root_is_under_out_unless_runs_is_given(tmp_path, monkeypatch):
    from rrlib import __main__ as cli
    from rrlib.compare import engine

    asked = []
    monkeypatch.setattr(engine, "run", lambda req, out, command, log: asked.append((req, out, command)))
    monkeypatch.chdir(tmp_path)
    base = ["compare", "--size", "tiny", "--variants", "review", "--against", "standard", "--seeds", "2", "--out",
            "mine"]
    assert cli.main(base) == 0 and cli.main([*base, "--runs", "elsewhere"]) == 0
    (default, out, command), (named, _, _) = asked
    assert Path(default.runs_root) == tmp_path / "mine" / "runs" and Path(named.runs_root) == tmp_path / "elsewhere"
    assert default.reuse_root == engine.STUDY_ROOT and command.endswith(" ".join(base))


# ---------------------------------------------------------------- round 3's leftovers, one sentence each

def test_a_preset_expanding_over_one_value_or_a_folder_named_yaml_never_breaks_help(tmp_path, monkeypatch, capsys):
    from rrlib import __main__ as cli

    (tmp_path / "good.yaml").write_text("model: {d_model: 64}\n")
    (tmp_path / "depth.yaml").write_text("expand: {n_layers: 5}\n")
    (tmp_path / "folder.yaml").mkdir()
    assert cli.size_names(tmp_path) == ["good"]
    monkeypatch.setattr(cli, "PARAMS_DIR", tmp_path)
    for argv in (["--help"], ["train", "--help"], ["compare", "--help"]):
        with pytest.raises(SystemExit) as stop:
            cli.main(argv)
        assert stop.value.code == 0
    assert "good" in capsys.readouterr().out


def test_help_s_description_is_whole_and_names_compare(capsys):
    from rrlib import __main__ as cli

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("Train, sweep, compare, benchmark, run a study and report: rrlib train|sweep|compare|bench|study|report"
            in text)
    assert "each command has its own --help)." in text


def test_a_yes_for_a_setting_of_named_choices_names_them(tmp_path, monkeypatch, capsys):
    status, _, err = cli(tmp_path, monkeypatch, capsys, "train", "--variant", "standard", *TINY, "--set",
                         "train.keep_weights=yes", "--out", "runs")
    assert one_sentence(status, err) and "train.keep_weights must be one of none, bf16, fp32, got True" in err
    assert "YAML reads yes" in err and not (tmp_path / "runs").exists()


def test_a_log_removed_while_the_run_trains_is_said_and_the_run_is_not_recorded(tmp_path, monkeypatch, data):
    from rrlib.runs import train
    from rrlib.runs.presets import resolve_run
    from rrlib.runs.folders.runfiles import StateError

    original = train.append_log

    def log_then_remove(metrics, record):
        original(metrics, record)
        Path(metrics.name).unlink(missing_ok=True)

    monkeypatch.setattr(train, "append_log", log_then_remove)
    run = resolve_run("tiny", "standard", 0, {"train": {"steps": 4, "eval_every": 4, "fixed_eval_tokens": 2048,
                                                        "paper_eval_batches": 1}}, str(tmp_path / "runs"))
    with pytest.raises(StateError, match="metrics.jsonl was removed or replaced while the run trained"):
        train.train_run(run, progress=False)
    assert not (run.run_dir / "result.json").exists()


def test_a_result_in_another_cell_s_folder_is_left_out_of_the_table_and_named(tmp_path, monkeypatch):
    from rrlib.runs import sweep

    result = {"size": "tiny", "variant": "review", "seed": 0, "params_M": 0.3, "steps": 4, "val_loss": 5.0,
              "ece": 0.1, "minutes": 0.1}
    for seed in (0, 5):  # seed 0's folder copied to seed 5's place
        folder = tmp_path / "tiny" / "review" / f"seed{seed}"
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(result))
    monkeypatch.setattr(sweep, "read_result", lambda run_dir: json.loads((run_dir / "result.json").read_text()))
    lines = []
    table = sweep.results_table(str(tmp_path), "tiny", log=lines.append)
    assert list(table["seed"]) == [0]
    assert lines == [f"[results] left out: {tmp_path / 'tiny/review/seed5/result.json'} holds the result of "
                     f"tiny/review/seed0, not of its own folder tiny/review/seed5; move it back where it belongs"]


@pytest.mark.parametrize("argv, said", [
    (["--threads", "-1"], "--threads: give a whole number of threads of at least 1"),
    (["--runs", "README.md"], "--runs: README.md is not a folder; give the folder"),
])
def test_report_refuses_a_bad_thread_count_and_a_runs_file_before_any_notebook(monkeypatch, capsys, argv, said):
    from rrlib.report.arguments import parse_args

    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err and len(err.strip().splitlines()) == 1


def test_a_bad_row_of_the_paper_s_table_is_named_by_its_line_in_the_file(tmp_path):
    from rrlib.runs.config import ConfigError
    from rrlib.speed.pricing import read_paper_csv

    csv = tmp_path / "paper.csv"
    csv.write_text("size,variant,steps,minutes\n\n60M,review,100,5\n60M,review,-1,5\n")
    with pytest.raises(ConfigError, match=r"paper.csv line 4: steps must be a positive whole number, got -1$"):
        read_paper_csv(csv)


def test_a_rule_that_fails_in_the_time_estimate_is_named(tmp_path, monkeypatch, capsys):
    from rrlib.runs import pace
    from rrlib.runs.config import ConfigError
    from rrlib.runs.presets import resolve_run

    monkeypatch.setattr(pace, "time_step", lambda run: torch.zeros(2, 3) @ torch.zeros(2, 3))
    run = resolve_run("tiny", "review", 0, {"data": {"cache_dir": str(tmp_path)}}, str(tmp_path / "runs"))
    with pytest.raises(ConfigError, match=r"^the rule review fails a training step of its tiny model \(timed for the "
                                          r"estimate\): RuntimeError: mat1 and mat2 shapes cannot be multiplied"):
        pace.estimated_seconds([run])


def test_the_estimate_reads_in_seconds_minutes_or_hours():
    from rrlib.compare.engine import duration

    assert (duration(25), duration(360), duration(3 * 3600)) == ("25 s", "6 min", "3.0 h")


def test_a_rule_identical_to_its_baseline_on_every_seed_is_equivalent_not_inconclusive(monkeypatch):
    from rrlib.compare import engine

    table = constructed({"copy": [2.0, 2.1, 2.05], "standard": [2.0, 2.1, 2.05]})
    rows = engine.verdict_table(engine.Request("tiny", ["copy"], ["standard"], seeds=[0, 1, 2]), table,
                                {"seeds": [0, 1, 2], "sized": False}, None)
    assert rows.iloc[0]["verdict"] == "equivalent" and rows.iloc[0]["p_equivalent_holm"] == 0.0
    assert verdict.sentence(rows.iloc[0]).startswith("copy is equivalent to standard within ±0.01 nats")
    # compare_pairs itself, which the report's pages read, leaves such a pair untested as before
    assert verdict.compare_pairs(table, ["copy"], ["standard"]).iloc[0]["verdict"] == "inconclusive"


def test_compare_s_advice_about_a_run_folder_names_runs_not_out(tmp_path, monkeypatch, capsys, data):
    other = [*TINY, "--set", "train.lr=0.001"]  # a finished run of other settings where compare's would go
    assert cli(tmp_path, monkeypatch, capsys, "train", "--variant", "review", *other, "--out", "verdict/runs")[0] == 0
    status, _, err = cli(tmp_path, monkeypatch, capsys, "compare", "--variants", "review", "--against", "standard",
                         "--seeds", "2", *TINY, "--out", "verdict")
    assert one_sentence(status, err) and "train this one under another --runs" in err and "--out" not in err, err


def test_a_bad_row_of_the_reports_paper_csv_is_named_before_any_page_runs(tmp_path, monkeypatch, capsys):
    (tmp_path / "paper.csv").write_text("size,variant,seed,params_M,steps,val_loss,ece,minutes\n"
                                        "60M,review_neutral,zero,59,8000,1.7,0.01,6.9\n")
    status, _, err = cli(tmp_path, monkeypatch, capsys, "report", "--only", "04_statistics", "--paper-csv",
                         "paper.csv", "--runs", "runs", "--out", "report")
    assert one_sentence(status, err), err
    assert f"--paper-csv: {tmp_path / 'paper.csv'} line 2: seed is 'zero', not a whole number" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["paper.csv"]
