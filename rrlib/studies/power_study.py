"""The powered CPU studies on the report's pages: a design's finished runs, its verdict through the compare engine,
the regime it trained in and whether its held-out loss was still falling at the end (how a page shows them:
rrlib.views.power_tables).

A design (``rrlib compare --size S --variants A --against B,C --seeds N``, run in shards across sittings) is read
only once every run of it has finished: a verdict at fewer seeds than the design fixed would be the optional
stopping the design exists to prevent. Until then a page says how many runs are done.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..runs.config import project_path, run_folder
from ..runs.loading import read_metrics
from ..runs.presets import resolve_run
from ..runs.data.rundata import load_run_data
from ..runs.sweep import results_table
from .. import stats
from ..stats import verdict

PILOT_SEEDS = 4  # a pilot is seeds 0-3 of every rule of the design (the issue asks for at least 4)
BUDGET_CPU_HOURS = 12.0  # the most CPU-hours one powered design is given
LATE_STEPS = 400  # the held-out loss must still fall over a run's last this many steps (no overfitting)
# compare_pairs' columns under the names page 04's tables of paired tests use, so the ledger reads either alike
TEST_NAMES = {"gap": "paired_gap", "seeds": "paired_n", "detectable": "mde"}


def design_runs(root: str, size: str, variants, seeds) -> pd.DataFrame:
    """The design's finished runs: one row per (variant, seed) asked for whose result says ``finished``."""
    if not (project_path(root) / size).is_dir():
        return pd.DataFrame(columns=["variant", "seed", "status"])
    runs = results_table(root, size)
    return runs[runs["variant"].isin(list(variants)) & runs["seed"].isin(list(seeds))
                & (runs["status"] == "finished")].reset_index(drop=True)


def finished_design(root: str, size: str, variants, n_seeds: int) -> tuple[pd.DataFrame | None, str]:
    """The design's runs (seeds 0 to ``n_seeds`` - 1 of each variant) once every one has finished, else None and
    how many have, in words."""
    runs = design_runs(root, size, variants, range(n_seeds))
    total = len(list(variants)) * n_seeds
    if len(runs) < total:
        return None, (f"{size}: {len(runs)} of the design's {total} runs have finished under {root}; its verdict "
                      "follows when all have")
    return runs, ""


def pilot_design(runs: pd.DataFrame, variant: str, baselines, target: float, pilot_seeds: int = PILOT_SEEDS,
                 budget: float = BUDGET_CPU_HOURS, alpha: float = verdict.ALPHA) -> pd.DataFrame:
    """The design a pilot fixes, one row per baseline: the paired SD it met (``verdict.compare_pairs``, as the
    compare engine's ``--detect`` reads it), the detectable gap at the pilot's seeds, and the seeds at which that SD
    detects ``target`` (80 % power, α); then the design, one for all baselines (the most seeds any needs, since the
    variant's runs are shared): its runs, and its CPU-hours at the pilot's median minutes per run (one process on
    one thread each; the median, since a run that shared its core with other work would otherwise price the whole
    design: two of the micro pilot's twelve took 18 and 20 minutes beside a median of 3.7). Beside them, what
    ``budget`` CPU-hours would buy: the seeds it affords and the gap those detect. And each comparison alone (the
    variant and that baseline, at the seeds it needs): its CPU-hours, since the budget is one comparison's and a
    joint design beyond it may still hold a comparison within it.
    """
    pilot = runs[runs["seed"].isin(range(pilot_seeds))]
    rows = verdict.compare_pairs(pilot, [variant], list(baselines), alpha=alpha)
    needed = [verdict.seeds_needed(sd, target, alpha) for sd in rows["sd"]]
    design_seeds = None if any(n is None for n in needed) else max(needed)
    arms, minutes = 1 + len(list(baselines)), float(pilot["minutes"].median())
    affordable = int(budget * 60 // (arms * minutes))
    return pd.DataFrame({
        "variant": variant, "baseline": rows["baseline"], "pilot_seeds": rows["seeds"], "sd": rows["sd"],
        "detectable_pilot": rows["detectable"], "target": target, "seeds_needed": needed,
        "design_seeds": design_seeds, "design_runs": None if design_seeds is None else arms * design_seeds,
        "minutes_per_run": minutes,
        "design_cpu_hours": np.nan if design_seeds is None else arms * design_seeds * minutes / 60,
        "comparison_cpu_hours": [np.nan if n is None else 2 * n * minutes / 60 for n in needed],
        "budget_cpu_hours": budget, "within_budget": design_seeds is not None and
        arms * design_seeds * minutes / 60 <= budget, "budget_seeds": affordable,
        "detectable_in_budget": [stats.detectable_gap(sd, affordable, alpha) for sd in rows["sd"]]})


def pilot_sentence(size: str, design: pd.DataFrame) -> str:
    """``pilot_design`` in words: the seeds the pilot fixes and their cost, and, beyond the budget, what it would
    take and what the budget could detect instead."""
    first = design.iloc[0]
    sds = ", ".join(f"{r.sd:.4f} against {r.baseline}" for r in design.itertuples())
    head = (f"{size}: the pilot's paired SD is {sds} ({int(first['pilot_seeds'])} seeds, "
            f"{first['minutes_per_run']:.1f} CPU-minutes a run)")
    if pd.isna(first["design_seeds"]):
        return head + f"; no number of seeds up to 1,000 detects {first['target']:g} nats"
    cost = (f"{int(first['design_seeds'])} seeds detect {first['target']:g} nats: {int(first['design_runs'])} runs, "
            f"about {first['design_cpu_hours']:.1f} CPU-hours")
    if first["within_budget"]:
        return f"{head}; {cost}, within the {first['budget_cpu_hours']:g} given"
    return (f"{head}; {cost}, beyond the {first['budget_cpu_hours']:g} given. Within them, "
            f"{int(first['budget_seeds'])} seeds would detect "
            + ", ".join(f"{r.detectable_in_budget:.4f} against {r.baseline}" for r in design.itertuples())
            + f"; the target needs {first['design_cpu_hours'] / first['budget_cpu_hours']:.2f}× the budget "
            f"(a GPU, or a smaller SD from a longer or quieter regime)" + alone(design))


def alone(design: pd.DataFrame) -> str:
    """Each comparison of a joint design priced alone (two rules at the seeds it needs), for a design beyond the
    budget with more than one baseline; else nothing."""
    if len(design) < 2:
        return ""
    return ". Alone, " + "; ".join(
        f"{r.variant} against {r.baseline} needs " + ("more than 1,000 seeds" if pd.isna(r.comparison_cpu_hours) else
                                                     f"{int(r.seeds_needed)} seeds, {2 * int(r.seeds_needed)} runs, "
                                                     f"about {r.comparison_cpu_hours:.1f} CPU-hours")
        for r in design.itertuples())


def tests(runs: pd.DataFrame, variant: str, baselines, size: str, margin: float = verdict.DEFAULT_MARGIN,
          alpha: float = verdict.ALPHA) -> pd.DataFrame:
    """The design's paired tests by the compare engine (``verdict.compare_pairs``, Holm over its baselines), one
    row per baseline, with page 04's column names beside the engine's (``TEST_NAMES``) and the size."""
    rows = verdict.compare_pairs(runs, [variant], list(baselines), margin=margin, alpha=alpha)
    for engine, page in TEST_NAMES.items():
        rows[page] = rows[engine]
    return rows.assign(size=size)


def reach_sentence(row: dict, target: float) -> str:
    """Whether a finished comparison detects the gap its design was sized for. The pilot's SD fixed the seeds; the
    SD over all of them can come out larger, and then the design detects less than it was built to. The largest SD
    at which its seeds reach the target follows from the detectable gap being proportional to the SD at a fixed
    seed count."""
    head = (f"{row['variant']} vs {row['baseline']} detects {row['detectable']:.4f} nats at its "
            f"{int(row['seeds'])} seeds")
    if row["detectable"] <= target:
        return head + f", within the {target:g} it was sized for"
    largest_sd = target * row["sd"] / row["detectable"]
    return (head + f", short of the {target:g} it was sized for: the paired SD over all its seeds is {row['sd']:.4f}, "
            f"above the {largest_sd:.4f} at which {int(row['seeds'])} seeds detect {target:g}")


def pooled(designs) -> pd.DataFrame | None:
    """Several designs' tests (``tests`` tables; None for one not yet finished) as one family, for a claim they all
    bear on: their rows, with Holm over every comparison of them all (each design's own table is Holm within
    itself). None when no design has finished."""
    finished = [rows for rows in designs if rows is not None]
    if not finished:
        return None
    rows = pd.concat(finished, ignore_index=True)
    return rows.assign(p_holm=stats.holm(rows["p"]))


def late_fall(run_dir, steps: int = LATE_STEPS) -> float:
    """How far the run's held-out ``fixed_loss`` fell over its last ``steps`` steps: the value at the last
    evaluation at least ``steps`` before the final one, minus the final one's (> 0: still falling). NaN when the
    run evaluated too seldom to tell."""
    evals = read_metrics(project_path(run_dir), "fixed_loss")
    if evals.empty:
        return np.nan
    last_step, last = evals["step"].iloc[-1], evals["fixed_loss"].iloc[-1]
    earlier = evals.loc[evals["step"] <= last_step - steps, "fixed_loss"]
    return float(earlier.iloc[-1] - last) if len(earlier) else np.nan


def late_falls(root: str, runs: pd.DataFrame, steps: int = LATE_STEPS) -> pd.Series:
    """``late_fall`` of each run of the table, indexed like it."""
    return pd.Series([late_fall(run_folder(root, r.size, r.variant, r.seed), steps) for r in runs.itertuples()],
                     index=runs.index, dtype=float)


def regime(runs: pd.DataFrame, train_tokens: int) -> dict:
    """What the design trained: steps, tokens and tokens per parameter (each variant's, the smallest to the
    largest), passes over the train stream of ``train_tokens`` tokens, and the CPU-hours its runs took (the sum of
    their training minutes; each run is one process on one thread)."""
    per_param = runs.groupby("variant")["tokens_per_param"].mean()
    return {"runs": len(runs), "steps": int(runs["steps"].max()), "tokens": int(runs["tokens"].max()),
            "tokens_per_param": (float(per_param.min()), float(per_param.max())),
            "passes": float(runs["tokens"].max() / train_tokens), "cpu_hours": float(runs["minutes"].sum() / 60)}


def regime_sentence(root: str, size: str, runs: pd.DataFrame) -> str:
    """The design's regime and cost in words (``regime``), and whether every run's held-out loss was still
    falling over its last ``LATE_STEPS`` steps (``late_falls``)."""
    first = runs.iloc[0]
    train_tokens = len(load_run_data(resolve_run(size, first["variant"], int(first["seed"]), None, root)).train)
    r, falls = regime(runs, train_tokens), late_falls(root, runs)
    end = ("of every run (no overfitting)" if (falls > 0).all() else
           f"and did not fall in {int((~(falls > 0)).sum())} runs")
    low, high = (f"{x:.1f}" for x in r["tokens_per_param"])
    return (f"{size}: {r['runs']} runs of {r['steps']:,} steps, {r['tokens'] / 1e6:.1f} M tokens each "
            f"({low if low == high else f'{low}–{high}'} tokens per parameter, {r['passes']:.1f} "
            f"passes over the train stream), {r['cpu_hours']:.1f} CPU-hours in all; the held-out loss fell by "
            f"{falls.min():.3f} to {falls.max():.3f} nats over the last {LATE_STEPS} steps " + end)
