"""The leaderboard study: every rule of the family, old and new, against standard at ``family_power`` with its
47 seeds, through ``rrlib compare``, reusing the committed runs under outputs/power/runs (standard, attnres,
delta_attnres and mgr have all 47).

    scripts/py scripts/leaderboard_study.py                      # the plan and its cost; trains nothing
    scripts/py scripts/leaderboard_study.py --run --budget 20    # train it, JOBS (default 2) at a time

The plan is printed first: per rule, the seeds already finished, the runs to train, the CPU-minutes a run takes and
the CPU-hours. Minutes per run: a rule with finished ``family_power`` runs, their median; any other, the median of
the committed standard runs times the rule's step time over standard's, measured here by ``rrlib bench`` (every
rule in one process, interleaved single steps at one thread, each timed by the thread's CPU time; a busy machine
still moves a ratio by several per cent). Rules are taken in order, the new ones and Review first, then the rest of the ``family``
preset's; each gets all 47 seeds while the budget lasts, the first that does not fit gets the seeds the rest of
the budget buys (none below 4, a pilot's seeds), and so on (the plan says at what seeds each rule stands).

With --run, each rule is one design as in scripts/power_study.sh: ``rrlib compare --variants RULE --against
standard`` in JOBS shards side by side, each on one thread, then once more for its verdict (outputs/power/
leaderboard/RULE; a log per shard in outputs/logs); finished runs are skipped, so a second call resumes. Last, one
compare call over every rule at all 47 seeds gives the board with Holm over all its comparisons
(outputs/power/leaderboard/board). Run it from a checkout of one clean commit, so every run records it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZE, SEEDS, BASELINE = "family_power", 47, "standard"
RUNS, OUT, LOGS = "outputs/power/runs", "outputs/power/leaderboard", "outputs/logs"
NEW_RULES = ("denseformer", "dynamic_dense", "laurel_rw", "laurel_lr", "value_residual")
FIRST = (*NEW_RULES, "review")  # the order: the new rules and Review before the rest
BUDGET_CPU_HOURS = 20.0
MIN_SEEDS = 4  # the fewest seeds a rule is run at (rrlib.report.power_study's pilot)


def board() -> list[str]:
    """Every rule of the board in the order it is run: ``FIRST``, then the ``family`` preset's other rules."""
    from rrlib.runs.presets import load_preset
    rest = [v for v in load_preset("family").variants if v not in FIRST and v != BASELINE]
    return [*FIRST, *rest]


def finished_seeds(rule: str) -> set[int]:
    from rrlib.report.power_study import design_runs
    return set(design_runs(RUNS, SIZE, [rule], range(SEEDS))["seed"])


def step_ratios(rules: list[str], repeats: int = 10) -> dict[str, float]:
    """Each rule's step time over standard's at ``SIZE`` on this CPU: ``rrlib bench``, every rule in one process,
    ``repeats`` interleaved single steps at one thread, each timed by the thread's CPU time (docs/speed.md)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bench.json"
        subprocess.run([sys.executable, "-m", "rrlib", "bench", "--size", SIZE, "--variants",
                        ",".join([BASELINE, *rules]), "--device", "cpu", "--steps", "1", "--repeats", str(repeats),
                        "--threads", "1", "--out", str(out)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        return {row["variant"]: row["step_time_vs_standard"] for row in json.loads(out.read_text())["results"]}


def minutes_per_run() -> dict[str, float]:
    """CPU-minutes one run of each rule takes: its finished runs' median, else the median of standard's times the
    rule's step ratio (``step_ratios``)."""
    from rrlib.report.power_study import design_runs
    runs = design_runs(RUNS, SIZE, [BASELINE, *board()], range(SEEDS))
    measured = runs.groupby("variant")["minutes"].median().to_dict()
    if BASELINE not in measured:
        raise SystemExit(f"no finished {SIZE} {BASELINE} runs under {RUNS}: the board reuses them (copy them in)")
    unmeasured = [rule for rule in board() if rule not in measured]
    ratios = step_ratios(unmeasured) if unmeasured else {}
    return {rule: measured.get(rule) or measured[BASELINE] * ratios[rule] for rule in board()}


def plan(budget: float) -> list[dict]:
    """One row per rule: seeds finished, the seeds it stands at within ``budget`` CPU-hours, the runs to train
    for them, minutes per run, and the CPU-hours they cost."""
    rows, left = [], budget * 60
    for rule, minutes in minutes_per_run().items():
        done = finished_seeds(rule)
        missing = [s for s in range(SEEDS) if s not in done]
        affordable = int(left // minutes) if minutes > 0 else len(missing)
        # the seeds 0..n-1 it stands at: all 47, or as many as the rest of the budget trains
        seeds = SEEDS if affordable >= len(missing) else next(
            n for n in range(SEEDS, -1, -1) if sum(s not in done for s in range(n)) <= affordable)
        if seeds < MIN_SEEDS:  # fewer seeds than a pilot's make no verdict worth a row
            seeds = len(done) if len(done) >= MIN_SEEDS and done == set(range(len(done))) else 0
        train = sum(s not in done for s in range(seeds))
        left -= train * minutes
        rows.append({"rule": rule, "finished": len(done), "seeds": seeds, "to_train": train, "minutes": minutes,
                     "cpu_hours": train * minutes / 60, "all_seeds_cpu_hours": len(missing) * minutes / 60})
    return rows


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="store_true", help="train the plan (default: print it only)")
    parser.add_argument("--budget", type=float, default=BUDGET_CPU_HOURS, help="CPU-hours (default: %(default)g)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 2)), help="runs side by side")
    args = parser.parse_args(argv)
    if args.budget < 0 or args.jobs < 1:
        parser.error("--budget must be at least 0 and --jobs at least 1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    rows = plan(args.budget)
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
