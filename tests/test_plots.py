"""The report's figure style and reader tables."""
import base64
import math

import numpy as np
import pandas as pd
import pytest

from rrlib.views import plots, tables
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


def test_rounded_keeps_five_significant_digits_and_every_integer_digit():
    # the two builds of page 01's value on two CPUs (their 7th digit differs) round to the same number
    assert tables.rounded(0.21880642067770198) == tables.rounded(0.2188063732566563) == 0.21881
    assert tables.rounded(12345.678) == 12346.0 and tables.rounded(1234567.8) == 1234568.0
    assert tables.rounded(-3.14159e-9) == -3.1416e-09 and tables.rounded(0.0) == 0.0
    df = pd.DataFrame({"loss": [2.2418123456, math.nan], "n": [3, 4], "name": ["a", "b"]},
                      index=pd.Index([0.333333333, 1.5], name="x"))
    out = tables.rounded(df)
    assert list(out["loss"].fillna(-1)) == [2.2418, -1] and list(out["n"]) == [3, 4] and list(out["name"]) == ["a", "b"]
    assert list(out.index) == [0.33333, 1.5] and out.index.name == "x" and df["loss"].iloc[0] == 2.2418123456
    assert tables.rounded(np.array([[1 / 3, 2 / 3]], dtype=np.float32)).tolist() == [[0.33333, 0.66667]]


def test_plotly_figures_are_embedded_rounded():
    go = pytest.importorskip("plotly.graph_objects")
    fig = go.Figure(go.Scatter(x=np.array([1.0, 2.0]), y=np.array([0.21880642067770198, 1 / 3]),
                               customdata=np.array([["mini", 0.0123456789]], dtype=object)))
    trace = plots._rounded_tree(fig.to_dict())["data"][0]
    assert np.frombuffer(base64.b64decode(trace["y"]["bdata"]), dtype=trace["y"]["dtype"]).tolist() == [0.21881, 0.33333]
    assert trace["customdata"].tolist() == [["mini", 0.012346]]


def test_a_reader_tables_text_reads_from_the_left_and_its_numbers_from_the_right():
    df = pd.DataFrame({"claim": ["the gate starts neutral"], "effect": [0.1234]})
    page = tables.reader_table(df, "09_align", rename={"claim": "what the paper says"}).data
    assert "#T_09_align_row0_col0 {\n  text-align: left;\n}" in page and "row0_col1 {" not in page


def test_plotly_pages_are_written_by_the_json_engine_whatever_is_installed():
    go = pytest.importorskip("plotly.graph_objects")
    import plotly.io as pio

    pio.json.config.default_engine = "auto"  # orjson where installed: "−" as itself
    html = plots.plotly_html(go.Figure(go.Scatter(x=[1.0], y=[2.0], name="a − b")), 1)
    assert pio.json.config.default_engine == "json"
    assert '"a \\u2212 b"' in html and 'id="plotly-1"' in html and "a − b" not in html


def test_every_csv_float_is_rounded_to_ten_digits_unless_told_fewer(tmp_path):
    pytest.importorskip("IPython")
    df = pd.DataFrame({"slope": [0.12345678901234567], "n": [3]})
    tables.reader_table(df, "09_stats", tmp_path / "figures", index=False)
    tables.reader_table(df, "09_probe", tmp_path / "figures", index=False, digits=5)
    assert (tmp_path / "tables" / "09_stats.csv").read_text() == "slope,n\n0.123456789,3\n"
    assert (tmp_path / "tables" / "09_probe.csv").read_text() == "slope,n\n0.12346,3\n"


def test_a_table_stacked_from_parts_shows_without_its_repeated_index(tmp_path):
    pytest.importorskip("IPython")
    part = pd.DataFrame({"rule": ["attnres"], "gap": [0.5]})
    stacked = pd.concat([part, part.assign(rule="mgr")])  # both rows keep index 0
    page = tables.reader_table(stacked, "09_stacked", tmp_path / "figures", index=False).data
    assert "attnres" in page and "mgr" in page
    assert (tmp_path / "tables" / "09_stacked.csv").read_text() == "rule,gap\nattnres,0.5\nmgr,0.5\n"
