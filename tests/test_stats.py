"""rrlib.stats: the paper's headline and Welch statistics, paired tests, Holm, edge cases, verdicts."""
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from rrlib import stats
from rrlib.home import REFERENCE_CSV

HEADLINE = {  # the paper's table: mean val_loss per size for review, highway, standard
    "60M": (1.6891, 1.6923, 1.6805), "150M": (1.5576, 1.5625, 1.5548), "320M": (1.5001, 1.5042, 1.5037),
    "590M": (1.4795, 1.4889, 1.4901), "1B": (1.4876, 1.5031, 1.5040),
}


@pytest.fixture(scope="module")
def paper():
    return stats.load_results(REFERENCE_CSV)


@pytest.fixture(scope="module")
def paper_table(paper):
    return stats.compare(paper, "val_loss")


def runs(size="60m", params=60.0, **variants) -> pd.DataFrame:
    """A results table for one size: variant=[loss per seed 0, 1, ...] or {seed: loss}."""
    rows = []
    for variant, losses in variants.items():
        by_seed = losses if isinstance(losses, dict) else dict(enumerate(losses))
        rows += [{"size": size, "variant": variant, "seed": s, "params_M": params, "val_loss": v, "fixed_loss": v,
                  "ece": v / 100}
                 for s, v in by_seed.items()]
    return pd.DataFrame(rows)


def row(table, size, baseline):
    return table[(table["size"] == size) & (table["baseline"] == baseline)].iloc[0]


def test_headline_reproduces_paper_means(paper):
    table = stats.headline(paper, "val_loss")
    assert list(table.index) == list(HEADLINE)  # ordered by parameters, not by name
    assert list(table.columns) == ["review", "highway", "standard"]
    np.testing.assert_allclose(table.round(4).to_numpy(), np.array(list(HEADLINE.values())), atol=1e-9)


def test_welch_reproduces_paper_statistics(paper_table):
    table = paper_table
    for size, baseline, t in [("590M", "highway", 3.28), ("590M", "standard", 3.67),
                              ("1B", "highway", 2.31), ("1B", "standard", 2.36)]:
        assert row(table, size, baseline)["welch_t"] == pytest.approx(t, abs=0.005)
    # the paper's reading: Welch p < 0.05 at 590M, not at 1B
    assert (table.loc[table["size"] == "590M", "welch_p"] < 0.05).all()
    assert (table.loc[table["size"] == "1B", "welch_p"] > 0.05).all()
    assert row(table, "1B", "standard")["gap"] == pytest.approx(1.5040 - 1.4876, abs=1e-4)


def test_paired_matches_scipy_on_hand_made_pairs():
    review, highway = [1.50, 1.47, 1.52, 1.49], [1.51, 1.49, 1.525, 1.51]
    result = row(stats.compare(runs(review=review, highway=highway), n_boot=0), "60m", "highway")
    ref = sps.ttest_rel(highway, review)
    assert result["paired_t"] == pytest.approx(ref.statistic)
    assert result["paired_p"] == pytest.approx(ref.pvalue)
    assert result["paired_p_one"] == pytest.approx(sps.ttest_rel(highway, review, alternative="greater").pvalue)
    assert result["paired_p_one"] == pytest.approx(ref.pvalue / 2)  # Review better: the one-sided half
    assert result["paired_df"] == 3 and result["test"] == "paired" and result["p"] == result["paired_p"]
    ci = ref.confidence_interval(0.95)
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((ci.low, ci.high))
    diffs = np.subtract(highway, review)
    assert result["d_z"] == pytest.approx(diffs.mean() / diffs.std(ddof=1))
    pooled = np.sqrt((np.var(review, ddof=1) + np.var(highway, ddof=1)) / 2)  # equal n
    assert result["cohen_d"] == pytest.approx(diffs.mean() / pooled)
    assert result["welch_t"] == pytest.approx(sps.ttest_ind(highway, review, equal_var=False).statistic)


def test_paired_test_is_stronger_than_welch_on_the_paper(paper_table):
    table = paper_table
    top = table[table["size"].isin(["590M", "1B"])]
    assert (top["paired_p"] < top["welch_p"]).all()
    assert (top["paired_n"] == 3).all() and (top["note"] == "no bootstrap: 3 seeds give 10 distinct resamples").all()


def test_holm_against_hand_computation():
    # sorted 0.005, 0.01, 0.03, 0.04 scaled by 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max 0.06
    np.testing.assert_allclose(stats.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    # NaN is not part of the family (m = 2) and stays NaN; adjusted values are capped at 1
    np.testing.assert_allclose(stats.holm([0.5, np.nan, 0.4]), [0.8, np.nan, 0.8])
    np.testing.assert_allclose(stats.holm([0.6, 0.7]), [1.0, 1.0])


def test_benjamini_hochberg_against_hand_computation():
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): scaled 0.02, 0.02, 0.04, 0.04; running minimum from the top keeps them
    np.testing.assert_allclose(stats.benjamini_hochberg([0.01, 0.04, 0.03, 0.005]), [0.02, 0.04, 0.04, 0.02])
    # 0.01, 0.02, 0.5 (m = 3): 0.03, 0.03, 0.5 — the second's 0.03 is its own, the first takes the minimum above it
    np.testing.assert_allclose(stats.benjamini_hochberg([0.02, 0.5, 0.01]), [0.03, 0.5, 0.03])
    np.testing.assert_allclose(stats.benjamini_hochberg([0.5, np.nan, 0.4]), [0.5, np.nan, 0.5])
    p = np.random.default_rng(1).uniform(0, 0.2, 12)
    assert (stats.benjamini_hochberg(p) <= stats.holm(p) + 1e-15).all()


def test_holm_covers_the_whole_family(paper_table):
    table = paper_table
    assert len(table) == 10
    np.testing.assert_allclose(table["p_holm"], stats.holm(table["p"]))
    assert (table["p_holm"] >= table["p"]).all()
    assert list(table["significant"]) == list(table["p_holm"] < 0.05)


REVIEW8, HIGHWAY8 = [1.50, 1.47, 1.52, 1.49, 1.48, 1.46, 1.51, 1.50], [1.51, 1.49, 1.525, 1.51, 1.50, 1.47, 1.53, 1.50]


def test_bootstrap_is_seeded_and_brackets_the_gap():
    df = runs(review=REVIEW8, highway=HIGHWAY8)
    a, b = stats.compare(df, seed=3), stats.compare(df, seed=3)
    assert a[["boot_low", "boot_high"]].equals(b[["boot_low", "boot_high"]])
    # a short bootstrap, so that another seed visibly moves the percentiles
    short = [tuple(stats.compare(df, n_boot=50, seed=s).iloc[0][["boot_low", "boot_high"]]) for s in range(5)]
    assert len(set(short)) > 1
    first = a.iloc[0]
    assert first["boot_low"] < first["paired_gap"] < first["boot_high"]
    diffs = np.subtract(HIGHWAY8, REVIEW8)
    assert diffs.min() <= first["boot_low"] and first["boot_high"] <= diffs.max()


def test_the_bootstrap_is_skipped_where_few_seeds_make_its_percentiles_single_resamples():
    assert stats.distinct_resamples([3]) == 10 and stats.distinct_resamples([5]) == 126
    assert stats.distinct_resamples([3, 3]) == 100
    assert [n for n in range(2, 12) if stats.bootstrap_allowed([n])] == list(range(7, 12))
    assert not stats.bootstrap_allowed([5], alpha=0.05) and stats.bootstrap_allowed([5], alpha=0.5)
    five = stats.compare(runs(review=REVIEW8[:5], highway=HIGHWAY8[:5])).iloc[0]
    assert np.isnan(five["boot_low"]) and np.isnan(five["boot_high"]) and np.isfinite(five["ci_low"])
    assert "no bootstrap: 5 seeds give 126 distinct resamples" in five["note"]
    eight = stats.compare(runs(review=REVIEW8, highway=HIGHWAY8)).iloc[0]
    assert np.isfinite(eight["boot_low"]) and "bootstrap" not in eight["note"]


def test_the_detectable_gap_has_the_power_it_claims():
    rng = np.random.default_rng(0)
    sd, n = 0.02, 5
    mde = stats.detectable_gap(sd, n)
    # simulated paired t-tests at that true gap reject about 80 % of the time, at half of it far less often
    def power(gap, trials=4000):
        d = rng.normal(gap, sd, (trials, n))
        return (sps.ttest_1samp(d, 0, axis=1).pvalue < 0.05).mean()
    assert power(mde) == pytest.approx(0.8, abs=0.025)
    assert power(mde / 2) < 0.45
    assert stats.detectable_gap(sd, 20) < mde / 2  # more seeds resolve smaller gaps
    assert np.isnan(stats.detectable_gap(0.0, 5)) and np.isnan(stats.detectable_gap(sd, 1))
    row5 = stats.compare(runs(review=REVIEW8[:5], highway=HIGHWAY8[:5])).iloc[0]
    sd5 = np.std(np.subtract(HIGHWAY8[:5], REVIEW8[:5]), ddof=1)
    assert row5["mde"] == pytest.approx(stats.detectable_gap(sd5, 5))


def test_equivalence_is_two_one_sided_tests():
    d = np.array([0.001, -0.002, 0.0015, 0.0, -0.001])
    p = stats.equivalence_p(d, 0.01)
    se = d.std(ddof=1) / np.sqrt(5)
    assert p == pytest.approx(max(sps.t.sf((d.mean() + 0.01) / se, 4), sps.t.cdf((d.mean() - 0.01) / se, 4)))
    assert p < 0.05 and stats.equivalence_p(d, 0.001) > 0.05
    assert stats.equivalence_p(d + 0.02, 0.01) > 0.5  # a real difference is not equivalent


def test_the_other_metric_stands_beside_every_comparison():
    df = runs(review=REVIEW8, highway=HIGHWAY8).assign(fixed_loss=lambda t: t["val_loss"])
    df.loc[df["variant"] == "highway", "val_loss"] = REVIEW8  # no gap at all on the second metric
    df.loc[(df["variant"] == "highway") & (df["seed"] == 0), "val_loss"] += 1e-3
    table = stats.compare_metrics(df, "fixed_loss", "val_loss").iloc[0]
    assert table["significant"] and not table["significant_val_loss"]
    assert table["metrics_note"] == "significant with fixed_loss only"
    assert table["p_val_loss"] == pytest.approx(stats.compare(df, "val_loss").iloc[0]["p"])


def test_missing_seed_pairs_on_the_intersection():
    df = runs(review=[1.50, 1.47, 1.52], highway={0: 1.51, 2: 1.535})
    result = row(stats.compare(df), "60m", "highway")
    assert result["n_ref"] == 3 and result["n_base"] == 2 and result["paired_n"] == 2
    assert "paired on the 2 shared seeds" in result["note"] and "review [1]" in result["note"]
    assert result["paired_p"] == pytest.approx(sps.ttest_rel([1.51, 1.535], [1.50, 1.52]).pvalue)
    assert result["paired_gap"] == pytest.approx(0.0125)
    assert result["gap"] == pytest.approx(1.5225 - np.mean([1.50, 1.47, 1.52]))


def test_two_seeds_give_one_degree_of_freedom():
    result = stats.compare(runs(review=[1.50, 1.47], highway=[1.52, 1.48])).iloc[0]
    assert result["paired_df"] == 1 and np.isfinite(result["paired_p"])
    assert result["welch_p"] == pytest.approx(sps.ttest_ind([1.52, 1.48], [1.50, 1.47], equal_var=False).pvalue)


def test_single_seed_gives_no_test_and_no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = stats.compare(runs(review=[1.50], highway=[1.52]))
        verdict = stats.verdicts(table)["verdict"].iloc[0]
    result = table.iloc[0]
    assert result["note"] == "one seed: no test" and result["test"] == "none"
    assert np.isnan(result[["welch_p", "welch_p_one", "paired_p", "p", "p_holm", "ci_low", "boot_low"]]
                    .astype(float)).all()
    assert result["gap"] == pytest.approx(0.02)
    assert "one seed: no test" in verdict


def test_welch_with_one_seed_in_a_group_is_nan_with_a_note():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = stats.compare(runs(review=[1.50], highway=[1.52, 1.48, 1.50])).iloc[0]
    assert np.isnan(result["welch_t"]) and np.isnan(result["welch_p"]) and np.isnan(result["p"])
    assert "one seed of review: no Welch test" in result["note"]
    assert "no paired test" in result["note"]


def test_identical_differences_give_no_paired_test_and_no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = stats.compare(runs(review=[1.2, 1.1, 1.0], highway=[1.3, 1.2, 1.1])).iloc[0]
    assert result["note"].split("; ")[0] == "identical paired differences: no paired test"
    assert np.isnan(result["paired_p"]) and result["test"] == "welch" and result["p"] == result["welch_p"]


def test_extra_variants_and_paper_name_are_accepted():
    base = runs(review_neutral=[1.50, 1.47, 1.52], highway=[1.51, 1.49, 1.53],
                standard=[1.52, 1.48, 1.55], rezero=[1.60, 1.58, 1.61])
    table = stats.compare(base)
    assert list(table["baseline"]) == ["highway", "rezero", "standard"]
    np.testing.assert_allclose(table["p_holm"], stats.holm(table["p"]))  # m = 3
    renamed = stats.compare(base.replace({"variant": {"review_neutral": "review"}}))
    pd.testing.assert_frame_equal(table, renamed)


def test_sizes_are_ordered_by_parameters_not_name():
    df = pd.concat([runs("60m", 60.0, review=[1.2, 1.1], standard=[1.3, 1.25]),
                    runs("tiny", 1.5, review=[3.0, 2.9], standard=[3.1, 2.95]),
                    runs("mini", 8.0, review=[2.0, 1.9], standard=[2.1, 1.95])])
    assert list(stats.headline(df).index) == ["tiny", "mini", "60m"]
    assert list(stats.compare(df)["size"]) == ["tiny", "mini", "60m"]
    assert list(stats.verdicts(stats.compare(df))["size"]) == ["tiny", "mini", "60m"]


def test_metric_is_selectable_and_lower_is_better(paper):
    ece = stats.compare(paper, metric="ece", n_boot=0)
    top = row(ece, "1B", "highway")
    # Review's ECE is higher at 1B (0.0220 vs 0.0191): a negative gap, against Review
    assert top["gap"] == pytest.approx(np.mean([0.0189, 0.019, 0.0193]) - np.mean([0.0217, 0.0222, 0.0222]))
    assert top["gap"] < 0 and top["paired_p_one"] > 0.5
    df = runs(review=[1.50, 1.47], highway=[1.52, 1.48]).assign(fixed_loss=[2.0, 2.1, 2.2, 2.4])
    assert stats.compare(df, metric="fixed_loss").iloc[0]["gap"] == pytest.approx(0.25)
    df.loc[3, "fixed_loss"] = np.nan  # highway seed 1 did not record it: pairs on seed 0 only
    assert stats.compare(df, metric="fixed_loss").iloc[0]["paired_n"] == 1
    with pytest.raises(ValueError, match="fixed_loss"):
        stats.compare(df, metric="val_los")


def test_unknown_reference_names_the_variants():
    with pytest.raises(ValueError, match="highway"):
        stats.compare(runs(review=[1.5, 1.4], highway=[1.6, 1.5]), reference="reveiw")


def test_finished_runs_drops_others_with_a_note(tmp_path):
    df = runs(review=[1.50, 1.47, 9.0], highway=[1.51, 1.49, 1.53])
    df["status"] = ["finished", "finished", "failed", "finished", "finished", "running"]
    with pytest.warns(UserWarning, match="dropped 2 unfinished runs"):
        kept = stats.finished_runs(df)
    assert len(kept) == 4 and "failed" in kept.attrs["note"] and "running" in kept.attrs["note"]
    df.to_csv(tmp_path / "results.csv", index=False)
    with pytest.warns(UserWarning):
        result = stats.compare(tmp_path / "results.csv").iloc[0]
    assert result["n_ref"] == 2 and result["paired_n"] == 2  # the failed seed 2 never enters


def test_duplicate_runs_are_refused():
    df = runs(review=[1.50, 1.47], highway=[1.51, 1.49])
    with pytest.raises(ValueError, match="more than one run"):
        stats.load_results(pd.concat([df, df.iloc[:1]]))


def test_trend_regresses_per_size_gaps_on_log_params(paper, paper_table):
    table = paper_table
    fit = stats.trend(paper, "val_loss").set_index("baseline")
    for baseline in ["highway", "standard"]:
        mine = table[table["baseline"] == baseline]
        ref = sps.linregress(np.log10(mine["params_M"]), mine["paired_gap"])
        assert fit.loc[baseline, "slope_per_decade"] == pytest.approx(ref.slope)
        assert fit.loc[baseline, "p"] == pytest.approx(ref.pvalue)
        assert fit.loc[baseline, "n_sizes"] == 5
    assert (fit["slope_per_decade"] > 0).all()  # the gain grows with scale
    assert (stats.trend(paper, metric="ece")["slope_per_decade"] < 0).all()


def test_trend_recovers_a_known_slope_and_needs_three_sizes():
    gap = {10.0: 0.00, 100.0: 0.01, 1000.0: 0.02}  # +0.01 per decade
    df = pd.concat([runs(f"s{p:g}", p, review=[1.0, 1.1, 1.2], highway=[1.0 + g, 1.1 + g + 1e-3, 1.2 + g])
                    for p, g in gap.items()])
    assert stats.trend(df).iloc[0]["slope_per_decade"] == pytest.approx(0.01)
    two = stats.trend(df[df["size"] != "s1000"]).iloc[0]
    assert two["slope_per_decade"] == pytest.approx(0.01) and np.isnan(two["p"]) and two["n_sizes"] == 2


def test_verdicts_follow_the_numbers(paper_table):
    words = stats.verdicts(paper_table).set_index("size")["verdict"]
    assert list(words.index) == list(HEADLINE)
    assert words["1B"].count("significant after Holm correction") == 2
    assert "vs highway: no gain" in words["60M"]
    assert "review worse" in words["60M"]  # standard beats Review at 60M
    assert "trend favouring review" in words["150M"] and "not significant after Holm" in words["150M"]


def test_verdict_for_review_significantly_worse():
    review = [1.50, 1.47, 1.52, 1.49, 1.48, 1.51]
    table = stats.compare(runs(review=review, standard=[v - 0.05 + 0.001 * (i % 2) for i, v in enumerate(review)]))
    assert table.iloc[0]["significant"]
    assert stats.verdicts(table)["verdict"].iloc[0].startswith("vs standard: review worse by 0.049")


def _grid(gap_of, noise=0.0, seeds=range(4)):
    """Two widths × three budgets; the baseline's loss is Review's plus gap_of(log10 size, log10 tpp)."""
    rng = np.random.default_rng(1)
    rows = []
    for params_M in (0.3, 1.1):
        for tpp in (0.2, 0.7, 2.2, 8.0):
            size = f"w{params_M}_t{tpp}"
            for seed in seeds:
                base = 2.0 + rng.normal(0, 0.05)
                gap = gap_of(np.log10(params_M), np.log10(tpp)) + rng.normal(0, noise)
                rows += [{"size": size, "variant": "review", "seed": seed, "params_M": params_M,
                          "tokens_per_param": tpp, "fixed_loss": base},
                         {"size": size, "variant": "standard", "seed": seed, "params_M": params_M,
                          "tokens_per_param": tpp, "fixed_loss": base + gap}]
    return pd.DataFrame(rows)


def test_gap_factors_recovers_which_factor_the_gap_follows():
    from rrlib.stats import gap_factors

    exact = gap_factors(_grid(lambda ls, lt: 0.01 - 0.05 * lt, noise=1e-4)).set_index("term")
    assert exact.loc["log10_tokens_per_param", "coef"] == pytest.approx(-0.05, abs=1e-3)
    assert exact.loc["log10_size", "coef"] == pytest.approx(0.0, abs=2e-3)
    assert exact.loc["log10_tokens_per_param", "p"] < 1e-6 and exact.loc["log10_size", "p"] > 0.01
    assert (exact["n_cells"] == 8).all() and (exact["df"] == 5).all()
    by_size = gap_factors(_grid(lambda ls, lt: 0.08 * ls, noise=1e-4)).set_index("term")
    assert by_size.loc["log10_size", "ci_low"] < 0.08 < by_size.loc["log10_size", "ci_high"]
    assert by_size.loc["log10_tokens_per_param", "ci_low"] < 0 < by_size.loc["log10_tokens_per_param", "ci_high"]


def test_gap_factors_refuses_collinear_size_and_tokens():
    from rrlib.stats import gap_factors

    df = _grid(lambda ls, lt: 0.0, noise=1e-3)
    df["tokens_per_param"] = 1 / df["params_M"]  # the paper's design: tokens per parameter fall as size grows
    out = gap_factors(df)
    assert out["coef"].isna().all() and (out["note"] == "size and tokens/param are collinear").all()


def test_every_public_function_defaults_to_the_primary_metric():
    import inspect

    for name in ("headline", "compare", "trend", "gap_factors"):
        assert inspect.signature(getattr(stats, name)).parameters["metric"].default == "fixed_loss", name
    assert inspect.signature(stats.compare_metrics).parameters["primary"].default == "fixed_loss"


def test_verdict_text_names_the_reference_rule_it_was_given():
    ours = [1.50, 1.47, 1.52, 1.49, 1.48, 1.51]
    table = stats.compare(runs(token_gate=ours, standard=[v + 0.05 + 0.001 * (i % 2) for i, v in enumerate(ours)]),
                          reference="token_gate")
    text = stats.verdicts(table, reference="token_gate")["verdict"].iloc[0]
    assert text.startswith("vs standard: token_gate better by 0.05") and "review" not in text.lower()


def test_a_bad_row_of_a_results_file_is_named_by_its_line(tmp_path):
    """A file's row whose seed is not a whole number (or whose params_M is not a number) is one sentence naming the
    file and the line, counting blank lines as the file does; before, pandas said only "invalid literal"."""
    path = tmp_path / "runs.csv"
    path.write_text("size,variant,seed,params_M,val_loss\n60m,review,0,61.0,3.1\n\n60m,review,x1,61.0,3.0\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} line 4: seed is 'x1', not a whole number$"):
        stats.load_results(path)
    path.write_text("size,variant,seed,params_M,val_loss\n60m,review,0,big,3.1\n")
    with pytest.raises(ValueError, match=r"line 2: params_M is 'big', not a number$"):
        stats.load_results(path)


def test_a_table_whose_every_run_diverged_says_so_rather_than_blaming_the_metric():
    table = pd.DataFrame({"size": "tiny", "variant": ["review", "standard"], "seed": 0, "params_M": 0.3,
                          "fixed_loss": np.nan, "status": "diverged"})
    with pytest.raises(ValueError, match=r"^no finished run to compare: dropped 2 unfinished runs \(status: "
                                         r"diverged\)$"):
        stats.compare(table)
