"""scripts/family_study.sh, scripts/study.sh and scripts/recipe_ablation.sh: which sweeps they start (through
scripts/run_sweeps.sh), and that they land where the notebooks read them.

A stub ``python3`` on PATH records each call instead of training, so these tests take milliseconds.
"""
import ast
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "family_study.sh"
STUDY = ROOT / "scripts" / "study.sh"


def notebook_parameters(name: str) -> dict:
    """The literal assignments of a notebook's parameters cell."""
    text = (ROOT / "notebooks" / f"{name}.py").read_text()
    cell = text.split('# %% tags=["parameters"]\n', 1)[1].split("\n# %%", 1)[0]
    values = {}
    for node in ast.parse(cell).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def run_script(tmp_path, env_extra: dict, *args, fail_on: str = "", script: Path = SCRIPT, status: int = 0
               ) -> tuple[list[list[str]], str]:
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    (stub / "python3").write_text(
        '#!/bin/sh\necho "$@" >> "$STUB_CALLS"\n'
        f'case "$*" in *"{fail_on or "never-matches"}"*) exit 1;; esac\n')
    (stub / "python3").chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{stub}{os.pathsep}{os.environ['PATH']}", "STUB_CALLS": str(calls),
           "LOGS": str(tmp_path / "logs"), **env_extra}
    done = subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == status, done.stderr
    lines = calls.read_text().splitlines() if calls.exists() else []
    return sorted(line.split() for line in lines), done.stdout


def test_default_grid_is_the_family_shards_notebook_05_reads(tmp_path):
    calls, _ = run_script(tmp_path, {"JOBS": "2"}, "--device", "cpu")
    params = notebook_parameters("05_related_methods")
    assert calls == [["-m", "rrlib", "sweep", "--size", params["size"], "--shard", f"{k}/2", "--device", "cpu"]
                     for k in range(2)]


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_shards_follow_jobs(tmp_path, jobs):
    calls, _ = run_script(tmp_path, {"JOBS": jobs, "SIZE": "mini"})
    assert [c[c.index("--shard") + 1] for c in calls] == [f"{k}/{jobs}" for k in range(int(jobs))]


def test_a_failed_sweep_is_reported_with_its_log_and_the_others_still_run(tmp_path):
    calls, out = run_script(tmp_path, {"JOBS": "2", "SIZE": "mini"}, fail_on="0/2", status=1)
    assert len(calls) == 2
    assert f"mini-0 FAILED ({tmp_path / 'logs' / 'mini-0.log'})" in out
    assert "mini-1 done" in out


def test_study_runs_one_sweep_per_size_with_the_extra_arguments(tmp_path):
    calls, out = run_script(tmp_path, {"SIZES": "micro mini", "JOBS": "2"}, "--device", "cpu", script=STUDY)
    assert calls == [["-m", "rrlib", "sweep", "--size", size, "--device", "cpu"] for size in ("micro", "mini")]
    assert "micro done" in out and "mini done" in out


def test_study_default_includes_the_size_by_tokens_grid_and_every_grid_size_exists(tmp_path):
    from rrlib.runs.presets import available_sizes

    grid = subprocess.run(["bash", str(STUDY), "--print-grid"], capture_output=True, text=True).stdout.split()
    assert grid and set(grid) <= set(available_sizes())
    assert {s.split("_steps")[0] for s in grid} == {"micro", "mini"}
    calls, _ = run_script(tmp_path, {"JOBS": "2"}, script=STUDY)
    assert set(grid) <= {c[c.index("--size") + 1] for c in calls}


def test_recipe_ablation_runs_both_recipes_seed_major_where_notebook_04_reads_them(tmp_path):
    calls, _ = run_script(tmp_path, {"SEEDS": "0 1", "JOBS": "1"}, "--device", "cpu",
                          script=ROOT / "scripts" / "recipe_ablation.sh")
    params = notebook_parameters("04_statistics")
    assert calls == sorted(["-m", "rrlib", "sweep", "--size", size, "--seeds", seed, "--out", params["recipe_root"],
                            "--device", "cpu"] for seed in ("0", "1") for size in ("mini", "mini_paper"))


def test_a_study_whose_every_sweep_failed_exits_1_naming_them(tmp_path):
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "python3").write_text("#!/bin/sh\nexit 1\n")
    (stub / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}{os.pathsep}{os.environ['PATH']}", "LOGS": str(tmp_path / "logs"),
           "JOBS": "2", "SIZES": "tiny mini"}
    done = subprocess.run(["bash", str(STUDY)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "2 sweep(s) FAILED: mini tiny" in done.stderr, (done.stdout, done.stderr)


@pytest.mark.parametrize("jobs", ["0", "two", "-1"])
@pytest.mark.parametrize("script", ["run_sweeps.sh", "family_study.sh", "power_study.sh", "looped_study.sh"])
def test_jobs_that_is_not_a_positive_whole_number_is_one_sentence_before_any_work(tmp_path, jobs, script):
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "python3").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\n')
    (stub / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}{os.pathsep}{os.environ['PATH']}", "LOGS": str(tmp_path / "logs"),
           "JOBS": jobs}
    done = subprocess.run(["bash", str(ROOT / "scripts" / script)], input="tiny --size tiny\n", env=env,
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 2 and done.stderr.startswith(f"error: JOBS={jobs} is not a positive whole number"), \
        done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "calls").exists()


def test_a_claims_study_part_that_does_not_exist_is_one_sentence_and_writes_no_log(tmp_path):
    from rrlib.studies.claims_study import PARTS

    script = (ROOT / "scripts" / "claims_study.sh").read_text()
    assert f'" {" ".join(PARTS)} "' in script and f"valid: {', '.join(PARTS)}" in script  # the module's parts
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / "scripts" / "claims_study.sh").write_text(script)
    done = subprocess.run(["bash", str(copy / "scripts" / "claims_study.sh")], env={**os.environ, "PART": "nosuch"},
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 2 and done.stderr.strip() == (
        "error: PART=nosuch is not a part of the claims study; valid: family, depth, conversion")
    assert not (copy / "outputs").exists()
