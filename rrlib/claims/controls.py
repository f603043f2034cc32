"""What a reach verdict holds in: the control studies of rrlib.studies.reach_control_study, each read by the rule its
record's ``control`` states (registered fd7ec85, before their runs), and what it does to the registered row.

A control reads ``pending`` until every run of its design has ended; then it ``passes`` or ``fails``, and a control
that fails (a positive control that does not show the mechanism working, a rate that changes the finding, a longer
run that turns it) makes a decided row inconclusive and says why. Where no control unsettles the row, its verdict
stands and names the setting it holds in (``setting``: steps, depth, learning rate, data, baseline), with the
controls still pending said so.

Choices the records leave open, fixed here before the runs they read had ended:

- Highway's rates: "a rate whose mean loss ends below the threshold" is the mean over the rate's two seeds of the
  design's loss (a diverged run at ln of the vocabulary, as the registered row reads it); the best rate is shown.
- ReZero's control: each rule's best rate of the wider grid by rrlib.studies.depth_reach_study.speed_reading on the
  pilot; "shown faster" is the registered paired t on log2(the post-norm standard's steps / ReZero's) at p < α with a
  positive mean; where both best rates lie inside the grid and differ from the record's (4e-3 each), the row is read
  again on the design's seeds at them, ReZero against the pre-norm standard, by the record's metric and test.
- ReZero's horizon: "faster" is that paired test on the 3,000-step runs at rezero_speed's target loss (a seed that
  never reaches it is left out, and counted); "ending lower" the paired t of the final fixed_loss.
- LayerScale's starts: each fixed start's per-seed slope of (layerscale − standard) on log2(blocks), one-sample t.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rrlib.stats import ledger, paired_comparison
from rrlib.studies import depth_reach_study as depth, reach_control_study as control
from rrlib.studies.study_plan import Study, arm_seeds, finished

from .reach_rows import trained_table, trained_values, trained_verdict  # the registered rows' own readings

PENDING, PASSES, FAILS = "pending", "passes", "fails"


@dataclass(frozen=True)
class Control:
    """One control study's reading: its ``role``, its ``state``, what it found (or its runs ended of planned), and
    ``unsettles``: why the row is inconclusive because of it ("" where it is not)."""
    study: str
    role: str
    state: str
    finding: str
    unsettles: str = ""
    reread: dict | None = None  # ReZero's row read again at the control's best rates (the module docstring)


def _ended(study: Study, seeds, arms=None) -> tuple[pd.DataFrame, int]:
    """The ended runs of the study's arms (or ``arms``) at ``seeds``, and how many it plans there."""
    arms = arms or study.arms
    runs = finished(study, arms, seeds)
    planned = sum(len(arm_seeds(study, arm, seeds)) * len(study.arm_sizes(arm)) for arm in arms)
    return runs, planned


def _pending(study: Study, role: str, seeds, what: str = "", arms=None) -> Control | None:
    runs, planned = _ended(study, seeds, arms)
    if len(runs) < planned:
        return Control(study.name, role, PENDING, f"{len(runs)} of {planned} {what}runs ended")
    return None


def _mean_loss(runs: pd.DataFrame) -> pd.Series:
    """Mean final loss per arm, a diverged run counting as no loss at all (its arm never best)."""
    return runs["fixed_loss"].astype(float).where(runs["status"] == "finished", np.inf).groupby(runs["arm"]).mean()


# ---------------------------------------------------------------- Highway at hundreds of layers
def highway(alpha: float = 0.05) -> list[Control]:
    """The carry arm's positive control (12 and 24 blocks), its rates at 100 blocks, its 3,000-step horizon."""
    out = []
    study = control.HIGHWAY_CONTROL
    seeds = control.design(study)["seeds"]
    out.append(_pending(study, "positive control", seeds) or _highway_control(study, seeds, alpha))
    study = control.HIGHWAY_RATES
    seeds = control.FIXED_SEEDS[study.name]
    if waiting := _pending(study, "learning rates", seeds):
        out.append(waiting)
    else:
        means = trained_values(study, seeds).groupby("arm")["below"].mean()
        trains = [f"lr {_lr(study, a)}" for a, v in means.items() if v > 0]
        found = ", ".join(f"lr {_lr(study, a)} {v:+.3f}" for a, v in means.items())
        out.append(Control(study.name, "learning rates", FAILS if trains else PASSES,
                           f"threshold − loss at 100 blocks, mean of 2 seeds: {found}",
                           f"the carry arm trains at 100 blocks at {', '.join(trains)}: the contradiction is the "
                           "registered rate's" if trains else ""))
    study = control.HIGHWAY_HORIZON
    seeds = control.FIXED_SEEDS[study.name]
    if waiting := _pending(study, "horizon", seeds):
        out.append(waiting)
    else:
        mean = float(trained_values(study, seeds)["below"].mean())
        out.append(Control(study.name, "horizon", FAILS if mean > 0 else PASSES,
                           f"threshold − loss at 100 blocks after {control.HORIZON_STEPS:,} steps: {mean:+.3f}",
                           f"the carry arm trains at 100 blocks in {control.HORIZON_STEPS:,} steps: the "
                           "contradiction is the 300-step horizon's" if mean > 0 else ""))
    return out


def _highway_control(study, seeds, alpha) -> Control:
    table = trained_table(study, seeds, alpha)
    tested = table[table["p"].notna()]
    verdicts = [trained_verdict(r, alpha) for _, r in tested.iterrows()]
    found = "; ".join(f"{r.blocks} blocks {r.below:+.3f} (p {r.p:.2g})" for r in tested.itertuples())
    passes = all(v == "supported" for v in verdicts)
    return Control(study.name, "positive control", PASSES if passes else FAILS,
                   f"the carry arm, threshold − loss, one-sided p that it ends below: {found}",
                   "" if passes else "the carry arm does not train at 12-24 blocks here (the positive control "
                                     "fails): this harness cannot test the claim")


def _lr(study: Study, arm_name: str) -> str:
    return f"{next(a.lr for a in study.arms if a.name == arm_name):g}"


# ---------------------------------------------------------------- ReZero's speed
def rezero(alpha: float = 0.05, registered_lr: float = 4e-3) -> list[Control]:
    """ReZero against the post-norm standard (the positive control, with the wider grid of rates), and the
    3,000-step horizon."""
    out = []
    study = control.REZERO_CONTROL
    design = control.design(study)
    if design["seeds"] is None:
        out.append(_pending(study, "positive control", study.pilot_seeds, "pilot ")
                   or Control(study.name, "positive control", PENDING, "the pilot's design is not yet sized"))
    elif waiting := _pending(study, "positive control", design["seeds"], "design ", design["arms"]):
        out.append(waiting)
    else:
        out.append(_rezero_control(study, design["seeds"], alpha, registered_lr))
    study = control.REZERO_HORIZON
    seeds = control.FIXED_SEEDS[study.name]
    out.append(_pending(study, "horizon", seeds) or _rezero_horizon(study, seeds, alpha))
    return out


def _speed_test(study: Study, seeds, rules, alpha: float):
    reading = depth.speed_reading(study, seeds, rules)
    values = reading["speedups"][np.isfinite(reading["speedups"])]
    return reading, paired_comparison(values, alpha), len(seeds) - len(values)


def _rezero_control(study: Study, seeds, alpha: float, registered_lr: float) -> Control:
    reading, test, left = _speed_test(study, seeds, ("rezero", "postnorm"), alpha)
    shown = ledger.judge("directional", test.gap, test.p, alpha=alpha) == "supported"
    prenorm = depth.speed_reading(study, study.pilot_seeds, ("rezero", "standard"))["arms"]
    rates = {a.name.split("_lr")[0]: a.lr for a in (*reading["arms"], *prenorm)}
    edges = [f"{rule} at {lr:g}" for rule, lr in rates.items() if lr in (min(control.SPEED_RATES),
                                                                         max(control.SPEED_RATES))]
    found = (f"log₂(post-norm standard's steps / ReZero's) {test.gap:+.3f} [{test.ci_low:+.3f}, "
             f"{test.ci_high:+.3f}], p {test.p:.2g}, {test.seeds} seeds" + (f" ({left} left out)" if left else "")
             + "; best rates " + ", ".join(f"{rule} {lr:g}" for rule, lr in rates.items()))
    why = []
    if not shown:
        why.append("ReZero is not shown faster than the post-norm standard its paper measured against (the positive "
                   "control fails): this harness cannot show the paper's effect")
    if edges:
        why.append(f"a best rate lies at the grid's edge ({', '.join(edges)})")
    reread = None
    if not why and (rates["rezero"], rates["standard"]) != (registered_lr, registered_lr):
        again, test_again, left_again = _speed_test(study, seeds, ("rezero", "standard"), alpha)
        reread = {"test": f"read again at the best rates of the wider grid (ReZero {rates['rezero']:g}, standard "
                          f"{rates['standard']:g}), {test_again.seeds} seeds of rezero_control"
                          + (f" ({left_again} left out)" if left_again else ""),
                  "verdict": ledger.judge("directional", test_again.gap, test_again.p, alpha=alpha),
                  "effect": test_again.gap, "ci_low": test_again.ci_low, "ci_high": test_again.ci_high,
                  "p": test_again.p, "detectable": test_again.detectable}
    return Control(study.name, "positive control", FAILS if why else PASSES, found, "; ".join(why), reread)


def _rezero_horizon(study: Study, seeds, alpha: float) -> Control:
    rezero_arm, standard_arm = study.arms
    target = depth.speed_reading(depth.REZERO_SPEED, depth.REZERO_SPEED.pilot_seeds)["target_loss"]
    speed = np.array([depth.speedup(study, rezero_arm, standard_arm, target, s) for s in seeds])
    faster = paired_comparison(speed[np.isfinite(speed)], alpha)
    runs = finished(study, seeds=seeds).pivot_table(index="seed", columns="arm", values="fixed_loss")
    lower = paired_comparison((runs["standard"] - runs["rezero"]).dropna().to_numpy(), alpha)
    turned = [what for what, t in (("faster", faster), ("ending lower", lower))
              if ledger.judge("directional", t.gap, t.p, alpha=alpha) == "supported"]
    return Control(study.name, "horizon", FAILS if turned else PASSES,
                   f"{control.HORIZON_STEPS:,} steps at lr 4e-3: log₂ speedup {faster.gap:+.3f} (p {faster.p:.2g}), "
                   f"standard − ReZero final loss {lower.gap:+.4f} (p {lower.p:.2g})",
                   f"in {control.HORIZON_STEPS:,} steps ReZero is shown {' and '.join(turned)}: the contradiction is "
                   "the 300-step horizon's" if turned else "")


# ---------------------------------------------------------------- LayerScale over depth
def layerscale(row_effect: float, alpha: float = 0.05) -> list[Control]:
    """λ's start held fixed at every depth, the rates at 36 blocks, the 3,000-step horizon; ``row_effect`` is the
    registered row's (−slope), whose sign a fixed start must show."""
    out = []
    study = control.LAYERSCALE_EPS
    seeds = control.FIXED_SEEDS[study.name]
    out.append(_pending(study, "start of λ", seeds) or _layerscale_starts(study, seeds, row_effect, alpha))
    study = control.LAYERSCALE_RATES
    seeds = control.FIXED_SEEDS[study.name]
    out.append(_pending(study, "learning rates", seeds) or _layerscale_rates(study, seeds))
    study = control.LAYERSCALE_HORIZON
    seeds = control.FIXED_SEEDS[study.name]
    if waiting := _pending(study, "horizon", seeds):
        out.append(waiting)
    else:
        runs = finished(study, seeds=seeds).pivot_table(index="seed", columns="arm", values="fixed_loss")
        test = paired_comparison((runs["layerscale"] - runs["standard"]).dropna().to_numpy(), alpha)
        against = ledger.judge("directional", test.gap, test.p, alpha=alpha) == "supported"
        out.append(Control(study.name, "horizon", PASSES if against else FAILS,
                           f"{control.HORIZON_STEPS:,} steps at 36 blocks: layerscale − standard {test.gap:+.4f} "
                           f"[{test.ci_low:+.4f}, {test.ci_high:+.4f}], p {test.p:.2g}",
                           "" if against else f"in {control.HORIZON_STEPS:,} steps LayerScale is not shown behind "
                                              "standard at 36 blocks: the finding is the 300-step horizon's"))
    return out


def _layerscale_starts(study: Study, seeds, row_effect: float, alpha: float) -> Control:
    runs = finished(study, seeds=seeds)
    loss = runs.pivot_table(index=["seed", "size"], columns="arm", values="fixed_loss")
    blocks = {size: depth.resolve_run(size, "standard", 0).model.n_layers for size in study.sizes}
    found, shown = [], []
    for arm in ("eps0.1", "eps1e-5"):
        gaps = (loss[arm] - loss["standard"]).rename("gap").reset_index()
        slopes = np.array([-np.polyfit(np.log2([blocks[s] for s in part["size"]]), part["gap"], 1)[0]
                           for _, part in gaps.groupby("seed") if part["gap"].notna().all()])
        test = paired_comparison(slopes, alpha)
        found.append(f"start {arm[3:]}: −slope {test.gap:+.4f} per doubling (p {test.p:.2g})")
        if test.p < alpha and np.sign(test.gap) == np.sign(row_effect):
            shown.append(arm[3:])
    return Control(study.name, "start of λ", PASSES if shown else FAILS, "; ".join(found),
                   "" if shown else "neither fixed start of λ shows the row's slope: the trend is CaiT's change of "
                                    "start between depths, not depth")


def _layerscale_rates(study: Study, seeds) -> Control:
    runs = finished(study, seeds=seeds)
    beside = finished(depth.LAYERSCALE, seeds=seeds)  # the registered 2e-3 at 36 blocks
    beside = beside[beside["size"] == "reach36"].assign(arm=lambda d: d["arm"] + "_lr0.002")
    means = _mean_loss(pd.concat([runs, beside], ignore_index=True))
    best = {rule: means[means.index.str.startswith(rule + "_")].idxmin() for rule in ("layerscale", "standard")}
    rate = {rule: float(arm.split("_lr")[1]) for rule, arm in best.items()}
    edges = [f"{rule} at {lr:g}" for rule, lr in rate.items() if lr in (min(control.RATES), max(control.RATES))]
    ahead = means[best["layerscale"]] < means[best["standard"]]
    why = (["LayerScale at its best rate ends below standard at its best: the gap is the shared rate's"] if ahead
           else []) + ([f"a best rate lies at the grid's edge ({', '.join(edges)})"] if edges else [])
    return Control(study.name, "learning rates", FAILS if why else PASSES,
                   "mean loss at the best rates: " + ", ".join(f"{rule} {means[a]:.4f} at {rate[rule]:g}"
                                                               for rule, a in best.items()), "; ".join(why))


# ---------------------------------------------------------------- the row
def settings(study: Study, baseline: str, lr: float | None = None) -> str:
    """The setting a reach verdict holds in: steps, depths, rate (``lr``, or the preset's), data and baseline."""
    blocks = [depth.resolve_run(size, "standard", 0).model.n_layers for size in study.sizes]
    config = depth.resolve_run(study.sizes[0], "standard", 0)
    tokens = config.train.batch_size * config.model.seq_len * study.steps
    sample = len(depth.load_run_data(config).train)
    depths = f"{min(blocks)}–{max(blocks)} blocks" if len(set(blocks)) > 1 else f"{blocks[0]} blocks"
    return (f"{study.steps} steps ({tokens / sample:.2f} passes over the TinyStories sample), {depths}, "
            f"lr {lr or config.train.lr:g}, against {baseline}")


def apply(row: dict, controls: list[Control], setting: str) -> dict:
    """The registered row with its controls: a control that unsettles a decided row makes it inconclusive (its test
    says why); ReZero's row read again where its control says so; the setting it holds in, and the controls' state,
    in ``setting``."""
    row = dict(row)
    decided = ledger.verdict_kind(row["verdict"]) in ("supported", "contradicted")
    reread = next((c.reread for c in controls if c.reread), None)
    if decided and reread:
        row.update({k: reread[k] for k in ("verdict", "effect", "ci_low", "ci_high", "p", "detectable")})
        row["test"] += f"; {reread['test']}"
    unsettled = [c for c in controls if c.unsettles]
    if decided and unsettled:
        row["verdict"] = "inconclusive"
        row["test"] += "; inconclusive by its registered controls: " + "; ".join(
            f"{c.study}: {c.unsettles}" for c in unsettled)
    states = "; ".join(f"{c.study} ({c.role}) {c.state}: {c.finding}" for c in controls)
    row["setting"] = f"{setting}; controls: {states}"
    return row
