"""A user's rule joins a study whose design compares rules: ``rrlib study run leaderboard --rules my_rules.py
--variants mine``.

Only the user's runs are trained, at the study's size and seeds, into a folder of the user's (``--out``, never under
the project's outputs/); the published runs are read where the study keeps them and never written. The board is
then judged again with the user's rules among the published ones, by the compare engine's statistics
(rrlib.stats.verdict: ``compare_pairs``, then its marks for identical and diverged pairs): per rule against the
baseline the paired gap on ``fixed_loss`` (baseline − rule: positive is better) with its interval, Holm's p over the
enlarged family, the detectable gap (80 % power) at the seeds run and the verdict word, ranked by the gap; beside
them, FLOPs per token and the CPU time of a step per FLOP against the baseline's, both read from the runs' results
(their minutes, steps and FLOPs). It is written to ``<out>/board.csv`` and ``board.html`` and printed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .work import Plan, sweep_job

DESIGN_FILE = "board.json"  # the design a --out holds, so that another design's runs and board never mix with it

COLUMNS = ["rank", "variant", "yours", "gap", "ci_low", "ci_high", "p_holm", "detectable", "verdict", "seeds",
           "flops_per_token", "step_time_per_flop_vs_baseline"]


@dataclass(frozen=True)
class Board:
    """A design that compares rules: every rule of ``rules()`` against ``baseline`` at ``size``, seeds 0 to
    ``seeds`` - 1, its runs under ``runs`` (``<runs>/<size>/<rule>/seed<k>``), trained with the sweep arguments
    ``extra`` (none: the preset's settings)."""
    size: str
    baseline: str
    seeds: int
    runs: str
    rules: Callable[[], list]
    extra: tuple = ()


def design(study: str, board: Board, variants) -> dict:
    """What one user's board is: the study, its size, baseline and seeds, and the user's rules."""
    return {"study": study, "size": board.size, "baseline": board.baseline, "seeds": board.seeds,
            "variants": sorted(variants)}


def other_design(folder: Path, mine: dict) -> str | None:
    """The board another design keeps in ``folder``, in words (None: none, or this one): its runs and board would
    mix with this one's, and the board of one would replace the other's."""
    try:
        there = json.loads((folder / DESIGN_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return f"a {DESIGN_FILE} that cannot be read"
    if there == mine:
        return None
    if not isinstance(there, dict):
        return f"a {DESIGN_FILE} that is not a board's"
    return f"the board of {', '.join(there.get('variants') or ['?'])} on {there.get('study', '?')}"


def keep_design(folder: Path, mine: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DESIGN_FILE).write_text(json.dumps(mine, sort_keys=True) + "\n")


def user_plan(board: Board, variants, out: str) -> Plan:
    """One sweep per user rule at the board's size and seeds, into ``<out>/runs``."""
    return Plan([[sweep_job(rule, board.size, [rule], range(board.seeds), f"{out}/runs", *board.extra)
                  for rule in variants]],
                [f"  {', '.join(variants)} against {board.baseline} at {board.size}, seeds 0-{board.seeds - 1}, "
                 f"into {out}/runs; the published runs under {board.runs} are read, never written"])


def ranked(board: Board, variants, out: str):
    """The board with the user's rules among the published ones (the module docstring), ranked by the gap."""
    import pandas as pd

    from ..runs.sweep import results_table
    from ..stats.verdict import compare_pairs, mark_diverged, mark_identical

    published = [r for r in board.rules() if r != board.baseline]
    seeds = list(range(board.seeds))
    theirs = results_table(board.runs, board.size)
    mine = results_table(f"{out}/runs", board.size)
    table = pd.concat([theirs[theirs["variant"].isin([*published, board.baseline])],
                       mine[mine["variant"].isin(list(variants))]], ignore_index=True)
    table = table[table["seed"].isin(seeds)]
    rows = mark_diverged(mark_identical(compare_pairs(table, [*published, *variants], [board.baseline], seeds=seeds)),
                         table, seeds)
    done = table[table["status"] == "finished"]
    per_flop = (done["minutes"] / done["steps"] / done["flops_per_token"]).groupby(done["variant"]).median()
    flops = done.groupby("variant")["flops_per_token"].median()
    rows = rows.assign(yours=rows["variant"].isin(list(variants)),
                       flops_per_token=rows["variant"].map(flops),
                       step_time_per_flop_vs_baseline=rows["variant"].map(per_flop / per_flop.get(board.baseline)))
    rows = rows.sort_values("gap", ascending=False, na_position="last").reset_index(drop=True)
    return rows.assign(rank=range(1, len(rows) + 1))[COLUMNS]


def render(board: Board, variants, out: str) -> str:
    """``ranked`` written to ``<out>/board.csv`` and ``board.html``; the table as text."""
    from ..home import project_path

    rows = ranked(board, variants, out)
    folder = project_path(out)
    rows.to_csv(folder / "board.csv", index=False)
    (folder / "board.html").write_text(rows.to_html(index=False, float_format=lambda x: f"{x:.4g}"))
    return rows.to_string(index=False, float_format=lambda x: f"{x:.4g}")
