"""The looped-transformer claims a CPU can reach, registered before their runs: the best learning rate's dependence on
the number of unique layers L, and the residual stream's norm over the loops under 1/N and 1/√N.

Both train the powered looped design's recipe (rrlib.studies.looped_study.POWER: d 64, context 128, batch 16, 1,000
steps, 100 warmup, byte-level TinyStories sample) with the ``scaled`` rules, whose ε = λ/(N^p·√(L/12)) carries
the paper's factored scaling (rrlib.rules.per_sublayer.Scaled says how λ relates to the abstract's).

1. The L sweep (``looped_study.UNIQUE_LAYERS``; ``rrlib study run unique_layers``; ``rrlib study plan
   unique_layers`` prints its sizing).

   - Claim (arXiv 2606.18524, abstract; family-abstracts.txt of the papers' texts): "A key consequence is that the
     optimal learning rate depends only on the number of unique layers $L$, not on the loop count $N$".
   - Runs: ``scaled`` (1/N) at N = 2 loops and L = 1, 2, 4 unique blocks (``params/looped_l.yaml``, sizes
     ``looped_l<L>``), five lattice rates per cell, 0.001·2^(k/2) for k = 5 … 9 (0.0057 to 0.023), centred on
     where the powered design put the optimum at L = 2 (0.010 at N = 1 and 2), with looped_study's extension rule
     (two more points beyond an edge that holds the optimum of two seeds or of the seed mean).
   - Metric and test: looped_study's estimator with L in place of N: per seed the parabola optimum (primary; the
     grid optimum beside it) and the least-squares slope of log2(optimum) on log2(L); over seeds the mean slope
     with its t-interval, two-sided one-sample t-test against 0, α 0.05, no correction (one test).
   - Target: the paper's own effect. Its per-group learning rate for the looped stack is η·m_L^(−1/2), an optimum
     that falls as L^(−1/2): −0.5 per doubling of L.
   - Seeds (``unique_layers_sizing``): the powered design's per-seed slopes of ``scaled`` over N = 1 … 8 (8 seeds;
     SD 0.176 parabola from 7 seeds, 0.224 grid from 8) are the spread; a slope over L = 1, 2, 4 spans two doublings
     instead of three, so its SD is √(5/2) that of a slope over four equally spaced points at the same noise per
     optimum (Σ(x − x̄)² is 2 against 5). At the upper 80 % bound (0.388 parabola, 0.478 grid) 80 % power at
     α 0.05 for 0.5 needs 7 seeds on the parabola optimum, the primary estimator (10 on the grid optimum beside it,
     which at 7 seeds detects about 0.6): 7 seeds, 105 runs before any extension. (The powered design trained the
     most either estimator needed; here that would take the study past the issue's budget of about 15 CPU-hours.)
   - Cost: the powered design's median minutes at the same compute per step (L·N blocks applied: L = 1 as its
     N = 1 model, 0.67 min; L = 2 as N = 2, 1.22; L = 4 as N = 4, 2.27): 4.2 minutes per rate and seed, 2.4 CPU-hours
     for the 7 seeds (``unique_layers_sizing`` prints them from the runs).

2. The loop norms (``LOOP_NORMS``, a study_plan ``Study``; ``rrlib study run loop_norms``: its pilot, then its design).

   - Claim: paraphrase of the same abstract: "weight sharing makes residual updates correlated across iterations,
     requiring the stronger scaling $\\varepsilon = 1/N$": under 1/√N the residual stream grows with N, under 1/N it
     does not.
   - Runs: ``scaled`` and ``scaled_loops`` at N = 1, 2, 4, 8 (L = 2, ``params/looped.yaml``) at lr 0.008, the lattice
     rate nearest both rules' optima at every N in the powered design (whose runs at that rate these repeat, with
     their weights kept; keep_weights changes no number), probed initial and trained (claims_study.write_probes).
   - Metric: per run, the stream's RMS after the last loop (``probes.loop_norms``, the head's input, averaged over
     8 held-out windows); per seed and rule, the least-squares slope of its log2 on log2(N): +0.5 per doubling if
     the N updates add up fully correlated under 1/√N, 0 under 1/N. Primary on the trained models, the initial
     ones beside them. The RMS after each loop of the N = 8 models is recorded too (the curve over loops).
   - Tests, Holm over the two: 1/√N grows (one-sample t-test of ``scaled_loops``' slopes against 0, two-sided);
     1/N does not (TOST of ``scaled``'s slopes at ±0.25, half the growth 1/√N would show).
   - Seeds: a pilot of 3 seeds; the design's seeds detect 0.5 for the first test at α 0.025 and the margin for the
     second (sized as the two-sided test at 2 × 0.025), from the pilot's SD at its upper 80 % bound.
"""
from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd

from ..runs.presets import resolve_run
from . import depth_reach_study, looped_study, probes, reach_control_study, sizing
from .claims_study import read_probes
from .study_plan import Arm, Study, main as study_main, pilot_done

MODULE = "rrlib.studies.looped_reach_study"

UNIQUE_LAYERS = looped_study.UNIQUE_LAYERS
UNIQUE_LAYERS_TARGET = 0.5  # per doubling of L: the paper's per-group rate η·m_L^(−1/2)


def slope_sd_factor(old=looped_study.LOOPS, new=UNIQUE_LAYERS.counts) -> float:
    """How much a least-squares slope's SD grows from the ``old`` points to the ``new`` (both in log2), at the same
    noise per point: √(Σ(x − x̄)² old / Σ(x − x̄)² new)."""
    ss = lambda counts: float(np.var(np.log2(counts)) * len(counts))
    return math.sqrt(ss(old) / ss(new))


def unique_layers_sizing() -> pd.DataFrame:
    """The L sweep's seeds from the powered design's per-seed slopes of ``scaled`` (the module docstring), one row
    per estimator, and the cost at the powered design's median minutes per run at the same compute per step."""
    runs = looped_study.study_runs(looped_study.POWER.out_root)
    _, own = looped_study.seeds_own_grid(runs, looped_study.POWER.seeds, looped_study.POWER)
    slopes = looped_study.seed_slopes(looped_study.seed_optima(own))
    slopes = slopes[slopes["variant"] == "scaled"]
    minutes = runs[runs["variant"] == "scaled"].groupby("loops")["minutes"].median()
    # the same blocks applied per step: L unique blocks looped twice is the powered design's L = 2 model at N = L
    per_seed = sum(minutes[n] for n in UNIQUE_LAYERS.counts) * UNIQUE_LAYERS.points
    rows = []
    for estimator in ("parabola", "grid"):
        sized = sizing.size(slopes[estimator].dropna() * slope_sd_factor(), UNIQUE_LAYERS_TARGET)
        rows.append({"estimator": estimator, **sized, "minutes_per_seed": per_seed,
                     "cpu_hours": per_seed * sized["seeds"] / 60})
    return pd.DataFrame(rows)


LOOP_NORM_LR = 0.008
LOOP_NORM_MARGIN = 0.25  # per doubling of N: half the +0.5 that fully correlated updates give under 1/√N
# The loop-norm design's seeds at most (fixed with the design, before its pilot): 16 seeds are 128 runs, about 5.6
# CPU-hours at the timed steps; the 45 a pilot SD of 0.27 asks of the TOST would take about 16, the whole budget the
# issue gives every reach study together. Where the pilot asks for more, the design says what 16 detect instead.
LOOP_NORM_MOST_SEEDS = 16
LOOP_NORMS = Study(  # answers looped-stream-norm (rrlib/claims/records.yaml: its words, metric, tests and margin)
    name="loop_norms", estimate="loop slopes", records=("looped-stream-norm",), target=0.5,
    target_why="the growth fully correlated updates give under 1/√N: √N, +0.5 log2 per doubling",
    sizes=("looped1", "looped2", "looped4", "looped8"),
    arms=(Arm("scaled", "scaled", lr=LOOP_NORM_LR), Arm("scaled_loops", "scaled_loops", lr=LOOP_NORM_LR)),
    steps=looped_study.POWER.steps, family=2, pilot_seeds=(0, 1, 2), extra=looped_study.POWER.extra, probe=True)
STUDIES = {LOOP_NORMS.name: LOOP_NORMS}
# The L sweep is a design of looped_study (a lattice of rates at each L), not a Study: page 07 lists its runs and its
# claim after the reach studies', under the design's name.
L_SWEEP = looped_study.UNIQUE_LAYERS
# Every study the CPU reaches by itself, in page 07's order: the depth studies, the loop norms, then the studies that
# say what setting the depth studies' verdicts hold in (and the AttnRes outputs' confirmatory design).
REACH = {**depth_reach_study.STUDIES, **STUDIES, **reach_control_study.STUDIES}


def claims_answered() -> dict[str, tuple]:
    """Each reach study's claims, by their record ids, and the L sweep's after them."""
    return {name: tuple(study.records) for name, study in REACH.items()} | {L_SWEEP.name: L_SWEEP.records}


def reach_design(name: str) -> dict:
    """The design of reach study ``name``, by the module that sizes it."""
    if name in STUDIES:
        return design(REACH[name])
    return (reach_control_study if name in reach_control_study.STUDIES else depth_reach_study).design(REACH[name])


def stream_slopes(study: Study, seeds, state: str = "trained") -> pd.DataFrame:
    """Per seed (rows) and rule (columns): the slope of log2(stream RMS after the last loop) on log2(N), NaN where
    the seed lacks a probe at some N."""
    rows = []
    for arm in study.arms:
        for size in study.sizes:
            model = resolve_run(size, arm.variant, 0).model
            scales = read_probes(study.arm_root(arm), size, [arm.variant], seeds)
            for seed, part in scales[scales["state"] == state].groupby("seed"):
                rms = probes.loop_norms(part, model.n_layers)["stream_rms"].iloc[-1]
                rows.append({"rule": arm.name, "seed": seed, "loops": model.n_loops, "log2_rms": math.log2(rms)})
    if not rows:
        return pd.DataFrame(columns=[arm.name for arm in study.arms])
    whole = lambda part: len(part) == len(study.sizes)  # a seed that lacks an N (a diverged run) has no slope
    return pd.DataFrame(rows).groupby(["seed", "rule"]).apply(
        lambda part: np.polyfit(np.log2(part["loops"]), part["log2_rms"], 1)[0] if whole(part) else np.nan
    ).unstack("rule")


def design(study: Study) -> dict:
    """The loop-norm design from its pilot (None seeds until every pilot run has finished and been probed)."""
    # a seed with a diverged run has no probe there: it has no slope (sizing drops it)
    slopes = stream_slopes(study, study.pilot_seeds) if pilot_done(study) else pd.DataFrame()
    if slopes.notna().all(axis=1).sum() < 2:
        return {"arms": study.arms, "seeds": None, "spread": "the pilot, once it has finished and been probed",
                "sizing": {}}
    grows = sizing.size(slopes["scaled_loops"], study.target, study.alpha, study.family, least=len(study.pilot_seeds))
    flat = sizing.size(slopes["scaled"], LOOP_NORM_MARGIN, study.alpha, study.family, one_sided=True,
                       least=len(study.pilot_seeds))
    sized = max((grows, flat), key=lambda s: s["seeds"] or 10**6)
    n = min(sized["seeds"] or LOOP_NORM_MOST_SEEDS, LOOP_NORM_MOST_SEEDS)
    spread = (f"the pilot's trained slopes; 1/√N's growth needs {grows['seeds']} seeds, 1/N's TOST "
              f"{flat['seeds']}: the design runs the larger")
    if n < (sized["seeds"] or 10**6):
        spread += (f", capped at {n} seeds (LOOP_NORM_MOST_SEEDS, the budget), which detect "
                   f"{sizing.detects(sized, n):.3g} there against the {sized['target']:g} it asks")
    return {"arms": study.arms, "seeds": tuple(range(n)), "sizing": sized, "spread": spread}


def main(argv=None) -> int:
    return study_main(STUDIES, MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
