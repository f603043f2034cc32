"""rrlib.rules.native's CPU kernels against the PyTorch path they replace: the same numbers, forward and backward."""
import os
from pathlib import Path

import pytest
import torch

from rrlib.model import GPT
from rrlib.rules import native
from rrlib.rules.depth_mixing.dispatch import kernels_for
from rrlib.rules.depth_mixing.gate_pool import gate_pool, pool
from rrlib.rules.depth_mixing.hyper_weights import hc_read_and_weigh, mhc_read_and_weigh
from rrlib.rules.depth_mixing.norms import inverse_rms, projected_rms, sinkhorn
from rrlib.rules.depth_mixing.streams import stream_read, stream_write, stream_write_sum
from rrlib.rules.protocol import RMS_EPS
from rrlib.runs.presets import resolve_run

F64 = dict(dtype=torch.float64)


def _with_and_without(monkeypatch, fn, inputs, grad):
    """fn's output and input gradients with the kernels, then with RRLIB_NATIVE=0 (the PyTorch path)."""
    results = []
    for setting in ("1", "0"):
        monkeypatch.setenv("RRLIB_NATIVE", setting)
        leaves = [x.detach().clone().requires_grad_() for x in inputs]
        out = fn(*leaves)
        out.backward(grad)
        results.append((out.detach(), [x.grad for x in leaves]))
    return results


def _assert_same(results, fp32=False):
    """The two paths' outputs and gradients agree: to float64's default tolerance, or with ``fp32`` to fp32
    rounding at each tensor's own scale. The kernels and ATen sum in other orders, and ATen's order follows the
    instruction set it dispatches to, so an entry where terms cancel keeps their absolute error: up to 8e-7 of
    the largest entry (7 eps) was seen with ATen's AVX-512 and its plain kernels; 1e-5 of it leaves 12 times
    that, where an absolute 1e-6 failed once in 480 entries of mHC's gradient with the plain kernels."""
    (out, grads), (ref, grads_ref) = results
    for actual, expected in zip([out, *grads], [ref, *grads_ref]):
        tolerance = dict(rtol=1e-5, atol=1e-5 * expected.abs().max().item()) if fp32 else {}
        torch.testing.assert_close(actual, expected, **tolerance)
    for g in grads:
        assert g.abs().max() > 1e-6  # a live gradient, not two zeros


@pytest.mark.parametrize("n, d", [(4, 6), (3, 37), (8, 1)])
def test_stream_read_and_write_kernels_match_pytorch(kernels, monkeypatch, n, d):
    B, T = 2, 5
    streams, u = torch.randn(B, T, n, d, **F64), torch.randn(B, T, d, **F64)
    weights, mix, write = torch.randn(B, T, n, **F64), torch.randn(B, T, n, n, **F64), torch.randn(B, T, n, **F64)
    _assert_same(_with_and_without(monkeypatch, lambda w, s: stream_read(w, s, -2), [weights, streams],
                                   torch.randn(B, T, d, **F64)))
    _assert_same(_with_and_without(monkeypatch, stream_write, [mix, streams, write, u],
                                   torch.randn(B, T, n, d, **F64)))


@pytest.mark.parametrize("native_setting", ["1", "0"], ids=["kernels", "pytorch"])
def test_stream_write_sum_is_the_sum_of_the_written_streams(monkeypatch, native_setting):
    """The head's input after the last step, made without the streams: the same numbers and gradients."""
    monkeypatch.setenv("RRLIB_NATIVE", native_setting)
    B, T, n, d = 2, 5, 4, 7
    inputs = [torch.randn(B, T, n, n, **F64), torch.randn(B, T, n, d, **F64), torch.randn(B, T, n, **F64),
              torch.randn(B, T, d, **F64)]
    grad = torch.randn(B, T, d, **F64)
    results = []
    for fn in (stream_write_sum, lambda *xs: stream_write(*xs).sum(-2)):
        leaves = [x.clone().requires_grad_() for x in inputs]
        out = fn(*leaves)
        out.backward(grad)
        results.append((out.detach(), [x.grad for x in leaves]))
    _assert_same(results)


@pytest.mark.parametrize("shape", [(3, 5, 8), (2, 4, 3, 77)])
def test_inverse_rms_kernel_matches_pytorch(kernels, monkeypatch, shape):
    x = torch.randn(shape, **F64) * 3
    _assert_same(_with_and_without(monkeypatch, inverse_rms, [x], torch.randn(*shape[:-1], 1, **F64)))


@pytest.mark.parametrize("tokens", [1, 64, 130])  # under, at and over one chunk of the kernel's 64 lanes
def test_sinkhorn_kernel_matches_pytorch(kernels, monkeypatch, tokens):
    logits = torch.randn(2, tokens, 4, 4, **F64) * 2
    results = _with_and_without(monkeypatch, sinkhorn, [logits], torch.randn(2, tokens, 4, 4, **F64))
    assert results[0][0].dtype == torch.float64  # at least fp32: fp64 logits stay fp64, on both paths
    _assert_same(results)
    rows = results[0][0].sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))  # rows sum to 1 after the last normalisation


def _sinkhorn_in_order(m, iters, grad):
    """Sinkhorn's rounds on (tokens, n, n) and their backward with each lane's operations in the kernels' order:
    a sum from zero over the entries in order, its reciprocal, a product per entry; backward, Σ ∂y·y from zero
    in order, then (∂y − Σ) · (1/s). Each elementwise operation rounds once, as the kernels' do."""
    n, steps = m.shape[-1], []
    for step in range(2 * iters):
        lines = [m[:, b, :] for b in range(n)] if step % 2 == 0 else [m[:, :, b] for b in range(n)]
        total = torch.zeros_like(lines[0])
        for line in lines:
            total = total + line
        m = m * ((1 / total)[:, None, :] if step % 2 == 0 else (1 / total)[:, :, None])
        steps.append((m, total))
    g = grad
    for step in reversed(range(2 * iters)):
        y, total = steps[step]
        axis = 1 + step % 2  # the axis summed over: the rows' index for the columns' sums, then the columns'
        dot = torch.zeros_like(total).unsqueeze(axis)
        for b in range(n):
            dot = dot + g.narrow(axis, b, 1) * y.narrow(axis, b, 1)
        g = (g - dot) * (1 / total).unsqueeze(axis)
    return m, g


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinkhorn_kernel_rounds_each_lane_as_written(kernels, n, dtype):
    """The kernel's rounds, for the numbers of streams it holds in registers (2-4) and for any other, are the
    formula in its order: the same bits forward; backward, to rounding (a compiler may fuse Σ ∂y·y's products
    and sums, the loops for any n were, on the machine this was written on)."""
    torch.manual_seed(n)
    m, grad = torch.rand(150, n, n, dtype=dtype) + 0.05, torch.randn(150, n, n, dtype=dtype)
    expected, expected_grad = _sinkhorn_in_order(m, 7, grad)
    assert torch.equal(kernels.sinkhorn(m, 7), expected)
    torch.testing.assert_close(kernels.sinkhorn_backward(grad, m, 7), expected_grad)


def _flat(outputs):
    return torch.cat([t.flatten() for t in outputs])


def _step(read_and_weigh, written):
    """The step node as a function of flat inputs: (streams, W, params…[, mix, b, u]) → its outputs, flattened."""
    def fn(streams, weight, first, second, *write):
        streams_read, pending = read_and_weigh(streams, weight, first, second, tuple(write) if write else None)
        return _flat((streams_read, *pending) if written else pending)
    return fn


def _write_inputs(tokens, n, d, **dtype):
    return [torch.randn(tokens, n, n, **dtype), torch.randn(tokens, n, **dtype), torch.randn(tokens, d, **dtype)]


@pytest.mark.parametrize("written", [False, True], ids=["read", "write-and-read"])
@pytest.mark.parametrize("n, d", [(4, 6), (3, 19)])
def test_hc_step_kernels_match_pytorch(kernels, monkeypatch, n, d, written):
    tokens = 10
    streams, weight = torch.randn(tokens, n, d, **F64), torch.randn(n + 2, d, **F64)
    static, scales = torch.randn(n, n + 2, **F64), torch.rand(2, **F64) + 0.5
    inputs = [streams, weight, static, scales] + (_write_inputs(tokens, n, d, **F64) if written else [])
    grad = torch.randn(tokens * (d + n + n * n + (n * d if written else 0)), **F64)
    _assert_same(_with_and_without(monkeypatch, _step(hc_read_and_weigh, written), inputs, grad))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("written", [False, True], ids=["read", "write-and-read"])
@pytest.mark.parametrize("tokens", [3, 70])  # under and over one chunk of the Sinkhorn kernel's 64 lanes
def test_mhc_step_kernels_match_pytorch(kernels, monkeypatch, tokens, written, dtype):
    """fp64 streams get fp64 weights on both paths (at least fp32: the weights of fp32 streams stay fp32)."""
    n, d, f = 4, 5, dict(dtype=dtype)
    streams, weight = torch.randn(tokens, n, d, **f), torch.randn(2 * n + n * n, n * d, **f) * 0.3
    alpha, bias = torch.rand(3, **f) + 0.5, torch.randn(2 * n + n * n, **f)
    inputs = [streams, weight, alpha, bias] + (_write_inputs(tokens, n, d, **f) if written else [])
    grad = torch.randn(tokens * (d + n + n * n + (n * d if written else 0)), **f)
    results = _with_and_without(monkeypatch, _step(mhc_read_and_weigh, written), inputs, grad)
    assert all(out.dtype == dtype for out, _ in results)
    _assert_same(results, fp32=dtype == torch.float32)


@pytest.mark.parametrize("k", [2, 4])
def test_mgr_gate_and_pool_kernels_match_pytorch(kernels, monkeypatch, k):
    B, T, d = 2, 5, 7
    s = torch.randn(k, B, T, d, **F64)
    inv = inverse_rms(s) * (1 + torch.rand(k, B, T, 1, **F64))  # any positive input: its gradient is checked too
    u, gate_query, pool_query = torch.randn(B, T, d, **F64), torch.randn(d, **F64), torch.randn(d, **F64)
    gate_bias = torch.randn(k, **F64)
    fn = lambda *inputs: _flat(gate_pool(*inputs, 0.4))  # noqa: E731
    grad = torch.randn(k * B * T * d + k * B * T + B * T * d, **F64)  # for (s', inv', h)
    _assert_same(_with_and_without(monkeypatch, fn, [s, inv, u, gate_query, gate_bias, pool_query], grad))
    _assert_same(_with_and_without(monkeypatch, lambda s, inv, q: pool(s, inv, q, 0.4), [s, inv, pool_query],
                                   torch.randn(B, T, d, **F64)))


@pytest.mark.parametrize("shape, k", [((2, 5, 4, 7), 6), ((3, 28), 24)])
def test_projected_rms_backward_is_autograds(monkeypatch, shape, k):
    x, weight = torch.randn(shape, **F64) * 2, torch.randn(k, shape[-1], **F64)
    plain = lambda x, w: torch.nn.functional.linear(x, w) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS)  # noqa: E731
    grad = torch.randn(*shape[:-1], k, **F64)
    for setting in ("1", "0"):
        monkeypatch.setenv("RRLIB_NATIVE", setting)
        results = []
        for fn in (projected_rms, plain):
            leaves = [x.clone().requires_grad_(), weight.clone().requires_grad_()]
            out = fn(*leaves)
            out.backward(grad)
            results.append((out.detach(), [t.grad for t in leaves]))
        _assert_same(results)


@pytest.mark.parametrize("variant", ["hc", "mhc", "mgr"])
def test_models_train_the_same_with_and_without_the_kernels(monkeypatch, kernels, variant):
    """A whole model's loss and every parameter's gradient, fp32: the kernels change nothing but rounding."""
    run = resolve_run("micro", variant, 0, {"train": {"device": "cpu"}})
    torch.manual_seed(0)
    model = GPT(run.model)
    with torch.no_grad():  # off the init, so that every coefficient path carries a gradient
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    x = torch.randint(0, run.model.vocab_size, (2, run.model.seq_len))
    results = []
    for setting in ("1", "0"):
        monkeypatch.setenv("RRLIB_NATIVE", setting)
        model.zero_grad()
        _, loss = model(x, x)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (loss, grads), (loss_ref, grads_ref) = results
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-6)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-6)


def test_kernel_gradients_do_not_depend_on_the_number_of_threads(kernels):
    """Parameter gradients are summed per fixed block of tokens, then in order: bitwise the same at 1 and 2
    threads, with enough tokens (3000) that the work is split."""
    torch.manual_seed(0)
    k, N, d = 4, 3000, 12
    inputs = [torch.randn(k, 1, N, d), None, torch.randn(1, N, d), torch.randn(d), torch.randn(k), torch.randn(d)]
    inputs[1] = inverse_rms(inputs[0])
    grads = []
    threads = torch.get_num_threads()
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            leaves = [x.clone().requires_grad_() for x in inputs]
            _flat(gate_pool(*leaves, 0.3)).sum().backward()
            grads.append([x.grad for x in leaves])
    finally:
        torch.set_num_threads(threads)
    for one, two in zip(*grads):
        assert torch.equal(one, two)


def _step_backward_inputs(kind, tokens, n=4, d=7, **dtype):
    """Random inputs of HC's or mHC's step backward kernel, without the write's and with them last; the streams x
    the step read are the write's output."""
    r = lambda *shape: torch.randn(*shape, **dtype)  # noqa: E731
    write = [r(tokens, n, d), r(tokens, n, n), r(tokens, n), r(tokens, d)]  # streams before, M, b, u
    if kind == "hc":
        k = n + 2
        step = [r(tokens, d), r(tokens, n), r(tokens, n, n), r(tokens, n, d), r(tokens, n), r(tokens * n).abs(),
                r(tokens * n, k), r(tokens * n, k).tanh(), r(k, d), r(2), r(tokens, n, d)]
    else:  # ∂h, ∂post, ∂H_res, x, W, r, q, pre, post, m0, P, α, Sinkhorn rounds, ∂x from the next write
        k = 2 * n + n * n
        step = [r(tokens, d), r(tokens, n), r(tokens, n, n), r(tokens, n, d), r(k, n * d), r(tokens).abs(),
                r(tokens, k), r(tokens, n).sigmoid(), 2 * r(tokens, n).sigmoid(), r(tokens, n, n).exp(), r(tokens, k),
                r(3), 20, r(tokens, n, d)]
    # x is what the write made from the streams before it: given the write, the kernel makes x again from them
    streams, mix, b, u = write
    step[3] = mix @ streams + b.unsqueeze(-1) * u.unsqueeze(-2)
    return step, write


def _step_backward(kernels, kind, step, write, fused):
    """(∂ of the streams before the write, ∂W, ∂M, ∂b, ∂u): the kind's kernel with the write (``fused``), or
    without it and stream_write_backward after it, as the step node ran before the two were one kernel."""
    op = kernels.hc_step_backward if kind == "hc" else kernels.mhc_step_backward
    if fused:
        out = op(*step, *write)
        return [out[0], out[1], *out[-3:]]
    out = op(*step, None, None, None, None)
    assert all(t.numel() == 0 for t in out[-3:])
    streams, mix, b, u = write
    grad_mix, grad_streams, grad_b, grad_u = kernels.stream_write_backward(out[0], mix, streams, b, u)
    return [grad_streams, out[1], grad_mix, grad_b, grad_u]


@pytest.mark.parametrize("n, d", [(4, 7), (3, 5)])  # 3 × 5 values a token: rows off the 32-byte stores' grid
@pytest.mark.parametrize("kind", ["hc", "mhc"])
def test_a_step_backward_with_its_write_equals_the_write_backward_after_it(kernels, kind, n, d):
    """One kernel for the step's backward and its write's (each token's ∂x used at once, never stored, and the
    earlier streams' gradient streamed to memory) gives what the two gave one after the other."""
    torch.manual_seed(0)
    step, write = _step_backward_inputs(kind, 300, n, d, **F64)
    fused, separate = (_step_backward(kernels, kind, step, write, fused) for fused in (True, False))
    for one, two in zip(fused, separate):
        torch.testing.assert_close(one, two)
        assert one.abs().max() > 0


@pytest.mark.parametrize("kind", ["hc", "mhc"])
def test_step_backward_kernels_do_not_depend_on_the_number_of_threads(kernels, kind):
    """HC's and mHC's step backward, write included: ∂W summed per fixed block of tokens (mHC's by one matrix
    product per block), then in order, so bitwise the same at 1 and 2 threads over 3000 tokens."""
    torch.manual_seed(0)
    step, write = _step_backward_inputs(kind, 3000)
    op = kernels.hc_step_backward if kind == "hc" else kernels.mhc_step_backward
    results = []
    threads = torch.get_num_threads()
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            results.append(op(*step, *write))
    finally:
        torch.set_num_threads(threads)
    for one, two in zip(*results):
        assert torch.equal(one, two)


@pytest.mark.parametrize("kind", ["hc", "mhc"])
def test_step_forward_kernels_do_not_depend_on_the_number_of_threads(kernels, kind):
    """HC's and mHC's forward kernels project a fixed block of tokens at a time (mHC's Sinkhorn chunks lie inside
    the blocks): bitwise the same at 1 and 2 threads over 3000 tokens, written or not."""
    torch.manual_seed(0)
    tokens, n, d = 3000, 4, 7
    streams, (_, mix, b, u) = torch.randn(tokens, n, d), _step_backward_inputs(kind, tokens, n, d)[1]
    if kind == "hc":
        params = (torch.randn(n + 2, d), torch.randn(n, n + 2), torch.rand(2) + 0.5, RMS_EPS)
        op = kernels.hc_step
    else:
        params = (torch.randn(2 * n + n * n, n * d) * 0.3, torch.rand(3) + 0.5, torch.randn(2 * n + n * n), 20,
                  RMS_EPS)
        op = kernels.mhc_step
    threads = torch.get_num_threads()
    for write in ((None, None, None), (mix, b, u)):
        results = []
        try:
            for n_threads in (1, 2):
                torch.set_num_threads(n_threads)
                results.append(op(streams, *write, *params))
        finally:
            torch.set_num_threads(threads)
        for one, two in zip(*results):
            assert torch.equal(one, two)


def test_kernels_apply_only_to_contiguous_cpu_float_tensors(kernels):
    x = torch.randn(4, 6)
    assert kernels_for(x, torch.randn(4)) is kernels
    assert kernels_for(x.T) is None  # strided: the PyTorch path, not a copy
    assert kernels_for(x.to(torch.bfloat16)) is None
    assert kernels_for(x, x.double()) is None  # mixed dtypes


def test_a_strided_tensor_passed_to_a_kernel_is_refused_by_name(kernels):
    with pytest.raises(RuntimeError, match="streams must be contiguous"):
        kernels.stream_read(torch.randn(8, 4), torch.randn(8, 6, 4).transpose(1, 2))


def test_rrlib_native_0_turns_the_kernels_off(monkeypatch):
    monkeypatch.setenv("RRLIB_NATIVE", "0")
    assert native.kernels() is None
    assert kernels_for(torch.randn(3)) is None


GCC_DRIVER = (' cc1plus -E -quiet /dev/null "-march=skylake-avx512" -mmmx -mavx2 '
              '-mavx512f -mno-amx-tile --param "l1-cache-size=32" "-mtune=skylake-avx512" -dumpbase null\n'
              "COLLECT_GCC_OPTIONS='-march=native' '-E'\n")
CLANG_DRIVER = (' "clang" "-cc1" "-E" "-target-cpu" "znver4" "-target-feature" "+avx512f" '
                '"-target-feature" "-amx-tile" "-tune-cpu" "generic" "-x" "c++" "/dev/null"\n')


def test_target_flags_are_read_off_gcc_and_clang_drivers():
    assert native.target_flags(GCC_DRIVER) == ("-march=skylake-avx512", "-mmmx", "-mavx2", "-mavx512f",
                                               "-mno-amx-tile", "-mtune=skylake-avx512", "--param l1-cache-size=32")
    assert native.target_flags(CLANG_DRIVER) == ("-target-cpu znver4", "-target-feature +avx512f",
                                                 "-target-feature -amx-tile", "-tune-cpu generic")
    assert native.target_flags("COLLECT_GCC_OPTIONS='-march=native'\n") == ()


def test_this_compiler_names_the_cpu_it_targets():
    try:
        native.native_target()
    except (OSError, RuntimeError) as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no C++ compiler to ask here ({error})")
    isa = native.target_isa()
    assert isa["march"] not in ("", "native") and isa["extensions"] == sorted(isa["extensions"])


def test_each_kind_of_cpu_gets_its_own_build_folder(monkeypatch, tmp_path):
    """A home shared by AVX2 and AVX-512 nodes: two builds side by side, so neither loads the other's."""
    from torch.utils.cpp_extension import _get_build_directory

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    folders = []
    for driver in (GCC_DRIVER, GCC_DRIVER.replace("-mavx512f", "-mno-avx512f"), GCC_DRIVER, CLANG_DRIVER):
        monkeypatch.setattr(native, "native_target", lambda d=driver: native.target_flags(d))
        assert native.build_name().startswith("rrlib_stream_ops_")
        folders.append(_get_build_directory(native.build_name(), verbose=False))  # the folder torch builds in
    assert folders[0] == folders[2] and len({folders[0], folders[1], folders[3]}) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({Path(f).name for f in folders})
    monkeypatch.setattr(native, "native_target", lambda: native.target_flags(GCC_DRIVER))
    assert native.target_isa() == {"march": "skylake-avx512", "extensions": ["avx2", "avx512f", "mmx"]}
