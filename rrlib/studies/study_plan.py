"""A registered study as data, and what turns it into runs: its arms, sizes and seeds as ``rrlib sweep`` lines, the
step timing at its deepest size, its cost, and its seeds sized before the runs that need them.

A study (``Study``) is written down before its runs, beside the claims it answers: their records
(rrlib/claims/records.yaml) hold each claim in its paper's words, its metric, test, correction and margin; the study
holds the detectable gap it is sized for and why, its arms (a rule with its options
and learning rate, each under its own folder, ``<root>/<arm>/<size>/<variant>/seed<k>``), its sizes and where its
seeds' spread comes from. Either committed runs give the spread (``spread`` reads it, and the design's seeds are
fixed now), or a pilot does: the pilot's seeds run first, and the design's seeds follow from them by the rule the
study states (``rrlib.studies.sizing``) once every pilot run has finished; the plan never asks for more.

``rrlib study`` runs a study (rrlib.studies.registry): before its first run it times one training step of every arm
at its deepest size and records it with the peak memory (``time_study``, step_times.json under the study's root;
each arm in a process of its own, ``main``); ``rrlib study plan NAME`` prints the design with its arithmetic and
its cost in CPU-hours (``describe``) and the sweeps of its pilot, then of its design (``sweep_lines``); before each
step it writes the probe file of every finished run that kept its weights (rrlib.studies.claims_study.write_probes).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..runs.config import project_path
from ..runs.sweep import results_table

STEP_TIMES = "step_times.json"
TIMED_STEPS = 3  # after one untimed step (allocations, first-call costs); the median is recorded
MEMORY_LIMIT_GB = 24.0  # the machine a study runs on


@dataclass(frozen=True)
class Arm:
    """One rule as a study runs it: its folder name under the study's root, the variant, its rule options and its
    learning rate (None: the preset's)."""
    name: str
    variant: str
    options: tuple = ()  # (key, value) pairs of model.rule_options
    lr: float | None = None
    tested: bool = True  # False: read beside the tested arms, at the study's ``context_seeds`` only
    sizes: tuple | None = None  # where an arm stops short of the study's sizes (the study says why); None: all
    steps: int | None = None  # where an arm trains longer than the study (the study says why); None: the study's

    def sweep_args(self) -> list[str]:
        args = ["--variants", self.variant]
        if self.options:  # JSON without spaces: the registry splits a sweep line on whitespace (reach_plan)
            args += ["--set", "model.rule_options=" + json.dumps(dict(self.options), separators=(",", ":"))]
        if self.lr is not None:
            args += ["--lr", f"{self.lr:g}"]
        return args


@dataclass(frozen=True)
class Study:
    """A registered design (the module docstring); ``pilot_seeds`` empty means the committed runs give the spread."""
    name: str
    estimate: str  # how the study's module reads the per-seed values that size it (its ``design`` says)
    records: tuple  # the claims it answers, by their ids in rrlib/claims/records.yaml (their words, metric and test)
    target: float
    target_why: str
    sizes: tuple
    arms: tuple
    steps: int
    family: int = 1  # tests in the claim's Holm family: the design is sized at α/family
    one_sided: bool = False
    pilot_seeds: tuple = ()
    first_seed: int = 0  # the design's seeds start here (fresh seeds where earlier ones were read)
    extra: tuple = field(default_factory=tuple)  # settings every sweep of the study gets
    probe: bool = False  # keep weights and write probe files
    context_seeds: int = 2  # the first this many of the design's seeds, for arms not tested
    alpha: float = 0.05

    @property
    def root(self) -> str:
        return f"outputs/{self.name}"

    def arm_root(self, arm: Arm) -> str:
        return f"{self.root}/{arm.name}"

    def arm_sizes(self, arm: Arm) -> tuple:
        return arm.sizes or self.sizes

    def arm_steps(self, arm: Arm) -> int:
        return arm.steps or self.steps


ENDED = ("finished", "diverged")  # a run that ended either way is an outcome of its design, not a run to wait for


def finished(study: Study, arms=None, seeds=None) -> pd.DataFrame:
    """Every run of the study that has ended (``ENDED``; of ``arms`` and ``seeds`` where given): one row each, with
    its arm. A diverged run's losses are missing: each reading says what that means for it."""
    frames = []
    for arm in arms or study.arms:
        for size in study.arm_sizes(arm):
            if (project_path(study.arm_root(arm)) / size).is_dir():
                runs = results_table(study.arm_root(arm), size)
                frames.append(runs[(runs["variant"] == arm.variant) & runs["status"].isin(ENDED)].assign(arm=arm.name))
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["arm", "size", "seed"])
    return runs[runs["seed"].isin(list(seeds))] if seeds is not None else runs


def pilot_done(study: Study, arms=None) -> bool:
    runs = finished(study, arms, study.pilot_seeds)
    return len(runs) == sum(len(study.arm_sizes(arm)) for arm in arms or study.arms) * len(study.pilot_seeds)


def arm_seeds(study: Study, arm: Arm, seeds) -> list:
    return list(seeds) if arm.tested else list(seeds)[:study.context_seeds]


def sweep_lines(study: Study, arms, seeds) -> list[str]:
    """One line per (arm, size): "<name> <rrlib sweep arguments>" (rrlib.studies.registry makes each a call)."""
    extra = list(study.extra) + (["--set", "train.keep_weights=fp32"] if study.probe else [])
    return [" ".join([f"{study.name}_{arm.name}_{size}", "--size", size, *arm.sweep_args(),
                      "--seeds", ",".join(str(s) for s in arm_seeds(study, arm, seeds)), "--out", study.arm_root(arm),
                      "--steps", str(study.arm_steps(arm)), "--device", "cpu", *extra])
            for arm in arms for size in study.arm_sizes(arm)]


# ---------------------------------------------------------------- timing


def time_one(size: str, arm: Arm, steps: int = TIMED_STEPS) -> dict:
    """One training step of ``arm`` at ``size`` (its model, a batch of its shape, AdamW), timed in this process:
    the median CPU seconds of ``steps`` after one untimed, the threads they ran on, and the process's peak
    memory."""
    import torch

    from ..model import GPT
    from ..runs.presets import resolve_run

    run = resolve_run(size, arm.variant, 0, {"model": {"rule_options": dict(arm.options)}})
    torch.manual_seed(0)
    model = GPT(run.model)
    opt = torch.optim.AdamW(model.parameters(), lr=run.train.lr)
    shape = (run.train.batch_size, run.model.seq_len)
    x, y = (torch.randint(0, run.model.vocab_size, shape) for _ in range(2))
    seconds = []
    for _ in range(steps + 1):  # the process's CPU time: on a shared machine the wall clock counts the neighbours too
        start = time.process_time()
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        seconds.append(time.process_time() - start)
    return {"size": size, "arm": arm.name, "variant": arm.variant,
            "blocks_applied": run.model.n_layers * run.model.n_loops,
            "params": model.n_params(), "threads": torch.get_num_threads(), "step_seconds": statistics.median(seconds[1:]),
            "peak_memory_GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def time_study(study: Study, module: str) -> list[dict]:
    """``time_one`` for every arm at its deepest size, each in a fresh process (so that its peak memory is
    its own); written to step_times.json under the study's root."""
    rows = []
    for arm in study.arms:
        out = subprocess.run([sys.executable, "-m", module, "--study", study.name, "--time-arm", arm.name],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout))
    path = project_path(study.root) / STEP_TIMES
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def step_seconds(study: Study, arm: Arm, size: str) -> float:
    """Seconds per step of ``arm`` at ``size``: the timed step at the arm's deepest size, scaled by the blocks a step
    applies (L·N; a step's cost is nearly all in its blocks at these widths); NaN before ``time_study``."""
    from ..runs.presets import resolve_run

    path = project_path(study.root) / STEP_TIMES
    if not path.exists():
        return np.nan
    timed = next(row for row in json.loads(path.read_text()) if row["arm"] == arm.name)
    model = resolve_run(size, arm.variant, 0).model
    return timed["step_seconds"] * model.n_layers * model.n_loops / timed["blocks_applied"]


def cpu_hours(study: Study, arms, seeds) -> float:
    return sum(step_seconds(study, arm, size) * study.arm_steps(arm) * len(arm_seeds(study, arm, seeds))
               for arm in arms for size in study.arm_sizes(arm)) / 3600


# ---------------------------------------------------------------- the command line


def arm_words(arm: Arm) -> str:
    settings = [arm.variant] + [f"{k}={v}" for k, v in arm.options] + ([f"lr {arm.lr:g}"] if arm.lr else []) + (
        [f"only at {', '.join(arm.sizes)}"] if arm.sizes else []) + ([f"{arm.steps} steps"] if arm.steps else [])
    return f"{arm.name} ({' '.join(settings)})"


def describe(study: Study, design: dict, arms, seeds) -> str:
    sized = design.get("sizing", {})
    lines = [f"{study.name}: answers {', '.join(study.records)} (rrlib/claims/records.yaml: the claim in its paper's "
             "words, the metric, test, correction and margin)",
             f"  target (detectable gap): {study.target:g}; {study.target_why}",
             f"  spread: {design.get('spread', '')}"]
    if sized:
        lines.append(f"  arithmetic: SD {sized['sd']:.4g} from {sized['pilot_n']} values, upper 80 % bound "
                     f"{sized['sd_upper']:.4g}; at α {sized['alpha']:.4g}{' one-sided' if sized['one_sided'] else ''}"
                     f", 80 % power: {sized['seeds']} seeds detect {sized['detectable']:.4g}")
    lines.append("  arms: " + ", ".join(arm_words(a) for a in arms))
    lines.append(f"  sizes: {', '.join(study.sizes)}; {study.steps} steps; seeds {list(seeds) if seeds else 'after the pilot'}"
                 + (f" (arms not tested: the first {study.context_seeds})" if not all(a.tested for a in arms) else ""))
    if study.pilot_seeds:
        lines.append(f"  pilot: seeds {list(study.pilot_seeds)}, {cpu_hours(study, study.arms, study.pilot_seeds):.2f} "
                     "CPU-hours")
    if seeds:
        runs = sum(len(arm_seeds(study, a, seeds)) * len(study.arm_sizes(a)) for a in arms)
        lines.append(f"  cost: {cpu_hours(study, arms, seeds):.2f} CPU-hours for {runs} "
                     "runs (steps x the timed step, one thread; the pilot's runs counted again where reused)")
    timed = project_path(study.root) / STEP_TIMES
    if timed.exists():
        for row in json.loads(timed.read_text()):
            fits = "fits" if row["peak_memory_GB"] < MEMORY_LIMIT_GB else "DOES NOT FIT"
            steps = next((study.arm_steps(a) for a in study.arms if a.name == row["arm"]), study.steps)
            lines.append(f"  timed at {row['size']}: {row['arm']} {row['step_seconds']:.3f} s/step, "
                         f"{row['step_seconds'] * steps / 60:.1f} min/run, peak {row['peak_memory_GB']:.2f} GB "
                         f"({fits} {MEMORY_LIMIT_GB:g} GB)")
    return "\n".join(lines)


def main(studies: dict, module: str, argv=None) -> int:
    """What ``time_study`` starts for each arm, so that its peak memory is its own: ``python -m <module> --study NAME
    --time-arm ARM`` prints that arm's ``time_one`` as JSON."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description="Time one training step of a study's "
                                     "arm at its deepest size (rrlib study run starts it for every arm).")
    parser.add_argument("--study", required=True, choices=list(studies))
    parser.add_argument("--time-arm", required=True, help="the arm's name")
    args = parser.parse_args(argv)
    arm = next((a for a in studies[args.study].arms if a.name == args.time_arm), None)
    if arm is None:
        parser.error(f"the study {args.study} has no arm {args.time_arm!r}")
    print(json.dumps(time_one(studies[args.study].arm_sizes(arm)[-1], arm)))
    return 0
