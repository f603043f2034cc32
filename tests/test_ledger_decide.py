"""Where several registered designs answer one claim, the one with the smallest detectable gap decides, whichever
way its verdict goes, and the others stand beside it in the row's test (rrlib.stats.ledger.decide)."""
import numpy as np
import pytest

from rrlib.stats import ledger


def design(test, verdict, effect=np.nan, detectable=np.nan, low=np.nan, high=np.nan):
    return ledger.row("P", "a claim", test, verdict, "page.html", effect, low, high, 0.01, "none",
                      detectable=detectable)


def test_the_design_that_detects_the_smallest_gap_decides_even_against_a_supported_verdict():
    weak = design("three seeds", "supported", 0.05, detectable=0.04, low=0.01, high=0.09)
    strong = design("47 seeds", "inconclusive", 0.002, detectable=0.006, low=-0.001, high=0.005)
    chosen = ledger.decide([weak, strong])
    assert chosen["verdict"] == "inconclusive" and chosen["effect"] == 0.002
    assert chosen["test"].startswith("47 seeds") and "also registered: three seeds: +0.0500 [+0.0100, +0.0900], " \
                                                      "supported, detects 0.04" in chosen["test"]


def test_a_design_without_a_verdict_or_a_detectable_gap_decides_only_alone():
    waiting = design("the powered design", ledger.untested("runs not finished"), detectable=0.001)
    measured = design("three seeds", "contradicted", -0.1, detectable=0.05)
    assert ledger.decide([waiting, measured])["test"].startswith("three seeds")
    unsized = design("a measurement", "supported", 0.3)
    assert ledger.decide([unsized, waiting])["test"].startswith("a measurement")
    assert ledger.decide([waiting])["verdict"] == waiting["verdict"]


def test_a_tie_keeps_the_first_and_one_design_is_returned_as_it_was():
    first, second = design("powered", "supported", 0.01, 0.005), design("board", "supported", 0.01, 0.005)
    assert ledger.decide([first, second])["test"].startswith("powered; also registered: board")
    assert ledger.decide([first]) == first
    rounded_down = design("board", "inconclusive", 0.01, 0.005 * (1 - 1e-12))  # the same runs, another rounding
    assert ledger.decide([first, rounded_down])["test"].startswith("powered")
    with pytest.raises(ValueError, match="at least one"):
        ledger.decide([])


def test_an_interval_below_the_paper_s_effect_contradicts_at_this_scale_as_one_above_zero_supports():
    assert ledger.at_this_scale("inconclusive", 0.0099, 0.0169) == "contradicted"
    assert ledger.at_this_scale("inconclusive", 0.02, 0.0169) == "inconclusive"  # the paper's effect inside
    assert ledger.at_this_scale("supported", 0.005, 0.0169) == "supported"  # the direction holds, smaller
    assert ledger.at_this_scale("inconclusive", np.nan, 0.0169) == "inconclusive"
    assert ledger.at_this_scale("inconclusive", -0.1, np.nan) == "inconclusive"  # no stated effect
    assert ledger.at_this_scale("untested: running", -0.1, 0.4) == "untested: running"


def test_a_record_s_row_applies_the_symmetric_rule_on_its_scale_only():
    import dataclasses

    from rrlib.claims import records, rows

    claim = records.by_id()["delta-routing"]  # the paper's 0.4: 0.6 against 0.2, on the row's scale
    made = rows.row(claim, "a test", "inconclusive", "e", -0.007, -0.022, 0.008, 0.17, "none", detectable=0.02)
    assert made["verdict"] == "contradicted" and "ruled out at this scale" in made["test"]
    other = dataclasses.replace(claim, paper_effect={**claim.paper_effect, "scale": ledger.OTHER_SCALE})
    kept = rows.row(other, "a test", "inconclusive", "e", -0.007, -0.022, 0.008, 0.17, "none", detectable=0.02,
                    paper_effect=0.4)
    assert kept["verdict"] == "inconclusive"
    seen = ledger.could_see(kept | {"effect_scale": ledger.OTHER_SCALE})
    assert seen == "unclear: detects 0.02; the paper's 0.4 is on another scale than this row's metric"
    own = records.by_id()["review-gain-1b"]  # the paper's own runs: its effect is the data's, no such reading
    assert rows.row(own, "t", "inconclusive", "e", 0.001, -0.01, 0.002, 0.5, "none")["verdict"] == "inconclusive"
