"""Page 08's board as a reader sees it: the judged rules' rows under the reader's names (``shown``) and their
paired gaps as a figure (``gaps_figure``); the rows themselves are rrlib.results.leaderboard's."""
from __future__ import annotations

import pandas as pd


def shown(board: pd.DataFrame) -> pd.DataFrame:
    """The page's columns, numbers as numbers (``SHOWN_FORMATS`` formats them; a row without a verdict shows –)."""
    interval = [f"{r.gap:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}]" if r.stage == "judged" and pd.notna(r.gap)
                else None
                for r in board.itertuples()]
    return pd.DataFrame({
        "rule": board.index, "paper": board["paper"], "gap (nats) [95 % CI]": interval, "verdict": board["verdict"],
        "Holm p": board["p_holm"], "detectable (nats)": board["detectable"], "params": board["params"],
        "FLOPs/token (M)": board["flops_per_token"] / 1e6,
        "step/FLOP vs standard": board["step_per_flop_vs_standard"], "stands at": board["stands_at"]})


SHOWN_FORMATS = {"detectable (nats)": "{:.4f}", "FLOPs/token (M)": "{:.3f}", "step/FLOP vs standard": "{:.3f}"}


def gaps_figure(board: pd.DataFrame, size: str, margin: float):
    """The judged rules' paired gaps with their 95 % intervals, best at the top, the equivalence margin shaded."""
    import matplotlib.pyplot as plt

    from .plots import color, marker

    judged = board[board["stage"] == "judged"].iloc[::-1]
    fig, ax = plt.subplots(figsize=(8, 1.8 + 0.4 * len(judged)))
    ax.axvspan(-margin, margin, color="#eeeeee", zorder=0)
    ax.axvline(0, color="#888888", lw=0.8)
    for y, (rule, row) in enumerate(judged.iterrows()):
        ax.errorbar(row["gap"], y, xerr=[[row["gap"] - row["ci_low"]], [row["ci_high"] - row["gap"]]],
                    color=color(rule), marker=marker(rule), capsize=3, lw=1.4)
    ax.set_yticks(range(len(judged)), [f"{rule} ({int(n)} seeds)" for rule, n in judged["seeds"].items()])
    ax.set_ylim(-0.6, len(judged) - 0.4)
    ax.set_xlabel(f"gap against standard on fixed_loss (nats; > 0: lower loss than standard)\n"
                  f"grey: ±{margin:g} nats, the equivalence margin")
    ax.set_title(f"{size}: paired gap against standard, 95 % intervals ({len(judged)} of {len(board) - 1} rules "
                 f"judged)")
    return fig
