"""How a finished reach study becomes a ledger row (rrlib.claims.reach_rows), on constructed runs: a depth that does
not train decides the depth claim, a diverged run counts as untrained, an unfinished design stays untested with its
count, ReZero's speed and LayerScale's trend are signed as their claims, the mechanism rows are Holm over the depths,
the loop-norm claim needs both its parts, and the L sweep reads its slope off the runs' own optima."""
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from rrlib.claims import reach_rows
from rrlib.claims.records import by_id
from rrlib.studies import depth_reach_study as depth, looped_study, probes
from rrlib.studies.study_plan import Arm

CLAIMS = by_id()
DEPTHS = {"reach24": 24, "reach64": 64}


def fake_finished(rows):
    """A stand-in for study_plan.finished over constructed rows (arm, size, seed, status, fixed_loss, minutes)."""
    table = pd.DataFrame(rows)

    def finished(study, arms=None, seeds=None):
        names = [a.name for a in arms or study.arms]
        part = table[table["arm"].isin(names)]
        return part[part["seed"].isin(list(seeds))] if seeds is not None else part
    return finished


def depth_study():
    return dataclasses.replace(depth.REZERO_DEPTH, name="depth_test", sizes=tuple(DEPTHS),
                               arms=(Arm("rezero", "rezero"), Arm("standard", "standard", tested=False)))


def depth_runs(loss_of, seeds=(0, 1, 2, 3)):
    """Every run of ``depth_study``'s design; ``loss_of(arm, size, seed)`` gives its loss (None: diverged)."""
    study, rows = depth_study(), []
    for arm in study.arms:
        for size in study.sizes:
            for seed in seeds if arm.tested else seeds[:2]:
                loss = loss_of(arm.name, size, seed)
                rows.append({"arm": arm.name, "variant": arm.variant, "size": size, "seed": seed, "minutes": 1.0,
                             "git_commit": "abc1234",
                             "status": "finished" if loss is not None else "diverged", "fixed_loss": loss})
    return rows


@pytest.fixture
def threshold(monkeypatch):
    monkeypatch.setattr(depth, "trained_threshold", lambda: 3.0)


def judge_depth(monkeypatch, rows):
    monkeypatch.setattr(reach_rows, "finished", fake_finished(rows))
    return reach_rows.trained_row(CLAIMS["rezero-120-layers"], depth_study(), {"arms": depth_study().arms,
                                                                               "seeds": (0, 1, 2, 3)}, "")


def test_every_depth_must_train_and_the_worst_decides(monkeypatch, threshold):
    wobble = {0: -0.02, 1: 0.01, 2: 0.0, 3: 0.015}
    good = judge_depth(monkeypatch, depth_runs(lambda arm, size, seed: 2.0 + wobble[seed]))
    assert good["verdict"] == "supported" and good["effect"] == pytest.approx(1.0 - np.mean(list(wobble.values())))
    # the deep model stays at the unigram level on every seed: the claim fails there
    stuck = judge_depth(monkeypatch, depth_runs(
        lambda arm, size, seed: (3.08 if size == "reach64" else 2.0) + wobble[seed]))
    assert stuck["verdict"] == "contradicted" and "64 blocks" in stuck["test"] and stuck["p"] > 0.99
    assert stuck["effect"] == pytest.approx(-0.08 - np.mean(list(wobble.values())))


def test_a_diverged_run_counts_as_its_initial_loss(monkeypatch, threshold):
    rows = depth_runs(lambda arm, size, seed: None if (size, seed, arm) == ("reach64", 3, "rezero") else 2.0 + seed / 100)
    row = judge_depth(monkeypatch, rows)
    vocab = depth.resolve_run("reach24", "rezero", 0).model.vocab_size
    expected = np.mean([1.0 - s / 100 for s in (0, 1, 2)] + [3.0 - math.log(vocab)])
    assert row["effect"] == pytest.approx(expected) and "1 diverged" in row["test"]
    assert row["verdict"] == "inconclusive"  # three trained seeds and one that learned nothing
    table = reach_rows.trained_table(depth_study(), (0, 1, 2, 3)).query("arm == 'rezero'").set_index("size")
    assert table.loc["reach64", "p"] + table.loc["reach64", "p_against"] == pytest.approx(1)
    assert table.loc["reach64", "p"] > table.loc["reach24", "p"]  # the deciding depth: least shown to train
    assert row["p"] == table.loc["reach64", "p"]  # the registered test's p: that the loss ends below the threshold


def test_an_unfinished_design_is_untested_with_its_count(monkeypatch, threshold):
    rows = [r for r in depth_runs(lambda *a: 2.0) if not (r["seed"] == 3 and r["size"] == "reach64")]
    assert judge_depth(monkeypatch, rows)["verdict"] == (
        "untested: depth_test runs not finished (3 of 4 seeds; 11 of 12 runs)")
    pilot = dataclasses.replace(depth.LAYERSCALE, name="pilot_test")
    monkeypatch.setattr(reach_rows, "finished", fake_finished([{**rows[0], "arm": "another_study"}]))
    waiting = reach_rows.layerscale_row(CLAIMS["layerscale-deeper"], pilot, {"arms": pilot.arms, "seeds": None}, "")
    assert waiting["verdict"] == "untested: registered before its runs; its design has not run yet"
    started = [r for r in depth_runs(lambda *a: 2.0) if r["size"] == "reach24"]
    for r in started:
        r.update(arm={"rezero": "layerscale"}.get(r["arm"], r["arm"]), size="reach4")
    monkeypatch.setattr(reach_rows, "finished", fake_finished(started))
    waiting = reach_rows.layerscale_row(CLAIMS["layerscale-deeper"], pilot, {"arms": pilot.arms, "seeds": None}, "")
    assert waiting["verdict"] == "untested: pilot_test's pilot runs not finished (0 of 4 seeds; 6 of 32 runs)"
    claim = CLAIMS["layerscale-deeper"]  # while its runs go, the row shows what it will be judged by
    assert waiting["test"] == f"{claim.metric}; {claim.test}" and claim.metric


def test_rezero_faster_is_a_positive_log_ratio(monkeypatch):
    study = dataclasses.replace(depth.REZERO_SPEED, name="speed_test")
    rezero, standard = study.arms[2], study.arms[5]  # 4e-3 and 2e-3
    rows = [{"arm": a.name, "size": "reach12", "seed": s, "fixed_loss": 2.4,
             "status": "diverged" if (a.lr, a.variant, s) == (0.008, "rezero", 0) else "finished"}
            for a in study.arms for s in study.pilot_seeds]
    monkeypatch.setattr(reach_rows, "finished", fake_finished(rows))
    monkeypatch.setattr(depth, "speed_reading", lambda st, seeds: {"arms": (rezero, standard), "target_loss": 2.5})
    times = {0: 1.9, 1: 2.1, 2: 1.95, 3: 2.05}  # how many times rezero's steps standard takes

    def curve(st, arm, seed):
        at = 100.0 * (1 if arm.variant == "rezero" else times[seed])
        return pd.DataFrame({"step": [0.0, at], "fixed_loss": [5.5, 2.5]})
    monkeypatch.setattr(depth, "eval_curve", curve)
    row = reach_rows.speed_row(CLAIMS["rezero-converges-faster-as-run"], study,
                               {"arms": (rezero, standard), "seeds": study.pilot_seeds}, "")
    assert row["effect"] == pytest.approx(np.mean(np.log2(list(times.values())))) and row["verdict"] == "supported"
    assert row["paper_effect"] == pytest.approx(0.642)
    monkeypatch.setattr(depth, "eval_curve", lambda st, arm, seed: curve(st, arm, seed) if seed else pd.DataFrame(
        {"step": [0.0, 300.0], "fixed_loss": [5.5, 2.6]}))  # seed 0 never reaches 2.5
    never = reach_rows.speed_row(CLAIMS["rezero-converges-faster-as-run"], study,
                                 {"arms": (rezero, standard), "seeds": study.pilot_seeds}, "")
    assert never["verdict"].startswith("untested: 1 of the design's seeds have no step ratio")
    monkeypatch.setattr(depth, "eval_curve", curve)
    slow = reach_rows.speed_row(CLAIMS["rezero-converges-faster-as-run"], study,
                                {"arms": (rezero, standard), "seeds": study.pilot_seeds}, "", rezero_lr=0.008)
    assert "lr 0.008" in slow["test"] and "3 seeds paired" in slow["test"] and "; 1 seed left out" in slow["test"]


def test_layerscale_gaining_with_depth_is_a_positive_trend(monkeypatch):
    study = dataclasses.replace(depth.LAYERSCALE, name="ls_test")
    blocks = {"reach4": 4, "reach12": 12, "reach24": 24, "reach36": 36}
    noise = np.random.default_rng(0).normal(0, 0.002, (4, 4))
    rows = [{"arm": arm.name, "size": size, "seed": s, "status": "finished",
             "fixed_loss": 2.5 - (0.02 * math.log2(b) + noise[s, i] if arm.name == "layerscale" else 0.0)}
            for arm in study.arms for i, (size, b) in enumerate(blocks.items()) for s in range(4)]
    monkeypatch.setattr(reach_rows, "finished", fake_finished(rows))
    monkeypatch.setattr(depth, "finished", fake_finished(rows))
    row = reach_rows.layerscale_row(CLAIMS["layerscale-deeper"], study, {"arms": study.arms, "seeds": (0, 1, 2, 3)}, "")
    assert row["effect"] == pytest.approx(0.02, abs=0.004) and row["verdict"] == "supported"
    gaps = reach_rows.layerscale_gaps(study, (0, 1, 2, 3))
    assert list(gaps["blocks"]) == [4, 12, 24, 36] and (gaps["p_holm"] >= gaps["p"]).all()
    assert set(reach_rows.VIEWS["layerscale"]["columns"]) <= set(gaps.columns)


def test_a_mechanism_must_hold_at_every_depth_after_holm(monkeypatch):
    study = dataclasses.replace(depth.MECHANISMS, name="mech_test")
    seeds = tuple(range(3, 9))
    rng = np.random.default_rng(1)
    less = {"depth8": 2.0, "depth16": 2.0, "depth24": 0.0}  # attnres grows 2 log2 units less, but not at 24 blocks
    rows = [{"arm": a.name, "size": size, "seed": s, "status": "finished", "fixed_loss": 2.0}
            for a in study.arms for size in study.sizes for s in seeds]
    growth = {(a.variant, size, s, state): (3.0 - (less[size] if a.variant == "attnres" else 0.0)) * (state == "trained")
              + rng.normal(0, 0.1) for a in study.arms for size in study.sizes for s in seeds for state in ("init", "trained")}

    def read(root, size, variants, seeds_):
        return pd.DataFrame([{"variant": v, "size": size, "seed": s, "state": st} for v in variants for s in seeds_
                             for st in ("init", "trained")])
    monkeypatch.setattr(reach_rows, "finished", fake_finished(rows))
    monkeypatch.setattr(reach_rows, "read_probes", read)
    monkeypatch.setattr(probes, "depth_growth", lambda part, metric: growth[tuple(part.iloc[0][["variant", "size", "seed",
                                                                                                 "state"]])])
    row = reach_rows.mechanism_row(CLAIMS["attnres-growth-confirm"], study, "attnres",
                                   {"arms": study.arms, "seeds": seeds}, "")
    assert row["verdict"] == "inconclusive" and abs(row["effect"]) < 0.3  # 24 blocks decides
    table = reach_rows.growth_by_depth(study, "attnres", seeds)
    assert table.set_index("size")["effect"]["depth8"] == pytest.approx(2.0, abs=0.3)
    monkeypatch.setattr(reach_rows, "read_probes", lambda root, size, variants, seeds_: pd.DataFrame(
        columns=["variant", "seed", "state", "sublayer", "index"]))  # what read_probes returns where none is found
    unprobed = reach_rows.mechanism_row(CLAIMS["attnres-growth-confirm"], study, "attnres",
                                        {"arms": study.arms, "seeds": seeds}, "")  # every run ended, none probed yet
    assert unprobed["verdict"] == "untested: the attnres and standard mech_test probe runs not finished (0 of 6 seeds)"
    monkeypatch.setattr(reach_rows, "read_probes", read)
    assert (table["p_holm"] >= table["p"]).all()
    assert set(reach_rows.VIEWS["mechanisms"]["columns"]) <= set(table.columns)  # page 07's view of it


def test_the_growth_note_says_what_the_gap_was_at_init():
    table = pd.DataFrame({"rule": ["attnres"] * 3 + ["mgr"] * 3, "size": ["depth8", "depth16", "depth24"] * 2,
                          "effect": [2.8, 3.0, 2.9, 2.6, 3.3, 3.6], "learned": [-0.4, -0.8, -1.1, 0.3, 0.6, 0.7],
                          "learned_p": [1e-4, 1e-7, 1e-9, 0.2, 1e-10, 1e-9]})
    note = reach_rows.growth_note(table)
    assert ("attnres: standard's hidden state grows 2.8 to 3.0 log₂ units more than attnres's from the first block to "
            "the last in the trained models, and 3.2 to 4.0 at init; training narrowed it at 3 of 3 depths "
            "(trained − init -1.1 to -0.4).") in note
    assert "mgr: standard's hidden state grows 2.6 to 3.6" in note and "2.3 to 2.9 at init" in note
    assert "training widened it at 2 of 3 depths" in note  # depth8's p is above α: not counted either way


@pytest.mark.parametrize("flat_slope, verdict", [(0.0, "supported"), (0.5, "contradicted")])
def test_the_loop_norm_claim_needs_both_parts(monkeypatch, flat_slope, verdict):
    study = dataclasses.replace(depth_study(), name="norms_test")
    rng = np.random.default_rng(2)
    slopes = pd.DataFrame({"scaled_loops": 0.5 + rng.normal(0, 0.03, 6), "scaled": flat_slope + rng.normal(0, 0.03, 6)})
    monkeypatch.setattr(reach_rows.looped_reach, "stream_slopes", lambda st, seeds, state="trained": slopes)
    monkeypatch.setattr(reach_rows, "unread", lambda *a, **k: None)
    row = reach_rows.loop_norm_row(CLAIMS["looped-stream-norm"], study, {"arms": study.arms, "seeds": tuple(range(6))}, "")
    assert row["verdict"] == verdict
    if verdict == "contradicted":
        assert row["test"].endswith("the row shows scaled")


@pytest.mark.parametrize("power, verdict", [(-0.5, "supported"), (0.5, "supported"), (0.0, "inconclusive")])
def test_the_l_sweep_reads_the_slope_of_its_own_optima_in_either_direction(monkeypatch, power, verdict):
    """Losses that are parabolas in log2(lr) around 0.0113·L^power: the optimum moves by ``power`` per doubling of L.
    The quote states a dependence on L and no direction, so a falling and a rising optimum both support it, a flat
    one does not; the effective step lr·ε (ε carries 1/√L) moves by power − 0.5."""
    design = looped_study.UNIQUE_LAYERS
    rng = np.random.default_rng(3)
    rows = [{"variant": "scaled", "loops": n, "lr": lr, "seed": s,
             "fixed_loss": 2.0 + (math.log2(lr) - math.log2(0.0113137 * n ** power) - rng.normal(0, 0.05)) ** 2 * 0.1}
            for n in design.counts for k in range(3, 12) for lr in [looped_study.lattice_lr(k)] for s in design.seeds]
    monkeypatch.setattr(looped_study, "study_runs", lambda root, setting: pd.DataFrame(rows))
    row = reach_rows.unique_layers_row(CLAIMS["looped-depends-on-l"], "")
    assert row["effect"] == pytest.approx(-power, abs=0.1) and row["verdict"] == verdict
    assert np.isnan(row["paper_effect"])  # no quoted sentence states a direction or size
    step = float(row["test"].split("has slope ")[1].split(" ")[0])
    assert step == pytest.approx(power - 0.5, abs=0.1)
    monkeypatch.setattr(looped_study, "study_runs", lambda root, setting: pd.DataFrame(rows).query("seed < 6"))
    assert reach_rows.unique_layers_row(CLAIMS["looped-depends-on-l"], "")["verdict"] == (
        "untested: the L sweep runs not finished (6 of 7 seeds)")
    monkeypatch.setattr(looped_study, "study_runs", lambda root, setting: pd.DataFrame(rows).iloc[:0])
    assert reach_rows.unique_layers_row(CLAIMS["looped-depends-on-l"], "")["verdict"] == (
        "untested: registered before its runs; its design has not run yet")


def test_runs_table_counts_each_studys_hours_and_commits(monkeypatch):
    monkeypatch.setattr(reach_rows, "finished", fake_finished(depth_runs(lambda *a: 2.0)))
    no_sweep = pd.DataFrame(columns=looped_study.RUN_COLUMNS)
    monkeypatch.setattr(looped_study, "study_runs", lambda root, setting: no_sweep)
    table = reach_rows.runs_table({"depth_test": depth_study()})
    assert table["study"].tolist() == ["depth_test"]  # a design with no ended run has no line
    assert tuple(table.iloc[0][["runs", "seeds", "cpu_hours", "commits"]]) == (12, 4, 0.2, "abc1234")


def test_runs_table_lists_the_l_sweeps_runs_after_the_studies(monkeypatch):
    monkeypatch.setattr(reach_rows, "finished", fake_finished(depth_runs(lambda *a: 2.0)))
    sweep = pd.DataFrame({"seed": [0, 0, 1], "status": ["finished", "diverged", "finished"], "minutes": [6.0, 3.0, 9.0],
                          "git_commit": ["c1256ab7264a", "c1256ab7264a", "94c1087aaaaa"]})
    monkeypatch.setattr(looped_study, "study_runs", lambda root, setting: sweep)
    table = reach_rows.runs_table({"depth_test": depth_study()}).set_index("study")
    assert table.index.tolist() == ["depth_test", "unique_layers"]
    line = table.loc["unique_layers"]
    assert (line["runs"], line["seeds"], line["diverged"], line["cpu_hours"], line["commits"]) == (
        3, 2, 1, 0.3, "94c1087, c1256ab")
    from rrlib.studies import looped_reach_study

    assert looped_reach_study.claims_answered()["unique_layers"] == ("looped-depends-on-l",)


def test_the_depth_figure_draws_every_run_and_a_diverged_one_open(monkeypatch, threshold):
    from rrlib.claims import figures

    rows = depth_runs(lambda arm, size, seed: None if (arm, size, seed) == ("rezero", "reach64", 1) else 2.0)
    monkeypatch.setattr(reach_rows, "finished", fake_finished(rows))
    values = reach_rows.trained_values(depth_study(), (0, 1, 2, 3))
    gaps = pd.DataFrame({"seed": [0, 0], "size": ["reach4", "reach12"], "gap": [0.1, 0.2], "blocks": [4, 12]})
    fig = figures.depth_reach({"depth_test": values}, gaps)
    runs_ax, gaps_ax = fig.axes
    drawn = sum(len(c.get_offsets()) for c in runs_ax.collections)
    assert drawn == len(values) == 12 and "rezero, diverged" in [t.get_text() for t in runs_ax.get_legend().get_texts()]
    assert sorted(gaps_ax.lines[0].get_xdata()) == [4, 12]


def test_two_arms_of_one_rule_at_the_same_loss_stay_apart_in_the_depth_figure():
    """Highway's carry and neutral arms end at the same loss at 100 blocks: each gets its own jitter and marker."""
    from rrlib.claims import figures

    runs = pd.DataFrame({"arm": ["carry"] * 2 + ["neutral"] * 2, "variant": ["highway_convex"] * 4,
                         "blocks": [100] * 4, "below": [-0.07] * 4, "status": ["finished"] * 4})
    (ax,) = figures.depth_reach({"highway_test": runs}, None).axes
    carry, neutral = [c for c in ax.collections if len(c.get_offsets())]
    assert not np.allclose(carry.get_offsets(), neutral.get_offsets())
    assert not np.array_equal(carry.get_paths()[0].vertices, neutral.get_paths()[0].vertices)


def test_every_reach_study_is_sized_by_its_own_module(monkeypatch):
    """Page 07 and the README read one mapping of reach studies; each design comes from the module that sizes it."""
    from rrlib.studies import depth_reach_study, looped_reach_study, reach_control_study

    assert list(looped_reach_study.REACH) == [*depth_reach_study.STUDIES, *looped_reach_study.STUDIES,
                                              *reach_control_study.STUDIES]
    monkeypatch.setattr(depth_reach_study, "design", lambda study: ("depth", study.name))
    monkeypatch.setattr(looped_reach_study, "design", lambda study: ("looped", study.name))
    monkeypatch.setattr(reach_control_study, "design", lambda study: ("control", study.name))
    assert looped_reach_study.reach_design("loop_norms") == ("looped", "loop_norms")
    assert looped_reach_study.reach_design("highway_depth") == ("depth", "highway_depth")
    assert looped_reach_study.reach_design("highway_control") == ("control", "highway_control")
    assert list(looped_reach_study.claims_answered())[-1] == looped_reach_study.L_SWEEP.name
