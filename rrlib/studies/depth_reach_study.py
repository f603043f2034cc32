"""The depth claims a CPU can reach, registered before their runs: deep Highway and ReZero as their papers build them,
ReZero's speed, LayerScale over depth, and confirmatory runs of the AttnRes and MGR mechanism claims.

Every study trains the depth ablation's recipe (d 64, 4 heads, context 64, byte-level TinyStories sample, batch 16,
300 steps at lr 2e-3 with 30 warmup steps; ``params/reach.yaml``, whose ``reach<L>`` has L blocks; the mechanism runs
use ``params/depth.yaml`` itself, whose 3 seeds they add to). Each study is one ``Study`` (rrlib.studies.study_plan)
which answers the records it names (rrlib/claims/records.yaml: the registration, each claim in its paper's words
with its metric, test and margin); ``design`` sizes its seeds (rrlib.studies.sizing: the spread at its upper 80 %
bound, 80 % power, α over its Holm family). Run one with ``rrlib study run NAME`` (its pilot, then its design).

The trained-or-not threshold (Highway, ReZero depth). A model that has learned only how often each byte occurs sits at
the training tokens' unigram entropy (3.06 nats on the training part of this sample; every convex run of the depth
ablation from 8 blocks on stalled there, at a held-out loss of 3.08) and one that has learned nothing at ln 257 = 5.55
nats, the loss of the initial model. A run *trains* when its fixed held-out loss falls below the unigram entropy by
0.05 nats (the looped study's stall rule): below its initial loss by 2.5 nats or more. The margin is that distance, not
a fraction of a nat, because falling to the unigram level is what a model that cannot use its depth still does.

Choices where the papers are not this harness:

- Highway: the convex gate of Srivastava et al. (arXiv 1505.00387), h' = (1 − g)·h + g·f(h), with its transform
  gate's bias at −3, the deep end of the −1 to −3 the paper suggests for carry behaviour at init (σ(−3) = 0.047
  of each update goes in); the gate's weights keep the paper's-code N(0, 0.02). The paper's own networks are fully
  connected and convolutional, without attention; here each sublayer of the transformer is one highway layer.
  The same depth without that bias (the ``neutral`` arm, g = 0.5 at init) runs at 100 blocks only. Its gate halves
  the gradient at every sublayer, so about a hundred sublayers below the top the gradients leave float32's normal
  range (2^−126) and run through the CPU's subnormal arithmetic: one step at 300 blocks took 31.8 CPU-seconds against the
  carry arm's 4.3 (7.4x; 159 minutes a run, 5.3 CPU-hours for two seeds at that depth alone), at 100 blocks 5.9
  against 1.3. From 8 to 24 blocks the depth ablation already shows it stalling at the unigram level
  (outputs/runs/depth<L>/highway_convex). Every model fits the machine's 24 GiB: the largest, 300 blocks, peaks at
  3.2 GB (step_times.json).
- ReZero: without the sublayers' pre-norm (``rule_options: {pre_norm: false}``), as arXiv 2003.04887 runs it; the
  final RMSNorm before the tied head stays. What the CPU cannot match: the paper's Transformers train on enwik8
  (character level) at widths and for step counts far beyond a CPU's; here d 64, 300 steps, byte-level TinyStories.
  "Converges faster" is read as the paper's table reads it, iterations to a fixed loss.
- LayerScale: CaiT's depth rule for λ's start (0.1 to 18 blocks, 1e-5 to 24, 1e-6 beyond; rrlib.rules.per_sublayer).
  CaiT states its gain in ImageNet top-1, which does not carry over to a loss: the target below is this harness's.
"""
from __future__ import annotations

import functools
import math
import sys

import numpy as np
import pandas as pd

from ..runs.config import project_path, run_folder
from ..runs.data import unigram_entropy
from ..runs.presets import resolve_run
from ..runs.data.rundata import load_run_data
from ..runs.folders.runfiles import read_log, read_result
from ..runs.sweep import results_table
from . import probes, sizing
from .claims_study import read_probes
from .study_plan import Arm, Study, finished, main as study_main, pilot_done

STALL_NATS = 0.05
TRAINED = "trained"  # the estimate of the two depth-trainability studies
MODULE = "rrlib.studies.depth_reach_study"

TRAINED_WHY = ("0.10 nats below the threshold: a tenth of the 1 nat a trained 24-block model sits below the unigram "
               "level, and far above the seed spread of a trained run")

# Each study answers the records it names (rrlib/claims/records.yaml: the claim in the paper's words, its metric,
# test, correction and margin); what it runs and how its seeds are sized is here.
HIGHWAY = Study(
    name="highway_depth", estimate=TRAINED, records=("highway-hundreds-of-layers",), target=0.10,
    target_why=TRAINED_WHY, sizes=("reach100", "reach200", "reach300"),
    arms=(Arm("carry", "highway_convex", (("carry_bias", -3.0),)),
          Arm("neutral", "highway_convex", tested=False, sizes=("reach100",)), Arm("standard", "standard", tested=False)),
    steps=300, one_sided=True)

REZERO_DEPTH = Study(
    name="rezero_depth", estimate=TRAINED, records=("rezero-120-layers",), target=0.10, target_why=TRAINED_WHY,
    sizes=("reach24", "reach64", "reach120"),
    arms=(Arm("rezero", "rezero", (("pre_norm", False),)), Arm("standard", "standard", tested=False)), steps=300,
    one_sided=True)

SPEED_LRS = (0.001, 0.002, 0.004, 0.008)  # a factor 2 apart around the recipe's 2e-3
SPEED_EVAL_EVERY = 10  # evaluations of the fixed held-out set, for the step at which a run reaches the target
SPEED_SLACK = 0.05  # nats above the worse pilot run's final loss: a level every design run reaches
REZERO_SPEED = Study(
    name="rezero_speed", estimate="speed", records=("rezero-converges-faster-as-run",), target=round(math.log2(1.56), 3),
    target_why="the paper's own effect: 56 % faster is 1/1.56 of the steps, log2 1.56 = 0.64", sizes=("reach12",),
    arms=tuple(Arm(f"{name}_lr{lr:g}", variant, options, lr) for name, variant, options in
               (("rezero", "rezero", (("pre_norm", False),)), ("standard", "standard", ())) for lr in SPEED_LRS),
    steps=300, pilot_seeds=(0, 1, 2, 3), extra=("--eval-every", str(SPEED_EVAL_EVERY)))

LAYERSCALE = Study(
    name="layerscale_depth", estimate="trend", records=("layerscale-deeper",), target=0.01,
    target_why="the paper states its gain in ImageNet top-1, which gives no loss: 0.01 nats per doubling of depth, "
               "a 1 % change of perplexity, the smallest trend this harness treats as real",
    sizes=("reach4", "reach12", "reach24", "reach36"), arms=(Arm("layerscale", "layerscale"), Arm("standard", "standard")),
    steps=300, pilot_seeds=(0, 1, 2, 3))

MECHANISM_SIZES = ("depth8", "depth16", "depth24")
COMMITTED_MECHANISM_SEEDS = (0, 1, 2)  # outputs/claims/depth<L>: read before these claims were registered again
MECHANISMS = Study(
    name="mechanisms", estimate="growth", records=("attnres-growth-confirm", "mgr-activation-scales-confirm"),
    target=1.0, target_why="the papers give no size; 1 log2 unit (the stream growing 2x less from the first block to "
                           "the last) is the least that 'counters' or 'stabilises' can mean",
    sizes=MECHANISM_SIZES, arms=(Arm("standard", "standard"), Arm("attnres", "attnres"), Arm("mgr", "mgr")), steps=300,
    family=3, first_seed=len(COMMITTED_MECHANISM_SEEDS), probe=True)

STUDIES = {s.name: s for s in (REZERO_SPEED, LAYERSCALE, REZERO_DEPTH, HIGHWAY, MECHANISMS)}


# ---------------------------------------------------------------- the spread each design is sized from


@functools.cache  # the page reads it for every depth study and row: the sample is tokenised once
def trained_threshold() -> float:
    """The loss a run must end below to count as trained: the training tokens' unigram entropy less STALL_NATS (the
    module docstring). Every preset these studies train reads the same sample, so one preset's tokens give it."""
    return unigram_entropy(load_run_data(resolve_run("depth24", "standard", 0)).train) - STALL_NATS


def trained_spread() -> tuple[np.ndarray, str]:
    """The committed depth ablation's most variable trained cell (variant and depth of 16 blocks or more whose mean
    loss is below the threshold): its final losses over its seeds."""
    threshold = trained_threshold()
    cells = []
    for size in ("depth16", "depth20", "depth24"):
        runs = results_table("outputs/runs", size)
        for variant, cell in runs[runs["status"] == "finished"].groupby("variant"):
            if cell["fixed_loss"].mean() < threshold:
                cells.append((cell["fixed_loss"].std(ddof=1), size, variant, cell["fixed_loss"].to_numpy()))
    sd, size, variant, values = max(cells, key=lambda c: c[0])
    return values, f"committed outputs/runs/{size}/{variant}, the most variable trained cell of 16-24 blocks"


def mechanism_differences() -> dict[tuple[str, str], np.ndarray]:
    """(rule, size) -> per committed seed, the rule's trained growth minus standard's (outputs/claims)."""
    out = {}
    for size in MECHANISM_SIZES:
        scales = read_probes("outputs/claims", size, ["standard", "attnres", "mgr"], COMMITTED_MECHANISM_SEEDS)
        growth = {(v, s): probes.depth_growth(part, "read_rms")
                  for (v, s, state), part in scales.groupby(["variant", "seed", "state"]) if state == "trained"}
        for rule in ("attnres", "mgr"):
            out[(rule, size)] = np.array([growth[(rule, s)] - growth[("standard", s)] for s in COMMITTED_MECHANISM_SEEDS])
    return out


def steps_to(curve: pd.DataFrame, target: float) -> float:
    """The step at which a run's fixed_loss first reaches ``target``, linearly interpolated from the evaluation
    before (``curve``: step and fixed_loss, in order); NaN if it never does."""
    steps, loss = curve["step"].to_numpy(dtype=float), curve["fixed_loss"].to_numpy(dtype=float)
    below = np.flatnonzero(loss <= target)
    if not len(below):
        return np.nan
    k = below[0]
    if k == 0:
        return steps[0]
    return float(steps[k - 1] + (loss[k - 1] - target) / (loss[k - 1] - loss[k]) * (steps[k] - steps[k - 1]))


def eval_curve(study: Study, arm: Arm, seed: int) -> pd.DataFrame:
    """A run's fixed held-out loss at every evaluation (metrics.jsonl) and at its end (result.json)."""
    folder = project_path(run_folder(study.arm_root(arm), study.sizes[0], arm.variant, seed))
    rows = read_log(folder)
    result = read_result(folder)
    rows = [r for r in rows if "fixed_loss" in r and r["step"] < result["steps"]]
    rows.append({"step": result["steps"], "fixed_loss": result["fixed_loss"]})
    return pd.DataFrame(rows, columns=["step", "fixed_loss"])


def speedup(study: Study, rezero: Arm, standard: Arm, target: float, seed: int) -> float:
    """log2(standard's steps / ReZero's) to ``target`` at ``seed``: positive when ReZero gets there first (NaN where
    either never does)."""
    return math.log2(steps_to(eval_curve(study, standard, seed), target) / steps_to(eval_curve(study, rezero, seed),
                                                                                   target))


def speed_reading(study: Study, seeds, rules=("rezero", "standard")) -> dict:
    """ReZero's speed design from its pilot: each rule's best rate (``rules``: ReZero, then the baseline its arms'
    names start with), the target loss, and per seed the speedup at it (``speedup``; the design reads only their
    spread)."""
    runs = finished(study, seeds=study.pilot_seeds)
    loss = runs["fixed_loss"].astype(float).where(runs["status"] == "finished", np.inf)  # a rate that diverged loses
    best = {}
    for rule in rules:
        means = loss[runs["arm"].str.startswith(rule + "_")].groupby(runs["arm"]).mean()
        best[rule] = next(a for a in study.arms if a.name == means.idxmin())
    chosen = runs[runs["arm"].isin([a.name for a in best.values()])]
    target = float(chosen["fixed_loss"].max() + SPEED_SLACK)
    speedups = [speedup(study, best[rules[0]], best[rules[1]], target, s) for s in seeds]
    return {"arms": (best[rules[0]], best[rules[1]]), "target_loss": target, "speedups": np.array(speedups)}


def layerscale_gaps(study: Study, seeds) -> pd.DataFrame:
    """Per seed and depth: standard − layerscale fixed_loss (positive: LayerScale better), with the blocks; NaN where
    a run diverged (no loss to compare)."""
    runs = finished(study, seeds=seeds)
    loss = runs.pivot_table(index=["seed", "size"], columns="arm", values="fixed_loss")
    gaps = (loss["standard"] - loss["layerscale"]).rename("gap").reset_index()
    return gaps.assign(blocks=[resolve_run(size, "standard", 0).model.n_layers for size in gaps["size"]])


def layerscale_slopes(study: Study, seeds) -> np.ndarray:
    """Per seed, the slope of (layerscale − standard) on log2(blocks); NaN for a seed with a diverged run."""
    return np.array([np.polyfit(np.log2(part["blocks"]), -part["gap"], 1)[0] if part["gap"].notna().all() else np.nan
                     for _, part in layerscale_gaps(study, seeds).groupby("seed")])


def design(study: Study) -> dict:
    """The study's arms and seeds (None until its pilot has finished), where its spread comes from and the sizing."""
    arms = study.arms
    if study.estimate == TRAINED:
        values, spread = trained_spread()
        sized = sizing.size(values, study.target, study.alpha, study.family, study.one_sided)
    elif study.estimate == "growth":
        by_cell = {cell: sizing.size(d, study.target, study.alpha, study.family)
                   for cell, d in mechanism_differences().items()}
        cell, sized = max(by_cell.items(), key=lambda item: item[1]["seeds"] or 10**6)
        spread = (f"committed outputs/claims probes (seeds {list(COMMITTED_MECHANISM_SEEDS)}), the cell needing the most "
                  f"seeds: {cell[0]} at {cell[1]}")
    elif not pilot_done(study):
        return {"arms": arms, "seeds": None, "spread": "the pilot, once it has finished", "sizing": {}}
    else:
        if study.estimate == "speed":
            reading = speed_reading(study, study.pilot_seeds)
            values, arms = reading["speedups"], reading["arms"]
            spread = (f"the pilot: rezero at lr {arms[0].lr:g}, standard at lr {arms[1].lr:g}, target loss "
                      f"{reading['target_loss']:.4f}")
        else:
            values, spread = layerscale_slopes(study, study.pilot_seeds), "the pilot's per-seed slopes"
        sized = sizing.size(values, study.target, study.alpha, study.family, study.one_sided,
                            least=len(study.pilot_seeds))
    return {"arms": arms, "seeds": _seeds(study, sized), "spread": spread, "sizing": sized}


MOST_SEEDS = 16  # a design that needs more is not run past this; its page says what it could detect


def _seeds(study: Study, sized: dict) -> tuple:
    n = min(sized["seeds"] or MOST_SEEDS, MOST_SEEDS)
    return tuple(range(study.first_seed, study.first_seed + n))


def main(argv=None) -> int:
    return study_main(STUDIES, MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
