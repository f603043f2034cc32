"""``rrlib study list | plan NAME | run NAME [--jobs N] | status NAME``: every registered study
(rrlib.studies.registry), how far it is, and the one command that runs what it still lacks.

``run`` makes the study's plan from its files, runs the first step that lacks anything (its calls JOBS at a time,
each its own process on one thread; a call split into shards where the step has fewer calls than JOBS), makes the
plan again and goes on, so a pilot is followed by the design it sizes and a looped grid by the extension its runs
ask for. Finished runs are skipped and a stopped one resumes from its checkpoint (rrlib.runs.sweep); a line on
stderr says each run that finishes, with done/planned. A run that fails is named when the step ends, with its
call's log, and the command exits 1 naming every one; ``status`` names them too (until they finish) from
``<logs>/study-<name>.json``. Bad input is one sentence and exit 2 before any work, and --help loads no torch.

``run NAME --rules my_rules.py --variants mine [--out FOLDER]``, for a study whose design compares rules, trains only
the user's rules into FOLDER and ranks them among the published ones (rrlib.studies.user_board).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

from ..home import given_path, project_path
from ..parsing import OneLineParser, add_rules_option, path_text
from .registry import STUDIES, Entry
from .work import Job, Run, result_of, standing, state, unique_runs

ACTIONS = ("list", "plan", "run", "status")
POLL_SECONDS = 5.0  # how often a running step looks for newly finished runs
# calls side by side at most: each is a process of its own, so --jobs 100000 would start that many at once (a
# fork bomb, not a study); past the machine's cores more calls only share them
MAX_JOBS = 256


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(prog="rrlib study", description="List, plan, run and follow the report's studies.")
    parser.add_argument("action", help=f"{', '.join(ACTIONS)}")
    parser.add_argument("name", nargs="?", help="the study (rrlib study list names them)")
    parser.add_argument("--jobs", default="1", help="calls side by side, each one process on one thread (default: 1)")
    parser.add_argument("--variants", default=None,
                        help="run only: your rules, comma-separated, to join a study that compares rules (leaderboard)")
    parser.add_argument("--out", type=path_text, default=None,
                        help="with --variants: the folder for your runs and board (default: study_<NAME>_<variants> "
                             "in the current folder; never the project's outputs/)")
    add_rules_option(parser)
    args = parser.parse_args(argv)
    if args.action not in ACTIONS:
        parser.exit(2, f"error: unknown action {args.action!r}; valid choices: {', '.join(ACTIONS)}\n")
    if args.action == "list" and args.name is not None:  # else the name would be dropped without a word
        parser.exit(2, f"error: rrlib study list lists every study and takes no name; for {args.name!r}: rrlib study "
                       f"plan|run|status NAME, with NAME one of {', '.join(STUDIES)}\n")
    if args.action != "list" and args.name not in STUDIES:
        said = "names no study" if args.name is None else f"names an unknown study {args.name!r}"
        parser.exit(2, f"error: rrlib study {args.action} {said}; valid choices: {', '.join(STUDIES)}\n")
    if not args.jobs.isdigit() or not 1 <= int(args.jobs) <= MAX_JOBS:
        parser.exit(2, f"error: --jobs takes a positive whole number up to {MAX_JOBS}, such as 2 (calls side by "
                       f"side, each one process on one thread; this machine has {os.cpu_count()} cores), got "
                       f"{args.jobs!r}\n")
    args.jobs = int(args.jobs)
    boards = [name for name, entry in STUDIES.items() if entry.board is not None]
    if (args.variants is not None or args.out is not None) and (args.action != "run" or args.name not in boards):
        parser.exit(2, f"error: --variants and --out join your rules to a study that compares rules, with rrlib study "
                       f"run; valid choices: {', '.join(boards)}\n")
    if args.out is not None and args.variants is None:
        parser.exit(2, "error: --out is where --variants' runs go; give --variants too (your rules, comma-separated)\n")
    if args.variants is not None:
        args.variants = [v for v in args.variants.split(",") if v]
        if not args.variants:
            parser.exit(2, "error: --variants names no rule; give your rules, comma-separated, e.g. --variants mine\n")
        out = given_path(args.out or f"study_{args.name}_{'_'.join(args.variants)}")
        try:
            where = project_path(out).resolve()
        except (OSError, RuntimeError) as err:  # a loop of links (RuntimeError before Python 3.13), a name too long
            reason = getattr(err, "strerror", None) or err
            parser.exit(2, f"error: --out {args.out or out} cannot be looked at ({reason}); give a folder of your "
                           f"own, e.g. --out my_board\n")
        if where.is_relative_to(project_path("outputs").resolve()):
            parser.exit(2, f"error: --out {args.out or out} lies in the project's outputs/, whose runs are published "
                           f"and never written by a user's study; give a folder of your own, e.g. --out my_board\n")
        args.out = out
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.action == "list":
        return list_studies()
    entry = STUDIES[args.name]
    if args.variants is not None:
        return join_board(entry, args.variants, args.out, args.jobs)
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


def join_board(entry: Entry, variants: list[str], out: str, jobs: int) -> int:
    """The user's rules at the study's design (rrlib.studies.user_board): their runs, then the board ranked."""
    from ..rules import RULES
    from .user_board import design, keep_design, other_design, render, user_plan

    board = entry.board
    published = [*board.rules(), board.baseline]
    unknown = [v for v in variants if v not in RULES]
    if unknown:
        say(f"error: --variants names {', '.join(map(repr, unknown))}, not a rule; valid choices: {', '.join(RULES)} "
            f"(a rule of your own arrives by --rules my_rules.py)")
        return 2
    if set(variants) & set(published):
        say(f"error: --variants names {', '.join(sorted(set(variants) & set(published)))}, already on the "
            f"{entry.name} board; give your own rules (the board's: {', '.join(published)})")
        return 2
    wanted = design(entry.name, board, variants)
    if (there := other_design(project_path(out), wanted)) is not None:
        say(f"error: --out {out} holds {there}; one --out keeps one board (one study, one set of --variants): give "
            f"this one another --out, or the same study and --variants as that one")
        return 2
    keep_design(project_path(out), wanted)
    mine = Entry(f"{entry.name}_{'_'.join(variants)}", entry.module, f"{', '.join(variants)} on {entry.name}",
                 lambda ready: user_plan(board, variants, out), logs=f"{out}/logs")
    status = run_study(mine, jobs)
    if status:
        return status
    print(render(board, variants, out))
    say(f"[study {entry.name}] the board with {', '.join(variants)}: {out}/board.csv, {out}/board.html")
    return 0


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
