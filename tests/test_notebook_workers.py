"""Notebook 03's workers (rrlib.speed.workers): a size's runs spread over processes by the sweep command's own shards,
bad worker counts and runs too large for one device said in one sentence before any work, a failed or dead
worker named with the finished runs kept, the two-worker notebook faster than its runs one after another, and a
page the notebook trained joining a report built into the user's own folder."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rrlib import count_params
from rrlib.__main__ import build_parser, overrides_from
from rrlib.runs.config import ConfigError
from rrlib.runs.presets import resolve_run
from rrlib.runs.sweep import SweepIncomplete, grid, parse_shard
from rrlib.speed import workers

REPO = Path(__file__).resolve().parents[1]
OVERRIDES = {"train": {"steps": 4, "device": "cpu", "eval_every": 2, "ckpt_every": 2},
             "model": {"highway_gate_init": "zero"}}


def one_sentence(text: str) -> bool:
    return "\n" not in text and text.count(". ") == 0


# ---------------------------------------------------------------- the worker count


def test_the_default_is_one_worker_on_a_cpu_and_one_per_gpu_on_a_gpu_host(monkeypatch):
    assert workers.worker_count(None, "cpu", 6) == 1
    monkeypatch.setattr(workers, "gpus_for", lambda device: [0, 1, 2, 3])
    assert workers.worker_count(None, "cuda", 9) == 4
    assert workers.worker_count(None, "cuda", 3) == 3  # a worker without a run would hold nothing
    assert workers.worker_count(2, "cuda", 9) == 2


@pytest.mark.parametrize("given", [0, -1, 1.5, True, "2"])
def test_a_worker_count_that_is_no_whole_number_of_devices_is_one_sentence_with_the_choices(given):
    with pytest.raises(ConfigError) as err:
        workers.worker_count(given, "cpu", 6)
    assert f"from 1 to {os.cpu_count()}" in str(err.value) and one_sentence(str(err.value))


def test_more_workers_than_gpus_is_one_sentence_naming_the_gpus(monkeypatch):
    monkeypatch.setattr(workers, "gpus_for", lambda device: [0, 1])
    with pytest.raises(ConfigError) as err:
        workers.worker_count(3, "cuda", 9)
    said = str(err.value)
    assert "from 1 to 2" in said and "2 are visible" in said and "-p device cpu" in said and one_sentence(said)


def test_bad_workers_stop_the_notebook_before_any_run_folder_is_made(tmp_path, data):
    with pytest.raises(ConfigError, match="from 1 to"):
        workers.spread_sweep("tiny", ["review"], [0], OVERRIDES, str(tmp_path / "runs"), workers=0)
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- the shards


@pytest.mark.parametrize("n", [2, 3, 4])
def test_the_workers_commands_are_the_sweep_commands_shards_and_cover_the_grid_once(n, tmp_path):
    cells = grid("tiny", ["review", "highway", "standard"], [0, 1])
    commands = workers.worker_commands("tiny", cells, OVERRIDES, str(tmp_path / "runs"), n)
    assert len(commands) == n
    shares = []
    for command in commands:
        assert command[:4] == [sys.executable, "-m", "rrlib", "sweep"]
        args = build_parser().parse_args(command[3:])  # the sweep command reads it as it reads a user's line
        assert overrides_from(args) == OVERRIDES and Path(args.out) == tmp_path / "runs"
        shares.append(grid(args.size, args.variants, args.seeds, parse_shard(args.shard)))
    assert sorted(cell for share in shares for cell in share) == sorted(cells)  # each run once, by one worker
    assert all(share for share in shares)


def test_each_worker_gets_its_own_gpu_or_its_share_of_the_cores(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6")
    assert [workers.worker_env(k, 3, [0, 1, 2])["CUDA_VISIBLE_DEVICES"] for k in range(3)] == ["3", "5", "6"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert workers.worker_env(1, 2, [0, 1])["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    env = workers.worker_env(0, 2, [])
    assert env["OMP_NUM_THREADS"] == "4" and "CUDA_VISIBLE_DEVICES" not in env and env["TQDM_DISABLE"] == "1"


def test_a_worker_that_dies_is_named_with_its_runs(tmp_path):
    lines = []
    killed = [sys.executable, "-c", "import os, signal; print('[sweep 1/1] tiny/review/seed0: finished', flush=True); "
                                    "os.kill(os.getpid(), signal.SIGKILL)"]
    worker = workers.Worker(1, 2, killed, dict(os.environ), [("review", 0)], lines.append)
    said = worker.wait()
    assert said == "worker 2 of 2 (shard 1/2: review/seed0) died (SIGKILL)"
    assert lines == ["[worker 2/2] [sweep 1/1] tiny/review/seed0: finished"]  # its line per run, as it came
    failing = [sys.executable, "-c", "import sys; print('error: 1 of 1 tiny runs did not run (review/seed0)'); "
                                     "sys.exit(1)"]
    said = workers.Worker(0, 2, failing, dict(os.environ), [("review", 0)], lines.append).wait()
    assert said == "worker 1 of 2 (shard 0/2: review/seed0) failed: 1 of 1 tiny runs did not run (review/seed0)"


def test_a_failed_run_is_named_in_one_sentence_and_the_finished_runs_stay(tmp_path, data):
    runs = tmp_path / "runs"
    spoiled = runs / "tiny" / "review" / "seed0"  # worker 1's only run (shard 0/2 of review, standard at seed 0)
    spoiled.mkdir(parents=True)
    (spoiled / "config.json").write_text("not json")
    lines = []
    with pytest.raises(SweepIncomplete) as err:
        workers.spread_sweep("tiny", ["review", "standard"], [0], OVERRIDES, str(runs), workers=2, log=lines.append)
    said = str(err.value)
    assert said.startswith("worker 1 of 2 (shard 0/2: review/seed0) failed: 1 of 1 tiny runs did not run")
    assert "; 1 of 2 runs finished and stay in" in said and one_sentence(said.split("; the first: ")[0])
    assert list(err.value.table["variant"]) == ["standard"]
    assert json.loads((runs / "tiny" / "standard" / "seed0" / "result.json").read_text())["status"] == "finished"
    assert any(line.startswith("[worker 2/2] [sweep 1/1] tiny/standard/seed0: finished") for line in lines)
    assert (runs / "tiny" / "results.csv").read_text().count("\n") == 2  # the header and the finished run


# ---------------------------------------------------------------- one device's memory


def test_a_run_too_large_for_one_device_is_one_sentence_with_the_torchrun_line_that_fits_it():
    run = resolve_run("tiny", "review", 0, {"train": {"steps": 5}})
    memory = workers.step_memory(run)
    assert all(part > 0 for part in memory)
    need = lambda sequences, accumulates: workers.step_bytes(run, memory, sequences, accumulates)  # noqa: E731
    batch = run.train.batch_size  # 8
    assert workers.fit_sentence(run, {}, need(batch, False), "device", 1) is None
    assert workers.fit_sentence(run, {}, need(batch, False) - 1, "device", 1) is not None
    said = workers.fit_sentence(run, {"train": {"steps": 5}}, need(batch // 2, True), "H100", 8)
    assert said.startswith("tiny/review does not fit one H100")
    assert said.endswith("train it on 2 GPUs, each with 4 of its 8 sequences: torchrun --nproc-per-node 2 -m rrlib "
                         "train --size tiny --variant review --seed 0 --set=train.steps=5 (or on one, slower, with "
                         "-y '{settings: {train: {micro_batch_size: 4}}}')")
    assert one_sentence(said)
    said = workers.fit_sentence(run, {}, need(batch // 4, True), "H100", 2)
    assert "train it on 4 GPUs (this host has 2: run it where 4 are)" in said
    said = workers.fit_sentence(run, {}, need(1, True) - 1, "H100", 8)
    assert said.endswith("train it on a device with more memory") and "torchrun" not in said and one_sentence(said)


def test_the_gradients_count_beside_the_activations_only_where_a_step_holds_them():
    run = resolve_run("tiny", "review", 0, {})
    memory = workers.step_memory(run)
    grads = workers.GRAD_BYTES * count_params(run.model)
    assert workers.step_bytes(run, memory, 4, True) == workers.step_bytes(run, memory, 4, False) + grads
    assert workers.step_bytes(run, memory, 8, False) > workers.step_bytes(run, memory, 4, False)


def test_a_run_too_large_stops_the_notebook_before_any_run_folder_is_made(tmp_path, data):
    with pytest.raises(ConfigError, match="does not fit one device"):
        workers.check_workers("tiny", ["review"], [0], OVERRIDES, str(tmp_path / "runs"), None, capacity=2**20)
    assert not (tmp_path / "runs").exists()


def test_the_memory_estimate_grows_with_the_batch_and_the_depth():
    small = resolve_run("tiny", "review", 0, {})
    deep = resolve_run("tiny", "review", 0, {"model": {"n_layers": 6}})
    (f2, s2), (f6, s6) = workers.step_memory(small), workers.step_memory(deep)
    assert f6 > f2 and s6 > s2


@pytest.mark.slow
def test_the_memory_estimate_errs_high_but_near_the_gpu_benchmarks_measured_peak():
    bench = json.loads((REPO / "outputs/bench/h200/eager-tf32-60m.json").read_text())
    for variant in ("review", "standard"):
        measured = next(r["peak_memory_bytes"] for r in bench["results"] if r["variant"] == variant)
        run = resolve_run("60m", variant, 0, {})
        estimate = workers.step_bytes(run, workers.step_memory(run), run.train.batch_size, False)
        assert measured <= estimate <= 1.4 * measured, (variant, estimate / 1e9, measured / 1e9)


# ---------------------------------------------------------------- the notebook, end to end


def papermill(tmp_path, *parameters, settings: str | None = None) -> float:
    """Notebook 03 executed by papermill with ``parameters`` (NAME VALUE pairs) and ``settings`` (its parameter of
    that name, in YAML); its wall time in seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "papermill", "notebooks/03_sweep.ipynb", str(tmp_path / "out.ipynb"),
                           *[word for pair in parameters for word in ("-p", *pair)],
                           *(["-y", f"{{settings: {settings}}}"] if settings else []), "--cwd", str(REPO)],
                          cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    return time.perf_counter() - start


@pytest.mark.slow
def test_two_cpu_workers_take_well_under_the_runs_summed_time(tmp_path, data):
    """A run's recorded minutes are its training steps' time (rrlib.runs.train), without its evaluations and
    checkpoints, so the runs evaluate and save only at their end here: what the two workers split is then what the
    minutes count."""
    runs = tmp_path / "runs"
    wall = papermill(tmp_path, ("size", "tiny"), ("steps", "1200"), ("workers", "2"), ("device", "cpu"),
                     ("out_root", str(runs)), settings="{train: {eval_every: 1200, ckpt_every: 1200, log_every: 100}}")
    minutes = [json.loads(p.read_text())["minutes"] for p in runs.glob("tiny/*/seed*/result.json")]
    assert len(minutes) == 6
    print(f"notebook 03, tiny at 1200 steps, 2 workers: {wall:.0f} s wall against {60 * sum(minutes):.0f} s of runs")
    assert wall < 0.75 * 60 * sum(minutes)


@pytest.mark.slow
def test_a_size_the_notebook_trained_joins_a_report_built_into_the_users_folder(tmp_path, data):
    """A size with no committed page (mini_paper), trained by the notebook with its steps capped, then `rrlib report`
    into the user's folder: the report finds the size among the run folders, and with the notebook's own parameters
    (-p steps, seeds) it executes the page (papermill), renders it (nbconvert) and puts its figures under figures/."""
    runs, out, build = tmp_path / "runs", tmp_path / "paper", tmp_path / "build"
    papermill(tmp_path, ("size", "mini_paper"), ("steps", "6"), ("seeds", "[0]"), ("workers", "2"),
              ("device", "cpu"), ("out_root", str(runs)))
    command = [sys.executable, "-m", "rrlib", "report", "--only", "03_sweep", "--runs", str(runs), "--out", str(out),
               "--build", str(build), "-p", "steps=6", "-p", "seeds=0", "-p", "device=cpu"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "03_sweep_mini_paper: executing" in done.stdout
    page = (out / "03_sweep_mini_paper.html").read_text()
    assert (out / "03_sweep_mini_paper.reader.html").exists()
    for figure in ("03_mini_paper_loss_curves.png", "03_mini_paper_final_loss.png"):
        assert (out / "figures" / figure).stat().st_size > 0
    assert "03_sweep_mini_paper" in (out / "index.html").read_text()
    assert "mini_paper" in page and (out / "tables" / "03_mini_paper_results.csv").read_text().count("\n") == 4
