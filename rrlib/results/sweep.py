"""Page 03's result for one size: each rule's held-out loss over its seeds, and Review's verdict against each
baseline, from the size's results table (``rrlib.runs.sweep.results_table``: one row per run)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .. import stats

METRIC = "fixed_loss"  # the loss on the fixed held-out set, the same windows for every run


@dataclass
class Recap:
    """``losses``: per rule (index ``variant``, in the order asked) ``mean``, ``std`` and ``count`` (finished runs)
    of ``METRIC``; ``verdicts``: ``rrlib.stats.verdicts`` of Review against each baseline (column ``verdict``), or
    None where Review or every baseline has no finished run."""
    losses: pd.DataFrame
    verdicts: pd.DataFrame | None


def recap(table: pd.DataFrame, variants) -> Recap:
    """The recap of ``table`` over ``variants``: a rule whose every run diverged counts 0 and is compared with none."""
    losses = table.groupby("variant")[METRIC].agg(["mean", "std", "count"]).loc[
        [v for v in variants if v in set(table["variant"])]]
    scored = losses[losses["count"] > 0]
    verdicts = stats.verdicts(stats.compare(table, metric=METRIC)) \
        if "review" in scored.index and len(scored) > 1 else None
    return Recap(losses, verdicts)
