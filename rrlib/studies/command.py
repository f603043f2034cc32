"""``rrlib study list | plan NAME | run NAME [--jobs N] | status NAME``: every registered study
(rrlib.studies.registry), how far it is, and the one command that runs what it still lacks.

``run`` makes the study's plan from its files, runs the first step that lacks anything (its calls JOBS at a time,
each its own process on one thread; a call split into shards where the step has fewer calls than JOBS), makes the
plan again and goes on, so a pilot is followed by the design it sizes and a looped grid by the extension its runs
ask for. Finished runs are skipped and a stopped one resumes from its checkpoint (rrlib.runs.sweep); a line on
stderr says each run that finishes, with done/planned. A run that fails is named when the step ends, with its
call's log, and the command exits 1 naming every one; ``status`` names them too (until they finish) from
``<logs>/study-<name>.json``. Bad input is one sentence and exit 2 before any work, and --help loads no torch.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

from ..home import project_path
from ..parsing import OneLineParser
from .registry import STUDIES, Entry
from .work import Job, Run, result_of, standing, state, unique_runs

ACTIONS = ("list", "plan", "run", "status")
POLL_SECONDS = 5.0  # how often a running step looks for newly finished runs


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(prog="rrlib study", description="List, plan, run and follow the report's studies.")
    parser.add_argument("action", help=f"{', '.join(ACTIONS)}")
    parser.add_argument("name", nargs="?", help="the study (rrlib study list names them)")
    parser.add_argument("--jobs", default="1", help="calls side by side, each one process on one thread (default: 1)")
    args = parser.parse_args(argv)
    if args.action not in ACTIONS:
        parser.exit(2, f"error: unknown action {args.action!r}; valid choices: {', '.join(ACTIONS)}\n")
    if args.action != "list" and args.name not in STUDIES:
        said = "names no study" if args.name is None else f"names an unknown study {args.name!r}"
        parser.exit(2, f"error: rrlib study {args.action} {said}; valid choices: {', '.join(STUDIES)}\n")
    if not args.jobs.isdigit() or int(args.jobs) < 1:
        parser.exit(2, f"error: --jobs takes a positive whole number such as 2 (calls side by side), got "
                       f"{args.jobs!r}\n")
    args.jobs = int(args.jobs)
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.action == "list":
        return list_studies()
    entry = STUDIES[args.name]
    return {"plan": show_plan, "status": show_status, "run": lambda e: run_study(e, args.jobs)}[args.action](entry)


# ---------------------------------------------------------------- words


def spans(numbers) -> str:
    """0,1,2,3,7 as 0-3, 7."""
    numbers, out = sorted(set(numbers)), []
    for n in numbers:
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def design_words(runs: list[Run]) -> str:
    sizes, rules = dict.fromkeys(r.size for r in runs), dict.fromkeys(r.variant for r in runs)
    return f"sizes {', '.join(sizes)}; rules {', '.join(rules)}; seeds {spans(r.seed for r in runs)}"


def hours(value: float) -> str:
    return "?" if math.isnan(value) else f"{value:.1f}"


def failed_record(entry: Entry) -> dict[str, str]:
    path = project_path(entry.logs) / f"study-{entry.name}.json"
    try:
        return json.loads(path.read_text())["failed"]
    except (OSError, ValueError, KeyError):
        return {}


def list_studies() -> int:
    print(f"{'study':<20} {'runs done':>13} {'CPU-h done':>10} {'CPU-h left':>10}  what and design")
    for entry in STUDIES.values():
        try:
            plan = entry.plan(False)
        except (OSError, ValueError, LookupError) as err:
            print(f"{entry.name:<20} {'?':>13} {'?':>10} {'?':>10}  {entry.about}; no plan yet: {err}")
            continue
        now = standing(plan.steps, failed_record(entry))
        done = f"{now.count('done')}/{now.planned}"
        print(f"{entry.name:<20} {done:>13} {hours(now.hours_done):>10} "
              f"{hours(now.hours_left):>10}  {entry.about}")
        print(f"{'':<58}{design_words(unique_runs(plan.steps))}"
              + ("" if len(plan.steps) and all(plan.steps) and not any("pilot has ended" in n for n in plan.notes)
                 else " (pilot; the design follows it)"))
    print("CPU-hours left: the study's step timing where it has one, else the median of its finished runs; ? where "
          "neither is known yet")
    return 0


def show_plan(entry: Entry) -> int:
    plan = entry.plan(False)
    now = standing(plan.steps, failed_record(entry))
    print(f"{entry.name} ({entry.module}): {entry.about}")
    for note in plan.notes:
        print(note)
    for k, step in enumerate(plan.steps, 1):
        print(f"step {k}: " + ("1 call" if len(step) == 1 else f"{len(step)} calls, side by side"))
        for job in step:
            done = sum(state(r) == "done" for r in job.runs)
            print(f"  rrlib {' '.join(job.argv)}  # {done}/{len(job.runs)} runs done")
    print(f"{now.count('done')}/{now.planned} runs done, {hours(now.hours_done)} CPU-hours; "
          f"{now.planned - now.count('done')} to run, about {hours(now.hours_left)} CPU-hours")
    return 0


def show_status(entry: Entry) -> int:
    plan, failed = entry.plan(False), failed_record(entry)
    now = standing(plan.steps, failed)
    print(f"{entry.name}: {now.count('done')}/{now.planned} runs done ({hours(now.hours_done)} CPU-hours), "
          f"{now.count('running')} running, {now.count('failed')} failed, {now.count('stopped')} stopped part-way "
          f"(they resume), {now.count('left')} left ({hours(now.hours_left)} CPU-hours to run)")
    for run in now.runs.get("running", []):
        print(f"  running (held by another process): {run}")
    for run in now.runs.get("failed", []):
        print(f"  failed: {run} (log {failed[str(run)]})")
    for run in now.runs.get("stopped", []):
        print(f"  stopped part-way: {run}")
    for step in plan.steps:
        for job in step:
            left = [r for r in job.runs if r in now.runs.get("left", [])]
            if left:
                print(f"  left: {len(left)} of rrlib {' '.join(job.argv)}")
    return 0


# ---------------------------------------------------------------- running


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_study(entry: Entry, jobs: int) -> int:
    """Run what the study lacks, step by step (the module docstring); 1 naming every run that failed."""
    logs = project_path(entry.logs)
    logs.mkdir(parents=True, exist_ok=True)
    failed: dict[str, str] = {}
    last = None
    while True:
        plan = entry.plan(True)
        planned = unique_runs(plan.steps)
        todo = next(([j for j in step if not j.done()] for step in plan.steps if any(not j.done() for j in step)), [])
        if not todo:
            say(f"[study {entry.name}] every run of its plan is done ({len(planned)} runs)")
            break
        key = sorted(j.name for j in todo)
        if key == last:  # the same calls again: what they lack is held by another process
            busy = [r for j in todo for r in j.runs if state(r) == "running"]
            say(f"[study {entry.name}] not complete: {len(busy)} runs are being run by another process "
                f"({', '.join(map(str, busy[:5]))}{', ...' if len(busy) > 5 else ''}); run it again once they end")
            remember(entry, failed)
            return 1
        last = key
        failed.update(run_step(entry, todo, jobs, planned, logs))
        if failed:
            break
    remember(entry, failed)
    if failed:
        say(f"error: study {entry.name}: {len(failed)} run{'s' if len(failed) > 1 else ''} failed: "
            + "; ".join(f"{run} (log {log})" for run, log in failed.items()))
        return 1
    return 0


def remember(entry: Entry, failed: dict[str, str]) -> None:
    """The failed runs ``status`` names: this call's, and an earlier call's that are still without a result."""
    path = project_path(entry.logs) / f"study-{entry.name}.json"
    kept = {run: log for run, log in failed_record(entry).items() if run not in failed}
    plan_runs = {str(r): r for r in unique_runs(entry.plan(False).steps)}
    kept = {run: log for run, log in kept.items() if run in plan_runs and state(plan_runs[run]) != "done"}
    path.write_text(json.dumps({"failed": {**kept, **failed}}, indent=1) + "\n")


def shards(todo: list[Job], jobs: int) -> list[Job]:
    """The step's calls, each split into shards where the step has fewer calls than ``jobs``."""
    if len(todo) >= jobs:
        return todo
    each = math.ceil(jobs / len(todo))
    return [part for job in todo for part in
            ([job.shard(k, n) for n in [min(each, len(job.runs))] for k in range(n)]
             if job.shardable and min(each, len(job.runs)) > 1 else [job])]


def run_step(entry: Entry, todo: list[Job], jobs: int, planned: list[Run], logs) -> dict[str, str]:
    """The step's calls, ``jobs`` at a time; returns {run: log} of every run that ended without a result."""
    waiting, running, failed = shards(todo, jobs), [], {}
    done = {r for r in planned if state(r) == "done"}
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                job = waiting.pop(0)
                log = logs / f"{job.name}.log"
                with open(log, "w") as sink:
                    process = subprocess.Popen([sys.executable, "-m", "rrlib", *job.argv], cwd=project_path("."),
                                               stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               env=env)
                say(f"[study {entry.name}] started rrlib {' '.join(job.argv)} (log {log})")
                running.append((job, process, log))
            time.sleep(POLL_SECONDS if running else 0)
            for run in planned:
                if run not in done and state(run) == "done":
                    done.add(run)
                    result = result_of(run) or {}
                    loss = result.get("fixed_loss")
                    say(f"[study {entry.name}] {len(done)}/{len(planned)} done: {run} {result.get('status')}"
                        + (f", fixed_loss {loss:.4f}" if isinstance(loss, float) else "")
                        + (f", {result['minutes']:.1f} min" if isinstance(result.get("minutes"), float) else ""))
            for job, process, log in [r for r in running if r[1].poll() is not None]:
                running.remove((job, process, log))
                lacking = [r for r in job.runs if state(r) in ("left", "stopped")]
                if process.returncode or lacking or (job.product and not project_path(job.product).exists()):
                    say(f"[study {entry.name}] rrlib {job.argv[0]} {job.name} FAILED (exit {process.returncode}; "
                        f"log {log})")
                    failed.update({str(r): str(log) for r in lacking} or {job.name: str(log)})
    except KeyboardInterrupt:
        for _, process, _ in running:  # stopped runs resume from their checkpoints on the next call
            process.terminate()
        for _, process, _ in running:
            process.wait()
        raise
    return failed
