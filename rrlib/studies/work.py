"""What a study's plan is made of, and where each of its runs stands, read from the run folders alone.

A study's plan (rrlib.studies.registry) is a list of steps run in order; a step is a list of ``Job`` that may run
side by side: one ``python -m rrlib sweep`` (or ``compare``) call, the runs it trains and, for a call that writes
a file of its own (compare's verdict), that file. A run is ``done`` once its folder holds a result (finished or
diverged: a diverged run is an outcome, not a run to retry), ``running`` while another process holds its lock
(rrlib.runs.folders.run_lock), ``stopped`` when it has a log or a checkpoint and neither (the next call resumes it
from its checkpoint), else ``left``. A job may be split into shards (``--shard k/n``) where the call takes one.
"""
from __future__ import annotations

import fcntl
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..home import project_path

ENDED = ("finished", "diverged")


@dataclass(frozen=True)
class Run:
    """One run folder of a plan: ``<root>/<size>/<variant>/seed<seed>``."""
    root: str
    size: str
    variant: str
    seed: int

    @property
    def folder(self) -> Path:
        return project_path(self.root) / self.size / self.variant / f"seed{self.seed}"  # runs.config.run_folder

    def __str__(self) -> str:
        return f"{self.root}/{self.size}/{self.variant}/seed{self.seed}"


@dataclass(frozen=True)
class Job:
    """One call of ``python -m rrlib <argv>``: its log's name, the runs it trains, whether it takes ``--shard``,
    the file it writes besides its runs (None: its runs are all it makes) and the CPU-minutes a run of it takes
    where the study measured them beforehand (its step timing; None: estimated from the runs done)."""
    name: str
    argv: tuple
    runs: tuple
    shardable: bool = True
    product: str | None = None
    minutes: float | None = None

    def done(self) -> bool:
        return all(state(r) == "done" for r in self.runs) and (
            self.product is None or project_path(self.product).exists())

    def shard(self, k: int, n: int) -> "Job":
        """The call's k-th of n shards, holding the runs that ``--shard k/n`` trains: every n-th run of a sweep's
        grid, and for compare each run whose seed's place plus its rule's place is k modulo n (rrlib.compare.engine's
        train), so that a shard is judged by its own runs and a rerun after a kill finishes them."""
        share = compare_share(self.runs, k, n) if self.argv[0] == "compare" else self.runs[k::n]
        return Job(f"{self.name}-{k}of{n}", (*self.argv, "--shard", f"{k}/{n}"), share, False, None, self.minutes)


def compare_share(runs: tuple, k: int, n: int) -> tuple:
    """The runs of a compare call (seed-major over its rules, the variants then the baselines) that its shard k/n
    trains: each run belongs to one shard for good, by its seed's place plus its rule's place, modulo n."""
    seeds = {s: j for j, s in enumerate(dict.fromkeys(r.seed for r in runs))}
    rules = {v: i for i, v in enumerate(dict.fromkeys(r.variant for r in runs))}
    return tuple(r for r in runs if (seeds[r.seed] + rules[r.variant]) % n == k)


@dataclass
class Plan:
    """A study's steps as its files stand now (each step's jobs may run side by side; the steps run in order),
    and what to say beside them: the design's arithmetic, or what it waits for (a pilot)."""
    steps: list
    notes: list = field(default_factory=list)


def result_of(run: Run) -> dict | None:
    """The run's result.json, or None (none yet, or unreadable: its sweep names why)."""
    try:
        return json.loads((run.folder / "result.json").read_text())
    except (OSError, ValueError):
        return None


def held(folder: Path) -> bool:
    """Whether another process holds the run folder's lock now (a shared lock is refused while it does)."""
    try:
        fh = open(folder / "run.lock")
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def state(run: Run) -> str:
    """done, running, stopped or left (the module docstring)."""
    result = result_of(run)
    if result is not None and result.get("status") in ENDED:
        return "done"
    folder = run.folder
    if held(folder):
        return "running"
    if (folder / "ckpt.pt").exists() or (folder / "metrics.jsonl").exists():
        return "stopped"
    return "left"


def unique_runs(steps) -> list[Run]:
    """Every run of the plan once, in its order."""
    return list(dict.fromkeys(r for step in steps for job in step for r in job.runs))


def minutes_of(steps) -> dict[Run, float]:
    """Each run's CPU-minutes: what it took where done, else the study's step timing, else the median of the done
    runs of its job, else of all the plan's done runs; NaN where nothing is known yet."""
    took, estimate = {}, {}
    for step in steps:
        for job in step:
            for run in job.runs:
                result = result_of(run)
                if result is not None and result.get("status") in ENDED and result.get("minutes") is not None:
                    took[run] = float(result["minutes"])
    every = statistics.median(took.values()) if took else math.nan
    for step in steps:
        for job in step:
            own = [took[r] for r in job.runs if r in took]
            known = job.minutes is not None and math.isfinite(job.minutes)
            guess = job.minutes if known else statistics.median(own) if own else every
            for run in job.runs:
                estimate.setdefault(run, took.get(run, guess))
    return estimate


@dataclass
class Standing:
    """Where a plan's runs stand: each state's runs, and CPU-hours done and still to run."""
    runs: dict = field(default_factory=dict)  # state -> [Run]
    hours_done: float = 0.0
    hours_left: float = 0.0

    def count(self, *states) -> int:
        return sum(len(self.runs.get(s, [])) for s in states)

    @property
    def planned(self) -> int:
        return sum(len(v) for v in self.runs.values())


def standing(steps, failed=()) -> Standing:
    """The plan's runs by state (a ``failed`` run: one the last ``rrlib study run`` named, still without a result
    and not running) and its CPU-hours."""
    out, minutes, failed = Standing(), minutes_of(steps), set(failed)
    for run in unique_runs(steps):
        now = state(run)
        if now in ("left", "stopped") and str(run) in failed:
            now = "failed"
        out.runs.setdefault(now, []).append(run)
        if now == "done":
            out.hours_done += minutes[run] / 60
        else:
            out.hours_left += minutes[run] / 60
    return out


def cells(size: str, variants, seeds, root: str) -> tuple:
    """The runs of one sweep, seed-major as rrlib.runs.sweep.grid orders them (so a shard's runs are its own)."""
    return tuple(Run(root, size, v, int(s)) for s in seeds for v in variants)


def sweep_job(name: str, size: str, variants, seeds, root: str, *extra, minutes: float | None = None) -> Job:
    """``rrlib sweep`` of ``variants`` x ``seeds`` at ``size`` into ``root``, with ``extra`` arguments."""
    argv = ("sweep", "--size", size, "--variants", ",".join(variants), "--seeds", ",".join(str(s) for s in seeds),
            "--out", root, *extra)
    return Job(name, argv, cells(size, variants, seeds, root), minutes=minutes)


def parsed_sweep(name: str, words: list[str], minutes: float | None = None) -> Job:
    """A job from a study module's sweep line (``--size``, ``--variants``, ``--seeds``, ``--out`` and the rest)."""
    flags = {words[k]: words[k + 1] for k in range(len(words) - 1) if words[k] in ("--size", "--variants", "--seeds",
                                                                                   "--out")}
    runs = cells(flags["--size"], flags["--variants"].split(","), flags["--seeds"].split(","),
                 flags.get("--out", "outputs/runs"))
    return Job(name, ("sweep", *words), runs, minutes=minutes)


def setting(value) -> str:
    """A value as ``--set`` reads it back (YAML): JSON, with a float's exponent given a decimal point (YAML 1.1
    reads 5e-05 as a word)."""
    if isinstance(value, float):
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        return (mantissa if "." in mantissa else mantissa + ".0") + (e + exponent if e else "")
    return json.dumps(value, separators=(",", ":"))


def override_args(overrides: dict) -> list[str]:
    """A library overrides dict ({section: {key: value}}) as ``--set section.key=value`` arguments."""
    return [word for section, values in overrides.items() for key, value in values.items()
            for word in ("--set", f"{section}.{key}={setting(value)}")]
