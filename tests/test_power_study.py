"""The powered studies' readers: a design's runs, its tests by the compare engine, its regime and its late loss."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from rrlib.views import power_tables
from rrlib.studies import power_study
from rrlib.stats import verdict
from rrlib.stats import detectable_gap


def losses(**by_variant):
    return pd.DataFrame([{"variant": v, "seed": s, "fixed_loss": x} for v, xs in by_variant.items()
                         for s, x in enumerate(xs)])


def test_the_design_is_tested_by_the_compare_engine_under_page_04s_names():
    table = losses(review=[2.00, 2.01, 1.99, 2.02], standard=[2.03, 2.02, 2.02, 2.05],
                   highway=[2.00, 2.02, 2.00, 2.01])
    rows = power_study.tests(table, "review", ["standard", "highway"], "micro")
    engine = verdict.compare_pairs(table, ["review"], ["standard", "highway"])
    assert list(rows["baseline"]) == ["standard", "highway"] and set(rows["size"]) == {"micro"}
    for engine_name, page_name in power_study.TEST_NAMES.items():
        np.testing.assert_allclose(rows[page_name], engine[engine_name])
    assert rows.loc[0, "paired_gap"] == pytest.approx(0.025)  # standard − review, seed by seed
    assert list(rows["p_holm"]) == list(engine["p_holm"])  # Holm over the design's two baselines


def write_metrics(folder, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_late_fall_reads_the_held_out_loss_over_the_last_steps(tmp_path):
    run = write_metrics(tmp_path / "run", [
        {"step": 50, "loss": 3.0}, {"step": 400, "fixed_loss": 2.0}, {"step": 800, "fixed_loss": 1.8},
        {"step": 1000, "loss": 1.7}, {"step": 1200, "fixed_loss": 1.75}])
    assert power_study.late_fall(run, steps=400) == pytest.approx(0.05)  # 1.80 at step 800, 1.75 at 1,200
    assert power_study.late_fall(run, steps=500) == pytest.approx(0.25)  # the last evaluation 500 or more before
    assert np.isnan(power_study.late_fall(run, steps=1000))  # no evaluation that far back
    rising = write_metrics(tmp_path / "rising", [{"step": 400, "fixed_loss": 1.7}, {"step": 800, "fixed_loss": 1.9}])
    assert power_study.late_fall(rising, steps=400) == pytest.approx(-0.2)


def test_regime_is_read_off_the_runs():
    runs = pd.DataFrame({"variant": ["review", "review", "standard"], "steps": [2409] * 3,
                         "tokens": [4_933_632] * 3, "tokens_per_param": [17.0, 17.0, 18.5], "minutes": [3.0, 4.0, 5.0]})
    r = power_study.regime(runs, 2_000_000)
    assert r["runs"] == 3 and r["steps"] == 2409 and r["tokens_per_param"] == (17.0, 18.5)
    assert r["passes"] == pytest.approx(2.466816) and r["cpu_hours"] == pytest.approx(0.2)


def test_design_runs_are_the_finished_ones_asked_for(tmp_path):
    runs = power_study.design_runs("outputs/power/runs", "review_power_micro", ["review", "standard"], [0, 1])
    assert sorted(zip(runs["variant"], runs["seed"])) == [("review", 0), ("review", 1), ("standard", 0),
                                                          ("standard", 1)]
    assert set(runs["status"]) == {"finished"}
    assert power_study.design_runs(str(tmp_path), "review_power_micro", ["review"], [0]).empty


def test_the_power_runs_are_inputs_of_the_pages_that_read_them_and_no_other():
    """Pages 04 and 05 both name the root: a change to its runs rebuilds them, and only them."""
    from rrlib.report.inputs import input_files
    from rrlib.report.notebooks import NOTEBOOKS
    from rrlib.runs.config import project_path

    runs, power = project_path("outputs/runs"), project_path("outputs/power")
    readers = {nb.name for nb in NOTEBOOKS if not nb.per_size
               and any(p.is_relative_to(power) for p in input_files(nb, runs, None))}
    assert readers == {"04_statistics", "05_related_methods", "08_leaderboard"}


def test_a_design_is_read_only_when_every_run_has_finished():
    runs, waiting = power_study.finished_design("outputs/power/runs", "review_power_micro", ["review", "standard"], 2)
    assert len(runs) == 4 and waiting == ""
    runs, waiting = power_study.finished_design("outputs/power/runs", "review_power_micro", ["review"], 1000)
    assert runs is None and re.fullmatch(r"review_power_micro: \d+ of the design's 1000 runs have finished under "
                                         r"outputs/power/runs; its verdict follows when all have", waiting)


def test_the_pilot_fixes_the_seeds_its_largest_paired_sd_needs_and_prices_them_at_its_minutes():
    gaps_standard, gaps_highway = np.array([0.01, 0.03, -0.01, 0.05]), np.array([0.00, 0.01, 0.02, 0.01])
    review = np.array([2.0, 2.1, 2.2, 2.3])
    table = losses(review=review, standard=review + gaps_standard, highway=review + gaps_highway,
                   extra=[9.0] * 4).assign(minutes=6.0)
    table = pd.concat([table, losses(review=[5.0] * 6).iloc[4:].assign(minutes=600.0)])  # seeds 4, 5: not the pilot
    design = power_study.pilot_design(table, "review", ["standard", "highway"], 0.010).set_index("baseline")
    assert design.loc["standard", "sd"] == pytest.approx(np.std(gaps_standard, ddof=1))
    assert design.loc["standard", "seeds_needed"] == verdict.seeds_needed(np.std(gaps_standard, ddof=1), 0.010)
    need = int(design["seeds_needed"].max())
    assert (design["design_seeds"] == need).all() and (design["design_runs"] == 3 * need).all()
    assert design["design_cpu_hours"].iloc[0] == pytest.approx(3 * need * 6.0 / 60)  # the pilot's minutes, 3 rules
    assert design["budget_seeds"].iloc[0] == 12 * 60 // (3 * 6)
    assert not design["within_budget"].iloc[0]
    sentence = power_study.pilot_sentence("micro", design.reset_index())
    assert f"{need} seeds detect 0.01 nats" in sentence and "beyond the 12 given" in sentence
    assert "40 seeds would detect" in sentence
    # each comparison priced alone: two rules at the seeds it needs
    assert design.loc["highway", "comparison_cpu_hours"] == pytest.approx(
        2 * design.loc["highway", "seeds_needed"] * 6.0 / 60)
    assert (f"Alone, review against standard needs {design.loc['standard', 'seeds_needed']} seeds, "
            f"{2 * design.loc['standard', 'seeds_needed']} runs") in sentence
    cheap = power_study.pilot_design(table.assign(minutes=0.1), "review", ["highway"], 0.010)
    assert bool(cheap["within_budget"].iloc[0])
    assert "within the 12 given" in power_study.pilot_sentence("micro", cheap)


def test_a_pilot_is_read_only_once_all_its_runs_have_finished(tmp_path):
    shown, sentence = power_tables.pilot("outputs/power/runs", "review_power_micro", "review", ["standard"], 0.010,
                                        "pilot")
    assert shown is not None and "the pilot's paired SD is" in sentence
    shown, sentence = power_tables.pilot(str(tmp_path), "review_power_micro", "review", ["standard"], 0.010, "pilot")
    assert shown is None and sentence.startswith("review_power_micro: 0 of its pilot's 8 runs")


def test_designs_pooled_for_one_claim_are_one_holm_family():
    micro = pd.DataFrame({"size": "micro", "baseline": ["standard", "highway"], "p": [0.01, 0.04], "p_holm": [0.02, 0.04]})
    mini = pd.DataFrame({"size": "mini", "baseline": ["highway"], "p": [0.02], "p_holm": [0.02]})
    both = power_study.pooled([micro, None, mini])
    assert list(both["size"]) == ["micro", "micro", "mini"]
    assert list(both["p_holm"]) == pytest.approx([0.03, 0.04, 0.04])  # 3 × 0.01, then max(2 × 0.02, ...), 0.04
    assert list(power_study.pooled([micro])["p_holm"]) == pytest.approx([0.02, 0.04])  # alone: its own Holm
    assert power_study.pooled([None, None]) is None


def test_a_finished_design_says_whether_it_reached_the_gap_it_was_sized_for():
    short = {"variant": "review", "baseline": "highway", "detectable": 0.0116, "seeds": 10, "sd": 0.0116}
    line = power_study.reach_sentence(short, 0.010)
    assert "short of the 0.01 it was sized for" in line and "paired SD over all its seeds is 0.0116" in line
    # the detectable gap is proportional to the SD at fixed seeds: 0.010 / 0.0116 of the SD reaches the target
    assert "above the 0.0100 at which 10 seeds detect 0.01" in line
    reached = power_study.reach_sentence({**short, "detectable": 0.0085, "sd": 0.0161}, 0.017)
    assert reached.endswith("detects 0.0085 nats at its 10 seeds, within the 0.017 it was sized for")
    n, sd, target = 12, 0.02, 0.01  # the largest SD it names does detect the target at those seeds
    line = power_study.reach_sentence({**short, "detectable": detectable_gap(sd, n), "sd": sd, "seeds": n}, target)
    largest = float(re.search(r"above the ([0-9.]+)", line).group(1))
    assert detectable_gap(largest, n) == pytest.approx(target, abs=1e-4)
