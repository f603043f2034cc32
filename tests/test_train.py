"""Training runs you can trust: results, resume after SIGKILL, divergence, locks, sweeps, DDP, CLI errors."""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rrlib.runs.config import ConfigError
from rrlib.runs.folders import RunBusy, run_lock
from rrlib.runs.optim import group_lrs, lr_at, make_optimizer, rule_lr_at
from rrlib.runs.presets import resolve_run
from rrlib.runs.sweep import grid, results_table, run_sweep
from rrlib.runs.train import train_run

REPO = Path(__file__).resolve().parents[1]
FAST = {"train": {"steps": 12, "eval_every": 6, "ckpt_every": 6, "log_every": 3, "paper_eval_batches": 2,
                  "fixed_eval_tokens": 2048}}


def cli(*args, **kw):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rrlib", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=300, **kw)


def test_result_file_has_the_paper_columns_and_provenance(tmp_path):
    result = train_run(resolve_run("tiny", "review", 0, FAST, str(tmp_path)), progress=False)
    run_dir = tmp_path / "tiny" / "review" / "seed0"
    assert json.loads((run_dir / "result.json").read_text()) == result
    for key in ("size", "variant", "seed", "params_M", "steps", "val_loss", "ece", "minutes", "fixed_loss",
                "non_embedding_params", "flops_per_token", "tokens", "tokens_per_s", "precision", "device",
                "status", "git_commit"):
        assert result[key] is not None, key
    assert result["status"] == "finished" and result["steps"] == 12 and result["precision"] == "fp32"
    assert result["tokens"] == 12 * 8 * 64
    assert 0 <= result["ece"] < 1 and result["val_loss"] < 5.6  # below uniform over 257 bytes
    config = json.loads((run_dir / "config.json").read_text())
    assert config["config"]["model"]["variant"] == "review" and config["git_commit"]
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines if "loss" in x] == [3, 6, 9, 12]
    assert [x["step"] for x in lines if "fixed_loss" in x] == [6]
    # restarting a finished run does nothing
    mtime = (run_dir / "result.json").stat().st_mtime_ns
    assert train_run(resolve_run("tiny", "review", 0, FAST, str(tmp_path)), progress=False) == result
    assert (run_dir / "result.json").stat().st_mtime_ns == mtime


def test_lr_schedule():
    t = resolve_run("60m", "review", 0).train
    assert lr_at(0, t) == pytest.approx(2e-4 / 500)
    assert lr_at(499, t) == pytest.approx(2e-4)
    assert lr_at(t.steps, t) == pytest.approx(2e-5)
    assert lr_at(500 + (t.steps - 500) // 2, t) == pytest.approx(2e-4 * 0.55, rel=1e-3)


def test_rule_lr_scale_gives_the_rule_its_own_rate_and_the_shared_floor():
    """The Delta code's --lr_attnres: the rule's parameters peak at scale·lr and decay to the same absolute floor
    as the rest (min_lr_frac·lr); at scale 1 the optimiser is the one it always was."""
    from rrlib.model import GPT
    run = resolve_run("tiny", "delta_attnres_block", 0, {"train": {"rule_lr_scale": 100.0, "min_lr_frac": 0.6}})
    t = run.train
    model = GPT(run.model)
    opt = make_optimizer(model, t, torch.device("cpu"))
    rule_ids = {id(p) for p in model.rule.parameters()}
    marked = [g for g in opt.param_groups if g.get("rule")]
    assert rule_ids and {id(p) for g in marked for p in g["params"]} == rule_ids
    assert not opt.param_groups[0].get("rule")  # the log's rate is the first group's
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))
    peak = t.warmup_steps - 1
    want = lambda base, rule: [rule if g.get("rule") else base for g in opt.param_groups]
    assert group_lrs(peak, t, opt) == pytest.approx(want(t.lr, 100 * t.lr))
    assert group_lrs(t.steps, t, opt) == pytest.approx(want(0.6 * t.lr, 0.6 * t.lr))  # one floor, as --lr_min
    floor = 0.6 * t.lr  # after warmup both groups follow one cosine between their peak and the shared floor
    for step in (t.warmup_steps + 1, (t.warmup_steps + t.steps) // 2, t.steps - 2):
        assert (rule_lr_at(step, t) - floor) / (lr_at(step, t) - floor) == pytest.approx((100 - 0.6) / (1 - 0.6))
    mid = (t.warmup_steps + t.steps) // 2
    plain = resolve_run("tiny", "delta_attnres_block", 0).train
    assert not any(g.get("rule") for g in make_optimizer(model, plain, torch.device("cpu")).param_groups)
    assert rule_lr_at(mid, plain) == lr_at(mid, plain)


def test_rule_lr_scale_is_fingerprinted_only_when_set():
    from rrlib.runs.folders.runfiles import fingerprint, run_identity
    plain = resolve_run("tiny", "review", 0)
    assert "rule_lr_scale" not in run_identity(plain, "cpu", "fp32")["train"]
    scaled = resolve_run("tiny", "review", 0, {"train": {"rule_lr_scale": 10.0}})
    assert fingerprint(run_identity(scaled, "cpu", "fp32")) != fingerprint(run_identity(plain, "cpu", "fp32"))
    with pytest.raises(ConfigError, match="rule_lr_scale must be a positive finite number"):
        resolve_run("tiny", "review", 0, {"train": {"rule_lr_scale": 0.0}})


@pytest.mark.slow
def test_resume_after_sigkill_is_bitwise(tmp_path):
    args = ["train", "--size", "tiny", "--variant", "review", "--seed", "1", "--steps", "400",
            "--ckpt-every", "20", "--eval-every", "1000", "--set", "train.log_every=20"]
    whole = cli(*args, "--out", str(tmp_path / "a"))
    assert whole.returncode == 0, whole.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rrlib", *args, "--out", str(tmp_path / "b")], cwd=REPO,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = tmp_path / "b" / "tiny" / "review" / "seed1" / "ckpt.pt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_b = tmp_path / "b" / "tiny" / "review" / "seed1"
    assert not (run_b / "result.json").exists(), "the run finished before it could be killed"
    resumed = cli(*args, "--out", str(tmp_path / "b"))
    assert resumed.returncode == 0, resumed.stderr
    assert "start step 0" not in resumed.stdout
    a = json.loads((tmp_path / "a" / "tiny" / "review" / "seed1" / "result.json").read_text())
    b = json.loads((run_b / "result.json").read_text())
    assert (a["val_loss"], a["fixed_loss"], a["ece"]) == (b["val_loss"], b["fixed_loss"], b["ece"])
    logs = lambda d: [x for x in map(json.loads, (d / "metrics.jsonl").read_text().splitlines()) if "loss" in x]
    assert [x["loss"] for x in logs(run_b)] == [x["loss"] for x in logs(tmp_path / "a" / "tiny" / "review" / "seed1")]


def test_sigterm_checkpoints_and_exits(tmp_path, data):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "rrlib", "train", "--size", "tiny", "--variant", "standard",
                             "--steps", "100000", "--ckpt-every", "100000", "--out", str(tmp_path)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "tiny" / "standard" / "seed0" / "metrics.jsonl"
    deadline = time.time() + 120
    while (not metrics.exists() or not metrics.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "checkpoint saved" in err
    assert (metrics.parent / "ckpt.pt").exists() and not (metrics.parent / "result.json").exists()


def test_divergence_is_recorded(tmp_path):
    over = {"train": {**FAST["train"], "lr": 1e9, "grad_clip": 1e9, "warmup_steps": 1}}
    result = train_run(resolve_run("tiny", "standard", 0, over, str(tmp_path)), progress=False)
    assert result["status"] == "diverged" and result["val_loss"] is None
    assert 0 <= result["diverged_step"] < 12


def test_gradient_accumulation_keeps_the_step(tmp_path):
    base = train_run(resolve_run("tiny", "review", 0, FAST, str(tmp_path / "a")), progress=False)
    split = {"train": {**FAST["train"], "micro_batch_size": 2}}
    accum = train_run(resolve_run("tiny", "review", 0, split, str(tmp_path / "b")), progress=False)
    assert accum["tokens"] == base["tokens"]
    assert accum["fixed_loss"] == pytest.approx(base["fixed_loss"], abs=1e-4)


def test_lock_keeps_a_second_process_out(tmp_path):
    run = resolve_run("tiny", "review", 0, FAST, str(tmp_path))
    with run_lock(tmp_path / "tiny" / "review" / "seed0"):
        with pytest.raises(RunBusy):
            train_run(run, progress=False)


def test_a_finished_run_keeps_no_lock_file(tmp_path):
    run = resolve_run("tiny", "review", 0, FAST, str(tmp_path))
    train_run(run, progress=False)
    assert not (run.run_dir / "run.lock").exists() and (run.run_dir / "result.json").exists()
    with run_lock(run.run_dir):  # the flock is the lock: a later holder takes the folder as before
        assert (run.run_dir / "run.lock").exists()
    assert not (run.run_dir / "run.lock").exists()


def test_sweep_skips_done_and_shards(tmp_path):
    assert grid("tiny", seeds=[0, 1], shard=(1, 2)) == [("highway", 0), ("review", 1), ("standard", 1)]
    lines = []
    table = run_sweep("tiny", ["review", "standard"], [0], FAST, str(tmp_path), progress=False, log=lines.append)
    assert sorted(table["variant"]) == ["review", "standard"] and (tmp_path / "tiny" / "results.csv").exists()
    run_sweep("tiny", ["review", "standard"], [0], FAST, str(tmp_path), progress=False, log=lines.append)
    assert sum("done already" in x for x in lines) == 2
    assert list(results_table(str(tmp_path))["size"]) == ["tiny", "tiny"]


def test_two_sweeps_at_once_never_run_the_same_run(tmp_path, data):
    args = ["sweep", "--size", "tiny", "--variants", "review,standard", "--seeds", "0,1,2", "--steps", "12",
            "--out", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "rrlib", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    trained = [line.split("]")[1].split(":")[0].strip() for out in outs for line in out.splitlines()
               if line.startswith("[sweep") and ": finished" in line]
    assert sorted(trained) == sorted(set(trained)) and len(trained) == 6


@pytest.mark.slow
def test_ddp_two_processes_match_one(tmp_path):
    common = ["--size", "tiny", "--variant", "review", "--steps", "6", "--set", "train.log_every=3",
              "--eval-every", "1000", "--set", "train.paper_eval_batches=1", "--set", "train.fixed_eval_tokens=1024"]
    one = cli("train", *common, "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "rrlib", "train", *common, "--out", str(tmp_path / "two")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-2000:]
    read = lambda d: [x["loss"] for x in map(json.loads, (d / "tiny/review/seed0/metrics.jsonl").read_text().splitlines())]
    assert read(tmp_path / "two") == pytest.approx(read(tmp_path / "one"), abs=1e-5)
    assert json.loads((tmp_path / "two/tiny/review/seed0/result.json").read_text())["world_size"] == 2


@pytest.mark.parametrize("args,message", [
    (["train", "--size", "huge", "--variant", "review"], "unknown size 'huge'; valid sizes:"),
    (["train", "--size", "tiny", "--variant", "nope"], "unknown variant 'nope'; valid variants:"),
    (["train", "--size", "tiny", "--variant", "review", "--steps", "-3"], "steps must be a positive"),
    (["train", "--size", "tiny", "--variant", "review", "--data-path", "missing.txt"], "missing.txt"),
    (["train", "--size", "tiny", "--variant", "review", "--precision", "fp8"], "valid precisions"),
    (["sweep", "--size", "tiny", "--shard", "3/2"], "bad shard '3/2'"),
    (["train", "--size", "tiny", "--variant", "review", "--set", "train.nope=1"], "unknown train setting"),
])
def test_cli_errors_are_one_sentence_and_exit_2(tmp_path, args, message):
    done = tmp_path / "tiny" / "review" / "seed0"
    done.mkdir(parents=True)
    (done / "keep.txt").write_text("precious")
    out = cli(*args, "--out", str(tmp_path))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert (done / "keep.txt").read_text() == "precious"


def test_a_changed_results_table_does_not_make_the_code_dirty(tmp_path):
    """A sweep rewrites its committed results.csv; only tracked code or settings count as uncommitted."""
    from rrlib.runs import provenance

    repo = tmp_path / "repo"
    (repo / "rrlib").mkdir(parents=True)
    (repo / "outputs" / "runs").mkdir(parents=True)
    (repo / "rrlib" / "code.py").write_text("x = 1\n")
    (repo / "outputs" / "runs" / "results.csv").write_text("a\n")
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    old_root, provenance.PROJECT_ROOT = provenance.PROJECT_ROOT, repo
    try:
        (repo / "outputs" / "runs" / "results.csv").write_text("b\n")
        assert provenance.git_commit() == head
        (repo / "rrlib" / "code.py").write_text("x = 2\n")
        assert provenance.git_commit() == head + "+dirty"
    finally:
        provenance.PROJECT_ROOT = old_root


def _rank_pid(launcher: subprocess.Popen, rank: int, timeout: float = 120) -> int:
    """The pid of torchrun's worker of ``rank`` (its child whose environment says RANK=rank)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split()
        for pid in children:
            with contextlib.suppress(OSError):
                if f"RANK={rank}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    return int(pid)
        time.sleep(0.2)
    raise AssertionError(f"no worker of rank {rank} appeared")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["rank 1", "launcher"])
def test_ddp_sigterm_to_any_process_stops_every_rank_at_one_step(tmp_path, target):
    args = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "rrlib", "train",
            "--size", "tiny", "--variant", "standard", "--steps", "300", "--set", "train.log_every=2",
            "--eval-every", "100000", "--set", "train.ckpt_every=100000", "--set", "train.paper_eval_batches=1",
            "--set", "train.fixed_eval_tokens=1024", "--out", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    launcher = subprocess.Popen([sys.executable, *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    worker = _rank_pid(launcher, 1)
    metrics = tmp_path / "tiny/standard/seed0/metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.is_file() and metrics.read_text().count("\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(launcher.pid if target == "launcher" else worker, signal.SIGTERM)
    out, err = launcher.communicate(timeout=120)
    stops = re.findall(r"stopped by signal 15 at step (\d+); checkpoint saved", out + err)
    assert len(stops) == 2 and len(set(stops)) == 1, err[-3000:]  # both ranks, one step
    assert "gloo" not in err.lower() and "SIGABRT" not in err, err[-3000:]
    ckpt = torch.load(metrics.parent / "ckpt.pt", weights_only=False)
    assert ckpt["step"] == int(stops[0]) < 300 and not (metrics.parent / "result.json").exists()
    if target == "rank 1":  # resuming finishes the run from the checkpoint
        resumed = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True,
                                 timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        result = json.loads((metrics.parent / "result.json").read_text())
        assert result["status"] == "finished" and result["steps"] == 300 and result["world_size"] == 2


@pytest.mark.parametrize("ending", ["refused", "interrupted"])
def test_a_command_leaves_the_process_group_it_joined_however_it_ends(tmp_path, monkeypatch, ending):
    # left to the interpreter's exit, gloo's threads can outlive their objects and abort a rank that stopped cleanly
    import torch.distributed as dist

    import rrlib.__main__ as cli

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    argv = ["train", "--size", "tiny", "--variant", "standard", "--out", str(tmp_path / "out")]
    if ending == "refused":
        argv += ["--set", "train.nosuch=1"]
    else:
        def stopped(*_):
            raise KeyboardInterrupt("stopped by signal 15 at step 1; checkpoint saved")
        monkeypatch.setattr(cli, "run_command", stopped)
    try:
        assert cli.main(argv) == (2 if ending == "refused" else 130)
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_a_finishing_run_writes_no_checkpoint_it_would_delete(tmp_path, monkeypatch):
    import rrlib.runs.train as train

    saved = []
    real = train.save_checkpoint
    monkeypatch.setattr(train, "save_checkpoint", lambda run_dir, model, opt, step, *a, **k: (
        saved.append(step), real(run_dir, model, opt, step, *a, **k)))
    run = resolve_run("tiny", "standard", 0, {"train": {"steps": 30, "ckpt_every": 15, "eval_every": 1000,
                                                        "paper_eval_batches": 1, "fixed_eval_tokens": 1024}},
                      str(tmp_path))
    assert train_run(run, progress=False)["status"] == "finished"
    assert saved == [15] and not (run.run_dir / "ckpt.pt").exists()


def test_recorded_arguments_carry_no_machine_path(tmp_path):
    from rrlib.runs.config import PROJECT_ROOT
    from rrlib.runs.provenance import portable_arguments

    inside = PROJECT_ROOT / "outputs" / "bench" / "x.json"
    assert portable_arguments(["--out", str(tmp_path / "a.json"), f"--data-path={tmp_path / 'b.txt'}", str(inside),
                               "outputs/runs", "--seed", "3"]) == \
        ["--out", "a.json", "--data-path=b.txt", "outputs/bench/x.json", "outputs/runs", "--seed", "3"]
