"""The GPU figures quoted in the README and docs/speed.md are the committed benchmark's (outputs/bench/h200/):
every tokens/s · MFU cell and the sweep's priced hours, read back from the JSON files the benchmark wrote."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "outputs" / "bench" / "h200"
SIZES = ["60m", "150m", "320m", "590m", "1b"]


def rows() -> dict:
    found = {}
    for name in ("eager", "eager-tf32", "compiled"):
        for size in SIZES:
            for r in json.loads((BENCH / f"{name}-{size}.json").read_text())["results"]:
                found[(name, size, r["variant"])] = r
    return found


def cell(r: dict) -> str:
    return f"{r['tokens_per_s'] / 1e3:,.0f}k · {r['mfu'] * 100:.1f} %"


def table_line(text: str, size: str, rule: str | None = None) -> str:
    pattern = rf"^\| {size} \| {rule} \|.*$" if rule else rf"^\| {size} \| \d.*$"
    (line,) = re.findall(pattern, text, re.M)
    return line


@pytest.mark.parametrize("size", SIZES)
def test_the_readme_table_is_the_benchmarks(size):
    r = rows()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    cells = [c.strip() for c in table_line(text, size).strip("|").split("|")]
    assert cells == [size, cell(r[("compiled", size, "standard")]), cell(r[("compiled", size, "review")]),
                     cell(r[("eager-tf32", size, "review")])]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("rule", ["review", "highway", "standard"])
def test_the_speed_page_table_is_the_benchmarks(size, rule):
    r = rows()
    text = (ROOT / "docs" / "speed.md").read_text(encoding="utf-8")
    cells = [c.strip() for c in table_line(text, size, rule).strip("|").split("|")]
    compiled = r.get(("compiled", size, rule))
    assert cells[3:6] == [cell(r[("eager", size, rule)]), cell(compiled) if compiled else "–",
                          cell(r[("eager-tf32", size, rule)])]


def test_the_quoted_sweep_hours_are_the_pricings():
    prices = {p["label"]: p for p in json.loads((BENCH / "sweep.json").read_text())["prices"]}
    tf32 = prices["tf32, eager (the paper's configuration)"]["total_hours"]
    bf16 = prices["bf16, eager"]["total_hours"]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"prices at {tf32:.1f} H200-hours in TF32 eager" in readme
    assert f"and {bf16:.1f} in bf16 eager" in readme
    assert f"reports {prices['bf16, eager']['paper_reported_hours']:.1f}" in readme
