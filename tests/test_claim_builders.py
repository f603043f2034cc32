"""The row and table builders page 07 calls (rrlib.claims.gate, conversion, mechanisms, family, looped, review,
sources): each judged on constructed cases, and each untested row naming what it waits for."""
import numpy as np
import pandas as pd
import pytest

from rrlib.claims import conversion, family, gate, looped, mechanisms, page, records, review, rows, sources

CLAIMS = records.by_id()


def test_the_gate_is_neutral_only_when_it_starts_at_one_half_and_spreads_in_every_sublayer():
    spread = pd.DataFrame({"r_sd": [0.09, 0.06, 0.07]})
    made = gate.neutral_row(CLAIMS["review-gate-neutral"], 0.0, spread, "family", "e")
    assert made["verdict"] == "supported" and made["effect"] == 0.06
    assert gate.neutral_row(CLAIMS["review-gate-neutral"], 1e-7, spread, "family", "e")["verdict"] == "contradicted"
    flat = spread.assign(**{"r_sd": [0.09, 0.04, 0.07]})
    assert gate.neutral_row(CLAIMS["review-gate-neutral"], 0.0, flat, "family", "e")["verdict"] == "contradicted"


def test_a_fresh_review_gate_starts_exactly_neutral():
    assert gate.init_deviation("tiny", 0, 2) == 0.0


def test_the_gate_share_is_counted_from_the_model_and_judged_at_every_size():
    counted = gate.share_table(["60m", "1b"])
    assert (counted["gate_params"] > 0).all() and (counted["gate_share"] < 0.5).all()
    assert counted["gate_share"].tolist() == pytest.approx((counted["gate_params"] / counted["review_params"]).tolist())
    shares = pd.DataFrame({"size": ["a", "b"], "gate_share": [0.065, 0.079]})
    made = gate.params_row(CLAIMS["review-gate-params"], shares, "e")
    assert made["verdict"] == "supported" and made["effect"] == 0.065 and "a 6.5%, b 7.9%" in made["test"]
    assert gate.params_row(CLAIMS["review-gate-params"], shares.assign(gate_share=[0.07, 0.081]),
                           "e")["verdict"] == "contradicted"


def runs(variant, losses):
    return pd.DataFrame({"variant": variant, "seed": range(len(losses)), "fixed_loss": losses})


def test_the_gate_halves_are_read_against_the_committed_review_and_the_state_only_half_decides():
    own = pd.concat([runs("review_state_only", [2.05, 2.06, 2.07]), runs("review", [9.0, 9.0, 9.0])])
    committed = pd.concat([runs("review", [2.0, 2.02, 2.01]), runs("highway", [2.03, 2.01, 2.05]),
                           runs("rezero", [3.0, 3.0, 3.0])])
    halves = gate.halves_runs(own, committed, ["review_state_only"])
    assert sorted(set(halves["variant"])) == ["highway", "review", "review_state_only"]
    assert halves.loc[halves["variant"] == "review", "fixed_loss"].max() < 3  # the committed review, not page 07's
    assert gate.halves_seeds(halves) == 3 and gate.halves_seeds(halves[halves["variant"] != "review"]) == 0
    table = gate.halves_table(halves)
    made = gate.halves_row(CLAIMS["review-update-conditioning"], table, "family", "e")
    assert made["effect"] == pytest.approx(0.05) and made["p"] == table.loc["review_state_only", "p_holm"]
    assert "Holm over the 2 comparisons" in made["correction"] and "highway − review" in made["test"]


def growth_table(ps, n=3):
    return pd.DataFrame({"rule": "mgr", "depth": ["depth8", "depth16"], "metric": "read_rms", "n": n,
                         "effect": [0.3, 0.2], "ci_low": [0.1, 0.0], "ci_high": [0.5, 0.4], "p": [0.01, 0.04],
                         "mde": [0.2, 0.3], "endpoint_effect": [0.1, -0.05], "endpoint_ci_low": [-0.1, -0.3],
                         "endpoint_ci_high": [0.3, 0.2], "endpoint_p": ps, "endpoint_mde": [0.4, 0.5]})


def test_a_growth_row_reads_its_own_readings_columns_and_holds_only_at_every_depth():
    claim = CLAIMS["mgr-activation-scales"]
    registered = mechanisms.growth_row(claim, growth_table([0.3, 0.6]), "mgr", "endpoint", 3, "e")
    assert registered["verdict"] == "inconclusive" and registered["effect"] == -0.05 and registered["detectable"] == 0.5
    fitted = mechanisms.growth_row(claim, growth_table([0.3, 0.6]), "mgr", "fit", 3, "e")
    assert fitted["verdict"] == "supported" and fitted["p"] == 0.04 and fitted["effect"] == 0.2
    waiting = mechanisms.growth_row(claim, growth_table([0.3, 0.6], n=2), "mgr", "fit", 3, "e")
    assert waiting["verdict"] == "untested: the mgr and standard depth-probe runs not finished (2 of 3 seeds)"
    with pytest.raises(ValueError, match="reading 'middle' is none of endpoint, fit"):
        mechanisms.growth_row(claim, growth_table([0.3, 0.6]), "mgr", "middle", 3, "e")


def test_the_routing_row_holds_at_every_depth_and_shows_the_block_forms_beside_it():
    by_depth = pd.DataFrame({"depth": ["depth8", "depth16"], "attnres": [0.1, 0.1], "delta_attnres": [0.3, 0.2],
                             "uniform": [0.1, 0.05], "effect": [0.2, 0.1], "ci_low": [0.1, -0.01],
                             "ci_high": [0.3, 0.45], "p": [0.01, 0.07], "mde": [0.1, 0.15], "n": [3, 3]})
    block = {"n": 3, "attnres_block": 0.01, "delta_attnres_block": 0.02, "effect": 0.01, "ci_low": -0.01,
             "ci_high": 0.03, "p": 0.2}
    made = mechanisms.routing_row(CLAIMS["delta-routing"], by_depth, block, "family", 4, 3, "e")
    assert made["verdict"] == "inconclusive" and made["effect"] == 0.1 and made["detectable"] == 0.15
    assert made["paper_effect"] == CLAIMS["delta-routing"].stated_effect and "per block at family (4 blocks)" in \
        made["test"]
    # the deciding depth's interval below the paper's 0.4: the paper's contrast is ruled out at this scale
    below = mechanisms.routing_row(CLAIMS["delta-routing"], by_depth.assign(ci_high=[0.3, 0.21]), block, "family",
                                   4, 3, "e")
    assert below["verdict"] == "contradicted" and "ruled out at this scale" in below["test"]
    assert mechanisms.routing_row(CLAIMS["delta-routing"], mechanisms.routing_by_depth(pd.DataFrame(), ["depth8"]),
                                  {"n": 0}, "family", 4, 3, "e")["verdict"].startswith("untested: ")
    assert mechanisms.block_contrast(pd.DataFrame()) == {"n": 0}


def test_the_conversion_arms_pair_each_recipe_with_the_same_continued_runs_and_holm_spans_the_two():
    continued = pd.concat([runs("standard", [2.0, 2.1, 2.2]), runs(conversion.CONVERTED, [2.01, 2.12, 2.205])])
    gated = runs(conversion.CONVERTED, [1.99, 2.095, 2.18])
    tests = conversion.arm_tests(continued, gated, 0.02)
    assert list(tests) == [conversion.DEFAULT, conversion.GATED] and conversion.seeds_done(tests) == 3
    assert tests[conversion.DEFAULT]["gap"] == pytest.approx(-0.0117, abs=1e-4)
    assert tests[conversion.GATED]["gap"] == pytest.approx(0.035 / 3)
    table = conversion.arms_table(tests)
    assert table["p_holm"].astype(float).min() == pytest.approx(2 * table["p"].astype(float).min())
    assert conversion.arm_tests(continued[continued["variant"] == "standard"], gated, 0.02).keys() == \
        {conversion.GATED}
    assert conversion.seeds_done({}) == 0


def test_a_family_claim_reads_the_powered_design_alone_once_it_has_finished():
    power = pd.DataFrame({"variant": "delta_attnres", "baseline": ["standard", "attnres"], "size": "family_power",
                          "gap": [0.02, 0.01], "ci_low": [0.01, 0.004], "ci_high": [0.03, 0.016], "p": [0.001, 0.004],
                          "seeds": [12, 12], "detectable": [0.008, 0.007]})
    assert family.powered(None, "mgr") is None and family.powered(power, "mgr") is None
    made = family.beats_both(CLAIMS["delta-beats-per-sublayer"], "delta_attnres", "attnres", power, pd.DataFrame(),
                             "family")
    assert made["verdict"] == "supported" and made["p"] == 0.004 and "the powered design" in made["test"]
    assert made["evidence"].endswith("tables/05_power_tests.csv")
    none = family.beats_both(CLAIMS["delta-beats-per-sublayer"], "delta_attnres", "attnres", None,
                             pd.DataFrame(columns=["variant"]), "family")
    assert none["verdict"] == "untested: no family runs of delta_attnres"
    assert family.powered_gain(CLAIMS["mgr-gain"], "mgr", power) is None
    assert family.over(CLAIMS["mhc-over-hc"], "mhc", "hc", pd.DataFrame(columns=["variant"]), "family")["verdict"] \
        == "untested: no family runs of hc and mhc"


def test_every_row_waits_with_the_table_it_needs_named():
    assert [r["verdict"] for r in review.depth_rows(CLAIMS, None, ("e", "e"))] == \
        ["untested: no runs yet for the result it reads (02_runs)"] * 2
    assert len(review.paper_run_rows(CLAIMS, None, pd.DataFrame(), "e")) == len(review.PAPER_RUN_CLAIMS)
    assert review.trend_row(CLAIMS, None, "e")["verdict"] == "untested: no runs yet for the result it reads (04_paper_trend)"
    assert review.size_row(CLAIMS, None, np.nan, "e")["claim"] == CLAIMS["review-size-not-budget"].label
    assert review.no_gain_cpu_row(CLAIMS["review-no-gain-cpu"], None, [], None, None)["verdict"] == \
        "untested: no runs yet for the result it reads (04_ours_tests)"
    assert family.gain_over_standard(CLAIMS["hc-gain"], "hc", None, pd.DataFrame(), "family", "e")["verdict"] == \
        "untested: no runs yet for the result it reads (05_family_summary)"
    waiting = looped.ledger_rows(CLAIMS, None, None, None, False, "e")
    assert [r["claim"] for r in waiting] == [CLAIMS[c].label for c in
                                             ("looped-trainability", "looped-transfer", "looped-contrast")]
    assert {r["verdict"] for r in waiting} == {"untested: study in progress (no seed has finished every cell)"}


def test_a_missing_run_folder_reads_as_no_runs_and_no_rate(tmp_path):
    empty = sources.finished(str(tmp_path), "family", [0, 1])
    assert empty.empty and list(empty.columns) == ["variant", "seed"]
    assert np.isnan(sources.cpu_rate(str(tmp_path), "family"))
    assert rows.link("07_claims", "07_growth", "07_growth.png") == \
        "07_claims.reader.html; tables/07_growth.csv; figures/07_growth.png"


def test_the_forest_shows_every_tested_row_with_an_interval_and_labels_the_exploratory_ones():
    df = pd.DataFrame({"id": ["a", "a-fit", "b", "c"], "status": ["registered", "exploratory", "registered",
                                                                   "registered"],
                       "verdict": ["supported", "inconclusive", "untested: waiting", "supported"],
                       "ci_low": [0.1, -0.2, np.nan, np.nan]})
    assert page.forest_rows(df)["label"].tolist() == ["a", "a-fit (exploratory)"]


def test_the_study_note_counts_the_planned_runs_and_compares_a_retrained_run_with_its_committed_one(tmp_path):
    own = pd.DataFrame({"variant": ["review", "hc"], "seed": [0, 0], "fixed_loss": [2.0, 2.5], "minutes": [1.0, 2.0]})
    committed = own.assign(fixed_loss=[2.00003, 2.5])
    plan = [{"variants": ["review", "hc", "mgr"], "seeds": [0, 1]}]
    first, second = sources.study_note(plan, "family", "claims", own, committed, str(tmp_path), "family_mini", [0])
    assert first == "This page's study: 6 runs at family (2 of its runs under claims finished, 1.5 min of training " \
                    "each on average)."
    assert second == "2 retrained runs against their committed results: largest |Δ fixed_loss| 3e-05"
    assert len(sources.study_note(plan, "family", "claims", own.iloc[:0], committed, str(tmp_path), "", [0])) == 1
