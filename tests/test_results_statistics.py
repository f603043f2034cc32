"""Page 04's results (rrlib.results.statistics and rrlib.results.power) against numbers computed here another way
from the committed runs (the result files read with json, the tests with scipy and numpy), or against the page's
committed tables at the ten significant digits those store; every column named in its function's docstring; and
each result computed once per set of runs."""
import inspect
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from rrlib.views import tables
from rrlib.results import power, statistics

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "paper" / "tables"
RUNS = ROOT / "outputs" / "runs"
PAPER = pd.read_csv(ROOT / "outputs" / "reference" / "scaling_v8.csv").replace({"variant": {"review_neutral":
                                                                                            "review"}})
NAME = re.compile(r"^[a-z][A-Za-z0-9_]*$")  # a name a program reads (params_M): no spaces, units or signs


def committed(name: str, **kwargs) -> pd.DataFrame:
    return pd.read_csv(PAGE / f"{name}.csv", **kwargs)


def as_stored(result: pd.DataFrame, index: bool = False) -> str:
    """``result`` as the page writes it (rrlib.views.tables: ten significant digits)."""
    return tables.rounded(result, tables.STORED_DIGITS).to_csv(index=index)


def our_results(sizes=("micro", "mini", "midi"), variants=("review", "highway", "standard")) -> pd.DataFrame:
    """Our runs of the scale axis, read here with json from each result file."""
    rows = [json.loads(p.read_text()) for size in sizes for v in variants
            for p in sorted((RUNS / size / v).glob("seed*/result.json"))]
    return pd.DataFrame([r for r in rows if r["status"] == "finished"])


def holm(p):
    """Holm's step-down adjustment, written out."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate([(len(p) - k) * p[i] for k, i in enumerate(order)]).clip(max=1)
    out = np.empty_like(p)
    out[order] = adjusted
    return out


def paired(table: pd.DataFrame, size, baseline, metric) -> np.ndarray:
    """baseline − review per seed at ``size``."""
    wide = table[table["size"] == size].pivot(index="seed", columns="variant", values=metric)
    return (wide[baseline] - wide["review"]).dropna().to_numpy()


def test_the_papers_tests_recompute_from_its_run_table_with_scipy():
    found = statistics.tests("paper")
    assert len(found) == 10 and set(found["metric"]) == {"val_loss"}
    for row in found.itertuples():
        d = paired(PAPER, row.size, row.baseline, "val_loss")
        test = scipy_stats.ttest_1samp(d, 0.0)
        ci = test.confidence_interval(0.95)
        review = PAPER.loc[(PAPER["size"] == row.size) & (PAPER["variant"] == "review"), "val_loss"]
        base = PAPER.loc[(PAPER["size"] == row.size) & (PAPER["variant"] == row.baseline), "val_loss"]
        assert row.paired_gap == pytest.approx(d.mean(), rel=1e-12)
        assert (row.paired_p, row.ci_low, row.ci_high) == pytest.approx((test.pvalue, ci.low, ci.high), rel=1e-9)
        assert row.welch_p == pytest.approx(scipy_stats.ttest_ind(base, review, equal_var=False).pvalue, rel=1e-9)
    assert found["p_holm"].to_numpy() == pytest.approx(holm(found["paired_p"]), rel=1e-12)
    assert found["significant"].tolist() == (found["p_holm"] < 0.05).tolist()
    # and as the page stores it, byte for byte
    assert as_stored(found) == (PAGE / "04_paper_tests.csv").read_text()


def test_the_papers_means_trend_and_calibration_recompute():
    means = statistics.means("paper")
    expected = PAPER.groupby(["size", "variant"])["val_loss"].mean().unstack()
    assert list(means.columns) == ["review", "highway", "standard"]
    assert list(means.index) == ["60M", "150M", "320M", "590M", "1B"]  # by parameters, not by name
    assert means.to_numpy() == pytest.approx(expected.loc[means.index, means.columns].to_numpy(), rel=1e-12)
    trend = statistics.trend("paper").set_index("baseline")
    for baseline in ("highway", "standard"):
        sizes = list(means.index)
        x = np.log10([PAPER.loc[(PAPER["size"] == s) & (PAPER["variant"] == "review"), "params_M"].mean()
                      for s in sizes])
        y = [paired(PAPER, s, baseline, "val_loss").mean() for s in sizes]
        fit = scipy_stats.linregress(x, y)
        assert trend.loc[baseline, ["slope_per_decade", "p", "r"]].tolist() == pytest.approx(
            [fit.slope, fit.pvalue, fit.rvalue], rel=1e-9)
        assert trend.loc[baseline, "n_sizes"] == 5
    ece = statistics.calibration_tests("paper")
    assert set(ece["metric"]) == {"ece"} and ece["boot_low"].isna().all()
    for name, result, index in (("04_paper_headline", means, True), ("04_paper_trend", trend.reset_index(), False),
                                ("04_paper_ece", statistics.means("paper", "ece"), True),
                                ("04_paper_ece_tests", ece, False)):
        assert as_stored(result, index) == (PAGE / f"{name}.csv").read_text(), name


def test_our_tests_means_and_trend_recompute_from_the_result_files():
    ours = our_results()
    found = statistics.tests("ours")
    assert set(found["size"]) == set(ours["size"]) and len(found) == 2 * ours["size"].nunique()
    for row in found.itertuples():
        d = paired(ours, row.size, row.baseline, "fixed_loss")
        test = scipy_stats.ttest_1samp(d, 0.0)
        assert (row.paired_gap, row.paired_p) == pytest.approx((d.mean(), test.pvalue), rel=1e-9)
        assert row.paired_n == len(d) == 5
        secondary = scipy_stats.ttest_1samp(paired(ours, row.size, row.baseline, "val_loss"), 0.0).pvalue
        assert row.p_val_loss == pytest.approx(secondary, rel=1e-9)
    assert found["p_holm"].to_numpy() == pytest.approx(holm(found["paired_p"]), rel=1e-12)
    assert found["p_holm_val_loss"].to_numpy() == pytest.approx(holm(found["p_val_loss"]), rel=1e-12)
    means = statistics.means("ours")
    expected = ours.groupby(["size", "variant"])["fixed_loss"].mean().unstack()
    assert means.to_numpy() == pytest.approx(expected.loc[means.index, means.columns].to_numpy(), rel=1e-12)
    for name, result, index in (("04_ours_tests", found, False), ("04_ours_headline", means, True),
                                ("04_ours_trend", statistics.trend("ours"), False),
                                ("04_ours_ece", statistics.means("ours", "fixed_ece"), True),
                                ("04_ours_ece_tests", statistics.calibration_tests("ours"), False),
                                ("04_provenance", statistics.provenance(), True)):
        assert as_stored(result, index) == (PAGE / f"{name}.csv").read_text(), name


def test_the_emergence_curve_is_the_primary_tests_gap_and_interval():
    tests, curve = statistics.tests("paper"), statistics.emergence("paper")
    assert curve["tested_gap"].tolist() == tests["paired_gap"].tolist()  # every comparison of the paper pairs
    assert (curve["tested_gap"] - curve["below"]).to_numpy() == pytest.approx(tests["ci_low"].to_numpy(), rel=1e-12)
    assert (curve["tested_gap"] + curve["above"]).to_numpy() == pytest.approx(tests["ci_high"].to_numpy(), rel=1e-12)
    assert (curve["below"] > 0).all() and (curve["above"] > 0).all()
    verdicts = statistics.verdicts("paper").set_index("size")
    assert list(verdicts.index) == list(dict.fromkeys(tests["size"]))
    for row in tests.itertuples():  # each clause names its baseline and quotes its gap
        assert f"vs {row.baseline}: " in verdicts.loc[row.size, "verdict"]
        assert f"{abs(row.paired_gap):.4f}" in verdicts.loc[row.size, "verdict"], (row.size, row.baseline)


def test_tokens_per_parameter_recompute_from_steps_and_parameters():
    budget = statistics.tokens_per_parameter().set_index(["source", "size"])
    review = PAPER[PAPER["variant"] == "review"].groupby("size")[["params_M", "steps"]].mean()
    for size, r in review.iterrows():
        assert budget.loc[("paper", size), "tokens"] == r["steps"] * 64 * 256
        assert budget.loc[("paper", size), "tokens_per_param"] == pytest.approx(
            r["steps"] * 64 * 256 / (r["params_M"] * 1e6), rel=1e-12)
    ours = our_results()
    ours = ours[ours["variant"] == "review"].groupby("size")[["params_M", "tokens"]].mean()
    for size, r in ours.iterrows():
        assert budget.loc[("ours", size), "tokens_per_param"] == pytest.approx(r["tokens"] / (r["params_M"] * 1e6),
                                                                              rel=1e-12)
    assert statistics.tokens_per_parameter()["params_M"].is_monotonic_increasing
    assert as_stored(statistics.tokens_per_parameter()) == (PAGE / "04_tokens_per_parameter.csv").read_text()


def test_the_recipe_gaps_and_their_difference_recompute_with_a_tost_written_out():
    gaps = {}
    for recipe, size in statistics.RECIPES.items():
        rows = [json.loads(p.read_text()) for p in (ROOT / "outputs" / "recipe" / size).glob("*/seed*/result.json")]
        wide = pd.DataFrame(rows).pivot(index="seed", columns="variant", values="fixed_loss")
        gaps[recipe] = {b: wide[b] - wide["review"] for b in ("highway", "standard")}
    found = statistics.recipe_gap_difference().set_index("baseline")
    margin = statistics.EQUIVALENCE_MARGIN
    for baseline in ("highway", "standard"):
        d = (gaps["paper"][baseline] - gaps["rrlib"][baseline]).dropna().to_numpy()
        se, dof = d.std(ddof=1) / np.sqrt(len(d)), len(d) - 1
        tost = max(scipy_stats.t.sf((d.mean() + margin) / se, dof), scipy_stats.t.cdf((d.mean() - margin) / se, dof))
        row = found.loc[baseline]
        assert row["seeds"] == len(d) == 5 and row["margin"] == margin
        assert [row["gap_difference"], row["p"], row["p_equivalent"]] == pytest.approx(
            [d.mean(), scipy_stats.ttest_1samp(d, 0.0).pvalue, tost], rel=1e-9)
    recipe_gaps = statistics.recipe_gaps()
    assert list(dict.fromkeys(recipe_gaps["recipe"])) == ["rrlib", "paper"]
    for r in recipe_gaps.itertuples():
        assert r.paired_gap == pytest.approx(gaps[r.recipe][r.baseline].mean(), rel=1e-12)
    assert as_stored(recipe_gaps) == (PAGE / "04_recipe_gaps.csv").read_text()
    # the page's CSV keeps its labels: the same numbers under them
    page = committed("04_recipe_gap_difference").set_index("baseline")
    labelled = {"gap_difference": "gap paper − gap rrlib", "ci_low": "95 % low", "ci_high": "95 % high",
                "p": "paired p", "p_equivalent": "TOST p (±0.02)", "detectable": "detectable (80 %)"}
    for column, label in labelled.items():
        assert tables.rounded(found[column], 10).tolist() == page[label].tolist(), column


def test_the_powered_pilots_and_designs_match_the_page_and_a_paired_t(data):
    root = power.root_beside("outputs/runs")
    assert root == str(Path("outputs") / "power" / "runs")
    for size in ("review_power_micro", "review_power_mini"):
        pilot = power.pilot(root, size, "review", ["highway", "standard"], 0.010)
        assert pilot.size == size and pilot.sentence.startswith(f"{size}: the pilot's paired SD is")
        assert as_stored(pilot.design) == (PAGE / f"04_pilot_{size}.csv").read_text()
    design = power.design_verdict(root, "review_power_micro", {"review": ["highway", "standard"]}, 37, target=0.010)
    assert as_stored(design.tests) == (PAGE / "04_power_tests.csv").read_text()
    assert len(design.lines) == 5 and "111 runs" in design.lines[0]
    runs = [json.loads(p.read_text()) for p in (ROOT / root / "review_power_micro").glob("*/seed*/result.json")]
    wide = pd.DataFrame(runs).query("seed < 37").pivot(index="seed", columns="variant", values="fixed_loss")
    for row in design.tests.itertuples():
        d = (wide[row.baseline] - wide["review"]).to_numpy()
        assert (row.gap, row.p, row.seeds) == pytest.approx((d.mean(), scipy_stats.ttest_1samp(d, 0.0).pvalue, 37),
                                                            rel=1e-9)
    mini = power.design_verdict(root, "review_power_mini", {"review": ["highway"]}, 10, target=0.010)
    assert as_stored(mini.tests) == (PAGE / "04_power_tests_mini.csv").read_text()
    # the tests alone, as the ledger and the index read them, need no data
    assert mini.tests.equals(power.design_tests(root, "review_power_mini", {"review": ["highway"]}, 10))


def test_a_design_or_pilot_not_yet_run_says_how_far_it_is(tmp_path):
    pilot = power.pilot(str(tmp_path), "review_power_micro", "review", ["standard"], 0.010)
    assert pilot.design is None and pilot.sentence.startswith("review_power_micro: 0 of its pilot's 8 runs")
    assert power.design_tests(str(tmp_path), "review_power_micro", {"review": ["standard"]}, 37) is None
    design = power.design_verdict(str(tmp_path), "review_power_micro", {"review": ["standard"]}, 37)
    assert design.tests is None and design.lines == [
        f"review_power_micro: 0 of the design's 74 runs have finished under {tmp_path}; its verdict follows when all "
        "have"]
    assert statistics.recipe_gaps(str(tmp_path)) is None and statistics.recipe_gap_difference(str(tmp_path)) is None


def documented(fn, column: str) -> bool:
    doc = inspect.getdoc(fn)
    return f"``{column}``" in doc or f"``{column.replace(statistics.SECONDARY, '<secondary>')}``" in doc


RESULTS = {
    "means": lambda: statistics.means("ours").reset_index(), "tests": lambda: statistics.tests("ours"),
    "calibration_tests": lambda: statistics.calibration_tests("paper"), "trend": lambda: statistics.trend("paper"),
    "emergence": lambda: statistics.emergence("ours"), "verdicts": lambda: statistics.verdicts("paper"),
    "tokens_per_parameter": statistics.tokens_per_parameter,
    "provenance": lambda: statistics.provenance().reset_index(), "recipe_gaps": statistics.recipe_gaps,
    "recipe_gap_difference": statistics.recipe_gap_difference,
    "runs": lambda: statistics.runs("paper")[["size", "variant", "seed", "params_M", "steps"]]}


@pytest.mark.parametrize("name", sorted(RESULTS))
def test_every_column_is_a_name_its_function_documents(name):
    columns = [c for c in RESULTS[name]().columns if c not in ("review", "highway", "standard")]  # means: per variant
    assert columns and all(NAME.match(c) for c in columns), columns
    missing = [c for c in columns if not documented(getattr(statistics, name), c)]
    if name in ("calibration_tests", "recipe_gaps"):  # these document the columns they share with tests by naming it
        missing = [c for c in missing if not documented(statistics.tests, c)]
    assert not missing, f"{name} leaves {missing} undocumented"


def test_the_powered_results_document_their_columns():
    root = power.root_beside("outputs/runs")
    pilot = power.pilot(root, "review_power_micro", "review", ["highway", "standard"], 0.010)
    assert [c for c in pilot.design.columns if not documented(power.Pilot, c)] == []
    design = power.design_tests(root, "review_power_mini", {"review": ["highway"]}, 10)
    assert list(design.columns) == list(committed("04_power_tests_mini").columns)
    assert [c for c in design.columns if not documented(power.design_tests, c)] == []


def test_an_unknown_source_or_keyword_is_one_sentence():
    with pytest.raises(ValueError, match=r"unknown source 'mine'; choose one of \['paper', 'ours'\]"):
        statistics.tests("mine")
    with pytest.raises(TypeError, match=r"unknown keyword \['runs'\]"):
        statistics.runs("ours", runs="outputs/runs")
    with pytest.raises(ValueError, match="no ours runs with Review and a baseline: train some under"):
        statistics.tests("ours", out_root="nowhere")


def copy_runs(src: Path, dst: Path, seeds=range(5)):
    for variant in ("review", "highway", "standard"):
        for seed in seeds:
            folder = dst / "mini" / variant / f"seed{seed}"
            folder.mkdir(parents=True)
            shutil.copy(src / "mini" / variant / f"seed{seed}" / "result.json", folder / "result.json")


def test_a_result_is_computed_once_per_set_of_runs_and_again_when_a_run_changes(tmp_path, monkeypatch):
    from rrlib import stats

    copy_runs(RUNS, tmp_path, seeds=range(4))
    calls = []
    real = stats.compare_metrics
    monkeypatch.setattr(stats, "compare_metrics", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = statistics.tests("ours", out_root=str(tmp_path))
    first.loc[0, "paired_p"] = -1.0  # a caller's edit stays its own
    again = statistics.tests("ours", out_root=str(tmp_path))
    assert len(calls) == 1 and (again["paired_p"] > 0).all() and set(again["paired_n"]) == {4}
    statistics.tests("ours", alpha=0.01, out_root=str(tmp_path))  # other arguments: another result
    assert len(calls) == 2
    copy_runs(RUNS, tmp_path / "more", seeds=[4])
    for folder in (tmp_path / "more" / "mini").glob("*/seed4"):
        shutil.move(folder, tmp_path / "mini" / folder.parent.name / "seed4")
    fifth = statistics.tests("ours", out_root=str(tmp_path))
    assert len(calls) == 3 and set(fifth["paired_n"]) == {5}
    assert as_stored(fifth[fifth["size"] == "mini"].drop(columns=["p_holm", "significant", "p_holm_val_loss",
                                                                   "significant_val_loss", "metrics_note"])) == \
        as_stored(statistics.tests("ours").query("size == 'mini'").drop(
            columns=["p_holm", "significant", "p_holm_val_loss", "significant_val_loss", "metrics_note"]))
