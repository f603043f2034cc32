"""The GPU figures quoted in the README and docs/speed.md are the committed benchmark's (outputs/bench/h200/):
every tokens/s · MFU cell and the sweep's priced hours, read back from the JSON files the benchmark wrote, and
the run-to-run comparison with the earlier run (outputs/bench/h200-earlier/)."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "outputs" / "bench" / "h200"
EARLIER = ROOT / "outputs" / "bench" / "h200-earlier"
SIZES = ["60m", "150m", "320m", "590m", "1b"]


def rows(bench: Path = BENCH) -> dict:
    found = {}
    for name in ("eager", "eager-tf32", "compiled"):
        for size in SIZES:
            for r in json.loads((bench / f"{name}-{size}.json").read_text())["results"]:
                found[(name, size, r["variant"])] = r
    return found


def flat(path: Path) -> str:
    """A page's text with every run of whitespace as one space: a quoted phrase may wrap anywhere."""
    return " ".join(path.read_text(encoding="utf-8").split())


def cell(r: dict) -> str:
    return f"{r['tokens_per_s'] / 1e3:,.0f}k · {r['mfu'] * 100:.1f} %"


def table_line(text: str, size: str, rule: str | None = None) -> str:
    pattern = rf"^\| {size} \| {rule} \|.*$" if rule else rf"^\| {size} \| \d.*$"
    (line,) = re.findall(pattern, text, re.M)
    return line


def test_the_readme_s_gpu_sentence_is_the_benchmarks():
    r = rows()
    review, standard = (r[("compiled", "1b", v)]["mfu"] * 100 for v in ("review", "standard"))
    assert f"Review at 1b trains at {review:.1f} % MFU compiled in bf16, standard at {standard:.1f} %" in \
        flat(ROOT / "README.md")


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
    speed = flat(ROOT / "docs" / "speed.md")
    compiled = prices["bf16, compiled"]["measured_hours"]
    assert f"{tf32:.1f} H200-hours in TF32 eager" in speed and f"{bf16:.1f} in bf16 eager" in speed
    assert f"reports {prices['bf16, eager']['paper_reported_hours']:.1f}" in speed
    assert f"prices Review's and standard's runs at {compiled:.1f} hours" in speed


def test_the_run_to_run_paragraph_is_the_two_runs():
    """docs/speed.md's "Run to run": the largest change in tokens/s between the runs, per group of cells, and the
    compiled 60m pass that did not repeat, each read from the two runs' files."""
    now, before = rows(), rows(EARLIER)
    assert now.keys() == before.keys()

    def largest_change(keys) -> str:
        return f"{max(abs(now[k]['tokens_per_s'] / before[k]['tokens_per_s'] - 1) for k in keys) * 100:.1f} %"

    eager = [k for k in now if k[0] != "compiled"]
    compiled_150m_up = [k for k in now if k[0] == "compiled" and k[1] != "60m"]
    speed = flat(ROOT / "docs" / "speed.md")
    commit = json.loads((EARLIER / "eager-60m.json").read_text())["git_commit"][:7]
    assert f"at commit {commit} (`outputs/bench/h200-earlier/`" in speed
    assert f"repeated within {largest_change(eager)} in tokens/s" in speed
    assert f"the compiled cells from 150m up within {largest_change(compiled_150m_up)}" in speed
    review, standard = (("compiled", "60m", v) for v in ("review", "standard"))

    def pair(r: dict, s: dict) -> tuple:
        return f"{r['tokens_per_s'] / 1e3:.0f}k", f"{s['tokens_per_s'] / 1e3:.0f}k", f"{r['step_ms']:.1f}", \
            f"{s['step_ms']:.1f}", f"{r['step_per_flop_vs_standard']:.2f}"

    b = pair(before[review], before[standard])
    n = pair(now[review], now[standard])
    assert (f"the earlier run timed Review at {b[0]} tokens/s and standard at {b[1]} (a median step of {b[2]} and "
            f"{b[3]} ms, Review {b[4]}× its FLOP share), this one {n[0]} and {n[1]} ({n[2]} and {n[3]} ms, "
            f"{n[4]}×)") in speed
