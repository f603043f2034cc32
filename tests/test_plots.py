"""The report's figure style and reader tables."""
import math

import pandas as pd

from rrlib.report import plots, tables
from rrlib.rules import RULES


def test_every_registered_rule_has_its_own_colour_and_marker():
    styles = {name: plots.rule_style(name) for name in RULES}
    assert len(set(styles.values())) == len(styles)
    # 14 rules in one figure must differ by colour alone (greyscale aside), not only by marker
    assert len({colour for colour, _ in styles.values()}) == len(styles) >= 14


def test_a_rule_added_later_gets_a_fixed_style():
    assert plots.rule_style("my_new_rule") == plots.rule_style("my_new_rule")
    assert plots.palette(["review", "my_new_rule"])["review"] == plots.RULE_STYLES["review"][0]


def test_reader_formatting():
    df = pd.DataFrame({"p (Holm)": [0.000349412, 1.0], "welch_p": [0.0625, math.nan], "ok": [True, False],
                       "loss": [2.241812, 2.3], "tokens": [1234567.0, 3.0], "name": ["a", None]})
    shown = tables.formatted(df)
    assert list(shown["p (Holm)"]) == ["0.00035", "1"]
    assert list(shown["welch_p"]) == ["0.062", "–"]
    assert list(shown["ok"]) == ["✓", "–"]
    assert list(shown["loss"]) == ["2.242", "2.3"]
    assert list(shown["tokens"]) == ["1,234,567", "3"]
    assert list(shown["name"]) == ["a", "–"]
    assert list(tables.formatted(df, {"loss": "{:.1f}"})["loss"]) == ["2.2", "2.3"]
