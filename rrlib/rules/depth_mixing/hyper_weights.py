r"""HC's and mHC's step: the projection of the streams, the per-token weights made from it, and the read.

As PyTorch operations the weights are a few dozen small operations per sublayer, forward and backward
(spreading the scales over columns, tanh or sigmoids, slicing out and copying the read, write and mixing weights,
for mHC the exponential and Sinkhorn), and the projection, its norm and the read each add a stream-sized
gradient in the backward pass. At the ``family`` size on a CPU (one thread) the coefficients took 24 of the
47 ms HC's step spent over the standard residual's, and 24 of mHC's 41 (measured by replacing them with
constants). On the CPU in fp32 (and fp64) the step is one autograd node (``_ReadAndWeigh`` for the first,
``_WriteAndWeigh`` with the previous step's write for the others) and two kernels of rrlib.rules.native per kind
(``_HC``, ``_MHC``): the forward (the write, the norms, the projection by ATen's matrix product, the weights and
the read) and the backward (all of their gradients), each over blocks of 256 tokens. A stream tensor at the
``family`` size (2048 tokens × 4 × 76 floats, 2.5 MB) outgrows the core's L2 cache, and on the AVX-512 Xeon a
pass over one read from memory costs about four times one from cache (a ``mul`` of it: 0.75 against 0.19 ms),
so the kernels are built to read each stream tensor from memory once a pass: a block's rows stay in L2 from
the write to the read, and no stream-sized gradient is stored and read back between the step's backward and
its write's. Elsewhere (CUDA, bf16 streams, no kernels built, ``RRLIB_NATIVE=0``) the same formulas run as
PyTorch operations (``hc_weights_plain``, ``mhc_weights_plain``), and tests/test_native.py compares the two.
"""
from __future__ import annotations

import torch

from ..protocol import RMS_EPS
from .dispatch import at_least_fp32, kernels_for
from .norms import SINKHORN_ITERS, projected_rms, sinkhorn
from .streams import stream_read, stream_write


def spread(values: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """values[j] repeated counts[j] times, e.g. one scale per group of coefficient columns."""
    return torch.cat([values[j:j + 1].expand(c) for j, c in enumerate(counts)])


# ---- HC: c = static + s ⊙ tanh(P), read weights A_m = c[:, 0], write B = c[:, n+1], mixing A_rᵀ = c[:, 1:n+1]ᵀ


def hc_read_and_weigh(streams: torch.Tensor, weight: torch.Tensor, static: torch.Tensor, scales: torch.Tensor,
                      write: tuple | None = None):
    """(H, (h, B, A_rᵀ)): the streams H (…, n, d), HC's step input h = A_mᵀ H and the step's (B, A_rᵀ), from W
    (n + 2, d), ``static`` (n, n + 2) and ``scales`` (s_α, s_β): (…, d), (…, n), (…, n, n). With ``write`` = the
    previous step's (A_rᵀ, B, u), H is first written from the given streams (``stream_write``), in the same node."""
    if kernels_for(streams, weight, static, scales, *(write or ())) is None:
        return hc_read_and_weigh_plain(streams, weight, static, scales, write)
    return _step(streams, write, weight, _HC, static, scales)


def hc_read_and_weigh_plain(streams, weight, static, scales, write=None):
    """``hc_read_and_weigh`` as PyTorch operations (and the stream ops of rrlib.rules.depth_mixing.streams)."""
    streams = _written(streams, write)
    a, b, mix = hc_weights_plain(projected_rms(streams, weight), static, scales)
    return streams, (stream_read(a.contiguous(), streams, -2), b, mix)


def _written(streams, write):
    return streams if write is None else stream_write(write[0], streams, *write[1:])


def _step(streams, write, weight, kind, *params):
    """The step's node in the kernels: ``_ReadAndWeigh``, or ``_WriteAndWeigh`` after a write."""
    if write is None:
        return streams, _ReadAndWeigh.apply(streams, weight, kind, *params)
    written, *pending = _WriteAndWeigh.apply(streams, *write, weight, kind, *params)
    return written, tuple(pending)


def hc_weights_plain(projected, static, scales):
    """(A_m, B, A_rᵀ) from H̄ W (…, n, n + 2), as PyTorch operations."""
    n = projected.shape[-2]
    c = static + spread(scales, [n + 1, 1]) * torch.tanh(projected)
    return c[..., 0], c[..., n + 1], c[..., 1:n + 1].transpose(-1, -2)


class _HC:
    """HC's step in the kernels: ``hc_step`` writes the streams, takes their rows' norms, projects them (ATen's
    matrix product), makes the weights (tanh by ATen, vectorised: a scalar tanh in the kernel cost more than the
    rest of the tail) and reads, a block of tokens at a time. Backward: one kernel for the read's, the weights',
    the norm's, the projection's and the write's gradients (``hc_step_backward``), which reuses tanh(P)."""

    @staticmethod
    def step(x, write, weight, params):
        """(x written, (h, b, M), what the backward needs) for streams x (N, n, d), written first with ``write`` =
        (M, b, u) of the step before where given."""
        static, scales = params
        x, h, a, b, mix, r, q, tanh = torch.ops.rrlib_native.hc_step(x, *(write or (None,) * 3), weight, static,
                                                                    scales, RMS_EPS)
        return x, (h, b, mix), (x, weight, r, q, a, tanh, scales)

    @staticmethod
    def backward(grad_h, grad_b, grad_mix, x, weight, a, r, q, saved, grad_streams, write):
        tanh, scales = saved
        grad_x, grad_weight, *grad_params, grad_mix_in, grad_write, grad_u = torch.ops.rrlib_native.hc_step_backward(
            grad_h, grad_b, grad_mix, x, a, r, q, tanh, weight, scales, grad_streams, *write)
        return grad_x, grad_weight, grad_params, (grad_mix_in, grad_write, grad_u)


# ---- mHC: logits = α_g ⊙ P + b; H_pre = σ(·), H_post = 2σ(·), H_res = Sinkhorn(·)


def mhc_read_and_weigh(streams: torch.Tensor, weight: torch.Tensor, alpha: torch.Tensor, bias: torch.Tensor,
                       write: tuple | None = None):
    """(x, (h, H_post, H_res)): the streams x (…, n, d), mHC's step input h = H_pre x and the step's (H_post,
    H_res), from φ (2n + n², n·d), ``alpha`` (α_pre, α_post, α_res) and ``bias``: (…, d), (…, n), (…, n, n), the
    weights in at least fp32 (``at_least_fp32``). ``write`` as ``hc_read_and_weigh``'s."""
    # the kernels make the weights in the streams' dtype, fp32 or fp64, which is what at_least_fp32 gives there
    if kernels_for(streams, weight, alpha, bias, *(write or ())) is None:
        return mhc_read_and_weigh_plain(streams, weight, alpha, bias, write)
    return _step(streams, write, weight, _MHC, alpha, bias)


def mhc_read_and_weigh_plain(streams, weight, alpha, bias, write=None):
    """``mhc_read_and_weigh`` as PyTorch operations (and the stream ops of rrlib.rules.depth_mixing.streams)."""
    streams = _written(streams, write)
    pre, post, res = mhc_weights_plain(projected_rms(streams.flatten(-2), weight), alpha, bias, streams.shape[-2])
    return streams, (stream_read(pre.to(streams.dtype).contiguous(), streams, -2), post, res)


def mhc_weights_plain(projected, alpha, bias, n, iters=SINKHORN_ITERS):
    """(H_pre, H_post, H_res) from x̃ φ (…, 2n + n²), as PyTorch operations, in fp32 (fp64 from fp64)."""
    logits = spread(alpha, [n, n, n * n]) * at_least_fp32(projected) + bias
    pre, post = torch.sigmoid(logits[..., :n]), 2 * torch.sigmoid(logits[..., n:2 * n])
    return pre, post, sinkhorn(logits[..., 2 * n:].unflatten(-1, (n, n)), iters)


class _MHC:
    """mHC's step in the kernels: ``mhc_step`` writes the streams, projects and normalises them, makes the weights
    (Sinkhorn included) and reads, a block of tokens at a time; the backward pass reads the sigmoids' and the
    exponential's derivatives off their outputs."""

    @staticmethod
    def step(x, write, weight, params):
        """``_HC.step``'s, for mHC."""
        alpha, bias = params
        x, h, pre, post, res, m0, p, r, q = torch.ops.rrlib_native.mhc_step(
            x, *(write or (None,) * 3), weight, alpha, bias, SINKHORN_ITERS, RMS_EPS)
        return x, (h, post, res), (x, weight, r, q, pre, post, m0, p, alpha)

    @staticmethod
    def backward(grad_h, grad_b, grad_mix, x, weight, a, r, q, saved, grad_streams, write):
        post, m0, p, alpha = saved  # a is H_pre
        grad_x, grad_weight, grad_alpha, grad_bias, *grad_write = torch.ops.rrlib_native.mhc_step_backward(
            grad_h, grad_b, grad_mix, x, weight, r, q, a, post, m0, p, alpha, SINKHORN_ITERS, grad_streams, *write)
        return grad_x, grad_weight, (grad_alpha, grad_bias), tuple(grad_write)


class _ReadAndWeigh(torch.autograd.Function):
    r"""A step's projection, weights and read as one autograd node, in the kernels (the kind's ``step``):

        rows of x (HC: each stream's; mHC: each token's n·d) → P = (rows Wᵀ) · rms(rows)^{-1} →
        (a, b, M) = weights(P) → h = Σ_j a_j x_j

    so that the streams have one consumer more than the write (where the separate projection, norm and read
    made three more, each adding a stream-sized gradient in the backward pass). Backward: the kind's kernels
    give ∂x, ∂W and the weights' parameter gradients, with ``project_rows_backward``'s formulas for the
    projection. Used for the first step; the later ones take ``_WriteAndWeigh``.
    """

    @staticmethod
    def forward(ctx, streams, weight, kind, *params):
        _, outputs, saved = kind.step(streams.reshape(-1, *streams.shape[-2:]), None, weight, params)
        ctx.save_for_backward(*saved)
        ctx.kind, ctx.shape = kind, streams.shape
        return _unflatten(outputs, streams.shape)

    @staticmethod
    def backward(ctx, grad_h, grad_b, grad_mix):
        grad_x, grad_weight, grad_params, _ = _step_backward(ctx.kind, ctx.saved_tensors, grad_h, grad_b, grad_mix)
        return (grad_x.view(ctx.shape), grad_weight, None, *grad_params)


class _WriteAndWeigh(torch.autograd.Function):
    r"""The previous step's write x' = M x + b ⊗ u and ``_ReadAndWeigh`` of x' as one node.

    x' has one consumer less (the next such node, where the write and the step node made two), so autograd no
    longer sums two stream-sized gradients for it. The kind's forward kernels take the written rows' norms as
    they write them, and its backward kernel starts ∂x' from the next node's gradient and runs the write's
    backward on each token's ∂x' as it makes it, so no stream-sized ∂x' is stored and read back: at the
    ``family`` size a stream tensor outgrows the core's L2, and each pass over one is read from memory. The
    nodes call the kernels' operators directly (their FLOP formulas are registered with them,
    rrlib.rules.native): through rrlib.rules.depth_mixing.streams' custom operators, each call cost about 0.1 ms
    of Python (HC's step at the ``family`` size, one thread: 30.0 against 34.7 ms over standard's, median of 20
    paired rounds).
    """

    @staticmethod
    def forward(ctx, streams, mix, write, u, weight, kind, *params):
        n, d = streams.shape[-2:]
        flat = streams.view(-1, n, d), mix.view(-1, n, n), write.view(-1, n), u.view(-1, d)
        written, outputs, saved = kind.step(flat[0], flat[1:], weight, params)
        ctx.save_for_backward(*flat, *saved)
        ctx.kind, ctx.shapes = kind, (streams.shape, mix.shape, write.shape, u.shape)
        return (written.view(streams.shape), *_unflatten(outputs, streams.shape))

    @staticmethod
    def backward(ctx, grad_written, grad_h, grad_next_write, grad_next_mix):
        streams, mix, write, u, *saved = ctx.saved_tensors
        grad_streams, grad_weight, grad_params, (grad_mix, grad_write, grad_u) = _step_backward(
            ctx.kind, saved, grad_h, grad_next_write, grad_next_mix, grad_written, (streams, mix, write, u))
        shape, mix_shape, write_shape, u_shape = ctx.shapes
        return (grad_streams.view(shape), grad_mix.view(mix_shape), grad_write.view(write_shape),
                grad_u.view(u_shape), grad_weight, None, *grad_params)


def _unflatten(outputs, shape):
    """(h, b, M) per token → (…, d), (…, n), (…, n, n) for streams of ``shape`` (…, n, d)."""
    (h, b, mix), lead, (n, d) = outputs, shape[:-2], shape[-2:]
    return h.view(*lead, d), b.view(*lead, n), mix.view(*lead, n, n)


def _step_backward(kind, saved, grad_h, grad_b, grad_mix, grad_streams=None, write=(None,) * 4):
    """(∂x, ∂W, the kind's parameter gradients, (∂M, ∂b, ∂u)) of the kind's ``step``; ``grad_streams``: x's
    gradient from elsewhere. With ``write`` = (streams, M, b, u) that x was written from, the first is the
    streams' gradient and the last the write's (empty tensors without one)."""
    x, weight, r, q, a, *kind_saved = saved
    tokens, n, d = x.shape
    grad_h, grad_b, grad_mix = (torch.zeros(tokens, *shape, dtype=x.dtype) if g is None
                                else g.contiguous().view(tokens, *shape)
                                for g, shape in ((grad_h, (d,)), (grad_b, (n,)), (grad_mix, (n, n))))
    if grad_streams is not None:
        grad_streams = grad_streams.contiguous().view(tokens, n, d)
    return kind.backward(grad_h, grad_b, grad_mix, x, weight, a, r, q, kind_saved, grad_streams, write)
