"""A 2-task SLURM array of the tiny sweep through a local slurmctld and slurmd (Debian's slurm-wlm).

Skipped where the slurm and munge daemons are not installed (Debian: apt-get install slurm-wlm) or where they
cannot be started by this user. Everything lives in a temporary folder: the configuration, munge's socket,
the daemons' state and logs; the daemons are stopped by their pid files at the end.
"""
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
pytestmark = pytest.mark.skipif(any(shutil.which(d) is None for d in DAEMONS) or os.geteuid() != 0,
                                reason="needs slurm-wlm and munge, started as root (Debian: apt-get install slurm-wlm)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(tmp_path):
    """A one-node SLURM cluster on this machine; yields the environment that points the clients at it."""
    for folder in ("state", "spool", "log", "munge"):
        (tmp_path / folder).mkdir()
    munge = tmp_path / "munge"
    host = socket.gethostname()
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"""ClusterName=rrlibtest
SlurmctldHost={host}
SlurmUser={getpass.getuser()}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={munge}/munge.socket
StateSaveLocation={tmp_path}/state
SlurmdSpoolDir={tmp_path}/spool
SlurmctldPidFile={tmp_path}/slurmctld.pid
SlurmdPidFile={tmp_path}/slurmd.pid
SlurmctldLogFile={tmp_path}/log/slurmctld.log
SlurmdLogFile={tmp_path}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=local Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    pids = [munge / "munged.pid", tmp_path / "slurmctld.pid", tmp_path / "slurmd.pid"]
    try:
        subprocess.run(["munged", f"--socket={munge}/munge.socket", f"--pid-file={pids[0]}",
                        f"--log-file={munge}/munged.log", f"--seed-file={munge}/seed", "--force"], check=True)
        subprocess.run(["slurmctld", "-f", str(conf)], env=env, check=True)
        subprocess.run(["slurmd", "-f", str(conf)], env=env, check=True)
        for _ in range(60):  # the node registers within seconds
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout
            if state.strip() == "idle":
                break
            time.sleep(1)
        else:
            pytest.skip(f"the local slurm node never came up (state {state.strip()!r})")
        yield env
    finally:
        for pid_file in reversed(pids):
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
                except (ProcessLookupError, ValueError):
                    pass


def test_two_task_array_of_the_tiny_sweep(cluster, tmp_path):
    runs, logs = tmp_path / "runs", tmp_path / "logs"
    logs.mkdir()
    # no GPU on this node: the template's one GPU a task is cleared on the command line, as sbatch allows
    done = subprocess.run(
        ["sbatch", "--wait", "--gres=none", "--cpus-per-task=1", "--array=0-1", f"--output={logs}/%A_%a.log",
         f"--chdir={REPO}", "--export=ALL,OMP_NUM_THREADS=1", str(REPO / "scripts" / "slurm_sweep.sbatch"),
         "--size", "tiny", "--variants", "review,standard", "--seeds", "0", "--steps", "5", "--device", "cpu",
         "--out", str(runs)],
        env=cluster, capture_output=True, text=True, timeout=600)
    shown = "\n".join(p.read_text() for p in sorted(logs.glob("*.log")))
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{shown}"
    assert "shard 0/2" in shown and "shard 1/2" in shown
    results = sorted(p.relative_to(runs).parts[1] for p in runs.glob("tiny/*/seed0/result.json"))
    assert results == ["review", "standard"]  # each cell of the grid by exactly one task
