"""Peak tensor memory on any device (rrlib.speed.memory) and the benchmark's per-rule memory and compile ratios."""
import json

import pytest
import torch

from rrlib.speed import bench, timing
from rrlib.speed.memory import peak_tensor_bytes

MB = 1_000_000


def test_peak_counts_what_is_held_at_once_not_what_was_there_before():
    before = torch.zeros(MB // 4)  # 1 MB held before: not counted

    def work():
        a = torch.ones(2 * MB // 4)  # 2 MB
        b = a * 2  # 4 MB at once
        del a, b
        c = torch.ones(3 * MB // 4)  # 3 MB, after 4 MB were freed
        c.add_(1)  # in place: nothing new
        return c.view(-1, 2)  # a view: nothing new

    assert peak_tensor_bytes(work) == 4 * MB
    assert before.numel() == MB // 4


def test_peak_sees_the_backward_pass():
    x = torch.randn(MB // 4, requires_grad=True)
    forward_only = peak_tensor_bytes(lambda: x.exp().sum())
    assert peak_tensor_bytes(lambda: x.exp().sum().backward()) > forward_only


def _row(variant, step_ms, memory, compile=False, options=None):
    return {"variant": variant, "head": "padded", "compile": compile, "rule_options": options or {},
            "step_ms": step_ms, "tokens_per_s": 1000 / step_ms, "flops_per_token": 100, "peak_memory_bytes": memory}


def test_each_ratio_is_to_the_row_that_differs_in_one_thing():
    rows = [_row("standard", 10, 50), _row("mhc", 20, 100), _row("mhc", 24, 60, options={"recompute": True}),
            _row("standard", 8, None, compile=True), _row("mhc", 12, None, compile=True)]
    rows[1]["flops_per_token"] = 125
    timing.add_ratios(rows)
    std, mhc, recomputed, std_compiled, mhc_compiled = rows
    assert mhc["step_time_vs_standard"] == 2.0 and mhc["step_per_flop_vs_standard"] == pytest.approx(1.6)
    assert recomputed["peak_memory_vs_default"] == 0.6 and mhc["peak_memory_vs_default"] is None
    assert mhc_compiled["compiled_vs_eager"] == 0.6 and mhc_compiled["step_time_vs_standard"] == 1.5
    assert std_compiled["compiled_vs_eager"] == 0.8 and mhc["compiled_vs_eager"] is None
    assert mhc_compiled["peak_memory_vs_default"] is None


def test_bench_measures_recompute_memory_per_rule(tmp_path):
    out = tmp_path / "b.json"
    assert bench.main(["--size", "tiny", "--variants", "standard,mhc", "--device", "cpu", "--steps", "1",
                       "--warmup", "1", "--recompute", "--out", str(out), "--paper-csv", str(tmp_path / "no.csv")]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["variant"], r["rule_options"]) for r in rows] == [("standard", {}), ("mhc", {}),
                                                                 ("mhc", {"recompute": True})]
    assert all(r["peak_memory_bytes"] > 0 for r in rows)
    assert rows[2]["peak_memory_vs_default"] < 1  # mHC's Sinkhorn iterates are recomputed, not kept
    assert "mem vs default" in out.with_suffix(".md").read_text()
