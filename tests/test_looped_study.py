"""The looped study's grid and estimator (rrlib.studies.looped_study), on synthetic loss curves with known optima."""
import math

import numpy as np
import pandas as pd
import pytest

from rrlib.studies import looped_study as ls
from rrlib.stats import detectable_gap


def curves(optimum_of_n, seeds=range(5), noise=0.0, lrs=None, variant="rule", rng=None):
    """Loss = (log2 lr − log2 optimum(N, seed))² / 10 + 2 on a lattice grid; one row per run."""
    rng = rng or np.random.default_rng(0)
    lrs = lrs or [ls.lattice_lr(k) for k in range(-4, 13)]
    rows = []
    for n in ls.LOOPS:
        for seed in seeds:
            opt = optimum_of_n(n, seed)
            for lr in lrs:
                loss = (math.log2(lr) - math.log2(opt)) ** 2 / 10 + 2 + noise * rng.standard_normal()
                rows.append({"variant": variant, "loops": n, "seed": seed, "lr": lr, "fixed_loss": loss,
                             "stalled": False})
    return pd.DataFrame(rows)


def test_the_lattice_is_sqrt2_apart_and_every_cell_spans_4x_with_at_least_5_points():
    for (rule, n), lrs in ls.base_grid().items():
        ratios = np.diff(np.log2(lrs))
        assert np.allclose(ratios, 0.5, atol=1e-5), (rule, n)
        assert len(lrs) >= 5 and lrs[-1] / lrs[0] >= 4
        assert [ls.lattice_lr(ls.lattice_index(lr)) for lr in lrs] == lrs
    assert set(ls.base_grid()) == {(r, n) for r in ls.RULES for n in ls.LOOPS}


def test_the_parabola_finds_an_optimum_between_grid_points():
    runs = curves(lambda n, s: 0.003)  # between the lattice points 0.00283 and 0.004
    optima = ls.seed_optima(runs)
    assert optima["parabola_lr"].to_numpy() == pytest.approx(0.003, rel=1e-9)
    assert set(optima["grid_lr"]) == {ls.lattice_lr(3)}
    assert optima["at_edge"].isna().all() and (optima["points"] == 17).all()


def test_a_minimum_on_the_edge_is_not_bracketed_and_asks_for_two_more_points():
    runs = curves(lambda n, s: 0.00001)  # far below the grid
    optima = ls.seed_optima(runs)
    assert (optima["at_edge"] == "low").all() and optima["parabola_lr"].isna().all()
    grid = {("rule", n): sorted(runs["lr"].unique()) for n in ls.LOOPS}
    added = ls.extension(optima, grid)
    assert added[("rule", 1)] == [ls.lattice_lr(-6), ls.lattice_lr(-5)]
    # one seed on the edge is not enough, and neither is an edge nobody sits on
    one = optima[(optima["seed"] == 0)]
    assert ls.extension(one, grid) == {}


def test_slopes_read_a_rate_that_halves_with_n_as_minus_one_and_a_fixed_rate_as_zero():
    halving = ls.seed_slopes(ls.seed_optima(curves(lambda n, s: 0.016 / n)))
    assert halving["parabola"].to_numpy() == pytest.approx(-1.0, abs=1e-9)
    fixed = ls.seed_slopes(ls.seed_optima(curves(lambda n, s: 0.005)))
    assert fixed["parabola"].to_numpy() == pytest.approx(0.0, abs=1e-9)
    assert fixed["grid"].to_numpy() == pytest.approx(0.0)


def test_verdicts_separate_moves_transfers_and_undecided():
    rng = np.random.default_rng(1)
    moves = ls.seed_optima(curves(lambda n, s: 0.016 / n * 2 ** (0.05 * s), rng=rng))
    flat = ls.seed_optima(curves(lambda n, s: 0.005 * n ** (0.01 * (s - 2)), rng=rng))
    wobbly = ls.seed_optima(curves(lambda n, s: 0.005 * n ** (0.4 * (s - 2)), rng=rng))
    table = ls.transfer_verdicts(pd.concat([
        ls.seed_slopes(moves.assign(variant="moves")), ls.seed_slopes(flat.assign(variant="flat")),
        ls.seed_slopes(wobbly.assign(variant="wobbly"))]))
    primary = table[table["estimator"] == "parabola"].set_index("variant")
    assert primary.loc["moves", "verdict"] == "moves with N"
    assert primary.loc["moves", "fold_change"] == pytest.approx(1 / 8, rel=1e-6)
    assert primary.loc["flat", "verdict"].startswith("transfers")
    assert primary.loc["wobbly", "verdict"] == "undecided"
    assert (primary["seeds"] == 5).all()
    low, high = primary.loc["wobbly", ["ci_low", "ci_high"]]
    assert low < 0 < high
    wobbly_slopes = ls.seed_slopes(wobbly)["parabola"]
    assert primary.loc["wobbly", "mde"] == pytest.approx(detectable_gap(wobbly_slopes.std(ddof=1), 5))
    assert primary.loc["flat", "mde"] < ls.TRANSFER_MARGIN < primary.loc["wobbly", "mde"]


def test_excluding_stalled_runs_drops_their_learning_rates_for_that_seed():
    runs = curves(lambda n, s: 0.003)
    worst = runs["lr"] == runs["lr"].max()
    runs.loc[worst, "stalled"] = True
    assert (ls.seed_optima(runs, exclude_stalled=True)["points"] == 16).all()
    assert (ls.seed_optima(runs)["points"] == 17).all()


def test_trainability_pairs_the_two_rules_per_n_and_notes_the_identical_n1():
    a = curves(lambda n, s: 0.003, variant="scaled")
    b = curves(lambda n, s: 0.003, variant="scaled_loops")
    b.loc[b["loops"] > 1, "fixed_loss"] += 0.01 * b.loc[b["loops"] > 1, "loops"] + 0.001 * b["seed"]
    table = ls.trainability(ls.seed_optima(pd.concat([a, b]))).set_index("loops")
    assert table.loc[1, "note"] == "the same model at this N" and np.isnan(table.loc[1, "p"])
    assert table.loc[8, "gap"] == pytest.approx(0.08 + 0.002, abs=1e-9)
    assert (table.loc[[2, 4, 8], "p"] < 0.001).all()
    assert (table.loc[[2, 4, 8], "p_holm"] >= table.loc[[2, 4, 8], "p"]).all()


def test_the_plan_is_seed_major_and_names_only_the_rules_whose_grid_holds_that_rate():
    lines = ls.plan(pd.DataFrame(columns=ls.RUN_COLUMNS), seeds=[0, 1])
    seeds = [int(line.split("--seeds ")[1].split()[0]) for line in lines]
    assert seeds == sorted(seeds) and seeds.count(0) == seeds.count(1)
    grid = ls.base_grid()
    for line in lines:
        n = int(line.split("--size looped")[1].split()[0])
        lr = float(line.split("--lr ")[1].split()[0])
        rules = line.split("--variants ")[1].split()[0].split(",")
        assert rules == [r for r in ls.RULES if lr in grid[(r, n)]]
        assert line.endswith(f"--out {ls.OUT_ROOT}/lr{lr:g}")
    assert sum(len(line.split("--variants ")[1].split()[0].split(",")) for line in lines) == 2 * 7 * 12


def test_the_powered_design_trains_the_two_rules_longer_on_their_own_root_and_extends_as_the_first():
    lines = ls.plan(pd.DataFrame(columns=ls.RUN_COLUMNS), [0], ls.POWER)
    assert len(lines) == len(ls.LOOPS) * 5  # five rates per N, both rules in each sweep
    assert all("--variants scaled,scaled_loops " in x and "--steps 1000 " in x and
               "--set train.warmup_steps=100" in x and "--out outputs/looped_power/lr" in x for x in lines)
    rates = sorted({float(x.split("--lr ")[1].split()[0]) for x in lines})
    assert rates == pytest.approx([0.001, 0.001414, 0.002, 0.002828, 0.004], rel=1e-3)
    # a cell whose optimum sits on the high edge for two seeds gets the two lattice points above, as in the grid
    runs = pd.DataFrame([{"variant": "scaled", "loops": 8, "lr": lr, "seed": seed, "fixed_loss": -math.log(lr)}
                         for seed in (0, 1) for lr in ls.base_grid(ls.POWER)[("scaled", 8)]])
    extended = ls.plan(runs, [0], ls.POWER)
    assert any("looped8-lr0.00565685" in x and "--variants scaled " in x for x in extended)
    assert ls.POWER_PILOT_SEEDS == ls.POWER.seeds[:4]


def power_runs(seeds, drop=None, minutes=2.0, fall=-0.25):
    """The powered design's base grid, finished at ``seeds``: 1/N's optimum near 0.002 (a seed-dependent drift),
    1/√N's falling from 0.0028 as N^``fall``; ``drop`` (variant, N, lr, seed) leaves one run out."""
    rows = []
    for (variant, n), lrs in ls.base_grid(ls.POWER).items():
        for seed in seeds:
            opt = 0.002 * 2 ** (0.02 * seed) if variant == "scaled" else 0.0028 * n ** fall
            for lr in lrs:
                if (variant, n, lr, seed) != drop:
                    rows.append({"variant": variant, "loops": n, "seed": seed, "lr": lr, "minutes": minutes,
                                 "fixed_loss": (math.log2(lr) - math.log2(opt)) ** 2 / 10 + 2, "stalled": False})
    return pd.DataFrame(rows)


def test_a_seed_is_complete_only_once_every_rate_of_every_cell_of_its_rule_has_finished():
    lr = ls.base_grid(ls.POWER)[("scaled", 4)][2]
    runs = power_runs(range(3), drop=("scaled", 4, lr, 1))
    grid = ls.design_grid(runs, ls.POWER)
    assert ls.complete_seeds(runs, grid, range(4)) == {"scaled": [0, 2], "scaled_loops": [0, 1, 2]}
    assert ls.grid_runs(grid, range(8)) == 2 * 4 * 5 * 8


def test_the_design_grid_adds_the_extension_its_runs_ask_for_so_a_seed_without_it_is_not_complete():
    runs = power_runs(range(2), fall=-0.5)  # 1/√N's optimum at N = 8 is 0.001: on the low edge for both seeds
    grid = ls.design_grid(runs, ls.POWER)
    assert grid[("scaled_loops", 8)][:2] == [ls.lattice_lr(-2), ls.lattice_lr(-1)]
    assert grid[("scaled", 8)] == ls.base_grid(ls.POWER)[("scaled", 8)]
    assert ls.complete_seeds(runs, grid, range(2)) == {"scaled": [0, 1], "scaled_loops": []}


def test_the_contrast_is_1_over_n_slope_minus_1_over_sqrt_n_slope_paired_by_seed():
    lrs = [ls.lattice_lr(k) for k in range(-6, 6)]
    scaled = curves(lambda n, s: 0.002 * n ** (0.01 * s), seeds=range(6), lrs=lrs, variant="scaled")
    loops = curves(lambda n, s: 0.002 * n ** -0.5, seeds=range(6), lrs=lrs, variant="scaled_loops")
    reading = ls.readings(pd.concat([scaled, loops], ignore_index=True))
    contrast = reading["contrast"].set_index("estimator")
    # per seed 0.01·s − (−0.5): mean 0.525, SD that of 0.01·s over s = 0 … 5
    assert contrast.loc["parabola", "effect"] == pytest.approx(0.525, abs=1e-6)
    assert contrast.loc["parabola", "sd"] == pytest.approx(0.01 * np.std(range(6), ddof=1), rel=1e-4)
    assert contrast.loc["parabola", "n"] == 6 and contrast.loc["parabola", "p"] < 1e-6
    assert set(reading["transfer"]["runs"]) == {"all runs", "stalled runs excluded"}
    assert set(reading["trainability"]["loops"]) == set(ls.LOOPS)
    one_rule = ls.slope_contrast(ls.seed_slopes(ls.seed_optima(scaled)), "parabola")
    assert one_rule["n"] == 0 and np.isnan(one_rule["effect"]) and np.isnan(one_rule["sd"])


def test_the_pilot_fixes_the_most_seeds_either_estimator_needs_but_never_fewer_than_stated():
    pilot = power_runs(range(4), minutes=3.0)
    contrast = pd.DataFrame([{"estimator": "parabola", "n": 4, "effect": 0.3, "sd": 0.2},
                             {"estimator": "grid", "n": 4, "effect": 0.3, "sd": 0.3}])
    fixed = ls.pilot_design(contrast, pilot, 4).set_index("estimator")
    from rrlib.stats.verdict import seeds_needed

    assert fixed.loc["grid", "seeds_needed"] == seeds_needed(0.3, ls.CONTRAST_TARGET) > len(ls.POWER.seeds)
    assert (fixed["design_seeds"] == seeds_needed(0.3, ls.CONTRAST_TARGET)).all()
    assert fixed["pilot_cpu_hours"].iloc[0] == pytest.approx(len(pilot) * 3.0 / 60)
    assert fixed["design_cpu_hours"].iloc[0] == pytest.approx(len(pilot) * 3.0 / 60 / 4 * fixed["design_seeds"].iloc[0])
    quiet = ls.pilot_design(contrast.assign(sd=0.01), pilot, 4)
    assert (quiet["seeds_needed"] < len(ls.POWER.seeds)).all() and (quiet["design_seeds"] == len(ls.POWER.seeds)).all()


def test_a_seed_part_way_through_a_cell_does_not_extend_it():
    # seeds 0-2 finished with interior optima; seeds 3 and 4 have run only the two lowest rates of every cell, whose
    # lower one is their own argmin's edge there: they must not call for an extension
    runs = power_runs(range(5))
    lowest = {cell: sorted(lrs)[:2] for cell, lrs in ls.base_grid(ls.POWER).items()}
    partial = [(r.seed >= 3) and r.lr not in lowest[(r.variant, r.loops)] for r in runs.itertuples()]
    runs = runs[~pd.Series(partial, index=runs.index)]
    assert ls.design_grid(runs, ls.POWER) == ls.base_grid(ls.POWER)
    assert ls.complete_seeds(runs, ls.design_grid(runs, ls.POWER), range(5)) == {"scaled": [0, 1, 2],
                                                                                 "scaled_loops": [0, 1, 2]}


def test_the_pilot_reads_its_own_grid_when_later_seeds_extend_a_cell():
    # seeds 0-3 (the pilot) have interior optima; seeds 4 and 5 put 1/√N's N = 8 optimum on the low edge, which
    # adds two rates for every seed, and the pilot's seeds have run one of them so far
    pilot = power_runs(range(4))
    later = power_runs(range(4, 6), fall=-0.5)
    low = ls.lattice_lr(-1)
    extra = pilot[(pilot["variant"] == "scaled_loops") & (pilot["loops"] == 8)].drop_duplicates("seed").assign(lr=low)
    runs = pd.concat([pilot, later, extra], ignore_index=True)
    assert len(ls.design_grid(runs, ls.POWER)[("scaled_loops", 8)]) == 7
    assert ls.complete_seeds(runs, ls.design_grid(runs, ls.POWER), range(4))["scaled_loops"] == []
    grid, own = ls.seeds_own_grid(runs, ls.POWER_PILOT_SEEDS, ls.POWER)
    assert grid == ls.base_grid(ls.POWER)
    assert own.equals(pilot.reset_index(drop=True))
    assert ls.complete_seeds(own, grid, range(4)) == {"scaled": [0, 1, 2, 3], "scaled_loops": [0, 1, 2, 3]}


def test_a_seeds_own_grid_keeps_the_extension_its_seeds_call_for_before_they_have_run_it():
    runs = power_runs(range(2), fall=-0.5)  # both seeds on 1/√N's low edge at N = 8: the rule adds two rates
    grid, own = ls.seeds_own_grid(runs, [0, 1], ls.POWER)
    assert grid == ls.design_grid(runs, ls.POWER) and len(grid[("scaled_loops", 8)]) == 7
    assert len(own) == len(runs) and ls.complete_seeds(own, grid, [0, 1])["scaled_loops"] == []


def test_a_study_without_runs_has_its_base_grid_and_no_complete_seed():
    grid, own = ls.seeds_own_grid(power_runs(range(2)).iloc[:0], ls.POWER_PILOT_SEEDS, ls.POWER)
    assert grid == ls.base_grid(ls.POWER) and len(own) == 0
    assert ls.complete_seeds(own, grid, ls.POWER_PILOT_SEEDS) == {"scaled": [], "scaled_loops": []}


def test_the_ledger_reads_the_powered_looped_design_only_once_it_has_finished(monkeypatch):
    from rrlib.claims import assemble as ledger
    from rrlib.results import looped, looped_power

    monkeypatch.setattr(looped, "reading", lambda root: "the 200-step study")
    monkeypatch.setattr(looped_power, "reading", lambda root: None)  # its runs not all finished
    assert ledger.looped_reading() == ("the 200-step study", "05_looped", False)
    monkeypatch.setattr(looped_power, "reading", lambda root: "the powered design")
    assert ledger.looped_reading() == ("the powered design", "05_looped_power", True)
    assert ledger.looped_reading("grid", None) == ("the 200-step study", "05_looped", False)  # a quick build
