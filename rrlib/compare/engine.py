"""One comparison from request to verdict: plan, estimate, train what is missing, size the design, test, time.

The design is paired by seed: a seed fixes the batch order and the evaluation windows for every variant, so the
per-seed difference on ``fixed_loss`` carries the signal (rrlib.report.verdict). With ``detect`` the seed count is
not given but sized: a pilot of ``pilot_seeds`` seeds measures the SD of every pair's differences, the seeds the
largest SD needs for the target detectable gap (80 % power, α, paired) are added, and the SD is measured again
over them, until every pair's detectable gap is at most the target or ``max_seeds`` is reached. Sizing on the
runs themselves (an internal pilot) is said in the verdict file, as is which of the two ended it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import types

import numpy as np
import pandas as pd

from ..report.verdict import ALPHA, DEFAULT_MARGIN, METRIC, compare_pairs, seeds_needed
from ..rules.external import rule_source
from ..runs.config import ConfigError, RunConfig
from ..runs.device import pick_device, resolve_precision
from ..runs.folders import claimed
from ..runs.pace import estimated_seconds
from ..runs.presets import resolve_run
from ..runs.runfiles import RunConflict, StateError
from ..runs.sweep import run_sweep

STANDARD = "standard"  # the rule whose step time per FLOP every other's is divided by


@dataclasses.dataclass
class Request:
    """What one ``rrlib compare`` call asks: its flags, parsed."""

    size: str
    variants: list[str]
    baselines: list[str]
    seeds: list[int] | None = None  # fixed seeds; None with detect
    detect: float | None = None  # the detectable gap the design must reach (nats)
    pilot_seeds: int = 4
    max_seeds: int = 16
    margin: float = DEFAULT_MARGIN
    alpha: float = ALPHA
    metric: str = METRIC
    overrides: dict = dataclasses.field(default_factory=dict)
    runs_root: str = "outputs/runs"
    shard: tuple[int, int] = (0, 1)
    timing: bool = True
    move_aside: bool = False
    allow_slow: bool | None = None

    @property
    def rules(self) -> list[str]:
        """Every rule the comparison trains: the variants, then the baselines, once each."""
        return list(dict.fromkeys([*self.variants, *self.baselines]))

    def check(self) -> None:
        """Every flag a user can get wrong, in one sentence each, before anything is trained."""
        if not self.variants or not self.baselines:
            raise ConfigError("compare needs --variants and --against, each one or more comma-separated rules")
        if set(self.variants) == set(self.baselines) and len(self.variants) == 1:
            raise ConfigError(f"--variants and --against are both {self.variants[0]!r}: a rule compared with "
                              f"itself has no verdict; give another baseline")
        if (self.seeds is None) == (self.detect is None):
            raise ConfigError("give either --seeds (how many, or a comma-separated list) or --detect EFFECT (the "
                              "detectable gap in nats the design must reach), not both or neither")
        if self.detect is not None and not (np.isfinite(self.detect) and self.detect > 0):
            raise ConfigError(f"--detect must be a positive number of nats, e.g. 0.01, got {self.detect!r}")
        if not 2 <= self.pilot_seeds <= self.max_seeds:
            raise ConfigError(f"--pilot-seeds must be at least 2 and at most --max-seeds ({self.max_seeds}), got "
                              f"{self.pilot_seeds}")
        if self.seeds is not None and len(self.seeds) < 2:
            raise ConfigError("a paired test needs at least 2 seeds; give --seeds 2 or more")
        if not (np.isfinite(self.margin) and self.margin > 0):
            raise ConfigError(f"--margin must be a positive number of nats, e.g. 0.01, got {self.margin!r}")
        if not 0 < self.alpha < 0.5:
            raise ConfigError(f"--alpha must lie between 0 and 0.5, e.g. 0.05, got {self.alpha!r}")


def resolved(req: Request, seeds) -> list[RunConfig]:
    """Every run of the comparison at these seeds, seed-major (a stopped call leaves whole seeds behind)."""
    return [resolve_run(req.size, v, s, req.overrides, req.runs_root) for s in seeds for v in req.rules]


def plan(runs: list[RunConfig], move_aside: bool = False) -> tuple[list[tuple[RunConfig, dict]], list[RunConfig]]:
    """(finished runs with their results, runs still to train). A folder holding another run is named in one
    sentence (the way out in it), unless ``move_aside``, when it is trained afresh."""
    done, todo = [], []
    for run in runs:
        try:
            settled, result = claimed(run)
        except (RunConflict, StateError) as err:
            if not move_aside:
                raise ConfigError(str(err)) from None
            settled, result = run, None  # the sweep moves the folder aside and trains it afresh
        if result is not None:
            done.append((settled, result))
        else:
            todo.append(settled)
    return done, todo


def describe(done, todo, log) -> None:
    """What the call will do, before it trains: reused runs, runs to train, and the time that takes here."""
    log(f"[compare] {len(done)} runs finished already (reused), {len(todo)} to train")
    if not todo:
        return
    by_rule = {}
    for run in todo:
        by_rule.setdefault(run.variant, []).append(run.seed)
    log("[compare] to train: " + "; ".join(f"{v} seeds {', '.join(map(str, s))}" for v, s in by_rule.items()))
    device = pick_device(todo[0].train.device)
    if device.type == "cpu":
        minutes = estimated_seconds(todo) / 60
        log(f"[compare] about {minutes:,.0f} min of training on this CPU (each model's step timed here, times its "
            f"steps; evaluations and a loaded machine add to it)")
    else:
        log(f"[compare] on {device}: no estimate is made before the first steps (the progress bar gives one)")


def train(req: Request, seeds, log) -> list[tuple[RunConfig, dict]] | None:
    """Train what is missing at these seeds (this shard's share); the finished runs, or None while other shards'
    runs are still missing."""
    done, todo = plan(resolved(req, seeds), req.move_aside)
    describe(done, todo, log)
    k, n = req.shard
    # the shard splits the runs still missing, not the whole grid: where one rule's runs are all finished, a split
    # of the grid would hand every missing run to the shards that hold the other rule's cells
    mine = todo[k::n]
    if n > 1 and todo:
        log(f"[compare] shard {k}/{n} trains {len(mine)} of the {len(todo)} missing runs")
    if mine:
        run_sweep(req.size, log=log, out_root=req.runs_root, overrides=req.overrides, move_aside=req.move_aside,
                  allow_slow=req.allow_slow, cells=[(run.variant, run.seed) for run in mine])
    done, todo = plan(resolved(req, seeds))
    if todo:
        log(f"[compare] {len(todo)} runs of the comparison are not finished (other shards'): run them, then this "
            f"command again without --shard for the verdict")
        return None
    return done


def results_frame(done: list[tuple[RunConfig, dict]]) -> pd.DataFrame:
    return pd.DataFrame([{**result, "run_dir": str(run.run_dir)} for run, result in done])


def sized_design(req: Request, log) -> tuple[pd.DataFrame | None, dict]:
    """Train the seeds the request needs: fixed, or sized for ``detect``; the results table and the design."""
    if req.detect is None:
        done = train(req, req.seeds, log)
        return (None if done is None else results_frame(done)), {"seeds": list(req.seeds), "sized": False}
    seeds = list(range(req.pilot_seeds))
    design = {"sized": True, "target": req.detect, "pilot_seeds": req.pilot_seeds, "max_seeds": req.max_seeds,
              "steps": []}
    while True:
        done = train(req, seeds, log)
        if done is None:
            return None, design
        table = results_frame(done)
        rows = compare_pairs(table, req.variants, req.baselines, req.metric, req.margin, req.alpha)
        needed = [seeds_needed(sd, req.detect, req.alpha, req.max_seeds) for sd in rows["sd"]]
        need = req.max_seeds + 1 if any(n is None for n in needed) else max(needed)
        design["steps"].append({"seeds": len(seeds), "largest_sd": float(rows["sd"].max()),
                                "largest_detectable": float(rows["detectable"].max()), "seeds_needed": need})
        log(f"[compare] at {len(seeds)} seeds the largest paired SD is {rows['sd'].max():.4f} and the largest "
            f"detectable gap {rows['detectable'].max():.4f} nats; the target {req.detect:g} needs "
            + (f"{need} seeds" if need <= req.max_seeds else f"more than --max-seeds {req.max_seeds}"))
        if need <= len(seeds):
            design.update(seeds=seeds, stopped="target reached")
            return table, design
        if len(seeds) >= req.max_seeds:
            design.update(seeds=seeds, stopped=f"--max-seeds {req.max_seeds} reached before the target")
            return table, design
        seeds = list(range(min(need, req.max_seeds)))


def step_times(req: Request) -> dict[str, float]:
    """Each rule's training step time over its FLOPs per token, divided by the standard residual's: measured in
    this process on one seed's models, in interleaved rounds of timed steps (rrlib.speed.timing)."""
    from ..speed.timing import bench_size

    rules = list(dict.fromkeys([*req.rules, STANDARD]))
    runs = [resolve_run(req.size, v, 0, req.overrides, req.runs_root) for v in rules]
    device = pick_device(runs[0].train.device)
    precision = resolve_precision(runs[0].train.precision, device)
    settings = types.SimpleNamespace(plain=False, compile_backend="inductor", warmup=3, repeats=5, steps=4)
    with contextlib.redirect_stdout(sys.stderr):  # its progress lines; the verdict table is the command's output
        rows = bench_size(runs, device, precision, settings, None, lambda rows: None)
    return {row["variant"]: row["step_per_flop_vs_standard"] for row in rows}


def verdict_table(req: Request, table: pd.DataFrame, design: dict, timing: dict | None) -> pd.DataFrame:
    """The pairs' statistics (rrlib.report.verdict) with each side's parameters, FLOPs and step time per FLOP."""
    seeds = design["seeds"]
    rows = compare_pairs(table, req.variants, req.baselines, req.metric, req.margin, req.alpha, seeds=seeds)
    means = table[table["seed"].isin(seeds)].groupby("variant")[["params", "flops_per_token"]].mean()
    for side in ("variant", "baseline"):
        rows[f"params_{side}"] = rows[side].map(means["params"]).round().astype("Int64")
        rows[f"flops_per_token_{side}"] = rows[side].map(means["flops_per_token"]).round().astype("Int64")
        rows[f"step_per_flop_vs_standard_{side}"] = rows[side].map(timing or {})
    return rows


def provenance(req: Request, table: pd.DataFrame, design: dict) -> dict:
    """What the verdict rests on: each run (its commit, fingerprint, minutes) and where each outside rule came from."""
    runs = table[table["seed"].isin(design["seeds"])]
    rules = {}
    for v in req.rules:
        origin, sha = rule_source(v)
        if origin is not None:
            rules[v] = {"origin": origin, "sha256": sha}
    return {"runs": [{k: r.get(k) for k in ("variant", "seed", "fingerprint", "git_commit", "minutes", "device",
                                            "status")} for r in runs.to_dict("records")],
            "training_minutes": float(runs["minutes"].sum()), "rules": rules}


def run(req: Request, out_dir, command: str, log=print) -> pd.DataFrame | None:
    """The whole comparison: check, train what is missing, size, test, time, write; the verdict rows (None while
    other shards' runs are missing)."""
    from . import files

    req.check()
    files.check_out(out_dir)
    resolved(req, req.seeds or range(req.pilot_seeds))  # every unknown size, rule or setting before any training
    table, design = sized_design(req, log)
    if table is None:
        return None
    timing = step_times(req) if req.timing else None
    rows = verdict_table(req, table, design, timing)
    written = files.write(out_dir, req, rows, table, design, provenance(req, table, design), command)
    log(files.printed(rows))
    log(f"[compare] wrote {', '.join(p.name for p in written)} in {out_dir}")
    return rows
