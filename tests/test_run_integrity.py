"""A run folder never claims what it did not run; every fault and bad input ends in one sentence."""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rrlib.runs.pace as pace
import rrlib.runs.train as train_module
from rrlib.studies import claims_study
from rrlib.runs.config import ConfigError
from rrlib.runs.device import training_flops
from rrlib.runs.folders import asked_identity, claimed
from rrlib.runs.pace import check_cpu_reach
from rrlib.runs.presets import available_sizes, load_preset, resolve_run
from rrlib.runs.folders.runfiles import RunConflict, StateError, fingerprint, run_identity
from rrlib.runs.sweep import SweepIncomplete, run_sweep
from rrlib.runs.train import train_run

REPO = Path(__file__).resolve().parents[1]
FAST = {"train": {"steps": 12, "eval_every": 6, "ckpt_every": 6, "log_every": 3, "paper_eval_batches": 2,
                  "fixed_eval_tokens": 2048}}
TIMING = ("tokens_per_s", "eval_seconds")  # wall-clock fields: the only ones a resumed log may differ in


def cli(*args):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rrlib", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=300)


def fast(**train):
    return {"train": {**FAST["train"], **train}}


def run_of(tmp_path, overrides=None, variant="review", seed=0):
    return resolve_run("tiny", variant, seed, overrides or FAST, str(tmp_path))


def interrupted(tmp_path, at_step: int, overrides=None):
    """Train until a SIGTERM arrives during step ``at_step`` (0-based); the run checkpoints and stops."""
    real = train_module.get_batch

    def batch(data, step, *args, **kw):
        if step == at_step:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(data, step, *args, **kw)

    train_module.get_batch = batch
    try:
        with pytest.raises(KeyboardInterrupt, match=f"at step {at_step + 1}"):
            train_run(run_of(tmp_path, overrides), progress=False)
    finally:
        train_module.get_batch = real
    return tmp_path / "tiny" / "review" / "seed0"


def log_lines(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted run every resumed one is compared with."""
    root = tmp_path_factory.mktemp("whole")
    result = train_run(run_of(root), progress=False)
    return result, log_lines(root / "tiny" / "review" / "seed0")


# ---------------------------------------------------------------- identity

def test_fingerprint_counts_what_changes_numbers_and_nothing_else():
    def fp(overrides, device="cpu", precision="fp32", seed=0, size="tiny"):
        return fingerprint(run_identity(resolve_run(size, "review", seed, overrides), device, precision))

    base = fp(FAST)
    for cadence in ({"log_every": 1}, {"eval_every": 2}, {"ckpt_every": 1}, {"keep_weights": "fp32"},
                    {"micro_batch_size": 2}, {"device": "cpu"}):
        assert fp(fast(**cadence)) == base, cadence
    assert fp(FAST, precision="bf16") != base and fp(FAST, device="cuda") != base and fp(FAST, seed=1) != base
    for change in (fast(lr=0.01), fast(steps=13), fast(warmup_steps=4), fast(compile=True),
                   fast(fixed_eval_tokens=4096), {**FAST, "model": {"d_model": 128}},
                   {**FAST, "data": {"max_stories": 10}}):
        assert fp(change) != base, change
    # the data file counts by name, not by the folder it sits in on one machine
    sample = load_preset("tiny").data.data_path
    assert fp({**FAST, "data": {"data_path": "elsewhere/" + Path(sample).name}}) == base
    # warmup counts as resolved: a share of the run and the same number of steps written out are one run
    by_share = resolve_run("micro_steps300", "review", 0, {"train": {"steps": 50}})
    by_steps = resolve_run("micro_steps300", "review", 0, {"train": {"steps": 50, "warmup_frac": None,
                                                                     "warmup_steps": 5}})
    assert run_identity(by_share, "cpu", "fp32") == run_identity(by_steps, "cpu", "fp32")


def test_finished_run_asked_again_under_other_settings(tmp_path, whole):
    result = train_run(run_of(tmp_path), progress=False)
    run_dir = tmp_path / "tiny" / "review" / "seed0"
    stamps = {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()}
    for name in ("config.json", "result.json"):
        assert json.loads((run_dir / name).read_text())["fingerprint"] == result["fingerprint"]
    # cadence may differ freely; the answer is the kept result, and nothing is rewritten
    assert train_run(run_of(tmp_path, fast(eval_every=4, ckpt_every=2, log_every=1)), progress=False) == result
    with pytest.raises(RunConflict, match=r"holds a finished run with other settings \(train.lr 0.003 there, "
                                          r"0.01 asked\); train this one under another --out, or pass --move-aside"):
        train_run(run_of(tmp_path, fast(lr=0.01)), progress=False)
    out = cli("train", "--size", "tiny", "--variant", "review", "--steps", "12", "--set", "model.d_model=128",
              "--out", str(tmp_path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "model.d_model 64 there, 128 asked" in out.stderr
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()} == stamps
    # --move-aside keeps the old folder, under a name no results glob picks up, and trains afresh
    moved = train_run(run_of(tmp_path, fast(lr=0.01)), progress=False, move_aside=True)
    aside = tmp_path / "tiny" / "review" / f"moved-seed0-{result['fingerprint']}"
    assert json.loads((aside / "result.json").read_text()) == result
    assert moved["lr"] == 0.01 and moved["fingerprint"] != result["fingerprint"]


def test_resume_under_other_settings_is_refused_and_the_same_resumes(tmp_path, whole):
    run_dir = interrupted(tmp_path, 7)
    assert (run_dir / "ckpt.pt").exists() and not (run_dir / "result.json").exists()
    with pytest.raises(RunConflict, match=r"holds a run in progress with other settings \(model.d_model 64 there"):
        train_run(run_of(tmp_path, {**FAST, "model": {"d_model": 128}}), progress=False)
    with pytest.raises(RunConflict, match=r"train.lr 0.003 there, 0.01 asked"):
        train_run(run_of(tmp_path, fast(lr=0.01)), progress=False)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["config"]["train"]["lr"] == 0.003  # the refused asks wrote nothing
    assert train_run(run_of(tmp_path, fast(ckpt_every=5)), progress=False)["fixed_loss"] == whole[0]["fixed_loss"]


def test_legacy_folders_without_fingerprints_are_done_already(tmp_path):
    result = train_run(run_of(tmp_path), progress=False)
    run_dir = tmp_path / "tiny" / "review" / "seed0"
    for name, drop in (("config.json", ("fingerprint", "device_type")), ("result.json", ("fingerprint",))):
        old = {k: v for k, v in json.loads((run_dir / name).read_text()).items() if k not in drop}
        old.get("config", {}).get("train", {}).pop("warmup_frac", None)  # a field added since
        (run_dir / name).write_text(json.dumps(old))
    lines = []
    run_sweep("tiny", ["review"], [0], FAST, str(tmp_path), progress=False, log=lines.append)
    assert any("done already" in x for x in lines)
    assert train_run(run_of(tmp_path), progress=False)["val_loss"] == result["val_loss"]


def test_every_committed_result_answers_done_already(registry_as_it_was):
    from rrlib.rules import load_rules

    for example in sorted((REPO / "examples").glob("*.py")):  # the worked examples' rules, as --rules loads them
        load_rules(str(example))
    roots = sorted(p for p in (REPO / "outputs").iterdir() if p.is_dir())
    checked = 0
    for res in sorted(p for root in roots for p in root.glob("*/*/seed*/result.json")):
        root, size, variant, seed = res.parts[-5], res.parts[-4], res.parts[-3], int(res.parts[-2][4:])
        lr = {"train": {"lr": float(root[len("looped-lr"):])}} if root.startswith("looped-lr") else {}
        lr = claims_study.overrides_of(root, size, variant) or lr  # notebook 07's fine-tuning runs: their own
        settled, done = claimed(resolve_run(size, variant, seed, lr, str(REPO / "outputs" / root)))
        assert done is not None and done["val_loss"] == json.loads(res.read_text())["val_loss"], res
        assert asked_identity(settled)["run"]["device_type"] in ("cpu", "cuda")
        checked += 1
    if checked == 0:
        pytest.skip("no committed results in this checkout")


# ---------------------------------------------------------------- SIGTERM and the log

# one step in the quick run; every other step with the slow checks (.ci/run)
@pytest.mark.parametrize("at_step", [5, *(pytest.param(k, marks=pytest.mark.slow) for k in (0, 1, 4, 7, 10, 11))])
def test_sigterm_at_any_step_resumes_to_the_same_metrics(tmp_path, whole, at_step):
    run_dir = interrupted(tmp_path, at_step)
    result = train_run(run_of(tmp_path), progress=False)
    assert log_lines(run_dir) == whole[1]
    assert (result["val_loss"], result["fixed_loss"], result["ece"]) == \
        (whole[0]["val_loss"], whole[0]["fixed_loss"], whole[0]["ece"])


def test_torn_metrics_tail_is_cut_and_said_once(tmp_path, whole, capsys):
    run_dir = interrupted(tmp_path, 7)
    with open(run_dir / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 9, "loss": 4.1')  # what a crash in mid-write leaves
    capsys.readouterr()
    train_run(run_of(tmp_path), progress=False)
    said = [x for x in capsys.readouterr().err.splitlines() if "not a whole record" in x]
    assert len(said) == 1 and "metrics.jsonl: line" in said[0]
    assert log_lines(run_dir) == whole[1]


# ---------------------------------------------------------------- damaged files

def test_truncated_checkpoint_is_one_sentence_naming_it(tmp_path):
    run_dir = interrupted(tmp_path, 7)
    ckpt = run_dir / "ckpt.pt"
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    with pytest.raises(StateError, match=r"ckpt.pt cannot be read \(.*\); delete it to start the run again from "
                                         r"step 0, or pass --move-aside"):
        train_run(run_of(tmp_path), progress=False)
    out = cli("train", "--size", "tiny", "--variant", "review", *sum((["--set", f"train.{k}={v}"]
                                                                    for k, v in FAST["train"].items()), []),
              "--out", str(tmp_path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "ckpt.pt cannot be read" in out.stderr
    result = train_run(run_of(tmp_path), progress=False, move_aside=True)
    assert result["status"] == "finished" and (run_dir.parent / "moved-seed0-unreadable" / "ckpt.pt").exists()


@pytest.mark.parametrize("name,content", [("result.json", "{not json"), ("result.json", "[]"),
                                          ("config.json", "garbage")])
def test_unreadable_result_or_config_names_the_file(tmp_path, name, content):
    train_run(run_of(tmp_path), progress=False)
    (tmp_path / "tiny" / "review" / "seed0" / name).write_text(content)
    with pytest.raises(StateError, match=rf"{name} cannot be read .*; restore it from a copy, or pass --move-aside"):
        train_run(run_of(tmp_path), progress=False)


def test_sweep_goes_on_past_bad_cells_and_ends_with_a_summary(tmp_path):
    train_run(run_of(tmp_path), progress=False)
    (tmp_path / "tiny" / "review" / "seed0" / "result.json").write_text("{torn")
    train_run(run_of(tmp_path, fast(lr=0.01), variant="highway"), progress=False)
    lines = []
    with pytest.raises(SweepIncomplete, match=r"2 of 3 tiny runs did not run \(review/seed0, highway/seed0\)") as err:
        run_sweep("tiny", ["review", "highway", "standard"], [0], FAST, str(tmp_path), progress=False,
                  log=lines.append)
    assert any("standard/seed0: finished" in x for x in lines)
    assert any("review/seed0: not run:" in x and "result.json cannot be read" in x for x in lines)
    assert any("highway/seed0: not run:" in x and "train.lr 0.01 there, 0.003 asked" in x for x in lines)
    assert list(err.value.table["variant"]) == ["highway", "standard"]  # the torn result is left out, named
    out = cli("sweep", "--size", "tiny", "--variants", "review,highway,standard", "--seeds", "0",
              *sum((["--set", f"train.{k}={v}"] for k, v in FAST["train"].items()), []), "--out", str(tmp_path))
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith("error: 2 of 3 tiny runs")
    assert "standard" in out.stdout


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("args,message", [
    (["train", "--seed", "-1"], "a seed must be a whole number from 0 to 2**64 - 1, got '-1'"),
    (["sweep", "--seeds", "0,-1"], "a seed must be a whole number from 0 to 2**64 - 1, got '-1'"),
    (["train", "--set", "train.lr=abc"], "train.lr must be a number, got 'abc'"),
    (["train", "--set", "train.steps=2.5"], "train.steps must be a whole number, got 2.5"),
    (["train", "--set", "model.n_heads=true"], "model.n_heads must be a whole number, got True"),
    (["train", "--set", "train.lr=["], "bad --set value"),
    (["train", "--lr", "fast"], "argument --lr: invalid float value: 'fast'"),
    # 1b: far beyond any CPU's reach whatever its measured peak (60m sits near the floor on a fast one)
    (["train", "--size", "1b", "--device", "cpu"], "hours on this CPU"),
    (["sweep", "--size", "60m", "--device", "cpu"], "pass --allow-slow"),
])
def test_bad_input_is_one_sentence_exit_2_and_leaves_nothing(tmp_path, args, message):
    if "--size" not in args:
        args = [args[0], "--size", "tiny", *args[1:]]
    if args[0] == "train" and "--variant" not in args:
        args += ["--variant", "review"]
    out = cli(*args, "--out", str(tmp_path / "runs"))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr and out.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_data_that_is_not_utf8_text_is_named(tmp_path):
    data = tmp_path / "stories.txt"
    data.write_bytes(bytes(range(128, 256)) * 40)
    out = cli("train", "--size", "tiny", "--variant", "review", "--data-path", str(data), "--out",
              str(tmp_path / "runs"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert f"{data} is not UTF-8 text; valid data files are UTF-8 text" in out.stderr
    assert not (tmp_path / "runs").exists()


def test_set_values_are_typed_by_the_setting():
    train = resolve_run("tiny", "review", 0, {"train": {"lr": "2e-4", "betas": [0.8, 0.9],
                                                        "micro_batch_size": None}}).train
    assert train.lr == 2e-4 and train.betas == (0.8, 0.9) and train.micro_batch_size is None
    with pytest.raises(ConfigError, match=r"train.micro_batch_size must be a whole number or null, got 'x'"):
        resolve_run("tiny", "review", 0, {"train": {"micro_batch_size": "x"}})
    with pytest.raises(ConfigError, match=r"train.compile must be true or false, got 1"):
        resolve_run("tiny", "review", 0, {"train": {"compile": 1}})


def test_a_malformed_preset_names_its_line_and_breaks_no_other_size(tmp_path):
    for name in ("tiny.yaml", "depth.yaml"):
        shutil.copy(REPO / "params" / name, tmp_path / name)
    (tmp_path / "broken.yaml").write_text("model: {d_model: 64\ntrain:\n  steps: [1, 2\n")
    assert load_preset("tiny", tmp_path).model.d_model == 64
    assert load_preset("depth4", tmp_path).model.n_layers == 4
    assert "tiny" in available_sizes(tmp_path) and "broken" not in available_sizes(tmp_path)
    with pytest.raises(ConfigError, match=r"preset .*broken.yaml line \d+ is not valid YAML"):
        load_preset("broken", tmp_path)
    with pytest.raises(ConfigError, match=r"unknown size 'huge'; valid sizes: .*tiny.* \(unreadable presets: broken\)"):
        load_preset("huge", tmp_path)
    (tmp_path / "depth.yaml").write_text("expand: {n_layers: [2, 4]\n")
    with pytest.raises(ConfigError, match=r"depth.yaml line \d+ is not valid YAML"):
        load_preset("depth4", tmp_path)


def test_cpu_guard_estimates_and_can_be_insisted_on(monkeypatch):
    # The FLOP floor is the run's FLOPs at the CPU's measured peak; a fixed peak keeps the test off the
    # machine it runs on (60m at 2 threads sits near the floor's threshold on a fast CPU).
    monkeypatch.setattr(pace, "matmul_peak", lambda cache_dir: 50e9)
    monkeypatch.setattr(pace, "time_step", lambda run: pytest.fail("no step is timed beyond the floor"))
    run = resolve_run("60m", "review", 0)
    cpu = torch.device("cpu")
    hours = training_flops(run) / 50e9 / 3600
    with pytest.raises(ConfigError, match=rf"60m/review/seed0 would take at least {hours:,.0f} hours on this CPU \("
                                          r"4\.8e\+16 training FLOPs at its matmul peak of 50 GFLOP/s"):
        check_cpu_reach([run], cpu)
    check_cpu_reach([run], cpu, allow_slow=True)
    monkeypatch.setenv("RRLIB_ALLOW_SLOW", "1")
    check_cpu_reach([run], cpu)
    check_cpu_reach([resolve_run("mini", "review", 0)], cpu, allow_slow=False)  # minutes: no word


def test_setup_script_writes_nothing_user_global():
    script = (REPO / "scripts" / "setup.sh").read_text()
    assert "--user" not in script and "ipykernel install --sys-prefix" in script


def test_a_cost_under_a_minute_is_said_in_seconds(monkeypatch):
    from rrlib.report import inputs
    from rrlib.runs import pace
    from rrlib.runs.device import training_flops
    from rrlib.runs.presets import resolve_run

    runs = [resolve_run("tiny", "review", seed) for seed in (0, 1)]
    flops = sum(training_flops(r) for r in runs)
    monkeypatch.setattr(pace, "matmul_peak", lambda cache_dir: flops / 12.4)  # this CPU: 12.4 s for both
    assert inputs.cost_text(runs).endswith("at least 12 s on this CPU at its full matmul speed")


def test_report_lists_missing_runs_with_their_cost_and_trains_none_unasked(tmp_path):
    (tmp_path / "runs").mkdir()
    out = cli("report", "--runs", str(tmp_path / "runs"), "--only", "02_depth_stability", "--out",
              str(tmp_path / "paper"), "--build", str(tmp_path / "build"))
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("[report] 02_depth_stability: skipped"))
    assert "lack 105 runs (depth2: 15," in line and "training FLOPs, at least" in line and "--train-missing" in line
    assert list((tmp_path / "runs").iterdir()) == [] and not (tmp_path / "build" / "notebooks").exists()
