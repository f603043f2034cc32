"""The reach verdicts' controls (rrlib.claims.controls): each control study read by its record's registered rule, and
what it does to the registered row. Constructed runs check each rule's branches; the committed runs check the
readings that have ended (Highway's positive control, LayerScale's fixed starts)."""
import numpy as np
import pandas as pd
import pytest

from rrlib.claims import controls
from rrlib.claims.controls import FAILS, PASSES, PENDING, Control
from rrlib.stats import ledger
from rrlib.studies import reach_control_study as control

ROW = ledger.row("LayerScale", "deeper", "the registered test", "contradicted", "e", -0.04, -0.06, -0.02, 0.001,
                 "none")


def test_a_control_that_fails_makes_a_decided_row_inconclusive_and_says_why():
    failed = Control("layerscale_eps", "start of λ", FAILS, "slopes", "the trend is the start's")
    row = controls.apply(ROW, [failed, Control("layerscale_horizon", "horizon", PENDING, "0 of 6 runs ended")],
                         "300 steps")
    assert row["verdict"] == "inconclusive" and row["effect"] == ROW["effect"]
    assert row["test"] == ("the registered test; inconclusive by its registered controls: layerscale_eps: the trend "
                           "is the start's")
    assert row["setting"] == ("300 steps; controls: layerscale_eps (start of λ) fails: slopes; layerscale_horizon "
                              "(horizon) pending: 0 of 6 runs ended")


def test_controls_that_pass_or_wait_keep_the_verdict_and_name_its_setting():
    row = controls.apply(ROW, [Control("a", "positive control", PASSES, "trains"),
                               Control("b", "horizon", PENDING, "0 of 2 runs ended")], "300 steps, 12 blocks")
    assert {k: v for k, v in row.items() if k != "setting"} == {k: v for k, v in ROW.items() if k != "setting"}
    assert row["setting"] == ("300 steps, 12 blocks; controls: a (positive control) passes: trains; b (horizon) "
                              "pending: 0 of 2 runs ended")


def test_an_untested_row_stays_untested_whatever_its_controls_say():
    waiting = ledger.row("ReZero", "faster", "", ledger.untested("registered before its runs"), "")
    row = controls.apply(waiting, [Control("c", "positive control", FAILS, "x", "cannot test")], "300 steps")
    assert row["verdict"] == waiting["verdict"]


def test_a_reread_at_the_controls_best_rates_replaces_the_registered_reading():
    again = {"test": "read again", "verdict": "supported", "effect": 0.7, "ci_low": 0.2, "ci_high": 1.2, "p": 0.01,
             "detectable": 0.5}
    row = controls.apply(ROW, [Control("rezero_control", "positive control", PASSES, "x", "", again)], "s")
    assert (row["verdict"], row["effect"], row["p"], row["detectable"]) == ("supported", 0.7, 0.01, 0.5)
    assert row["test"] == "the registered test; read again"


def runs(rows):
    return pd.DataFrame(rows, columns=["arm", "size", "seed", "status", "fixed_loss"])


def test_layerscale_rates_fail_where_layerscale_is_best_or_a_best_rate_is_at_the_edge(monkeypatch):
    def finished(study, arms=None, seeds=None):
        if study.name == "layerscale_depth":  # the registered 2e-3 at 36 blocks, read beside the bracket
            return runs([("layerscale", "reach36", s, "finished", 3.0) for s in (0, 1)]
                        + [("standard", "reach36", s, "finished", 2.9) for s in (0, 1)])
        loss = {"layerscale_lr0.0005": 3.2, "layerscale_lr0.001": 3.1, "layerscale_lr0.004": 2.95,
                "layerscale_lr0.008": 3.3, "standard_lr0.0005": 3.1, "standard_lr0.001": 3.0,
                "standard_lr0.004": 2.8, "standard_lr0.008": 2.85}
        return runs([(arm, "reach36", s, "finished", value) for arm, value in loss.items() for s in (0, 1)])

    monkeypatch.setattr(controls, "finished", finished)
    read = controls._layerscale_rates(control.LAYERSCALE_RATES, (0, 1))
    assert read.state == PASSES and read.finding == ("mean loss at the best rates: layerscale 2.9500 at 0.004, "
                                                     "standard 2.8000 at 0.004")

    def ahead(study, arms=None, seeds=None):
        table = finished(study, arms, seeds)
        return table.assign(fixed_loss=np.where(table["arm"] == "layerscale_lr0.008", 2.5, table["fixed_loss"]))

    monkeypatch.setattr(controls, "finished", ahead)
    read = controls._layerscale_rates(control.LAYERSCALE_RATES, (0, 1))
    assert read.state == FAILS and read.unsettles == (
        "LayerScale at its best rate ends below standard at its best: the gap is the shared rate's; a best rate "
        "lies at the grid's edge (layerscale at 0.008)")


def test_a_diverged_rate_is_never_the_best(monkeypatch):
    def finished(study, arms=None, seeds=None):
        if study.name == "layerscale_depth":
            return runs([])
        return runs([("layerscale_lr0.008", "reach36", 0, "diverged", np.nan),
                     ("layerscale_lr0.008", "reach36", 1, "finished", 1.0),
                     ("layerscale_lr0.001", "reach36", 0, "finished", 3.0),
                     ("standard_lr0.001", "reach36", 0, "finished", 2.0)])

    monkeypatch.setattr(controls, "finished", finished)
    read = controls._layerscale_rates(control.LAYERSCALE_RATES, (0, 1))
    assert "layerscale 3.0000 at 0.001" in read.finding and read.state == PASSES


def test_a_control_whose_runs_have_not_all_ended_is_pending(monkeypatch):
    monkeypatch.setattr(controls, "finished", lambda study, arms=None, seeds=None: runs(
        [("carry", "reach100", 0, "finished", 2.0)]))
    read = controls._pending(control.HIGHWAY_HORIZON, "horizon", (0, 1))
    assert (read.state, read.finding) == (PENDING, "1 of 2 runs ended")


@pytest.mark.usefixtures("data")
def test_the_committed_controls_read_as_registered():
    """Highway's positive control (the carry arm at 12 and 24 blocks) passes; neither fixed start of λ shows the
    registered row's negative slope (0.1 shows the paper's direction), so LayerScale's row is inconclusive."""
    highway = {c.study: c for c in controls.highway()}
    assert highway["highway_control"].state == PASSES
    layerscale = {c.study: c for c in controls.layerscale(row_effect=-0.041)}
    starts = layerscale["layerscale_eps"]
    assert starts.state == FAILS and starts.finding.startswith("start 0.1: −slope +0.0210 per doubling (p 0.0067)")
    assert {c.study: c.state for c in controls.layerscale(row_effect=+0.041)}["layerscale_eps"] == PASSES
