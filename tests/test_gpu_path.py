"""The GPU path, checked on a CPU: disk kept by runs, compiled graphs per step, precision, the fast head and loss.

Tests that need CUDA (pinned copies, host syncs in the step loop) are skipped without one, not faked.
"""
import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from rrlib.model import GPT, ModelConfig, chunked_cross_entropy, count_params, head_rows, proposal, residual_step
from rrlib.runs.folders import checkpoints
from rrlib.runs.data import get_batch
from rrlib.runs.device import autocast_factory
from rrlib.runs.optim import make_optimizer, optimizer_step
from rrlib.runs.presets import load_preset, resolve_run
from rrlib.runs.train import device_batches, train_run

REPO = Path(__file__).resolve().parents[1]
FAST = {"steps": 6, "eval_every": 6, "ckpt_every": 3, "log_every": 3, "paper_eval_batches": 1,
        "fixed_eval_tokens": 1024}
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def small(n_layers=2, variant="review", vocab_size=97, **kw) -> GPT:
    return GPT(ModelConfig(d_model=16, n_layers=n_layers, n_heads=2, seq_len=8, vocab_size=vocab_size,
                           variant=variant), **kw)


# ---------------------------------------------------------------- disk

def test_finished_run_keeps_no_optimizer_state_and_its_weights_only_when_asked(tmp_path):
    for keep in ("none", "bf16"):
        result = train_run(resolve_run("tiny", "review", 0, {"train": {**FAST, "keep_weights": keep}},
                                       str(tmp_path / keep)), progress=False)
        folder = tmp_path / keep / "tiny" / "review" / "seed0"
        assert result["status"] == "finished"
        names = {p.name for p in folder.iterdir()}
        assert not names & {"ckpt.pt", "ckpt.pt.tmp", "weights.pt.tmp"}, names
        for path in folder.glob("*.pt"):
            assert "optimizer" not in torch.load(path, weights_only=True)
        assert ("weights.pt" in names) == (keep == "bf16")
    kept = torch.load(tmp_path / "bf16" / "tiny" / "review" / "seed0" / "weights.pt", weights_only=True)
    assert kept["dtype"] == "bf16" and all(v.dtype == torch.bfloat16 for v in kept["model"].values())
    model = GPT(resolve_run("tiny", "review", 0).model)
    checkpoints.load_weights(tmp_path / "bf16" / "tiny" / "review" / "seed0", model)
    assert model.wte.weight.dtype == torch.float32
    assert torch.equal(model.wte.weight, kept["model"]["wte.weight"].float())


def test_a_running_checkpoint_is_replaced_atomically(tmp_path):
    model = small()
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.long))[1].backward()
    optimizer.step()
    for step in (1, 2):
        checkpoints.save_checkpoint(tmp_path, model, optimizer, step, 0.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"] == 2


def test_sweep_peak_disk_is_counted_from_the_models():
    preset = load_preset("tiny")
    params = [count_params(resolve_run("tiny", v, 0).model) for v in preset.variants]
    n = len(preset.seeds)
    assert checkpoints.sweep_peak_disk_bytes("tiny") == 2 * 12 * max(params)
    assert checkpoints.sweep_peak_disk_bytes("tiny", "bf16") == 2 * 12 * max(params) + 2 * n * sum(params)
    assert checkpoints.sweep_peak_disk_bytes("tiny", "fp32") == 2 * 12 * max(params) + 4 * n * sum(params)


# ---------------------------------------------------------------- compile per residual step

def _entries(fn) -> int:
    return len(_debug_get_cache_entry_list(fn.__code__))


def test_compile_per_step_is_flat_in_depth_seeds_and_sublayers():
    """Dynamo's graphs are counted per code object: two (attention, MLP) for every depth and seed of a rule."""
    torch._dynamo.reset()
    x = torch.randint(0, 97, (2, 8))
    seen = []
    for n_layers, seed in ((2, 0), (8, 0), (8, 1)):
        torch.manual_seed(seed)
        eager = small(n_layers)
        model = small(n_layers).compile_steps(backend="eager")
        model.load_state_dict(eager.state_dict())
        loss = model(x, x)[1]
        loss.backward()
        assert torch.equal(model.hidden(x), eager.hidden(x))  # backend "eager" runs the very ops of the steps
        assert fp32_close(loss, eager(x, x)[1])  # the compiled loss writes its gradient out: float rounding
        seen.append(_entries(residual_step))
    assert seen == [2, 2, 2]
    small(4, "highway").compile_steps(backend="eager")(x, x)[1].backward()
    assert _entries(residual_step) == 4  # a second rule: its own attention and MLP graphs, no fallback
    assert torch._dynamo.config.fail_on_recompile_limit_hit and torch._dynamo.config.recompile_limit >= 64


def test_cross_depth_rules_compile_the_sublayer_alone():
    torch._dynamo.reset()
    x = torch.randint(0, 97, (2, 8))
    for n_layers in (2, 8):
        small(n_layers, "attnres").compile_steps(backend="eager")(x, x)[1].backward()
    assert _entries(proposal) == 2 and _entries(residual_step) == 0


def _compiled_against_eager(variant, n_layers, monkeypatch, chunk=None):
    """(eager model's loss and grads, compiled one's) for one training step of the same weights. The compiled
    model runs without the CPU kernels (``RRLIB_NATIVE=0``), as on a GPU, where its depth mixing is PyTorch
    operations only; the eager one with them."""
    from torch._dynamo.utils import counters

    counters.clear()
    torch.manual_seed(0)
    eager = small(n_layers, variant)
    model = small(n_layers, variant)
    model.load_state_dict(eager.state_dict())
    model.compile_steps(backend="aot_eager")  # AOT autograd's forward and backward graphs, without code generation
    x, y = torch.randint(0, 97, (2, 2, 8))
    out = []
    for m in (eager, model):
        if m is model:
            monkeypatch.setenv("RRLIB_NATIVE", "0")
        m.loss_chunk = chunk or m.loss_chunk
        loss = m(x, y)[1]
        loss.backward()
        out.append((loss, {k: p.grad for k, p in m.named_parameters()}))
    monkeypatch.delenv("RRLIB_NATIVE")
    assert not counters["graph_break"], dict(counters["graph_break"])  # each compiled function is whole graphs
    return out


def test_the_compiled_loss_equals_the_eager_one_in_one_graph_per_chunk_shape(monkeypatch):
    from rrlib.model import chunk_loss_and_grads

    torch._dynamo.reset()
    # chunks of 6, 6 and 4 tokens
    (loss, grads), (compiled_loss, compiled_grads) = _compiled_against_eager("review", 2, monkeypatch, chunk=6)
    assert fp32_close(compiled_loss, loss)
    for name in grads:
        assert fp32_close(compiled_grads[name], grads[name]), name
    assert _entries(chunk_loss_and_grads) == 2  # a full chunk and the last, shorter one


@pytest.mark.parametrize("variant,functions", [("mgr", ("pool_plain", "gate_pool_plain")),
                                               ("hc", ("hc_read_and_weigh_plain",)),
                                               ("mhc", ("mhc_read_and_weigh_plain",))])
def test_multi_stream_writes_compile_to_graphs_flat_in_depth_and_equal_eager(variant, functions, monkeypatch):
    """The rule's depth mixing runs compiled (the PyTorch form) where eager runs the CPU kernels: equal to float
    rounding, and the same graphs serve a model twice as deep."""
    from rrlib.rules.depth_mixing import gate_pool, hyper_weights

    codes = [getattr(gate_pool if "pool" in f else hyper_weights, f) for f in functions]
    torch._dynamo.reset()
    seen = []
    for n_layers in (2, 4):
        (loss, grads), (compiled_loss, compiled_grads) = _compiled_against_eager(variant, n_layers, monkeypatch)
        assert fp32_close(compiled_loss, loss)
        for name in grads:
            assert fp32_close(compiled_grads[name], grads[name]), name
        seen.append([_entries(f) for f in codes])
    assert seen[0] == seen[1] and all(n > 0 for n in seen[0]), seen
    assert _entries(proposal) == 2 and _entries(residual_step) == 0


# ---------------------------------------------------------------- precision

def test_tf32_and_bf16_runs_in_one_process_read_their_precision_back(tmp_path):
    for precision, matmul in (("tf32", "high"), ("bf16", "highest"), ("fp32", "highest")):
        autocast = autocast_factory(precision, torch.device("cpu"))
        assert torch.get_float32_matmul_precision() == matmul
        with autocast():
            dtype = torch.ones(2, 2) @ torch.ones(2, 2)
        assert dtype.dtype == (torch.bfloat16 if precision == "bf16" else torch.float32)
    for precision in ("tf32", "bf16"):
        result = train_run(resolve_run("tiny", "standard", 0, {"train": {**FAST, "precision": precision}},
                                       str(tmp_path / precision)), progress=False)
        assert result["precision"] == precision and result["status"] == "finished"
        config = json.loads((tmp_path / precision / "tiny" / "standard" / "seed0" / "config.json").read_text())
        assert config["precision"] == precision
    assert torch.get_float32_matmul_precision() == "highest"


# ---------------------------------------------------------------- the head and the loss

def test_head_padding_keeps_counts_and_shapes():
    assert head_rows(50257) == 50304 and head_rows(257) == 257  # 257 → 320 would add 25 % of the head's work
    padded, plain = small(vocab_size=50257), small(vocab_size=50257, plain_head=True)
    assert padded.head_rows == 50304 and plain.head_rows == 50257
    assert padded.n_params() == plain.n_params() and padded.flops_per_token() == plain.flops_per_token()
    assert {k: v.shape for k, v in padded.state_dict().items()} == {k: v.shape for k, v in plain.state_dict().items()}


def fp32_close(actual, expected) -> bool:
    """Equal to fp32 rounding at the tensor's own scale. A loss that differs in its last bit (eps = 1.2e-7)
    reaches each gradient through a dozen matmuls and norms whose sums cancel, so an entry's error is bounded by
    its tensor's largest entry, not by itself: up to 3e-6 of it (26 eps) was seen here with several chunks or
    1/accum, under MKL's AVX-512, AVX2 and SSE4.2 kernels alike; 1e-5 of it leaves three times that."""
    return torch.allclose(actual, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


@pytest.mark.parametrize("vocab_size,chunk,accum", [(50257, 4096, 1), (97, 4096, 1), (50257, 4096, 3), (50257, 5, 1),
                                                    (97, 7, 3)])
def test_padded_chunked_loss_equals_the_plain_path(vocab_size, chunk, accum):
    """Unpadded, one chunk runs the plain path's very ops on the very shapes: bitwise. A padded head multiplies by
    50,304 rows where the plain one has 50,257, and BLAS may take other kernels for the other shape (an AVX-512
    Xeon's MKL does, and wte's gradient moves in its last bit); several chunks sum in another order, and a
    1/accum factor meets the 1/N one in another order: these agree to fp32 rounding (``fp32_close``)."""
    torch.manual_seed(0)
    plain = small(vocab_size=vocab_size, plain_head=True)
    fast = small(vocab_size=vocab_size)
    fast.load_state_dict(plain.state_dict())
    fast.loss_chunk = chunk
    x, y = torch.randint(0, vocab_size, (2, 2, 8))
    losses, grads = [], []
    for model in (plain, fast):
        loss = model(x, y)[1]
        (loss / accum).backward()  # as optimizer_step scales a micro-batch's loss
        losses.append(loss)
        grads.append({k: p.grad for k, p in model.named_parameters()})
    same_shapes = head_rows(vocab_size) == vocab_size
    check = torch.equal if same_shapes and chunk >= x.numel() and accum == 1 else fp32_close
    assert check(losses[0], losses[1])
    for name in grads[0]:
        assert check(grads[0][name], grads[1][name]), name
    assert (torch.equal if same_shapes else fp32_close)(plain(x)[0], fast(x)[0])
    assert fast(x)[0].shape == (2, 8, vocab_size)


def test_chunked_loss_under_bf16_autocast_matches_the_plain_one():
    torch.manual_seed(0)
    h = torch.randn(24, 16, requires_grad=True)
    w = (0.1 * torch.randn(97, 16)).requires_grad_()
    y = torch.randint(0, 97, (24,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain = torch.nn.functional.cross_entropy(torch.nn.functional.linear(h, w).float(), y)
        chunked = chunked_cross_entropy(h, w, y, chunk=5, rows=128)
    grads = [torch.autograd.grad(loss, (h, w)) for loss in (plain, chunked)]
    torch.testing.assert_close(chunked, plain, rtol=1e-6, atol=1e-6)
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=2e-2, atol=2e-4)  # bf16 partial sums over chunks round apart
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # without gradients: the same loss
        assert torch.equal(chunked_cross_entropy(h, w, y, chunk=5, rows=128), chunked.detach())


# ---------------------------------------------------------------- batches

def test_device_batches_are_the_steps_batches():
    tokens = torch.randint(0, 97, (4096,)).numpy().astype("uint16")
    got = list(device_batches(tokens, 3, 7, 1, 4, 16, 0, 1, torch.device("cpu")))
    assert len(got) == 4
    for step, (x, y) in zip(range(3, 7), got):
        ex, ey = get_batch(tokens, step, 1, 4, 16)
        assert torch.equal(x, ex) and torch.equal(y, ey)


@cuda
def test_cuda_steps_between_log_steps_do_not_sync():
    """What the step loop runs between log steps: prefetched pinned batches, the step, the divergence flag."""
    device = torch.device("cuda")
    tokens = torch.randint(0, 97, (4096,)).numpy().astype("uint16")
    model = small().to(device)
    optimizer = make_optimizer(model, resolve_run("tiny", "review", 0).train, device)
    first_bad = torch.full((), -1, dtype=torch.long, device=device)
    batches = device_batches(tokens, 0, 4, 0, 4, 8, 0, 1, device)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any operation that makes the host wait raises
    try:
        for step in range(4):
            x, y = next(batches)
            loss, _ = optimizer_step(model, model, optimizer, x, y, 1e-3, 1, contextlib.nullcontext, 1.0)
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), step, first_bad)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert first_bad.item() == -1


# ---------------------------------------------------------------- the GPU benchmark script

def test_gpu_bench_dry_run_on_cpu(tmp_path):
    env = {**os.environ, "DEVICE": "cpu", "PRECISION": "fp32", "PRICE_PRECISION": "fp32", "SIZES": "tiny",
           "COMPILE_BACKEND": "eager", "OMP_NUM_THREADS": "1", "BUDGET_S": "400", "RRLIB_GIT_COMMIT": "abc123"}
    done = subprocess.run(["bash", "scripts/gpu_bench.sh", str(tmp_path / "out")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = tmp_path / "out"
    eager = json.loads((out / "eager-tiny.json").read_text())
    compiled = json.loads((out / "compiled-tiny.json").read_text())
    assert {r["variant"] for r in eager["results"]} == {"review", "highway", "standard"}
    assert compiled["compile"] and {r["variant"] for r in compiled["results"]} == {"review", "standard"}
    assert eager["git_commit"] == "abc123" and eager["sweep"] is None  # priced once, below, not per file
    for row in eager["results"] + compiled["results"]:
        assert row["compile_s"] >= 0 and row["step_ms"] > 0 and row["eval_ms"] > 0
    log = (out / "gpu_bench.log").read_text()
    order = ["eager-tiny: --size tiny", "eager-fp32-tiny: --size tiny", "compiled-tiny: --size tiny",
             "the required passes are done", "the sweep, priced once", "] done"]
    assert [log.index(mark) for mark in order] == sorted(log.index(mark) for mark in order)
    assert json.loads((out / "sweep.json").read_text())["prices"] == []  # tiny is no paper size


def _bench_file(path, precision, compile, peak, rows):
    path.write_text(json.dumps({"peak_flops": peak, "results": [
        {"size": size, "variant": variant, "precision": precision, "compile": compile, "rule_options": {},
         "head": "padded, chunked loss", "tokens_per_s": tok_s, "mfu": mfu} for size, variant, tok_s, mfu in rows]}))


def test_the_sweep_is_priced_once_from_every_sizes_file_per_precision(tmp_path):
    from rrlib.speed import pricing

    variants = ("review", "highway", "standard")
    _bench_file(tmp_path / "eager-60m.json", "bf16", False, 1e15, [("60m", v, 1e6, 0.2) for v in variants])
    _bench_file(tmp_path / "eager-1b.json", "bf16", False, 1e15, [("1b", v, 1e5, 0.4) for v in variants])
    _bench_file(tmp_path / "eager-tf32-60m.json", "tf32", False, 5e14, [("60m", v, 5e5, 0.2) for v in variants])
    _bench_file(tmp_path / "compiled-60m.json", "bf16", True, 1e15, [("60m", v, 2e6, 0.4) for v in ("review",)])
    assert pricing.main([str(tmp_path)]) == 0
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    prices = {(p["precision"], p["compile"]): p for p in sweep["prices"]}
    assert set(prices) == {("bf16", False), ("bf16", True), ("tf32", False)}
    runs = pricing.paper_runs(pricing.PAPER_CSV)
    expect = {}
    for precision, at in (("bf16", {"60m": (1e6, 0.2), "1b": (1e5, 0.4)}), ("tf32", {"60m": (5e5, 0.2)})):
        peak = 1e15 if precision == "bf16" else 5e14
        measured = sum(r["tokens"] / at[r["size"]][0] for r in runs if r["size"] in at) / 3600
        rank = {s: pricing.SIZE_ORDER.index(s) for s in at}
        def nearest(run):
            return min(at, key=lambda s: (abs(rank[s] - run["size_rank"]), -rank[s]))
        estimated = sum(r["tokens"] * r["flops_per_token"] / (at[nearest(r)][1] * peak)
                        for r in runs if r["size"] not in at) / 3600
        expect[precision] = measured, estimated
    for precision in ("bf16", "tf32"):
        p = prices[precision, False]
        assert p["measured_hours"] == pytest.approx(expect[precision][0])
        assert p["flop_estimated_hours"] == pytest.approx(expect[precision][1])
        assert p["total_hours"] == pytest.approx(sum(expect[precision]))
    assert prices["tf32", False]["paper_configuration"] and "paper's configuration" in prices["tf32", False]["label"]
    assert prices["bf16", False]["measured_sizes"] == ["60m", "1b"]
    assert prices["bf16", True]["unpriced_runs"] and prices["bf16", True]["total_hours"] is None
    assert "tf32, eager (the paper's configuration)" in (tmp_path / "sweep.md").read_text()


def test_the_committed_paper_csv_is_the_released_table():
    """Byte for byte the paper's released run table: the SHA-256 its README records (outputs/reference/)."""
    import hashlib
    import re

    from rrlib.speed import pricing

    recorded = re.search(r"SHA-256\s+`([0-9a-f]{64})`", (pricing.PAPER_CSV.parent / "README.md").read_text()).group(1)
    assert hashlib.sha256(pricing.PAPER_CSV.read_bytes()).hexdigest() == recorded


def test_bf16_matching_widens_in_multiples_of_8_and_tf32_keeps_the_papers_widths():
    from rrlib.speed.timing import misaligned

    for size, variant, paper_width in (("150m", "standard", 876), ("590m", "highway", 1380), ("590m", "mhc", 1460)):
        assert resolve_run(size, variant, 0).model.d_model == paper_width  # the paper's recipe, TF32
        bf16 = resolve_run(size, variant, 0, {"train": {"precision": "bf16"}}).model
        assert bf16.d_model % 8 == 0 and bf16.d_model % bf16.n_heads == 0 and bf16.d_model > paper_width - 8
        kept = resolve_run(size, variant, 0, {"train": {"precision": "bf16", "bf16_width_multiple": 1}}).model
        assert kept.d_model == paper_width
    assert misaligned(876, 12, "bf16") == ["d_model 876", "head_dim 73"] and misaligned(512, 8, "bf16") == []
    assert misaligned(568, 8, "tf32") == ["head_dim 71"]


def test_padded_attention_heads_equal_the_unpadded_ones(monkeypatch):
    import rrlib.model as model

    torch.manual_seed(0)
    attn = model.Attention(4 * 71, 4)  # 60m standard's head dim
    x = torch.randn(2, 16, 4 * 71)
    plain = attn(x)
    real = model.sdpa_head_dim
    assert real(71, "cpu") == 71
    assert [real(h, "cuda") for h in (64, 69, 71, 96, 103, 111)] == [64, 72, 72, 96, 104, 112]
    monkeypatch.setattr(model, "sdpa_head_dim", lambda hd, device_type: real(hd, "cuda"))  # CUDA's padding
    torch.testing.assert_close(attn(x), plain, rtol=1e-5, atol=1e-6)


def test_a_run_records_the_attention_kernel_its_shapes_get(tmp_path):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from rrlib.runs.provenance import attention_kernel

    train_run(resolve_run("tiny", "review", 0, {"train": FAST}, str(tmp_path)), progress=False)
    recorded = json.loads((tmp_path / "tiny" / "review" / "seed0" / "config.json").read_text())["attention"]
    assert recorded.upper() in SDPBackend.__members__, recorded
    # the kernel named is one that takes these shapes: attention restricted to it is the dispatcher's own choice
    cfg = resolve_run("tiny", "review", 0).model
    assert attention_kernel(cfg, 2, torch.device("cpu"), "fp32") == recorded
    torch.manual_seed(0)
    attn, x = GPT(cfg).sublayers[0].fn, torch.randn(2, cfg.seq_len, cfg.d_model)
    with torch.no_grad(), sdpa_kernel([SDPBackend.__members__[recorded.upper()]]):
        only = attn(x)
    with torch.no_grad():
        assert torch.equal(attn(x), only)  # the same kernel on the same shapes: the same bits
