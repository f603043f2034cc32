"""What the reach verdicts hold in: a positive control, a bracket of learning rates and a longer horizon for each of
the three depth claims the 300-step studies contradicted (Highway at 100-300 blocks, ReZero's speed as its paper
runs it, LayerScale over depth), and the Attention Residuals claim read on the quantity its words name. Registered
before their runs, with the rule each reading applies to the registered row; run each with
``rrlib study run NAME`` (``rrlib study run highway_control``).

A contradiction by rrlib.studies.depth_reach_study says what a 300-step run at one learning rate shows. It is the
paper's failure only where the same setting can show the mechanism working where the paper says it works, where
the rate is not what held a rule back, and where the finding does not turn with a longer run. The rule each control
applies to its claim's registered row (rrlib/claims/records.yaml, the record's ``control``):

- **a positive control that fails** makes the row inconclusive ("this harness cannot test the claim"), never
  contradicted;
- **a best rate at its grid's edge** makes the row inconclusive (the grid did not find the rule's rate); a best
  rate inside the grid that is not the registered one reads the registered test again at the best rates, where the
  study trains design seeds for it (ReZero), and otherwise says the row's rate was not the rule's best;
- **a horizon that turns the finding** (ten times the steps, the same depth, the same rate and warm-up, the cosine
  stretched over the longer run) keeps the row's verdict but names the setting it holds in (300 steps), and makes
  it inconclusive where the longer runs show the paper's direction.

The studies (each an ``Arm`` list of rrlib.studies.study_plan; their costs by ``rrlib study plan NAME``):

- ``highway_control``: the carry-gated Highway (transform-gate bias −3) at 12 and 24 blocks, 24 and 48 highway
  layers, far fewer than the hundreds of the claim and depths at which every other rule of the harness trains;
  the depth ablation's neutral convex gate already stalls from 8 blocks, so whether carry behaviour at init lets
  the convex form train at all here is the question. The same test as ``highway_depth`` (one-sided one-sample t,
  per depth, that the loss ends 0.05 nats below the unigram entropy; every depth must pass), at its seeds (4).
- ``highway_rates``: the carry arm at 100 blocks at 5e-4, 1e-3, 4e-3 and 8e-3, a factor 2 apart around the
  registered 2e-3 (``highway_depth``'s seeds 0 and 1 read beside them), seeds 0 and 1: the rate whose two runs end
  lowest is the arm's best. Where any rate trains at 100 blocks (its mean below the threshold) the registered
  contradiction is the rate's, and the row is inconclusive.
- ``highway_horizon``: the carry arm at 100 blocks for 3,000 steps, seeds 0 and 1 (1.5 passes over the training
  sample; 300 steps make 0.15).
- ``rezero_control``: ReZero (no pre-norm, as its paper), the pre-norm standard and the post-norm standard
  (``standard`` with ``post_norm``: the baseline ReZero's paper reports its 56 % against) at 12 blocks, each at
  5e-4 to 1.6e-2, a factor 2 apart (``rezero_speed``'s grid widened by one rate at each end), a pilot of 4 seeds,
  evaluated every 10 steps. From the pilot, by ``rezero_speed``'s rule (a rate where a pilot seed diverged is
  never a rule's best; the target is the worse rule's final loss + 0.05 nats): the control is ReZero against the
  post-norm standard, log2 of the steps to the target, paired t over seeds, sized for the paper's log2 1.56 = 0.64
  (at most 16 seeds); ReZero against the pre-norm standard is read again at both rules' best rates of the wider
  grid, on the same seeds. The control passes where ReZero is shown faster than the post-norm standard (p < 0.05).
- ``rezero_horizon``: ReZero and the pre-norm standard at 12 blocks at the registered rates (4e-3 each), 3,000
  steps, 4 seeds, evaluated every 50 steps: the speedup to ``rezero_speed``'s target and the final losses, paired.
- ``layerscale_eps``: LayerScale with λ's start held at 0.1 (CaiT's value to 18 blocks) and at 1e-5 (its value at 24)
  at every depth, with standard, at 4, 12, 24 and 36 blocks, seeds 0-3 (``layerscale_depth``'s design: its pilot's
  slopes detect 0.0098 nats per doubling with 4 seeds). Per start, the registered slope of (layerscale − standard)
  on log2(blocks); CaiT's rule changes the start from 0.1 to 1e-5 between 12 and 24 blocks and to 1e-6 at 36, so its
  slope is depth and start together. The control: where neither fixed start shows the slope the registered row
  found (one-sample t of the slopes, p < 0.05, same sign), the trend is the start's step, and the row is
  inconclusive for depth.
- ``layerscale_rates``: LayerScale (CaiT's start) and standard at 36 blocks at 5e-4, 1e-3, 4e-3 and 8e-3
  (``layerscale_depth``'s 2e-3 beside them), seeds 0 and 1. Where LayerScale's loss at its best rate is below
  standard's at its best, the gap the row reads at one shared rate is the rate's, and the row is inconclusive.
- ``layerscale_horizon``: LayerScale (CaiT's start, 1e-6 at 36 blocks) and standard at 36 blocks, 3,000 steps,
  seeds 0-2: the paired gap of the final losses.
- ``attnres_outputs``: the quantity the Attention Residuals abstract names, "output magnitudes ... across depth":
  the growth over depth of the sublayer outputs' RMS (``update_rms``, the fit over every sublayer of
  rrlib.studies.probes.depth_growth), what training changed (trained − init) separated from what the architecture
  gives at init, standard's − AttnRes's, at 8, 16 and 24 blocks (``params/depth.yaml``), on fresh seeds from 18
  (seeds 0-17 were read). Sized from the committed ``mechanisms`` probes' learned growth (seeds 3-17), at its upper
  80 % bound, for 1 log2 unit at α/3 (Holm over the depths), at most 16 seeds.
"""
from __future__ import annotations

import sys

import numpy as np

from . import depth_reach_study as depth, probes, sizing
from .claims_study import read_probes
from .study_plan import Arm, Study, main as study_main, pilot_done

MODULE = "rrlib.studies.reach_control_study"
HORIZON_STEPS = 3000  # ten times the reach studies' 300
RATES = (5e-4, 1e-3, 4e-3, 8e-3)  # a factor 2 apart around the registered 2e-3, which the registered design ran
SPEED_RATES = (5e-4, 1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2)  # rezero_speed's 1e-3 to 8e-3, one more rate at each end
CARRY = (("carry_bias", -3.0),)
NO_PRE_NORM = (("pre_norm", False),)
POST_NORM = (("post_norm", True),)
FIXED = "fixed seeds"  # a bracket or a horizon: the seeds are stated, not sized (each says why)

HIGHWAY_CONTROL = Study(
    name="highway_control", estimate=depth.TRAINED, records=("highway-hundreds-of-layers",), target=0.10,
    target_why=depth.TRAINED_WHY, sizes=("reach12", "reach24"),
    arms=(Arm("carry", "highway_convex", CARRY), Arm("standard", "standard", tested=False)), steps=300,
    one_sided=True)
HIGHWAY_RATES = Study(
    name="highway_rates", estimate=FIXED, records=("highway-hundreds-of-layers",), target=np.nan,
    target_why="a bracket of rates, two seeds each: which rate ends lowest, and whether any trains",
    sizes=("reach100",), arms=tuple(Arm(f"carry_lr{lr:g}", "highway_convex", CARRY, lr) for lr in RATES),
    steps=300)
HIGHWAY_HORIZON = Study(
    name="highway_horizon", estimate=FIXED, records=("highway-hundreds-of-layers",), target=np.nan,
    target_why="a horizon check, two seeds: whether the carry arm trains when it runs ten times longer",
    sizes=("reach100",), arms=(Arm("carry", "highway_convex", CARRY, steps=HORIZON_STEPS),), steps=300)

REZERO_CONTROL = Study(
    name="rezero_control", estimate="speed", records=("rezero-converges-faster-as-run",),
    target=depth.REZERO_SPEED.target, target_why=depth.REZERO_SPEED.target_why, sizes=("reach12",),
    arms=tuple(Arm(f"{name}_lr{lr:g}", variant, options, lr) for name, variant, options in
               (("rezero", "rezero", NO_PRE_NORM), ("standard", "standard", ()), ("postnorm", "standard", POST_NORM))
               for lr in SPEED_RATES),
    steps=300, pilot_seeds=(0, 1, 2, 3), extra=depth.REZERO_SPEED.extra)
REZERO_HORIZON = Study(
    name="rezero_horizon", estimate=FIXED, records=("rezero-converges-faster-as-run",), target=np.nan,
    target_why="a horizon check, four seeds: the speedup and the final losses when both rules run ten times longer",
    sizes=("reach12",), arms=(Arm("rezero", "rezero", NO_PRE_NORM, 4e-3, steps=HORIZON_STEPS),
                              Arm("standard", "standard", (), 4e-3, steps=HORIZON_STEPS)),
    steps=300, extra=("--eval-every", "50"))

LAYERSCALE_EPS = Study(
    name="layerscale_eps", estimate=FIXED, records=("layerscale-deeper",), target=depth.LAYERSCALE.target,
    target_why="layerscale_depth's design: its pilot's per-seed slopes, 4 seeds detect 0.0098 of the 0.01 nats per "
               "doubling it is sized for",
    sizes=depth.LAYERSCALE.sizes, arms=(Arm("eps0.1", "layerscale", (("init", 0.1),)),
                                        Arm("eps1e-5", "layerscale", (("init", 1e-5),)),
                                        Arm("standard", "standard")),
    steps=300)
LAYERSCALE_RATES = Study(
    name="layerscale_rates", estimate=FIXED, records=("layerscale-deeper",), target=np.nan,
    target_why="a bracket of rates, two seeds each: each rule's best rate at 36 blocks, and the gap at the best rates",
    sizes=("reach36",), arms=tuple(Arm(f"{name}_lr{lr:g}", name, (), lr) for name in ("layerscale", "standard")
                                   for lr in RATES),
    steps=300)
LAYERSCALE_HORIZON = Study(
    name="layerscale_horizon", estimate=FIXED, records=("layerscale-deeper",), target=np.nan,
    target_why="a horizon check, three seeds: the gap at 36 blocks when both rules run ten times longer",
    sizes=("reach36",), arms=(Arm("layerscale", "layerscale", steps=HORIZON_STEPS),
                              Arm("standard", "standard", steps=HORIZON_STEPS)),
    steps=300)

COMMITTED_OUTPUT_SEEDS = tuple(range(3, 18))  # depth.MECHANISMS' design seeds, whose probes were read
ATTNRES_OUTPUTS = Study(
    name="attnres_outputs", estimate="learned output growth", records=("attnres-outputs-confirm",), target=1.0,
    target_why=depth.MECHANISMS.target_why, sizes=depth.MECHANISM_SIZES,
    arms=(Arm("standard", "standard"), Arm("attnres", "attnres")), steps=300, family=len(depth.MECHANISM_SIZES),
    first_seed=COMMITTED_OUTPUT_SEEDS[-1] + 1, probe=True)

# The seeds of the studies whose seeds are stated, not sized (``FIXED``): each study's ``target_why`` says why.
FIXED_SEEDS = {HIGHWAY_RATES.name: (0, 1), HIGHWAY_HORIZON.name: (0, 1), REZERO_HORIZON.name: (0, 1, 2, 3),
               LAYERSCALE_EPS.name: (0, 1, 2, 3), LAYERSCALE_RATES.name: (0, 1), LAYERSCALE_HORIZON.name: (0, 1, 2)}
STUDIES = {s.name: s for s in (HIGHWAY_CONTROL, HIGHWAY_RATES, HIGHWAY_HORIZON, REZERO_CONTROL, REZERO_HORIZON,
                               LAYERSCALE_EPS, LAYERSCALE_RATES, LAYERSCALE_HORIZON, ATTNRES_OUTPUTS)}


def learned_output_growth(root: str, size: str, variant: str, seeds) -> dict[int, float]:
    """Per seed: the growth over depth of ``update_rms`` in the trained model less the same at init (log2 units,
    rrlib.studies.probes.depth_growth), from the probe files under ``root``."""
    scales = read_probes(root, size, [variant], seeds)
    growth = {key: probes.depth_growth(part, "update_rms") for key, part in scales.groupby(["seed", "state"])}
    return {seed: growth[(seed, "trained")] - growth[(seed, "init")] for seed in seeds
            if (seed, "trained") in growth and (seed, "init") in growth}


def output_growth_differences() -> dict[str, np.ndarray]:
    """Per depth: standard's learned output growth − AttnRes's, per committed ``mechanisms`` seed."""
    out = {}
    for size in depth.MECHANISM_SIZES:
        growth = {arm.name: learned_output_growth(depth.MECHANISMS.arm_root(arm), size, arm.variant,
                                                  COMMITTED_OUTPUT_SEEDS)
                  for arm in depth.MECHANISMS.arms if arm.name in ("standard", "attnres")}
        out[size] = np.array([growth["standard"][s] - growth["attnres"][s] for s in COMMITTED_OUTPUT_SEEDS
                              if s in growth["standard"] and s in growth["attnres"]])
    return out


def design(study: Study) -> dict:
    """The study's arms and seeds (None until its pilot has finished), where its spread comes from and the sizing."""
    if study.estimate == FIXED:
        return {"arms": study.arms, "seeds": FIXED_SEEDS[study.name], "spread": f"none: {study.target_why}",
                "sizing": {}}
    if study.estimate == depth.TRAINED:
        values, spread = depth.trained_spread()
        sized = sizing.size(values, study.target, study.alpha, study.family, study.one_sided)
        return {"arms": study.arms, "seeds": depth._seeds(study, sized), "spread": spread, "sizing": sized}
    if study.estimate == "learned output growth":
        by_size = {size: sizing.size(d, study.target, study.alpha, study.family)
                   for size, d in output_growth_differences().items()}
        size, sized = max(by_size.items(), key=lambda item: item[1]["seeds"] or 10**6)
        return {"arms": study.arms, "seeds": depth._seeds(study, sized), "sizing": sized,
                "spread": f"committed outputs/mechanisms probes (seeds {COMMITTED_OUTPUT_SEEDS[0]}-"
                          f"{COMMITTED_OUTPUT_SEEDS[-1]}), learned growth of update_rms, the depth needing the most "
                          f"seeds: {size}"}
    if not pilot_done(study):
        return {"arms": study.arms, "seeds": None, "spread": "the pilot, once it has finished", "sizing": {}}
    control = depth.speed_reading(study, study.pilot_seeds, ("rezero", "postnorm"))
    prenorm = depth.speed_reading(study, study.pilot_seeds, ("rezero", "standard"))
    by_pair = {pair: sizing.size(reading["speedups"], study.target, study.alpha, study.family,
                                 least=len(study.pilot_seeds))
               for pair, reading in (("post-norm", control), ("pre-norm", prenorm))}
    pair, sized = max(by_pair.items(), key=lambda item: item[1]["seeds"] or 10**6)
    arms = tuple(dict.fromkeys(control["arms"] + prenorm["arms"]))
    rates = ", ".join(f"{a.name.split('_lr')[0]} at lr {a.lr:g}" for a in arms)
    return {"arms": arms, "seeds": depth._seeds(study, sized), "sizing": sized,
            "spread": f"the pilot: {rates}; the {pair} pair's speedups need the most seeds"}


def main(argv=None) -> int:
    return study_main(STUDIES, MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
