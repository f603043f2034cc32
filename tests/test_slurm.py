"""The SLURM array template: its tasks' shards cover a sweep's grid exactly once."""
import os
import subprocess
from pathlib import Path

import pytest

from rrlib.runs.sweep import grid

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "slurm_sweep.sbatch"


def shard_of_task(tmp_path, task_id: int, task_min: int, count: int) -> str:
    """The --shard the script passes for one array task, read from a stand-in python3 on PATH."""
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "python3").write_text('#!/bin/sh\necho "$@"\n')
    (shim / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}", "SLURM_ARRAY_TASK_ID": str(task_id),
           "SLURM_ARRAY_TASK_MIN": str(task_min), "SLURM_ARRAY_TASK_COUNT": str(count),
           "SLURM_SUBMIT_DIR": str(REPO)}
    done = subprocess.run(["bash", str(SCRIPT), "--size", "mini"], env=env, capture_output=True, text=True,
                          check=True)
    args = done.stdout.split()
    assert args[:5] == ["-m", "rrlib", "sweep", "--size", "mini"]
    return args[args.index("--shard") + 1]


@pytest.mark.parametrize("count,task_min", [(1, 0), (2, 0), (3, 1), (4, 0), (7, 5)])
def test_array_tasks_cover_the_grid_exactly_once(tmp_path, count, task_min):
    shards = [shard_of_task(tmp_path, task_min + i, task_min, count) for i in range(count)]
    assert shards == [f"{i}/{count}" for i in range(count)]
    cells = [cell for text in shards for cell in grid("mini", shard=tuple(map(int, text.split("/"))))]
    assert sorted(cells) == sorted(grid("mini")) and len(cells) == len(set(cells))


def test_the_template_asks_one_gpu_per_task_and_refuses_to_run_outside_an_array():
    text = SCRIPT.read_text()
    assert "#SBATCH --gres=gpu:1" in text and "#SBATCH --array=" in text
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(["bash", str(SCRIPT), "--size", "mini"], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "sbatch --array" in done.stderr
