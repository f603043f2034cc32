"""Page 03's recap from a size's results table: each rule's mean, SD and count of finished runs, and Review's verdict
against each baseline only where both have finished runs."""
import numpy as np
import pandas as pd

from rrlib.results import sweep


def table(losses: dict) -> pd.DataFrame:
    rows = [{"size": "tiny", "variant": v, "seed": s, "params_M": 0.1, "fixed_loss": x,
             "status": "finished" if np.isfinite(x) else "diverged"}
            for v, xs in losses.items() for s, x in enumerate(xs)]
    return pd.DataFrame(rows)


def test_the_recap_counts_finished_runs_and_compares_only_where_both_sides_have_them():
    runs = table({"review": [2.0, 2.1, 2.2], "standard": [2.1, 2.3, 2.2], "highway": [np.nan, np.nan, np.nan]})
    made = sweep.recap(runs, ["review", "highway", "standard"])
    assert list(made.losses.index) == ["review", "highway", "standard"]
    assert made.losses.loc["review", "mean"] == 2.1 and made.losses.loc["highway", "count"] == 0
    np.testing.assert_allclose(made.losses.loc["standard", "std"], np.std([2.1, 2.3, 2.2], ddof=1))
    assert made.verdicts is not None and len(made.verdicts) >= 1
    alone = sweep.recap(table({"review": [2.0, 2.1], "highway": [np.nan, np.nan]}), ["review", "highway"])
    assert alone.verdicts is None
