"""The leaderboard page's rows (rrlib.results.leaderboard): columns and order, the stage each rule stands at, the
statistics equal to the compare engine's, the board's verdict file when it judges the board, and the counts."""
import json
import re
import sys

import numpy as np
import pandas as pd
import pytest

from rrlib.results import leaderboard
from rrlib.views import leaderboard as board_view
from rrlib.stats.verdict import compare_pairs
from rrlib.runs.config import ConfigError

SEEDS = 6
NOISE = [0.004, -0.003, 0.001, -0.002, 0.003, -0.003]  # per-seed spread with mean 0: each test has an SD


def runs_of(**gaps):
    """Finished runs: standard's loss per seed, and each rule's at ``gap`` below it (lower is better), over the
    first ``n`` seeds for a rule given as (gap, n)."""
    base = 2.0 + np.linspace(0, 0.05, SEEDS)
    rows = [{"variant": "standard", "seed": s, "fixed_loss": base[s]} for s in range(SEEDS)]
    for k, (rule, spec) in enumerate(gaps.items()):
        gap, n = spec if isinstance(spec, tuple) else (spec, SEEDS)
        rows += [{"variant": rule, "seed": s, "fixed_loss": base[s] - gap + NOISE[(s + k) % SEEDS]} for s in range(n)]
    return pd.DataFrame(rows)


def plan_of(**seeds):
    """The study's plan: per rule the seeds it stands at; finished and cost follow from ``runs``' convention."""
    return pd.DataFrame([{"rule": rule, "finished": done, "seeds": n, "to_train": n - done, "minutes": 2.0,
                          "cpu_hours": (n - done) * 2.0 / 60, "all_seeds_cpu_hours": (SEEDS - done) * 2.0 / 60}
                         for rule, (done, n) in seeds.items()]).set_index("rule")


RULES = ["standard", "better", "worse", "partial", "unrun", "costly"]
COUNTS = pd.DataFrame({"params": [1000, 1010, 990, 1005, 1020, 1000],
                       "flops_per_token": [5e6, 5.1e6, 4.9e6, 5e6, 5.2e6, 5e6]}, index=RULES)
RATIOS = pd.DataFrame({"step_time_vs_standard": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5],
                       "step_per_flop_vs_standard": [1.0, 1.05, 1.15, 1.25, 1.35, 1.45]}, index=RULES)


@pytest.fixture
def board():
    runs = runs_of(better=0.02, worse=-0.01, partial=(0.05, 3))
    plan = plan_of(better=(SEEDS, SEEDS), worse=(SEEDS, SEEDS), partial=(3, SEEDS), unrun=(0, SEEDS),
                   costly=(0, 0))
    return runs, plan, leaderboard.leaderboard(plan, runs, COUNTS, RATIOS, "standard", SEEDS)


def test_rows_are_sorted_by_gap_then_the_unjudged_in_the_studys_order(board):
    _, _, rows = board
    assert list(rows.index) == ["better", "standard", "worse", "partial", "unrun", "costly"]
    assert list(rows["stage"]) == ["judged", "baseline", "judged", "in progress", "planned", "beyond the budget"]
    shown = board_view.shown(rows)
    assert list(shown.columns) == ["rule", "paper", "gap (nats) [95 % CI]", "verdict", "Holm p", "detectable (nats)",
                                   "params", "FLOPs/token (M)", "step/FLOP vs standard", "stands at"]
    assert list(shown["rule"]) == list(rows.index)
    assert shown["gap (nats) [95 % CI]"].iloc[0].startswith("+0.0200 [")
    assert pd.isna(shown["gap (nats) [95 % CI]"].iloc[1]) and rows.loc["standard", "gap"] == 0  # the baseline


def test_judged_numbers_are_the_compare_engines_with_holm_over_the_board(board):
    runs, _, rows = board
    engine = compare_pairs(runs, ["better", "worse"], ["standard"], seeds=range(SEEDS)).set_index("variant")
    for column in ("seeds", "gap", "ci_low", "ci_high", "p", "p_holm", "detectable", "p_equivalent_holm", "verdict"):
        assert rows.loc[["better", "worse"], column].tolist() == engine.loc[["better", "worse"], column].tolist()
    assert rows.loc["better", "verdict"] == "better" and rows.loc["worse", "verdict"] == "worse"
    assert rows.loc["better", "holm_over"] == 2 and rows.loc["better", "source"] == "runs"
    assert rows.loc["better", "stands_at"] == f"{SEEDS} seeds, Holm over 2"


def test_a_rule_without_every_seed_has_no_verdict_and_one_without_runs_says_so_with_its_plan(board):
    _, _, rows = board
    partial, unrun, costly = rows.loc["partial"], rows.loc["unrun"], rows.loc["costly"]
    assert np.isnan(partial["gap"]) and pd.isna(partial["verdict"])  # 3 of 6 seeds: no optional stopping
    assert partial["stands_at"] == f"3 of {SEEDS} seeds; 3 runs, 0.1 CPU-h to go"
    assert np.isnan(unrun["gap"]) and unrun["stands_at"] == f"no runs yet; {SEEDS} seeds planned, 0.2 CPU-h"
    assert (unrun["planned_seeds"], unrun["runs_to_train"]) == (SEEDS, SEEDS)
    assert costly["stands_at"] == f"no runs yet; beyond the budget ({SEEDS} seeds: 0.2 CPU-h)"
    shown = board_view.shown(rows).set_index("rule")
    assert pd.isna(shown.loc["unrun", "gap (nats) [95 % CI]"]) and pd.isna(shown.loc["unrun", "Holm p"])
    # counted from the model and timed by the benchmark, so a planned row has its costs too
    assert (unrun["params"], unrun["flops_per_token"], unrun["step_per_flop_vs_standard"]) == (1020, 5.2e6, 1.35)
    assert unrun["timed_by"] == "benchmark" and rows.loc["standard", "step_per_flop_vs_standard"] == 1.0


def test_a_rule_the_budget_holds_below_all_seeds_is_judged_alone_at_its_seeds():
    runs = runs_of(better=0.02, short=(0.03, 4))
    plan = plan_of(better=(SEEDS, SEEDS), short=(4, 4))
    ratios = RATIOS.rename(index={"worse": "short"})
    rows = leaderboard.leaderboard(plan, runs, COUNTS.rename(index={"worse": "short"}), ratios, "standard", SEEDS)
    alone = compare_pairs(runs, ["short"], ["standard"], seeds=range(4)).iloc[0]
    assert rows.loc["short", "seeds"] == 4 and rows.loc["short", "holm_over"] == 1
    assert (rows.loc["short", "p_holm"], rows.loc["short", "gap"]) == (alone["p_holm"], alone["gap"])
    assert rows.loc["short", "stands_at"] == f"4 of {SEEDS} seeds (budget), judged alone"
    assert rows.loc["better", "holm_over"] == 1  # the board holds one rule at all seeds


def test_the_boards_verdict_file_serves_when_it_judges_exactly_the_boards_rules(board, tmp_path):
    runs, plan, _ = board
    engine = compare_pairs(runs, ["better", "worse"], ["standard"], seeds=range(SEEDS))
    file = engine.assign(step_per_flop_vs_standard_variant=[1.5, 1.6], p_holm=[0.001, 0.9])  # marked: the file's
    rows = leaderboard.leaderboard(plan, runs, COUNTS, RATIOS, "standard", SEEDS, file)
    assert rows.loc["better", "p_holm"] == 0.001 and rows.loc["better", "source"] == "board file"
    assert (rows.loc["worse", "step_per_flop_vs_standard"], rows.loc["worse", "timed_by"]) == (1.6, "board call")
    assert rows.loc["unrun", "timed_by"] == "benchmark"
    stale = file[file["variant"] == "better"]  # written before "worse" finished: the runs judge both again
    rows = leaderboard.leaderboard(plan, runs, COUNTS, RATIOS, "standard", SEEDS, stale)
    assert rows.loc["better", "p_holm"] == engine.set_index("variant").loc["better", "p_holm"]
    assert set(rows["source"].dropna()) == {"runs"}


def test_read_board_is_none_before_the_call_and_refuses_another_questions_file(tmp_path):
    path = tmp_path / "verdict.csv"
    assert leaderboard.read_board(path, "standard") is None
    pd.DataFrame({"variant": ["mgr"], "baseline": ["attnres"], "metric": ["fixed_loss"]}).to_csv(path, index=False)
    with pytest.raises(ConfigError, match=r"judges against \['attnres'\].*not the board's verdict file"):
        leaderboard.read_board(path, "standard")


def bench_file(folder, name, size, ratios):
    rows = [{"size": size, "variant": v, "compile": False, "step_time_vs_standard": t,
             "step_per_flop_vs_standard": f} for v, (t, f) in ratios.items()]
    path = folder / name
    path.write_text(json.dumps({"results": rows}))
    return str(path)


def test_bench_ratios_take_each_rule_from_the_first_file_and_only_at_the_boards_model(tmp_path):
    first = bench_file(tmp_path, "a.json", "family", {"standard": (1.0, 1.0), "review": (1.1, 1.2)})
    second = bench_file(tmp_path, "b.json", "family", {"standard": (1.0, 1.0), "review": (9.0, 9.0),
                                                        "denseformer": (1.05, 1.04)})
    ratios = leaderboard.bench_ratios([first, second], "family", "family_power")
    assert ratios.loc["review"].tolist() == [1.1, 1.2] and ratios.loc["denseformer"].tolist() == [1.05, 1.04]
    with pytest.raises(ConfigError, match="another model or batch than 'family_power'"):
        leaderboard.bench_ratios([first], "mini", "family_power")


def test_the_plan_is_the_studys_with_step_times_from_the_benchmark(monkeypatch):
    from rrlib.studies import power_study

    from rrlib.studies import leaderboard_study as study

    rules = study.board()
    finished = pd.DataFrame([{"variant": v, "seed": s, "minutes": m} for v, m in (("standard", 2.0), ("mgr", 3.0))
                             for s in range(study.SEEDS)])
    monkeypatch.setattr(power_study, "design_runs", lambda root, size, variants, seeds: finished[
        finished["variant"].isin(list(variants)) & finished["seed"].isin(list(seeds))])
    ratios = pd.DataFrame({"step_time_vs_standard": [1.0 + k / 100 for k in range(len(rules))],
                           "step_per_flop_vs_standard": 1.0}, index=rules)
    plan = leaderboard.study_plan(20.0, ratios)
    assert list(plan.index) == rules
    assert plan.loc["mgr", "minutes"] == 3.0 and plan.loc["mgr", "to_train"] == 0  # its own runs' median
    assert plan.loc["review", "minutes"] == pytest.approx(2.0 * ratios.loc["review", "step_time_vs_standard"])
    assert plan.loc["review", "cpu_hours"] == pytest.approx(study.SEEDS * plan.loc["review", "minutes"] / 60)
    with pytest.raises(ConfigError, match="no step time for"):
        leaderboard.study_plan(20.0, ratios.iloc[1:])


def test_counts_are_the_models_and_equal_what_the_runs_recorded():
    from rrlib.studies import leaderboard_study as study
    from rrlib.studies.power_study import design_runs
    runs = design_runs(study.RUNS, study.SIZE, [study.BASELINE, "attnres"], [0]).set_index("variant")
    counts = leaderboard.model_counts(study.SIZE, [study.BASELINE, "attnres"])
    assert counts["params"].tolist() == runs.loc[counts.index, "params"].tolist()
    assert counts["flops_per_token"].tolist() == runs.loc[counts.index, "flops_per_token"].tolist()


def test_every_rule_of_the_board_names_its_paper_and_its_arxiv_id_is_the_one_its_docstring_cites():
    from rrlib.rules import RULES

    from rrlib.studies import leaderboard_study as study

    for rule in [study.BASELINE, *study.board()]:
        assert rule in leaderboard.PAPERS, f"{rule} has no paper on the board"
        cls = RULES[rule]
        cited = set(re.findall(r"arXiv[: ](\d{4}\.\d{4,5})", (cls.__doc__ or "") +
                               (sys.modules[cls.__module__].__doc__ or "")))
        arxiv = leaderboard.PAPERS[rule][1]
        assert not cited or arxiv in cited, f"{rule}: arXiv:{arxiv} on the board, its docstrings cite {cited}"
    assert leaderboard.paper("denseformer") == "DenseFormer, arXiv:2402.02622"
    assert leaderboard.paper("a_rule_of_ones_own") == "–"


def test_a_board_with_no_rule_judged_yet_lists_every_rule_by_its_plan():
    runs = runs_of()  # standard's runs only
    plan = plan_of(better=(0, SEEDS), worse=(0, SEEDS))
    rows = leaderboard.leaderboard(plan, runs, COUNTS, RATIOS, "standard", SEEDS)
    assert list(rows.index) == ["standard", "better", "worse"] and set(rows["stage"][1:]) == {"planned"}
    assert rows["gap"][1:].isna().all() and rows.loc["standard", "stands_at"] == f"{SEEDS} seeds"


def test_engine_rows_are_what_rrlib_compare_writes_for_the_same_runs():
    from rrlib.compare.engine import Request, verdict_table

    runs = runs_of(better=0.02, worse=-0.01)
    runs["params"], runs["flops_per_token"] = 1000, 5e6
    request = Request(size="family_power", variants=["better", "worse"], baselines=["standard"],
                      seeds=list(range(SEEDS)))
    engine = verdict_table(request, runs, {"seeds": list(range(SEEDS))}, None)
    mine = leaderboard.engine_rows(runs, ["better", "worse"], "standard", range(SEEDS))
    pd.testing.assert_frame_equal(mine, engine[mine.columns])


def test_a_rule_that_diverged_on_a_seed_is_judged_diverged_with_no_test():
    runs = runs_of(better=0.02, unstable=0.05)
    broken = (runs["variant"] == "unstable") & (runs["seed"] == 2)
    runs["status"] = "finished"
    runs.loc[broken, ["fixed_loss", "status"]] = [np.nan, "diverged"]
    plan = plan_of(better=(SEEDS, SEEDS), unstable=(SEEDS - 1, SEEDS), unrun=(0, SEEDS))
    rows = leaderboard.leaderboard(plan, runs, COUNTS.rename(index={"worse": "unstable"}),
                                   RATIOS.rename(index={"worse": "unstable"}), "standard", SEEDS)
    assert list(rows.index) == ["better", "standard", "unstable", "unrun"]  # judged, but no gap: after the gaps
    assert (rows.loc["unstable", "stage"], rows.loc["unstable", "verdict"]) == ("judged", "diverged")
    assert np.isnan(rows.loc["unstable", "p_holm"]) and rows.loc["better", "verdict"] == "better"
    assert pd.isna(board_view.shown(rows).set_index("rule").loc["unstable", "gap (nats) [95 % CI]"])
