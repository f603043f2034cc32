"""One comparison from request to verdict: plan, estimate, train what is missing, size the design, test, time.

The design is paired by seed: a seed fixes the batch order and the evaluation windows for every variant, so the
per-seed difference on ``fixed_loss`` carries the signal (rrlib.stats.verdict). With ``detect`` the seed count is
not given but sized: a pilot of ``pilot_seeds`` seeds measures the SD of every pair's differences, the seeds the
largest SD needs for the target detectable gap are added (``verdict.design_seeds``: 80 % power at Holm's α over
the call's comparisons, from the SD's upper 80 % bound), and the SD is measured again over them, until every
pair's detectable gap is at most the target or ``max_seeds`` is reached. Sizing on the runs themselves (an
internal pilot) is said in the verdict file, as is which of the two ended it and the power the design reached. A
pair whose rule diverged, or whose runs did not differ at all, has no SD to size from: the design stops and says
so, never "target reached".

Where the runs live. Every run the call trains goes under its own runs root: ``--runs``, or ``<--out>/runs``. A
finished run of the project's own study (``outputs/runs``, the committed baselines) with the same fingerprint is
read from there and never written to: the checkout's committed results stay as they were.

Whole or absent. Every input is checked before the first file is written: the flags, every run's settings, the
output folder and its files (no link, nothing but regular files), and a one-step trial of each rule on a small
batch, which names a rule that fails and its error. The verdict's files are written together (rrlib.compare.files).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd

from ..parsing import MOST_SEEDS
from ..stats import detectable_gap
from ..stats.verdict import (ALPHA, DEFAULT_MARGIN, METRIC, POWER, compare_pairs, design_seeds, mark_diverged,
                              mark_identical, paired_power, sd_upper_bound)
from ..rules.external import GIVEN, rule_source
from ..runs.config import ConfigError, RunConfig, project_path
from ..runs.device import pick_device, resolve_precision
from ..runs.folders import claimed, finished_at
from ..runs.presets import resolve_run
from ..runs.folders.runfiles import RunConflict, StateError
from ..runs.sweep import run_sweep
from .estimate import describe, duration  # noqa: F401 - duration is read from here too
from .out_folder import design_done, out_lock

STANDARD = "standard"  # the rule whose step time per FLOP every other's is divided by
STUDY_ROOT = "outputs/runs"  # the project's committed runs: read for reuse, never written by compare


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
    runs_root: str = "runs"  # where this call trains; the command line makes it <--out>/runs unless --runs is given
    reuse_root: str | None = STUDY_ROOT  # finished runs read from here (never written); None: none
    shard: tuple[int, int] = (0, 1)
    timing: bool = True
    move_aside: bool = False
    allow_slow: bool | None = None

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Every (variant, baseline) the call tests, in order (a rule is never compared with itself)."""
        return [(v, b) for v in self.variants for b in self.baselines if v != b]

    @property
    def design(self) -> str:
        """What the shards of one design share, in words a second design's shard is told apart by: every field but
        the shard itself and how each call runs (timing, moving folders aside, a slow CPU allowed)."""
        fields = {k: v for k, v in dataclasses.asdict(self).items()
                  if k not in ("shard", "timing", "move_aside", "allow_slow")}
        return json.dumps(fields, sort_keys=True, default=str)

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
        for flag, names in (("--variants", self.variants), ("--against", self.baselines)):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ConfigError(f"{flag} names {', '.join(twice)} twice; name each rule once")
        mirrored = sorted({tuple(sorted(p)) for p in self.pairs if p[::-1] in self.pairs})
        if mirrored:
            a, b = mirrored[0]
            raise ConfigError(f"--variants and --against ask for {a} against {b} and {b} against {a}, one comparison "
                              f"twice (and Holm would count it twice); put each rule on one side only")
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
        for flag, count in (("--seeds", len(self.seeds or ())), ("--max-seeds", self.max_seeds)):
            if count > MOST_SEEDS:
                raise ConfigError(f"{flag} asks for {count:,} seeds, more than the {MOST_SEEDS:,} one comparison "
                                  f"may train; give at most {MOST_SEEDS:,} (or --detect, which sizes the design)")
        if self.seeds is not None and len(set(self.seeds)) < len(self.seeds):
            twice = sorted({s for s in self.seeds if self.seeds.count(s) > 1})
            raise ConfigError(f"--seeds names seed {', '.join(map(str, twice))} twice; a seed is one pair of runs, "
                              f"so give each once (e.g. --seeds 0,1)")
        if not (np.isfinite(self.margin) and self.margin > 0):
            raise ConfigError(f"--margin must be a positive number of nats, e.g. 0.01, got {self.margin!r}")
        if not 0 < self.alpha < 0.5:
            raise ConfigError(f"--alpha must lie between 0 and 0.5, e.g. 0.05, got {self.alpha!r}")


def resolved(req: Request, seeds) -> list[RunConfig]:
    """Every run of the comparison at these seeds, seed-major (a stopped call leaves whole seeds behind)."""
    return [resolve_run(req.size, v, s, req.overrides, req.runs_root) for s in seeds for v in req.rules]


def runs_flag(advice: str) -> str:
    """A run folder's advice as compare gives it: the runs root is compare's --runs (train's and sweep's --out)."""
    return advice.replace("--out", "--runs")


def plan(runs: list[RunConfig], move_aside: bool = False, reuse_root: str | None = None
         ) -> tuple[list[tuple[RunConfig, dict]], list[RunConfig]]:
    """(finished runs with their results, runs still to train). A run not finished under its own root is taken
    from ``reuse_root`` where that holds it finished (read only). A folder holding another run is named in one
    sentence (the way out in it), unless ``move_aside``, when it is trained afresh."""
    done, todo = [], []
    for run in runs:
        try:
            settled, result = claimed(run)
        except (RunConflict, StateError) as err:
            if not move_aside:
                raise ConfigError(runs_flag(str(err))) from None
            settled, result = run, None  # the sweep moves the folder aside and trains it afresh
        if result is None and reuse_root is not None:
            settled, result = finished_at(run, reuse_root) or (settled, None)
        if result is not None:
            done.append((settled, result))
        else:
            todo.append(settled)
    return done, todo


def train(req: Request, seeds, log) -> list[tuple[RunConfig, dict]] | None:
    """Train what is missing at these seeds (this shard's share); the finished runs, or None while other shards'
    runs are still missing."""
    done, todo = plan(resolved(req, seeds), req.move_aside, req.reuse_root)
    describe(done, todo, log)
    k, n = req.shard
    # Each run belongs to one shard for good, by its seed's place and its rule's: a shard run again after a kill
    # trains the runs it had left, whichever the others finished meanwhile. The rule's place shifts each rule's
    # seeds by one, so where one rule's runs are all finished already the missing ones still split evenly (a split
    # of the seed-major grid would hand them all to the shards holding the other rule's cells).
    place = {rule: i for i, rule in enumerate(req.rules)}
    order = {seed: j for j, seed in enumerate(seeds)}
    mine = [run for run in todo if (order[run.seed] + place[run.variant]) % n == k]
    if n > 1 and todo:
        log(f"[compare] shard {k}/{n} trains {len(mine)} of the {len(todo)} missing runs")
    if mine:
        try:
            run_sweep(req.size, log=log, out_root=req.runs_root, overrides=req.overrides, move_aside=req.move_aside,
                      allow_slow=req.allow_slow, cells=[(run.variant, run.seed) for run in mine])
        except ConfigError as err:  # the sweep's advice names its runs root --out, which compare calls --runs
            raise ConfigError(runs_flag(str(err))) from None
    done, todo = plan(resolved(req, seeds), reuse_root=req.reuse_root)
    if todo:
        if n > 1:
            log(f"[compare] {len(todo)} runs of the comparison are not finished (other shards'): run them, then "
                f"this command again without --shard for the verdict")
        else:
            log(f"[compare] {len(todo)} runs of the comparison are not finished: another process is training them "
                f"under --runs {req.runs_root}; run this command again once it has finished, for the verdict")
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
    comparisons = len(req.pairs)
    design = {"sized": True, "target": req.detect, "pilot_seeds": req.pilot_seeds, "max_seeds": req.max_seeds,
              "power": POWER, "alpha_sized": req.alpha / comparisons, "sd_bound": "upper 80 % (chi-square)",
              "steps": []}
    while True:
        done = train(req, seeds, log)
        if done is None:
            return None, design
        table = results_frame(done)
        rows = mark_diverged(compare_pairs(table, req.variants, req.baselines, req.metric, req.margin, req.alpha),
                             table, seeds, req.metric)
        unsized = unsizable(rows)
        if unsized:
            design["steps"].append({"seeds": len(seeds), "largest_sd": None, "largest_detectable": None,
                                    "seeds_needed": None})
            log(f"[compare] at {len(seeds)} seeds the design cannot be sized: {unsized}")
            design.update(seeds=seeds, stopped=f"not sized: {unsized}", power_reached=None)
            return table, design
        sd = float(rows["sd"].max())
        need = design_seeds(sd, len(seeds), req.detect, req.alpha, comparisons, req.max_seeds)
        design["steps"].append({"seeds": len(seeds), "largest_sd": sd,
                                "largest_detectable": float(rows["detectable"].max()), "seeds_needed": need})
        power = paired_power(req.detect, sd, len(seeds), req.alpha / comparisons)
        if need is not None and need <= len(seeds):
            log(f"[compare] at {len(seeds)} seeds the largest paired SD is {sd:.4f}: the target {req.detect:g} "
                f"needs {need} seeds, reached (power {power:.0%} at the SD met)")
            design.update(seeds=seeds, stopped="target reached", power_reached=power)
            return table, design
        at_most = detects_at(sd, len(seeds), req.max_seeds, req.alpha, comparisons)
        if len(seeds) >= req.max_seeds:
            log(f"[compare] at {len(seeds)} seeds (--max-seeds) the largest paired SD is {sd:.4f}: the design "
                f"detects {at_most:.4f} nats, not the target {req.detect:g} (power {power:.0%} for it)")
            design.update(seeds=seeds, stopped=f"--max-seeds {req.max_seeds} reached before the target",
                          power_reached=power, detects_at_max=at_most)
            return table, design
        if need is None:
            log(f"[compare] at {len(seeds)} seeds the largest paired SD is {sd:.4f}: the target {req.detect:g} "
                f"needs more than --max-seeds {req.max_seeds}, which would detect {at_most:.4f} nats; training up "
                f"to {req.max_seeds} seeds (raise --max-seeds or the target to reach it)")
        else:
            log(f"[compare] at {len(seeds)} seeds the largest paired SD is {sd:.4f}: the target {req.detect:g} "
                f"needs {need} seeds")
        seeds = list(range(min(need or req.max_seeds, req.max_seeds)))


def unsizable(rows: pd.DataFrame) -> str | None:
    """Why a design cannot be sized from these pairs (a diverged rule, an SD that is not a positive number), in
    words; None when it can."""
    diverged = rows[rows["verdict"] == "diverged"]
    if len(diverged):
        r = diverged.iloc[0]
        rule = r["variant"] if r["diverged_variant"] else r["baseline"]
        return f"{rule} diverged, so its pairs have no SD to size from"
    flat = rows[~(rows["sd"].astype(float) > 0)]
    if len(flat):
        r = flat.iloc[0]
        return (f"{r['variant']} and {r['baseline']} gave paired differences with no spread (SD {r['sd']:.3g}), "
                f"so no SD to size from")
    return None


def detects_at(sd: float, pilot_n: int, seeds: int, alpha: float, comparisons: int) -> float:
    """The gap a design of ``seeds`` seeds detects at the SD's upper bound and Holm's α, the way design_seeds sizes
    it: what --max-seeds would buy."""
    return detectable_gap(sd_upper_bound(sd, pilot_n), seeds, alpha / comparisons)


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
    """The pairs' statistics (rrlib.stats.verdict) with each side's parameters, FLOPs and step time per FLOP."""
    seeds = design["seeds"]
    rows = compare_pairs(table, req.variants, req.baselines, req.metric, req.margin, req.alpha, seeds=seeds)
    rows = mark_diverged(mark_identical(rows), table, seeds, req.metric)
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
            rules[v] = {"origin": origin, "sha256": sha, **({"given": GIVEN[v]} if v in GIVEN else {})}
    return {"runs": [{k: r.get(k) for k in ("variant", "seed", "fingerprint", "git_commit", "minutes", "device",
                                            "status")} for r in runs.to_dict("records")],
            "training_minutes": float(runs["minutes"].sum()), "rules": rules}


def trial(req: Request) -> None:
    """One training step of each rule's model on a batch of one short sequence, then one forward pass as evaluation
    runs it (eval mode, no gradients), before anything is written: a rule that fails in either (a wrong shape, an
    error of its own, one raised only under ``no_grad``) or whose evaluation is not finite (no run of it could be
    scored) is named, with its error, in one sentence. So is a rule that changes torch's settings or functions, or
    rrlib's, as its model is built or run (rrlib.rules.import_guard, which refuses the same at import; so the
    trial comes before anything else of the call builds a model): the runs trained beside it in this process would
    change under their clean fingerprints."""
    import torch

    from ..model import GPT
    from ..rules.import_guard import refusal, snapshot

    clean = snapshot()
    for rule in req.rules:
        cfg = resolve_run(req.size, rule, 0, req.overrides, req.runs_root).model
        tokens = min(8, cfg.seq_len)
        trial_of = f"a one-step trial (one sequence of {tokens} tokens at size {req.size})"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            stage = "fails"
            try:
                x = torch.randint(0, cfg.vocab_size, (1, tokens + 1))
                model = GPT(cfg)
                _, loss = model(x[:, :-1], x[:, 1:])
                loss.backward()
                stage = "fails in evaluation (eval mode, no gradients) after"
                model.eval()
                with torch.no_grad():
                    logits, _ = model(x[:, :-1])
            except Exception as err:  # a user's rule: whatever it raises is said in one sentence
                raise ConfigError(f"the rule {rule} {stage} {trial_of}: {type(err).__name__}: "
                                  f"{' '.join(str(err).split())}") from None
        if said := refusal(clean, rule, "as its model is built or run", "the runs beside it"):
            raise ConfigError(said)
        if not torch.isfinite(logits).all():
            raise ConfigError(f"the rule {rule} gives non-finite logits in evaluation (eval mode, no gradients) after "
                              f"{trial_of}, so no run of it could be scored; make its eval-mode path finite")


def checked_inputs(req: Request, runs: list[RunConfig]) -> None:
    """Before the plan is said and ``--out`` is made: the run folders (one holding another run is named), the places
    the runs to train write (``--runs``, the token cache) and their data (here or fetched, long enough for a window),
    each one sentence."""
    from ..runs.folders.output_paths import checked_run_outputs
    from ..runs.data.rundata import checked_run_data

    _, todo = plan(runs, req.move_aside, req.reuse_root)
    try:
        for run in todo:
            checked_run_outputs(run.run_dir, project_path(run.data.cache_dir))
    except ConfigError as err:  # its advice names the runs root --out, which compare calls --runs
        raise ConfigError(runs_flag(str(err))) from None
    for run in {(repr(run.data), run.model.seq_len): run for run in todo}.values():
        checked_run_data(run)


def run(req: Request, out_dir, command: str, log=print) -> pd.DataFrame | None:
    """The whole comparison: check, train what is missing, size, test, time, write; the verdict rows (None while
    other runs are missing)."""
    from . import files

    req.check()
    files.check_out(out_dir)
    trial(req)  # first: resolving a run may build its rule's model (see trial)
    first = resolved(req, req.seeds or range(req.pilot_seeds))  # every unknown size, rule or setting
    checked_inputs(req, first)
    sharded = req.shard[1] > 1
    with out_lock(out_dir, shared=sharded, design=req.design):
        table, design = sized_design(req, log)
        if table is None:
            return None
        if not sharded:
            return write_verdict(req, out_dir, table, design, command, log)
    # A shard that finds every run finished writes the verdict too, holding --out alone: it waits for a shard still
    # between its own last check and its exit (refused, both could leave the verdict unwritten); where two shards
    # both find every run finished, the second writes the same verdict again.
    with out_lock(out_dir, wait=True):
        return write_verdict(req, out_dir, table, design, command, log)


def write_verdict(req: Request, out_dir: Path, table: pd.DataFrame, design: dict, command: str, log) -> pd.DataFrame:
    """Test, time and write the finished comparison into ``out_dir``; its verdict rows."""
    from . import files

    timing = step_times(req) if req.timing else None
    rows = verdict_table(req, table, design, timing)
    written = files.write(out_dir, req, rows, table, design, provenance(req, table, design), command)
    design_done(out_dir)  # the sharded design, if any, is whole: the folder is free for another
    log(files.printed(rows))
    log(f"[compare] wrote {', '.join(p.name for p in written)} in {out_dir}")
    return rows
