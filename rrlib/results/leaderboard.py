"""The leaderboard (page 08): every rule of the family against the standard residual at one size, one row per
rule, sorted by the paired gap, every statistic from the compare engine (rrlib.stats.verdict.compare_pairs).

The board is the leaderboard study's (rrlib.studies.leaderboard_study, run by ``rrlib study run leaderboard``): its
rules, size, seeds, baseline and run folder, and its plan of the seeds each rule stands at within the budget
(``study_board``: that board as page 08 shows it, from the study's files alone). Each rule's row is at one of four
stages:

===================  ==============================================================================================
judged               every seed of the rule's design has a result (the rule's and the baseline's; a diverged run is
                     one): the paired gap on ``fixed_loss`` with its interval, the verdict word (``diverged``
                     where either side diverged on a seed), Holm p and the detectable gap
in progress          some seeds have finished: how many, and what is left; no statistics, since a verdict read
                     before the design is complete is the optional stopping a fixed design exists to prevent
                     (rrlib.studies.power_study)
planned              no runs yet: the seeds the study's plan gives the rule, its runs and their CPU-hours
beyond the budget    no runs, and the plan affords the rule fewer than a pilot's seeds
===================  ==============================================================================================

Where the judged rows come from. The study's last ``rrlib compare`` call judges every rule that stands at all seeds
in one call, Holm over its comparisons, and writes ``<study OUT>/board/verdict.csv``; the page reads that file when
it judges exactly the rules whose designs are complete at all seeds. Until then (or once a rule has finished after
it) the page makes the engine's call (``engine_rows``) on the same runs with the same rules and seeds, so the family
Holm spans is the board call's: every rule judged at all seeds, and it grows as rules finish. A rule the budget
holds below all seeds is judged alone, as the study's own design call for it (``--variants RULE``) judges it.

Parameters and FLOPs per token are counted from each rule's parameter-matched model (rrlib.model), so a planned
row has them too; they equal what its runs record. Step time per FLOP relative to the standard residual's is the
board call's (measured in its process, interleaved) for a rule its file judges, else the committed benchmark's at
the ``family`` preset, whose model is the board size's: the two presets differ in their steps only, and a step's
time is the same. The plan prices a rule without runs by the same benchmark's step-time ratio, where the study
times one afresh when it prints its plan, so that the page is built from files alone.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..runs.config import ConfigError, project_path
from ..stats.verdict import METRIC, compare_pairs, mark_diverged, mark_identical
from ..studies import leaderboard_study as study

BOARD_VERDICT = "board/verdict.csv"  # under the study's OUT: its last compare call's verdict file
# `rrlib bench` at `family`: the step times of every older rule, then of the new ones (the first naming a rule wins)
BENCH_FILES = ("outputs/bench/cpu-family.json", "outputs/bench/cpu-family-new-rules.json")
BENCH_SIZE = "family"  # the benchmark's size: the board size's model and batch, fewer steps
DONE = ("finished", "diverged")  # a diverged run is a result: its pair's verdict is "diverged"

# Each rule's paper: (its name, its arXiv id). A test checks every id against the ids the rule's docstring names;
# the Review paper has none, and the older rules' docstrings cite author and year.
PAPERS = {
    "standard": ("pre-norm residual", None),
    "review": ("Review Residuals, Kramer 2026", None),
    "highway": ("Highway Networks, Review's baseline", "1505.00387"),
    "rezero": ("ReZero", "2003.04887"),
    "layerscale": ("LayerScale (CaiT)", "2103.17239"),
    "attnres": ("Attention Residuals", "2603.15031"),
    "attnres_block": ("Block AttnRes", "2603.15031"),
    "delta_attnres": ("Delta Attention Residuals", "2605.18855"),
    "delta_attnres_block": ("Block Delta AttnRes", "2605.18855"),
    "mgr": ("Multi-Gate Residuals", "2605.23259"),
    "hc": ("Hyper-Connections", "2409.19606"),
    "mhc": ("mHC", "2512.24880"),
    "denseformer": ("DenseFormer", "2402.02622"),
    "dynamic_dense": ("MUDDFormer", "2502.12170"),
    "laurel_rw": ("LAuReL", "2411.07501"),
    "laurel_lr": ("LAuReL", "2411.07501"),
    "value_residual": ("ResFormer", "2410.17897"),
}


def paper(rule: str) -> str:
    """The rule's paper as the board names it: "DenseFormer, arXiv:2402.02622"; "–" for a rule it does not know."""
    name, arxiv = PAPERS.get(rule, ("–", None))
    return f"{name}, arXiv:{arxiv}" if arxiv else name


def bench_ratios(paths, size: str, board_size: str) -> pd.DataFrame:
    """Each rule's step time and step time per FLOP over the standard residual's at ``size``, one row per rule,
    from ``rrlib bench`` result files (eager steps); the first file that has a rule gives its row (each ratio is to
    standard's step in the same process). ``size`` must train the board size's model on batches of its size,
    since a step's time is all the board takes from it."""
    from ..runs.presets import load_preset

    timed, board = load_preset(size), load_preset(board_size)
    if (timed.model, timed.train.batch_size) != (board.model, board.train.batch_size):
        raise ConfigError(f"the benchmark's size {size!r} trains another model or batch than {board_size!r}: its "
                          f"step times are not the board's; bench at a size with the same model section")
    rows = {}
    for path in paths:
        for row in json.loads(project_path(path).read_text())["results"]:
            if row["size"] == size and not row.get("compile"):
                rows.setdefault(row["variant"], {"step_time_vs_standard": row["step_time_vs_standard"],
                                                 "step_per_flop_vs_standard": row["step_per_flop_vs_standard"]})
    return pd.DataFrame.from_dict(rows, orient="index")


def study_plan(budget: float, ratios: pd.DataFrame) -> pd.DataFrame:
    """The study's plan (rrlib.studies.leaderboard_study.plan: per rule its finished seeds, the seeds it stands at
    within ``budget`` CPU-hours, the runs to train and their cost), one row per rule in the study's order, a rule
    without finished runs priced by its step-time ratio in ``ratios`` rather than timed afresh."""
    from ..studies import leaderboard_study as study

    unmeasured = [rule for rule in study.board() if rule not in ratios.index]
    if unmeasured:
        raise ConfigError(f"the benchmark files have no step time for {', '.join(unmeasured)}; bench them at the "
                          f"board's model (python -m rrlib bench --size family --variants ...)")
    minutes = study.minutes_per_run(lambda rules: {rule: float(ratios.loc[rule, "step_time_vs_standard"])
                                                   for rule in rules})
    return pd.DataFrame(study.plan(budget, minutes)).set_index("rule")


def model_counts(size: str, rules) -> pd.DataFrame:
    """Parameters and training FLOPs per token of each rule's parameter-matched model at ``size`` (built on the
    meta device: nothing is allocated)."""
    import torch

    from ..model import GPT
    from ..runs.presets import resolve_run

    rows = {}
    for rule in rules:
        with torch.device("meta"):
            model = GPT(resolve_run(size, rule, 0).model)
        rows[rule] = {"params": model.n_params(), "flops_per_token": model.flops_per_token()}
    return pd.DataFrame.from_dict(rows, orient="index")


def read_board(path: Path, baseline: str, metric: str = METRIC) -> pd.DataFrame | None:
    """The board call's verdict rows, or None before it has run; one sentence if the file is another question's."""
    if not path.is_file():
        return None
    rows = pd.read_csv(path)
    if set(rows["baseline"]) != {baseline} or set(rows["metric"]) != {metric}:
        raise ConfigError(f"{path} judges against {sorted(set(rows['baseline']))} on {sorted(set(rows['metric']))}, "
                          f"not against {baseline} on {metric}: it is not the board's verdict file")
    return rows


def done_runs(root: str, size: str, rules, seeds) -> pd.DataFrame:
    """The runs of ``rules`` at ``seeds`` under ``root`` that have a result: finished or diverged."""
    from ..runs.sweep import results_table

    if not (project_path(root) / size).is_dir():
        return pd.DataFrame(columns=["variant", "seed", "status", METRIC])
    runs = results_table(root, size)
    return runs[runs["variant"].isin(list(rules)) & runs["seed"].isin(list(seeds))
                & runs["status"].isin(DONE)].reset_index(drop=True)


def engine_rows(runs: pd.DataFrame, rules, baseline: str, seeds) -> pd.DataFrame:
    """The compare engine's rows for ``rules`` against ``baseline`` at ``seeds``, Holm over them: compare_pairs,
    then its marks for identical and diverged pairs, in the order rrlib.compare.engine.verdict_table applies them
    (the report may not import the compare package, which sits above it; a test holds the two equal)."""
    seeds = list(seeds)
    return mark_diverged(mark_identical(compare_pairs(runs, list(rules), [baseline], seeds=seeds)), runs, seeds)


def stages(plan: pd.DataFrame, runs: pd.DataFrame, baseline: str) -> pd.Series:
    """Each rule's stage (the module docstring's table) from the plan and the runs with a result (variant, seed)."""
    done = runs.groupby("variant")["seed"].agg(set).to_dict()
    ready = done.get(baseline, set())

    def stage(rule, seeds):
        finished = done.get(rule, set())
        if seeds and set(range(seeds)) <= finished & ready:
            return "judged"
        return "in progress" if finished else "planned" if seeds else "beyond the budget"

    return pd.Series({rule: stage(rule, int(seeds)) for rule, seeds in plan["seeds"].items()}, name="stage")


def judged_rows(runs: pd.DataFrame, plan: pd.DataFrame, stage: pd.Series, baseline: str, all_seeds: int,
                board: pd.DataFrame | None = None) -> pd.DataFrame:
    """The engine's rows for every judged rule (``source``: the board's file or the runs; ``holm_over``: the
    comparisons its Holm adjustment spans). The board's rules are those judged at all seeds, Holm over them; the
    file serves when it judges exactly those rules."""
    judged = stage.index[stage == "judged"]
    whole = [rule for rule in judged if plan.loc[rule, "seeds"] == all_seeds]
    parts = []
    if whole and board is not None and set(board["variant"]) == set(whole):
        parts.append(board.assign(source="board file", holm_over=len(whole)))
    elif whole:
        parts.append(engine_rows(runs, whole, baseline, range(all_seeds)).assign(source="runs", holm_over=len(whole)))
    for rule in (r for r in judged if r not in whole):  # held below all seeds by the budget: its own design
        parts.append(engine_rows(runs, [rule], baseline, range(int(plan.loc[rule, "seeds"])))
                     .assign(source="runs", holm_over=1))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["variant"])


def standing(row) -> str:
    """Where a row stands, in a few words: its seeds and Holm family, or what it still needs and costs."""
    seeds, total = int(row["planned_seeds"]), int(row["all_seeds"])
    cost = f"{int(row['runs_to_train'])} runs, {row['cpu_hours']:.1f} CPU-h"
    if row["stage"] == "baseline":
        return f"{int(row['finished'])} seeds"
    if row["stage"] == "judged":
        return (f"{seeds} seeds, Holm over {int(row['holm_over'])}" if seeds == total
                else f"{seeds} of {total} seeds (budget), judged alone")
    if row["stage"] == "in progress":
        return f"{int(row['finished'])} of {seeds} seeds; {cost} to go"
    if row["stage"] == "planned":
        return f"no runs yet; {seeds} seeds planned, {row['cpu_hours']:.1f} CPU-h"
    return f"no runs yet; beyond the budget ({total} seeds: {row['all_seeds_cpu_hours']:.1f} CPU-h)"


def leaderboard(plan: pd.DataFrame, runs: pd.DataFrame, counts: pd.DataFrame, ratios: pd.DataFrame, baseline: str,
                all_seeds: int, board: pd.DataFrame | None = None) -> pd.DataFrame:
    """The board, one row per rule and one for the baseline (gap 0 by definition): the judged rows' statistics
    (``judged_rows``), parameters and FLOPs per token (``counts``), step time per FLOP over the baseline's (the
    board file's, else ``ratios``'), where each row stands (``standing``); sorted by gap, best first, the rules
    without a verdict after them in the study's order."""
    stage = stages(plan, runs, baseline)
    verdicts = judged_rows(runs, plan, stage, baseline, all_seeds, board).set_index("variant")
    rules = [baseline, *plan.index]
    out = pd.DataFrame(index=pd.Index(rules, name="rule"))
    out["paper"] = [paper(rule) for rule in rules]
    out["stage"] = pd.concat([pd.Series({baseline: "baseline"}), stage])
    for column in ("seeds", "gap", "ci_low", "ci_high", "p", "p_holm", "detectable", "margin", "p_equivalent_holm",
                   "verdict", "holm_over", "source", "step_per_flop_vs_standard_variant"):
        out[column] = verdicts[column] if column in verdicts else np.nan
    out["verdict"] = out["verdict"].astype(object)
    out.loc[baseline, ["gap", "verdict"]] = [0.0, "baseline"]
    out["params"], out["flops_per_token"] = counts["params"], counts["flops_per_token"]
    from_board = out["step_per_flop_vs_standard_variant"].notna()
    out["step_per_flop_vs_standard"] = out["step_per_flop_vs_standard_variant"].fillna(
        ratios["step_per_flop_vs_standard"])
    out.loc[baseline, "step_per_flop_vs_standard"] = 1.0
    out["timed_by"] = np.where(from_board, "board call", "benchmark")
    out.loc[baseline, "timed_by"] = "baseline"  # 1 by definition
    out["finished"] = pd.Series({baseline: len(runs[runs["variant"] == baseline])}).combine_first(plan["finished"])
    out["planned_seeds"] = plan["seeds"].reindex(rules).fillna(all_seeds).astype(int)
    out["all_seeds"] = all_seeds
    for column in ("runs_to_train", "cpu_hours", "all_seeds_cpu_hours"):
        out[column] = plan["to_train" if column == "runs_to_train" else column].reindex(rules).fillna(0)
    out = out.astype({"seeds": "Int64", "holm_over": "Int64", "runs_to_train": int})
    out["stands_at"] = [standing(row) for _, row in out.reset_index().iterrows()]
    # with a gap first, best first; then judged without one (diverged); then the rest in the study's order
    group = np.where(out["gap"].notna(), 0, np.where(out["stage"] == "judged", 1, 2))
    order = pd.DataFrame({"group": group, "gap": -out["gap"].fillna(0), "place": range(len(out))}, index=out.index)
    return out.drop(columns="step_per_flop_vs_standard_variant").loc[
        order.sort_values(["group", "gap", "place"]).index]


def study_board(budget_cpu_hours: float = study.BUDGET_CPU_HOURS, bench_files=BENCH_FILES,
                bench_size: str = BENCH_SIZE) -> pd.DataFrame:
    """The leaderboard study's board as page 08 shows it (``leaderboard``): its plan within ``budget_cpu_hours``,
    priced by the benchmark's step times (``bench_files`` at ``bench_size``), its finished runs, and the board call's
    verdict file where the study has written it."""
    rules = [study.BASELINE, *study.board()]
    ratios = bench_ratios(list(bench_files), bench_size, study.SIZE)
    plan = study_plan(budget_cpu_hours, ratios)
    runs = done_runs(study.RUNS, study.SIZE, rules, range(study.SEEDS))
    return leaderboard(plan, runs, model_counts(study.SIZE, rules), ratios, study.BASELINE, study.SEEDS,
                       read_board(project_path(study.OUT) / BOARD_VERDICT, study.BASELINE))
