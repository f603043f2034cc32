"""The ledger rows page 07 builds in the library: the mechanism readings of the depth probes, the no-gain rule over
several comparisons, and the rows a record alone makes (registered before its runs; out of reach with its cost)."""
import numpy as np
import pandas as pd
import pytest

from rrlib.claims import mechanisms, records, rows
from rrlib.stats import ledger

CLAIMS = records.by_id()


def probe(values, variant="standard", seed=0, state="trained", metric="read_rms"):
    return pd.DataFrame({"variant": variant, "seed": seed, "state": state, "index": range(len(values)),
                         "sublayer": [f"{'attn' if i % 2 == 0 else 'mlp'}{i // 2}" for i in range(len(values))],
                         metric: values})


def test_the_endpoint_reading_is_log2_of_the_last_sublayer_over_the_first():
    assert mechanisms.endpoint_growth(probe([1.0, 3.0, 2.0, 4.0]), "read_rms") == pytest.approx(2.0)
    scales = pd.concat([probe([1.0, 1.0, 1.0, 2.0], state="init"), probe([1.0, 1.0, 1.0, 8.0])])
    assert mechanisms.learned_growth(scales, "standard", "read_rms", "endpoint").tolist() == pytest.approx([2.0])
    with pytest.raises(ValueError, match="reading 'middle' is none of endpoint, fit"):
        mechanisms.learned_growth(scales, "standard", "read_rms", "middle")


def test_growth_by_depth_pairs_standard_against_the_rule_by_seed_in_both_readings():
    frames = []
    for seed, grown in enumerate([8.0, 16.0, 4.0]):
        for variant, last in (("standard", grown), ("mgr", 2.0)):
            frames += [probe([1.0, 1.0, 1.0, 1.0], variant, seed, "init"), probe([1.0, 1.0, 1.0, last], variant, seed)]
    scales = pd.concat(frames).assign(depth="depth8")
    out = mechanisms.growth_by_depth(scales, {"mgr": "read_rms"}, ["depth8"]).iloc[0]
    assert out["endpoint_effect"] == pytest.approx(np.mean([3 - 1, 4 - 1, 2 - 1]))  # log2 8, 16, 4 less log2 2
    assert out["n"] == 3 and out["endpoint_p"] < 0.1 and np.isfinite(out["effect"])


def test_the_routing_contrast_reads_the_deeper_half_trained_minus_init():
    def reads(variant, seed, state, weight):
        return pd.DataFrame({"variant": variant, "seed": seed, "state": state, "index": range(4),
                             "sublayer": ["attn0", "mlp0", "attn1", "mlp1"], "max_weight": [0.9, 0.9, weight, weight],
                             "uniform": [1.0, 0.5, 1 / 3, 0.25]})
    probes = pd.concat([reads(v, s, st, w) for s in range(3) for v, w in (("attnres", 0.4), ("delta", 0.6 + s / 100))
                        for st, w in (("init", 0.3), ("trained", w))])
    out = mechanisms.routing_contrast(probes, "attnres", "delta")
    assert out["effect"] == pytest.approx(0.21) and out["n"] == 3  # deeper half: reads 2 and 3; 0.6 + s/100 − 0.4


def comparisons(gaps, sd=0.002, n=20):
    half = 2.093 * sd / np.sqrt(n)  # t_{0.975, 19}
    return pd.DataFrame({"size": [f"s{i}" for i in range(len(gaps))], "baseline": "standard", "paired_gap": gaps,
                         "ci_low": np.array(gaps) - half, "ci_high": np.array(gaps) + half, "paired_n": n,
                         "mde": 0.001, "p": 1e-5})


def test_a_no_gain_claim_over_several_comparisons_is_judged_at_its_margin():
    claim = CLAIMS["review-no-gain-paper"]  # margin 0.009, the paper's smallest reported gain
    inside = rows.no_gain(claim, comparisons([0.004, -0.002]), "here", "")
    assert inside["verdict"] == "supported" and inside["effect"] == pytest.approx(0.004)  # significant, yet no gain
    beyond = rows.no_gain(claim, comparisons([0.004, 0.02]), "here", "")
    assert beyond["verdict"] == "contradicted" and beyond["effect"] == pytest.approx(0.02)
    wide = rows.no_gain(claim, comparisons([0.004, 0.0], sd=0.03, n=3), "here", "")
    assert wide["verdict"] == "inconclusive" and wide["margin"] == claim.margin_value


def test_a_record_alone_makes_a_pending_or_an_out_of_reach_row():
    waiting = rows.pending(CLAIMS["highway-hundreds-of-layers"])
    assert ledger.verdict_kind(waiting["verdict"]) == "untested" and waiting["margin"] == 2.5
    far = rows.beyond_reach(CLAIMS["review-gain-590m-harness"], 1e10)
    assert far["verdict"].startswith("out of reach: needs 9 runs of the 590m recipe") and far["paper_effect"] == 0.009
    assert rows.beyond_reach(CLAIMS["mgr-communication"], 1e10)["verdict"] == \
        "out of reach: needs several devices under model-parallel training"


def test_the_paper_run_rows_state_1b_as_the_paper_does_beside_the_paired_reading():
    """On the paper's committed runs: 1B is supported by the paired test, its record's words are the paper's strong
    trend, the paper's own Welch p stands in the test, and the effect set against the design is the stated +0.016."""
    from pathlib import Path

    from rrlib.claims import review
    from rrlib import stats

    root = Path(__file__).resolve().parents[1]
    tests = pd.read_csv(root / "paper/tables/04_paper_tests.csv")
    made = {r["claim"]: r for r in review.paper_run_rows(CLAIMS, tests, stats.load_results(
        root / "outputs/reference/scaling_v8.csv"), "e")}
    one_b = made[CLAIMS["review-gain-1b"].label]
    assert one_b["verdict"] == "supported" and one_b["paper_effect"] == 0.016
    assert "Welch's t on the per-seed losses: vs highway p 0.083, vs standard p 0.077" in one_b["test"]
    assert one_b["p"] == pytest.approx(tests.query("size == '1B' and baseline == 'highway'")["paired_p"].iloc[0])
    assert made[CLAIMS["review-no-gain-paper"].label]["verdict"] == "inconclusive"  # 3 seeds cannot show < 0.009
    assert made[CLAIMS["review-standard-better-60m"].label]["paper_effect"] == 0.009


def test_the_looped_transfer_row_holds_only_if_the_supplementary_extension_agrees():
    from rrlib.claims import looped

    def estimate(runs, p_equivalent, slope=0.02):
        return {"variant": "scaled", "estimator": "parabola", "seeds": 8, "slope": slope, "ci_low": slope - 0.05,
                "ci_high": slope + 0.05, "p": 0.5, "p_equivalent": p_equivalent, "mde": 0.07, "verdict": "v",
                "runs": runs}
    claim = CLAIMS["looped-transfer"]
    agreeing = pd.DataFrame([estimate("all runs", 0.01), estimate("all runs", 0.02),
                             estimate("edge cells extended", 0.03)])
    assert looped.transfer_row(claim, agreeing, "s", "e")["verdict"] == "supported"
    split = pd.DataFrame([estimate("all runs", 0.01), estimate("all runs", 0.02),
                          estimate("edge cells extended", 0.3)])
    row = looped.transfer_row(claim, split, "s", "e")
    assert row["verdict"] == "inconclusive" and row["margin"] == claim.margin_value
    assert looped.trainability_row(CLAIMS["looped-trainability"],
                                   pd.DataFrame({"loops": [1], "gap": [0.0], "ci_low": [np.nan], "ci_high": [np.nan],
                                                 "p": [np.nan], "seeds": [8]}), "s", "e") is None


def test_beating_every_baseline_is_decided_by_the_largest_p_and_the_conversion_by_the_default_recipe():
    from rrlib.claims import conversion, family

    tests = pd.DataFrame({"gap": [0.02, 0.004], "ci_low": [0.01, -0.002], "ci_high": [0.03, 0.02],
                          "p": [0.001, 0.2], "seeds": [8, 8], "detectable": [0.009, 0.011]},
                         index=pd.Index(["standard", "attnres"], name="baseline"))
    row = family.beats_all(CLAIMS["delta-beats-per-sublayer"], tests, "delta_attnres", "here", "e")
    assert row["verdict"] == "inconclusive" and row["effect"] == 0.004 and row["detectable"] == 0.011
    assert row["paper_effect"] == CLAIMS["delta-beats-per-sublayer"].stated_effect
    arm = {"gap": -0.0044, "ci_low": -0.006, "ci_high": -0.0025, "p": 0.003, "p_equivalent": 0.9, "seeds": 5,
           "detectable": 0.0026}
    arms = {"without a gate (the code's default)": pd.Series(arm),
            "with the identity gate": pd.Series({**arm, "gap": 0.002, "ci_low": 0.001, "ci_high": 0.003})}
    made = conversion.ends_better(CLAIMS["delta-conversion"], arms, "s", pd.DataFrame(), 0.02, "e")
    assert made["verdict"] == "contradicted" and made["effect"] == -0.0044  # the gated form does not rescue it


def test_an_out_of_reach_row_without_a_measured_rate_says_so():
    assert rows.beyond_reach(CLAIMS["mgr-large-scale"], float("nan"))["verdict"] == (
        "out of reach: needs 2 runs of the 1b recipe (no CPU runs here to price them by)")


@pytest.mark.parametrize("gap, ci, verdict", [(-0.0044, (-0.006, -0.0025), "supported"),  # worse, within 0.02
                                              (-0.03, (-0.035, -0.025), "contradicted"),  # shown 0.025+ worse
                                              (-0.01, (-0.04, 0.02), "inconclusive")])  # too wide to tell
def test_the_conversion_is_non_inferior_where_its_shortfall_is_shown_below_the_margin(gap, ci, verdict):
    from rrlib.claims import conversion

    arm = {"gap": gap, "ci_low": ci[0], "ci_high": ci[1], "p": 0.01, "seeds": 5, "detectable": 0.003}
    arms = {"without a gate (the code's default)": pd.Series(arm),
            "with the identity gate": pd.Series({**arm, "gap": 0.5, "ci_low": 0.4, "ci_high": 0.6})}
    made = conversion.non_inferior(CLAIMS["delta-conversion-noninferior"], arms, "s", "e")
    assert made["verdict"] == verdict and made["margin"] == 0.02
    assert (made["effect"], made["ci_low"], made["ci_high"]) == (-gap, -ci[1], -ci[0])  # the shortfall, signed
    assert "beside it, with the identity gate -0.5000 [-0.6000, -0.4000]" in made["test"]
