"""The rows of the claims the CPU reaches by its own studies (rrlib.studies.depth_reach_study, looped_reach_study and
looped_study's L sweep), each judged by the one rule once every run of its registered design has ended, and untested
with its count of seeds until then. Each reader takes the claim's record and what its study wrote; the studies'
modules hold the designs, this module how a finished design is read. Every reading here was written down before the
runs it reads had been looked at; where it fixes something a record leaves open, the function says so.

- ``trained_row``: Highway's and ReZero's depth claims. Per seed, threshold − final fixed_loss (positive: below the
  unigram level, depth_reach_study's docstring); per depth the registered one-sided one-sample t-test that it is
  above 0 (its p is the row's; a depth shown below 0 by the opposite one-sided test contradicts the claim);
  every depth must pass, so the depth least in the claim's favour decides (ledger.binding; no correction); the
  record's margin is built into the threshold. A diverged run has no final loss; it is read at its initial loss,
  ln(vocabulary) (it learned nothing), never dropped.
- ``speed_row``: ReZero's speed, log2(standard's steps / ReZero's) to the target loss, positive when ReZero is
  faster, paired over the design's seeds; ``speed_row`` at ``rezero_lr`` gives the exploratory reading at another
  rate (the seeds that reached the target there).
- ``layerscale_row``: minus the per-seed slope of (layerscale − standard) on log2(blocks), positive when
  LayerScale's gain grows with depth; the per-depth gaps (Holm over the depths) in its table.
- ``mechanism_row``: standard's trained growth over depth − the rule's, paired by seed, Holm over the depths; the
  depth least in the claim's favour decides (every depth must hold); trained − init beside it, and ``growth_note``
  says how much of the gap the rule had at init.
- ``loop_norm_row``: 1/√N's stream grows with N (t-test of its slopes) and 1/N's does not (TOST at the margin),
  Holm over the two; supported where both parts are, contradicted where either is.
- ``unique_layers_row``: minus the slope of log2(optimal lr) on log2(L) under 1/N at N = 2, judged two-sided (the
  quote states a dependence on L, no direction), with the slope of the effective step lr·ε beside it.

``runs_table`` lists each study's runs (the L sweep's too), seeds, CPU-hours (the runs' own training minutes) and the
commits they ran at.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rrlib.studies import depth_reach_study as depth, looped_reach_study as looped_reach, looped_study, probes
from rrlib.studies.claims_study import read_probes
from rrlib.studies.study_plan import Study, arm_seeds, finished
from rrlib.stats import detectable_gap, equivalence_p, holm, ledger, paired_comparison

from .rows import pending, row, unfinished


def design_ended(study: Study, arms, seeds) -> tuple[pd.DataFrame, int]:
    """The runs of the design (``arms`` at their sizes, the tested arms at ``seeds``, the others at the study's
    context seeds) that have ended, and how many of ``seeds`` have every run they take part in ended."""
    runs = pd.concat([finished(study, [arm], arm_seeds(study, arm, seeds)) for arm in arms], ignore_index=True)
    ended = set(zip(runs["arm"], runs["size"], runs["seed"]))
    done = sum(all((a.name, size, seed) in ended for a in arms if seed in arm_seeds(study, a, seeds)
                   for size in study.arm_sizes(a)) for seed in seeds)
    return runs, done


def unread(claim, study: Study, design: dict, arms=None) -> dict | None:
    """The row of a design not yet read: registered before its runs while none has ended, else untested with its
    seeds done and runs ended (the pilot's while the pilot runs); None once every run of the design has ended.
    ``design`` is the study module's (arms and seeds; seeds None until the pilot has finished)."""
    what, seeds = (f"{study.name}'s pilot", study.pilot_seeds) if design["seeds"] is None else (study.name,
                                                                                                  design["seeds"])
    arms = study.arms if design["seeds"] is None else arms or design["arms"]
    runs, done = design_ended(study, arms, seeds)
    if not len(runs):
        return pending(claim)
    planned = sum(len(arm_seeds(study, arm, seeds)) * len(study.arm_sizes(arm)) for arm in arms)
    return (unfinished(claim, what, done, len(seeds), (len(runs), planned))
            if design["seeds"] is None or done < len(seeds) else None)


def design_done(study: Study, design: dict) -> bool:
    """Whether every run of the design has ended (its tables can be shown)."""
    return design["seeds"] is not None and design_ended(study, design["arms"], design["seeds"])[1] == len(
        design["seeds"])


def _one_sided(values, alpha: float) -> dict:
    """The registered one-sided one-sample t-test that the mean of ``values`` is above 0 (``p``), the opposite
    one-sided p (``p_against``: the mean shown below 0), the two-sided interval at 1 − alpha, and the mean the
    one-sided test detects at 80 % power."""
    test = paired_comparison(values, alpha)
    above = test.p / 2 if test.gap > 0 else 1 - test.p / 2
    return {**test.effect_row(), "p": above, "p_against": 1 - above,
            "mde": detectable_gap(test.sd, test.seeds, 2 * alpha)}


# ---------------------------------------------------------------- Highway and ReZero: do the deep models train?


def trained_values(study: Study, seeds) -> pd.DataFrame:
    """One row per ended run of the design at ``seeds``: arm, variant, size, blocks, seed, status and ``below`` =
    threshold − fixed_loss (a diverged run at its initial loss, ln of the vocabulary)."""
    runs, _ = design_ended(study, study.arms, seeds)
    threshold = depth.trained_threshold()
    vocab = depth.resolve_run(study.sizes[0], study.arms[0].variant, 0).model.vocab_size
    loss = np.where(runs["status"] == "finished", runs["fixed_loss"].astype(float), math.log(vocab))
    blocks = [depth.resolve_run(size, "standard", 0).model.n_layers for size in runs["size"]]
    return runs.assign(blocks=blocks, below=threshold - loss)[["arm", "variant", "size", "blocks", "seed", "status",
                                                               "below"]]


def trained_table(study: Study, seeds, alpha: float = 0.05) -> pd.DataFrame:
    """Per arm and depth: seeds, diverged runs, the mean of threshold − loss with its interval, and for the tested
    arm the one-sided p and the detectable mean."""
    values = trained_values(study, seeds)
    rows = []
    for (arm, size), part in values.groupby(["arm", "size"], sort=False):
        tested = next(a for a in study.arms if a.name == arm).tested
        test = _one_sided(part["below"].to_numpy(), alpha)
        rows.append({"arm": arm, "size": size, "blocks": int(part["blocks"].iloc[0]), "seeds": len(part),
                     "diverged": int((part["status"] == "diverged").sum()), "below": test["effect"],
                     "ci_low": test["ci_low"], "ci_high": test["ci_high"],
                     "p": test["p"] if tested else np.nan, "p_against": test["p_against"] if tested else np.nan,
                     "mde": test["mde"] if tested else np.nan})
    return pd.DataFrame(rows)


def trained_verdict(depth_row, alpha: float = 0.05) -> str:
    """The rule on the registered one-sided test at the deciding depth: supported where it shows the loss below the
    threshold; contradicted only where the opposite one-sided test shows it above (the rule's other branch, at the
    same α); else inconclusive."""
    side = depth_row["p"] if depth_row["below"] > 0 else depth_row["p_against"]
    return ledger.judge("directional", depth_row["below"], side, alpha=alpha)


def trained_row(claim, study: Study, design: dict, evidence: str, alpha: float = 0.05) -> dict:
    """The claim that the tested arm trains at every depth (the module docstring)."""
    if waiting := unread(claim, study, design):
        return waiting
    seeds = design["seeds"]
    table = trained_table(study, seeds, alpha)
    tested = table[table["p"].notna()].reset_index(drop=True)
    chosen = tested.iloc[ledger.binding(tested["p"])]  # p tests the claim's side: the largest is least in its favour
    beside = table[table["p"].isna()]
    return row(claim, f"threshold − final fixed_loss (nats; the threshold {depth.trained_threshold():.3f}, 0.05 below "
                      f"the unigram entropy), {int(chosen['seeds'])} seeds a depth, one-sided p that it ends below: "
               + "; ".join(
                          f"{r.arm} at {r.blocks} blocks {r.below:+.3f} (p {r.p:.2g}"
                          + (f", {r.diverged} diverged" if r.diverged else "") + ")" for r in tested.itertuples())
               + "; the depth least in the claim's favour decides. Beside it: " + "; ".join(
                   f"{r.arm} at {r.blocks} {r.below:+.3f} ({r.seeds} seeds"
                   + (f", {r.diverged} diverged" if r.diverged else "") + ")" for r in beside.itertuples()),
               trained_verdict(chosen, alpha), evidence, chosen["below"],
               chosen["ci_low"], chosen["ci_high"], chosen["p"], ledger.NO_CORRECTION, detectable=chosen["mde"])


# ---------------------------------------------------------------- ReZero's speed


def speed_values(study: Study, seeds, rezero_lr: float | None = None) -> tuple[pd.Series, dict]:
    """Per seed: log2(standard's steps / ReZero's) to the design's target loss (positive: ReZero faster), at the
    design's best rates, or with ReZero at ``rezero_lr`` (a seed where either run diverged or never reached the
    target is left out, and counted)."""
    reading = depth.speed_reading(study, study.pilot_seeds)
    rezero, standard = reading["arms"]
    if rezero_lr is not None:
        rezero = next(a for a in study.arms if a.variant == "rezero" and a.lr == rezero_lr)
    ended = finished(study, [rezero, standard], seeds)
    ran = {s for s, part in ended.groupby("seed") if len(part) == 2 and (part["status"] == "finished").all()}
    ratios = {s: depth.speedup(study, rezero, standard, reading["target_loss"], s) for s in seeds if s in ran}
    values = pd.Series(ratios, dtype=float).dropna()
    return values, {"rezero": rezero, "standard": standard, "target": reading["target_loss"],
                    "left_out": len(seeds) - len(values)}


def speed_row(claim, study: Study, design: dict, evidence: str, rezero_lr: float | None = None,
              alpha: float = 0.05) -> dict:
    """ReZero reaches the target loss in fewer steps than standard, each at its rate (the module docstring); at
    ``rezero_lr`` the exploratory reading, on the design's seeds."""
    if waiting := unread(claim, study, design, study.arms if rezero_lr else None):
        return waiting
    seeds = design["seeds"]
    values, how = speed_values(study, seeds, rezero_lr)
    if how["left_out"] and rezero_lr is None:  # the design's rates and target make this impossible; never drop quietly
        return row(claim, "", ledger.untested(f"{how['left_out']} of the design's seeds have no step ratio (a run "
                                              "diverged or never reached the target), which the registered metric "
                                              "leaves undefined"), evidence)
    test = paired_comparison(values.to_numpy(), alpha)
    left = (f"; {how['left_out']} seed{'s' if how['left_out'] > 1 else ''} left out (diverged or never at the "
            "target)") if how["left_out"] else ""
    return row(claim, f"log₂(standard's steps / rezero's) to fixed_loss {how['target']:.4f}, rezero (no pre-norm) at "
                      f"lr {how['rezero'].lr:g}, standard at lr {how['standard'].lr:g}, {test.seeds} seeds paired "
                      f"(per seed: {', '.join(f'{v:+.2f}' for v in values)}){left}; the paper's 56 % faster is "
                      f"{claim.stated_effect:+.3f}",
               ledger.judge("directional", test.gap, test.p, alpha=alpha), evidence, test.gap, test.ci_low,
               test.ci_high, test.p, claim.correction, claim.stated_effect, test.detectable)


# ---------------------------------------------------------------- LayerScale over depth


def layerscale_seed_gaps(study: Study, seeds) -> pd.DataFrame:
    """Per seed and depth, the gap standard − layerscale (depth_reach_study.layerscale_gaps) where both runs
    finished."""
    return depth.layerscale_gaps(study, seeds).dropna(subset=["gap"]).reset_index(drop=True)


def layerscale_gaps(study: Study, seeds, alpha: float = 0.05) -> pd.DataFrame:
    """Per depth: the gaps of ``layerscale_seed_gaps`` paired by seed, Holm over the depths."""
    gaps = layerscale_seed_gaps(study, seeds)
    rows = [{"size": size, "blocks": int(part["blocks"].iloc[0]),
             **paired_comparison(part["gap"].to_numpy(), alpha).effect_row()}
            for size, part in gaps.groupby("size", sort=False)]
    table = pd.DataFrame(rows).sort_values("blocks").reset_index(drop=True)
    return table.assign(p_holm=holm(table["p"]))


def layerscale_row(claim, study: Study, design: dict, evidence: str, alpha: float = 0.05) -> dict:
    """LayerScale's gain over standard grows with depth: minus the per-seed slope of the gap on log2(blocks)."""
    if waiting := unread(claim, study, design):
        return waiting
    seeds = design["seeds"]
    slopes = -depth.layerscale_slopes(study, seeds)
    test = paired_comparison(slopes[np.isfinite(slopes)], alpha)
    gaps = layerscale_gaps(study, seeds, alpha)
    left = len(slopes) - test.seeds  # a seed with a diverged run has no gap at that depth, so no slope
    return row(claim, f"−slope of (layerscale − standard) fixed_loss on log₂(blocks), nats per doubling, {test.seeds} "
                      + (f"seeds ({left} left out: a run diverged, so the seed has no slope)" if left else "seeds")
                      + "; the gaps standard − layerscale beside it (Holm over the depths): " + "; ".join(
                          f"{r.blocks} blocks {r.effect:+.4f} (Holm p {r.p_holm:.2g})" for r in gaps.itertuples()),
               ledger.judge("directional", test.gap, test.p, alpha=alpha), evidence, test.gap, test.ci_low,
               test.ci_high, test.p, claim.correction, detectable=test.detectable)


# ---------------------------------------------------------------- AttnRes and MGR on fresh seeds


def growth_by_depth(study: Study, rule: str, seeds, alpha: float = 0.05, metric: str = "read_rms",
                    primary: str = "trained") -> pd.DataFrame:
    """Per depth: standard's growth over depth of ``metric`` − ``rule``'s, paired by seed, in the trained models
    (``trained``) and trained − init (``learned``); the ``primary`` one is tested (``effect`` ... ``p``, Holm over the
    depths, the detectable difference at the level Holm leaves: α over the depths), the other beside it
    (``learned`` and ``learned_p`` where the trained models are primary, ``trained`` and ``trained_p`` otherwise)."""
    rows = []
    arms = {a.name: a for a in study.arms}
    beside = "learned" if primary == "trained" else "trained"
    for size in study.sizes:
        growth = {}
        for name in ("standard", rule):
            scales = read_probes(study.arm_root(arms[name]), size, [arms[name].variant], seeds)
            growth[name] = pd.Series({key: probes.depth_growth(part, metric)
                                      for key, part in scales.groupby(["seed", "state"])}, dtype=float)
        diff = (growth["standard"] - growth[rule]).dropna()
        diff = diff.unstack() if len(diff) else pd.DataFrame()  # no probe yet: no seed to pair
        trained = diff.get("trained", pd.Series(dtype=float)).dropna()
        learned = (diff["trained"] - diff["init"]).dropna() if {"trained", "init"} <= set(diff) else trained[:0]
        values = {"trained": trained, "learned": learned}
        test = paired_comparison(values[primary].to_numpy(), alpha)
        rows.append({"rule": rule, "size": size, **test.effect_row(),
                     "mde": detectable_gap(test.sd, test.seeds, alpha / len(study.sizes)),
                     beside: values[beside].mean() if len(values[beside]) else np.nan,
                     f"{beside}_p": paired_comparison(values[beside].to_numpy(), alpha).p})
    table = pd.DataFrame(rows)
    return table.assign(p_holm=holm(table["p"]))


def mechanism_row(claim, study: Study, rule: str, design: dict, evidence: str, alpha: float = 0.05) -> dict:
    """``rule``'s hidden state grows less over depth than standard's, at every depth (the module docstring)."""
    if waiting := unread(claim, study, design, [a for a in study.arms if a.name in ("standard", rule)]):
        return waiting
    seeds = design["seeds"]
    table = growth_by_depth(study, rule, seeds, alpha)
    if int(table["n"].min()) < len(seeds):
        return unfinished(claim, f"the {rule} and standard {study.name} probe", int(table["n"].min()), len(seeds))
    effect, low, high, p = ledger.intersection(*(table[c].to_numpy() for c in ("effect", "ci_low", "ci_high",
                                                                               "p_holm")))
    chosen = table.iloc[ledger.binding(table["p_holm"], table["effect"])]
    return row(claim, f"growth over depth of the hidden state's RMS in the trained models (log₂, first block to last), "
                      f"standard's − {rule}'s, seeds {seeds[0]}–{seeds[-1]} paired at each depth: " + "; ".join(
                          f"{r.size} {r.effect:+.3f} (Holm p {r.p_holm:.2g}; trained − init {r.learned:+.3f})"
                          for r in table.itertuples()) + "; the depth least in the claim's favour decides",
               ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p,
               claim.correction, detectable=chosen["mde"])


def output_growth_row(claim, study: Study, rule: str, design: dict, evidence: str, alpha: float = 0.05) -> dict:
    """``rule``'s sublayer outputs grow less over depth with training than standard's, at every depth: the learned
    growth (trained − init) of ``update_rms`` is the test, the trained models' growth beside it."""
    if waiting := unread(claim, study, design):
        return waiting
    seeds = design["seeds"]
    table = growth_by_depth(study, rule, seeds, alpha, "update_rms", "learned")
    if int(table["n"].min()) < len(seeds):
        return unfinished(claim, f"the {rule} and standard {study.name} probe", int(table["n"].min()), len(seeds))
    effect, low, high, p = ledger.intersection(*(table[c].to_numpy() for c in ("effect", "ci_low", "ci_high",
                                                                               "p_holm")))
    chosen = table.iloc[ledger.binding(table["p_holm"], table["effect"])]
    return row(claim, f"learned growth over depth (trained − init) of the sublayer outputs' RMS (log₂, the fit over "
                      f"every sublayer), standard's − {rule}'s, seeds {seeds[0]}–{seeds[-1]} paired at each depth: "
               + "; ".join(f"{r.size} {r.effect:+.3f} (Holm p {r.p_holm:.2g}; in the trained models {r.trained:+.3f})"
                           for r in table.itertuples()) + "; the depth least in the claim's favour decides",
               ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p,
               claim.correction, detectable=chosen["mde"])


def growth_note(table: pd.DataFrame, alpha: float = 0.05) -> str:
    """What the mechanism rows' trained growth owes to training, one sentence a rule of ``growth_by_depth``'s
    table: the gap at init (trained − learned) beside the gap in the trained models, and which way training moved
    it at the depths where its paired p is below ``alpha``. A gap a rule's construction makes at init is not one
    training made (the first readings on page 07 judge the learned change alone)."""
    def span(values) -> str:
        return f"{values.min():.1f}" if np.isclose(values.min(), values.max(), atol=0.05) else \
            f"{values.min():.1f} to {values.max():.1f}"
    sentences = []
    for rule, part in table.groupby("rule", sort=False):
        init = part["effect"] - part["learned"]
        shown = part[part["learned_p"] < alpha]
        if len(shown) and (shown["learned"] < 0).all():
            moved = f"training narrowed it at {len(shown)} of {len(part)} depths"
        elif len(shown) and (shown["learned"] > 0).all():
            moved = f"training widened it at {len(shown)} of {len(part)} depths"
        elif len(shown):
            moved = "training narrowed it at some depths and widened it at others"
        else:
            moved = "training did not move it at any depth (p ≥ α)"
        sentences.append(f"{rule}: standard's hidden state grows {span(part['effect'])} log₂ units more than "
                         f"{rule}'s from the first block to the last in the trained models, and {span(init)} at "
                         f"init; {moved} (trained − init {span(part['learned'])}).")
    return " ".join(sentences)


# ---------------------------------------------------------------- the looped claims


def loop_norm_parts(study: Study, seeds, margin: float, alpha: float = 0.05) -> pd.DataFrame:
    """The two parts of the loop-norm claim on the trained models' slopes (initial models' beside): 1/√N grows
    (``scaled_loops``, t-test against 0) and 1/N does not (``scaled``, TOST at ±margin), Holm over the two, and
    each part's verdict by the rule."""
    slopes, init = (looped_reach.stream_slopes(study, seeds, state) for state in ("trained", "init"))
    rows = []
    for rule, kind in (("scaled_loops", "directional"), ("scaled", "equivalence")):
        s = slopes[rule].dropna().to_numpy()
        test = paired_comparison(s, alpha)
        p = test.p if kind == "directional" else equivalence_p(s, margin)
        rows.append({"rule": rule, "kind": kind, **test.effect_row(), "p_test": p, "init_slope": init[rule].mean()})
    parts = pd.DataFrame(rows)
    parts["p_holm"] = holm(parts["p_test"])
    parts["verdict"] = [ledger.judge(
        r.kind, r.effect, r.p_holm if r.kind == "directional" else np.nan,
        r.p_holm if r.kind == "equivalence" else np.nan, alpha=alpha,
        p_beyond=ledger.beyond_margin_p(r.effect, r.ci_low, r.ci_high, r.n, margin, "both", alpha)
        if r.kind == "equivalence" else np.nan) for r in parts.itertuples()]
    return parts


def loop_norm_row(claim, study: Study, design: dict, evidence: str, alpha: float = 0.05) -> dict:
    """Both parts must hold: supported where both are, contradicted where either is; the row shows the deciding
    part (the contradicting one, else the one with the larger Holm p)."""
    if waiting := unread(claim, study, design):
        return waiting
    seeds = design["seeds"]
    parts = loop_norm_parts(study, seeds, claim.margin_value, alpha)
    against = parts[parts["verdict"] == "contradicted"]
    chosen = against.iloc[0] if len(against) else parts.iloc[ledger.binding(parts["p_holm"])]
    verdict = ("contradicted" if len(against) else "supported" if (parts["verdict"] == "supported").all()
               else "inconclusive")
    return row(claim, f"slope of log₂(stream RMS after the last loop) on log₂ N, trained, {int(parts['n'].min())} "
                      "seeds: " + "; ".join(
                          f"{r.rule} {r.effect:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] "
                          f"({'t' if r.kind == 'directional' else 'TOST'} Holm p {r.p_holm:.2g}: {r.verdict}; "
                          f"initial models {r.init_slope:+.3f})" for r in parts.itertuples())
               + f"; the row shows {chosen['rule']}",
               verdict, evidence, chosen["effect"], chosen["ci_low"], chosen["ci_high"], chosen["p_holm"],
               claim.correction, detectable=chosen["mde"], margin=claim.margin_value)


EPSILON_SLOPE = -0.5  # log2 of the harness's ε = λ/(N√L) per doubling of L: its 1/√L


def unique_layers_row(claim, evidence: str, alpha: float = 0.05) -> dict:
    """The optimum under 1/N depends on L: minus the slope of log2(optimal lr) on log2(L), the parabola optimum
    (primary) over the seeds with one at every L, judged two-sided as the quote states a dependence and no direction
    (supported where the registered two-sided t rejects no slope, in either direction); the grid optimum beside it,
    and the slope of the effective step lr·ε, which adds ε's own −1/2 per doubling (``EPSILON_SLOPE``): where it is
    near 0, the optimum's dependence on L is the 1/√L that ε already carries."""
    design = looped_study.UNIQUE_LAYERS
    runs = looped_study.study_runs(design.out_root, design.count_setting)
    if runs.empty:
        return pending(claim)
    grid = looped_study.design_grid(runs, design)
    seeds = looped_study.complete_seeds(runs, grid, design.seeds).get("scaled", [])
    if len(seeds) < len(design.seeds):
        return unfinished(claim, "the L sweep", len(seeds), len(design.seeds))
    on_grid = runs[[lr in grid.get((v, n), ()) for v, n, lr in zip(runs["variant"], runs["loops"], runs["lr"])]]
    slopes = looped_study.seed_slopes(looped_study.seed_optima(on_grid[on_grid["seed"].isin(seeds)]))
    by = {e: paired_comparison(-slopes[e].dropna().to_numpy(), alpha) for e in ("parabola", "grid")}
    t = by["parabola"]
    step = (-t.gap + EPSILON_SLOPE, -t.ci_high + EPSILON_SLOPE, -t.ci_low + EPSILON_SLOPE)
    return row(claim, f"−slope of log₂(optimal lr) on log₂ L under 1/N at N = 2, L = "
                      f"{', '.join(map(str, design.counts))}, parabola optimum ({t.seeds} seeds with one at every L), "
                      f"two-sided: a dependence in either direction; by the grid optimum ({by['grid'].seeds} seeds) "
                      f"{by['grid'].gap:+.3f}, p {by['grid'].p:.2g}; the effective step lr·ε (ε carries 1/√L) has "
                      f"slope {step[0]:+.3f} [{step[1]:+.3f}, {step[2]:+.3f}] per doubling of L",
               ledger.judge("directional", abs(t.gap), t.p, alpha=alpha), evidence, t.gap, t.ci_low, t.ci_high, t.p,
               claim.correction, claim.stated_effect, t.detectable)


# ---------------------------------------------------------------- what the runs cost


def runs_table(studies: dict[str, Study]) -> pd.DataFrame:
    """Per study, and the L sweep after them: its ended runs, the seeds among them, the CPU-hours they took (their
    own training minutes, one thread each) and the commits they ran at."""
    ran = {name: finished(study) for name, study in studies.items()}
    sweep = looped_reach.L_SWEEP
    ran[sweep.name] = looped_study.study_runs(sweep.out_root, sweep.count_setting)
    rows = [{"study": name, "runs": len(runs), "seeds": runs["seed"].nunique(),
             "diverged": int((runs["status"] == "diverged").sum()),
             "cpu_hours": float(runs["minutes"].astype(float).sum() / 60),
             "commits": ", ".join(sorted({str(c)[:7] for c in runs["git_commit"]}))}
            for name, runs in ran.items() if len(runs)]
    return pd.DataFrame(rows, columns=["study", "runs", "seeds", "diverged", "cpu_hours", "commits"])


# ---------------------------------------------------------------- how page 07 shows the studies' tables

_INTERVAL = {"ci_low": "95 % low", "ci_high": "95 % high", "mde": "detectable (80 %)", "n": "seeds"}
VIEWS = {
    "runs": {"formats": {"cpu_hours": "{:.2f}"}, "rename": {"cpu_hours": "CPU-hours", "diverged": "diverged runs"}},
    "trained": {"formats": {c: "{:+.3f}" for c in ("below", "ci_low", "ci_high")}
                | {"p": "{:.2g}", "p_against": "{:.2g}", "mde": "{:.3f}"},
                "rename": _INTERVAL | {"below": "threshold − final loss (nats)", "p": "p that it ends below",
                                       "p_against": "p that it ends above", "diverged": "diverged runs"}},
    "layerscale": {"columns": ["blocks", "effect", "ci_low", "ci_high", "p", "p_holm", "mde", "n"],
                   "formats": {c: "{:+.4f}" for c in ("effect", "ci_low", "ci_high")}
                   | {"p": "{:.2g}", "p_holm": "{:.2g}", "mde": "{:.4f}"},
                   "rename": _INTERVAL | {"effect": "standard − layerscale (nats)", "p": "paired p",
                                          "p_holm": "Holm p (4 depths)"}},
    "mechanisms": {"columns": ["rule", "size", "effect", "ci_low", "ci_high", "p", "p_holm", "mde", "n", "learned",
                               "learned_p"],
                   "formats": {c: "{:+.3f}" for c in ("effect", "ci_low", "ci_high", "learned")}
                   | {"p": "{:.2g}", "p_holm": "{:.2g}", "mde": "{:.3f}", "learned_p": "{:.2g}"},
                   "rename": _INTERVAL | {"effect": "standard's − the rule's trained growth (log₂)", "p": "paired p",
                                          "p_holm": "Holm p (3 depths)", "mde": "detectable (80 %, α/3)",
                                          "learned": "the same, trained − init", "learned_p": "its p"}},
}
