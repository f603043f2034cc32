"""The leaderboard study: every rule of the family, old and new, against standard at ``family_power`` with its
47 seeds, through ``rrlib compare``, reusing the committed runs under outputs/power/runs (standard, attnres,
delta_attnres and mgr have all 47).

    scripts/py scripts/leaderboard_study.py                      # the plan and its cost; trains nothing
    scripts/py scripts/leaderboard_study.py --run --budget 20    # train it, JOBS (default 2) at a time

The plan (rrlib.studies.leaderboard_study, which page 08 reads too) is printed first: per rule, the seeds already
finished, the runs to train, the CPU-minutes a run takes and the CPU-hours. A rule without finished runs is priced by
its step time over standard's, measured here by ``rrlib bench`` (every rule in one process, interleaved single steps
at one thread, each timed by the thread's CPU time; a busy machine still moves a ratio by several per cent).

With --run, each rule is one design as in scripts/power_study.sh: ``rrlib compare --variants RULE --against
standard`` in JOBS shards side by side, each on one thread, then once more for its verdict (outputs/power/
leaderboard/RULE; a log per shard in outputs/logs); finished runs are skipped, so a second call resumes. Last, one
compare call over every rule at all 47 seeds gives the board with Holm over all its comparisons
(outputs/power/leaderboard/board). Run it from a checkout of one clean commit, so every run records it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's rrlib, where the study's runs are

from rrlib.parsing import OneLineParser
from rrlib.studies.leaderboard_study import (BASELINE, BUDGET_CPU_HOURS, LOGS, OUT, RUNS, SEEDS, SIZE,
                                           minutes_per_run, plan)


def step_ratios(rules: list[str], repeats: int = 10) -> dict[str, float]:
    """Each rule's step time over standard's at ``SIZE`` on this CPU: ``rrlib bench``, every rule in one process,
    ``repeats`` interleaved single steps at one thread, each timed by the thread's CPU time (docs/speed.md)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bench.json"
        subprocess.run([sys.executable, "-m", "rrlib", "bench", "--size", SIZE, "--variants",
                        ",".join([BASELINE, *rules]), "--device", "cpu", "--steps", "1", "--repeats", str(repeats),
                        "--threads", "1", "--out", str(out)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        return {row["variant"]: row["step_time_vs_standard"] for row in json.loads(out.read_text())["results"]}


def print_plan(rows: list[dict], budget: float) -> None:
    print(f"leaderboard at {SIZE}, every rule against {BASELINE}, {SEEDS} seeds, runs under {RUNS}; "
          f"budget {budget:g} CPU-hours")
    print(f"{'rule':<20} {'finished':>8} {'seeds':>5} {'to train':>8} {'min/run':>7} {'CPU-h':>6} {'CPU-h, all 47':>13}")
    for r in rows:
        print(f"{r['rule']:<20} {r['finished']:>8} {r['seeds']:>5} {r['to_train']:>8} {r['minutes']:>7.2f} "
              f"{r['cpu_hours']:>6.1f} {r['all_seeds_cpu_hours']:>13.1f}")
    total, whole = sum(r["cpu_hours"] for r in rows), sum(r["all_seeds_cpu_hours"] for r in rows)
    print(f"within the budget: {sum(r['to_train'] for r in rows)} runs, about {total:.1f} CPU-hours; the whole board "
          f"at {SEEDS} seeds: {sum(len(range(SEEDS)) - r['finished'] for r in rows)} runs, about {whole:.1f} CPU-hours")


def compare(rules: list[str], seeds: int, out: str, log: str, shard: str | None = None) -> subprocess.Popen:
    """``rrlib compare`` of ``rules`` against standard at seeds 0 to ``seeds`` - 1, started, its output in ``log``."""
    command = [sys.executable, "-m", "rrlib", "compare", "--allow-slow", "--size", SIZE, "--variants", ",".join(rules),
               "--against", BASELINE, "--seeds", str(seeds), "--runs", RUNS, "--out", out]
    with open(ROOT / LOGS / log, "w") as sink:
        return subprocess.Popen(command + (["--shard", shard] if shard else []), cwd=ROOT, stdout=sink,
                                stderr=subprocess.STDOUT)


def design(rule: str, seeds: int, jobs: int) -> int:
    """One rule's design: ``jobs`` shards side by side, then the verdict call (it trains what a failed shard left)."""
    shards = [compare([rule], seeds, f"{OUT}/{rule}", f"leaderboard_{rule}_{k}.log", f"{k}/{jobs}")
              for k in range(jobs)]
    for shard in shards:
        shard.wait()
    return compare([rule], seeds, f"{OUT}/{rule}", f"leaderboard_{rule}.log").wait()


def budget_hours(text: str) -> float:
    """--budget: CPU-hours, a finite number of at least 0 (nan and inf are no budget)."""
    try:
        hours = float(text)
    except ValueError:
        hours = math.nan
    if not (math.isfinite(hours) and hours >= 0):
        raise argparse.ArgumentTypeError(f"--budget takes CPU-hours, a number of at least 0 such as 20, got {text!r}")
    return hours


def jobs_count(text: str) -> int:
    """--jobs (default $JOBS, else 2): a positive whole number, checked when the flags are read, not before --help."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--jobs (or $JOBS) takes a positive whole number such as 2, got {text!r}")
    return int(text)


def main(argv=None) -> int:
    parser = OneLineParser(prog="scripts/leaderboard_study.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="store_true", help="train the plan (default: print it only)")
    parser.add_argument("--budget", type=budget_hours, default=BUDGET_CPU_HOURS,
                        help="CPU-hours (default: %(default)g)")
    # a string default goes through the type after --help has had its say
    parser.add_argument("--jobs", type=jobs_count, default=os.environ.get("JOBS", "2"), help="runs side by side")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.chdir(ROOT)
    try:
        rows = plan(args.budget, minutes_per_run(step_ratios))
    except FileNotFoundError as err:
        parser.error(str(err))
    print_plan(rows, args.budget)
    if not args.run:
        return 0
    (ROOT / LOGS).mkdir(parents=True, exist_ok=True)
    for r in rows:
        if r["seeds"] and design(r["rule"], r["seeds"], args.jobs):
            print(f"{r['rule']}: the verdict call failed (outputs/logs/leaderboard_{r['rule']}.log says why)")
            return 1
    whole = [r["rule"] for r in rows if r["seeds"] == SEEDS]
    return compare(whole, SEEDS, f"{OUT}/board", "leaderboard_board.log").wait() if whole else 0


if __name__ == "__main__":
    sys.exit(main())
