"""The speed benchmark: its result file, the peak-FLOP/s table and MFU, the sweep's hours, its errors."""
import contextlib
import io
import json

import pytest
import torch

from rrlib.__main__ import main as cli
from rrlib.model import GPT, count_params
from rrlib.rules import native
from rrlib.runs import allocator
from rrlib.runs.presets import resolve_run
from rrlib.speed import bench, peaks, pricing, timing


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "tiny.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert bench.main(["--size", "tiny", "--variants", "review,highway,standard", "--device", "cpu",
                           "--steps", "2", "--warmup", "1", "--repeats", "2", "--out", str(out),
                           "--paper-csv", str(out.parent / "none.csv")]) == 0
    (out.parent / "printed.txt").write_text(printed.getvalue())  # what a log of the call would hold
    return out


def test_bench_writes_its_result_file(tiny_result):
    result = json.loads(tiny_result.read_text())
    for key in ("device", "torch_version", "git_commit", "precision", "peak_flops_source", "peak_memory_kind"):
        assert result[key]
    assert result["precision"] == "fp32" and result["peak_flops"] is None and result["sweep"] is None
    # the absolute --out and --paper-csv it was given are recorded without the machine's folders
    assert "--out tiny.json --paper-csv none.csv" in result["command"] and str(tiny_result.parent) not in \
        result["command"]
    # and so is what it prints, which gpu_bench.sh keeps as its committed log
    printed = (tiny_result.parent / "printed.txt").read_text()
    (wrote,) = [line for line in printed.splitlines() if line.startswith("wrote ")]
    assert wrote == "wrote tiny.json and tiny.md"
    # a CPU step's memory is reused as in a training run (rrlib.runs.allocator), and the file says so
    assert result["allocator"] == ("glibc's, freed memory kept for later steps" if allocator.keep_freed_memory()
                                   else "the process's own, as found")
    cpu = result["cpu"]  # the CPU, and the instruction sets its kernels were dispatched to and built for
    assert cpu["model"] and cpu["aten_capability"] == torch.backends.cpu.get_cpu_capability()
    assert cpu["march"] is None or {k: cpu[k] for k in ("march", "extensions")} == native.target_isa()
    rows = {row["variant"]: row for row in result["results"]}
    assert list(rows) == ["review", "highway", "standard"]
    std = rows["standard"]
    assert std["step_time_vs_standard"] == 1.0 and std["tokens_per_s_vs_standard"] == 1.0
    for variant, row in rows.items():
        run = resolve_run("tiny", variant, 0)
        assert row["params"] == count_params(run.model) and row["d_model"] == run.model.d_model
        assert row["flops_per_token"] == GPT(run.model).flops_per_token()
        assert row["timed_steps"] == 4 and row["mfu"] is None and row["peak_memory_bytes"] > 0
        assert row["step_time_vs_standard"] == pytest.approx(row["step_ms"] / std["step_ms"])
        assert row["tokens_per_s_vs_standard"] == pytest.approx(row["tokens_per_s"] / std["tokens_per_s"])
        assert row["eval_to_step"] == pytest.approx(row["eval_ms"] / row["step_ms"])
        assert row["step_ms_min"] <= row["step_ms"] <= row["step_ms_max"]
    # parameter matching: the baselines are widened to at least Review's count
    assert rows["standard"]["params"] >= rows["review"]["params"] <= rows["highway"]["params"]
    table = tiny_result.with_suffix(".md").read_text()
    assert table.count("| tiny |") == 3 and "step vs std" in table
    assert f"on {cpu['model']} (ATen {cpu['aten_capability']}, -march=native {cpu['march']})" in table


def test_without_a_compiler_the_cpu_is_still_named(monkeypatch):
    def no_compiler():
        raise FileNotFoundError("c++")

    monkeypatch.setattr(bench, "target_isa", no_compiler)
    cpu = bench.cpu_description()
    assert cpu["model"] and cpu["aten_capability"] and cpu["march"] is None and cpu["extensions"] is None


def test_a_size_out_of_memory_is_skipped_not_fatal(monkeypatch, tmp_path):
    real = bench.bench_size

    def bench_size(runs, *args):
        if runs[0].size == "mini":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return real(runs, *args)

    monkeypatch.setattr(bench, "bench_size", bench_size)
    out = tmp_path / "b.json"
    assert bench.main(["--size", "mini", "--size", "tiny", "--variants", "standard", "--device", "cpu",
                       "--steps", "1", "--warmup", "0", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["out_of_memory"] == ["mini"] and [r["size"] for r in result["results"]] == ["tiny"]
    assert "Out of device memory, not measured: mini." in out.with_suffix(".md").read_text()


def test_ratios_need_a_standard():
    rows = [{"variant": "review", "step_ms": 2.0, "tokens_per_s": 5.0}]
    timing.add_ratios(rows)
    assert rows[0]["step_time_vs_standard"] is None and rows[0]["tokens_per_s_vs_standard"] is None


@pytest.mark.parametrize("name,precision,tflops,label", [
    ("NVIDIA H100 80GB HBM3", "bf16", 989.5, "H100 SXM"),
    ("NVIDIA H100 PCIe", "tf32", 378.0, "H100 PCIe"),
    ("NVIDIA H200", "bf16", 989.5, "H200 SXM"),
    ("NVIDIA H200 NVL", "bf16", 835.5, "H200 NVL"),
    ("NVIDIA GH200 480GB", "bf16", 989.5, "GH200"),
    ("NVIDIA A100-SXM4-80GB", "tf32", 156.0, "A100"),
    ("NVIDIA B200", "bf16", 2250.0, "B200"),
])
def test_peak_table(name, precision, tflops, label):
    flops, source = peaks.table_peak(name, precision)
    assert flops == tflops * 1e12
    assert source.startswith(f"{label} {precision} dense")


def test_peak_table_never_guesses():
    assert peaks.table_peak("NVIDIA GeForce GTX 1080", "bf16") is None
    assert peaks.table_peak("NVIDIA H100 80GB HBM3", "fp32") is None  # no fp32 column: measure it instead


def test_peak_on_cpu_and_on_a_named_gpu(monkeypatch):
    assert peaks.resolve_peak(torch.device("cpu"), "fp32", measure=False)[0] is None
    monkeypatch.setattr(peaks, "device_name", lambda device: "NVIDIA H200")
    assert peaks.resolve_peak(torch.device("cuda"), "bf16", measure=False) == (
        989.5e12, "H200 SXM bf16 dense, vendor data sheet")
    monkeypatch.setattr(peaks, "device_name", lambda device: "Some Future GPU")
    flops, source = peaks.resolve_peak(torch.device("cuda"), "bf16", measure=False)
    assert flops is None and "--measure-peak" in source


def test_mfu_formula():
    # 6 GFLOPs/token at 50k tokens/s is 300 TFLOP/s: 30.32 % of an H100 SXM's bf16 dense peak
    assert peaks.mfu(6e9, 5e4, 989.5e12) == pytest.approx(3e14 / 989.5e12)
    assert peaks.mfu(6e9, 5e4, None) is None


def _run(size, variant, tokens, flops_per_token=1e9, minutes=60.0):
    return {"size": size, "size_rank": "abc".index(size), "variant": variant, "tokens": tokens,
            "flops_per_token": flops_per_token, "minutes": minutes}


def _measured(size, tokens_per_s, mfu):
    return {"size_rank": "abc".index(size), "tokens_per_s": tokens_per_s, "mfu": mfu}


def test_sweep_hours_measured_and_extrapolated():
    runs = [_run("a", "review", 3.6e9), _run("a", "review", 7.2e9), _run("b", "review", 3.6e9),
            _run("c", "review", 1.8e10, flops_per_token=2e9), _run("c", "standard", 3.6e9)]
    measured = {("a", "review"): _measured("a", 1e6, 0.2), ("b", "review"): _measured("b", 2e6, 0.5)}
    hours = pricing.sweep_hours(runs, measured, peak_flops=1e15)
    assert hours["measured_hours"] == pytest.approx(1 + 2 + 0.5)  # tokens / tokens/s
    # c/review: 1.8e10 tokens x 2e9 FLOPs / (0.5, the MFU at the nearest measured size b, x 1e15) = 72000 s
    assert hours["flop_estimated_hours"] == pytest.approx(20)
    assert hours["unpriced_runs"] == ["c/standard"] and hours["total_hours"] is None
    assert hours["paper_reported_hours"] == pytest.approx(5) and hours["runs"] == 5
    complete = pricing.sweep_hours(runs[:4], measured, peak_flops=1e15)
    assert complete["total_hours"] == pytest.approx(23.5)
    assert pricing.sweep_hours(runs[:4], measured, peak_flops=None)["unpriced_runs"] == ["c/review"]


def test_sweep_hours_take_the_larger_neighbour_on_a_tie():
    measured = {("a", "review"): _measured("a", 1e6, 0.1), ("c", "review"): _measured("c", 1e6, 0.4)}
    hours = pricing.sweep_hours([_run("b", "review", 1.44e10)], measured, peak_flops=1e13)
    assert hours["flop_estimated_hours"] == pytest.approx(1.44e19 / (0.4 * 1e13) / 3600)


def test_paper_sweep_in_rrlib_names():
    runs = pricing.paper_runs(pricing.PAPER_CSV)
    assert len(runs) == 42
    assert {r["size"] for r in runs} == {"60m", "150m", "320m", "590m", "1b"}
    assert {r["variant"] for r in runs} == {"review", "highway", "standard"}
    first = next(r for r in runs if r["size"] == "1b" and r["variant"] == "review")
    assert first["tokens"] == 6000 * 64 * 256
    with torch.device("meta"):
        assert first["flops_per_token"] == GPT(resolve_run("1b", "review", 0).model).flops_per_token()


@pytest.mark.parametrize("argv,message", [
    (["--size", "nope"], "error: unknown size 'nope'; valid sizes: "),
    (["--size", "tiny", "--variants", "review,nope"], "error: unknown variant 'nope'; valid variants: "),
    (["--size", "tiny", "--steps", "0"], "error: --steps must be a positive whole number, got 0"),
    ([], "error: nothing to measure"),
])
def test_user_errors_are_one_sentence(argv, message, capsys):
    assert cli(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_tokenize_benchmark(data):
    path = data / "tinystories" / "TinyStories-valid-sample.txt"
    out = bench.bench_tokenize(path, data / "gpt2")
    assert out["stories"] == 1000
    assert out["bytes"]["tokens"] == out["text_bytes"]  # one token per UTF-8 byte
    assert 0 < out["gpt2"]["tokens"] < out["bytes"]["tokens"]
    for name in ("gpt2", "bytes"):
        assert out[name]["mb_per_s"] > 0 and out[name]["first_load_s"] > 0 and out[name]["cached_load_s"] > 0
