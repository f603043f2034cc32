r"""HC's and mHC's step: the projection of the streams, the per-token weights made from it, and the read.

As PyTorch operations the weights are a few dozen small operations per sublayer, forward and backward
(spreading the scales over columns, tanh or sigmoids, slicing out and copying the read, write and mixing weights,
for mHC the exponential and Sinkhorn), and the projection, its norm and the read each add a stream-sized
gradient in the backward pass. At the ``family`` size on a CPU (one thread) the coefficients took 24 of the
47 ms HC's step spent over the standard residual's, and 24 of mHC's 41 (measured by replacing them with
constants). On the CPU in fp32 (and fp64) the step is one autograd node (``_ReadAndWeigh``): ATen's matrix
product for the projection, rrlib.native's kernels for the norm, the weights (``_HC``, ``_MHC``) and the read;
elsewhere (CUDA, bf16 streams, no kernels built, ``RRLIB_NATIVE=0``) the same formulas run as PyTorch
operations (``hc_weights_plain``, ``mhc_weights_plain``), and tests/test_native.py compares the two.
"""
from __future__ import annotations

import torch

from .depth_mixing import (SINKHORN_ITERS, kernels_for, project_rows, projected_rms, projection_grads, sinkhorn,
                           stream_read)


def spread(values: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """values[j] repeated counts[j] times, e.g. one scale per group of coefficient columns."""
    return torch.cat([values[j:j + 1].expand(c) for j, c in enumerate(counts)])


# ---- HC: c = static + s ⊙ tanh(P), read weights A_m = c[:, 0], write B = c[:, n+1], mixing A_rᵀ = c[:, 1:n+1]ᵀ


def hc_read_and_weigh(streams: torch.Tensor, weight: torch.Tensor, static: torch.Tensor, scales: torch.Tensor):
    """HC's step input h = A_mᵀ H and the step's (B, A_rᵀ), from H (…, n, d), W (n + 2, d), ``static``
    (n, n + 2) and ``scales`` (s_α, s_β): (…, d), (…, n), (…, n, n)."""
    if kernels_for(streams, weight, static, scales) is None:
        a, b, mix = hc_weights_plain(projected_rms(streams, weight), static, scales)
        return stream_read(a.contiguous(), streams, -2), b, mix
    return _ReadAndWeigh.apply(streams, weight, streams.shape[-2], _HC, static, scales)


def hc_weights_plain(projected, static, scales):
    """(A_m, B, A_rᵀ) from H̄ W (…, n, n + 2), as PyTorch operations."""
    n = projected.shape[-2]
    c = static + spread(scales, [n + 1, 1]) * torch.tanh(projected)
    return c[..., 0], c[..., n + 1], c[..., 1:n + 1].transpose(-1, -2)


class _HC:
    """HC's weights in the kernels: tanh(P) by ATen (vectorised; a scalar tanh in the kernel cost more than the
    rest of the tail), the rest by ``hc_weights``. Backward: one kernel for the read's, the weights' and the
    norm's gradients (``hc_step_backward``), which reuses tanh(P)."""

    @staticmethod
    def forward(projected, n, static, scales):
        tanh = torch.tanh(projected).view(-1, n, n + 2)
        return torch.ops.rrlib_native.hc_weights(tanh, static, scales), (tanh, scales)

    @staticmethod
    def backward(grad_h, grad_b, grad_mix, x, a, r, q, saved):
        grad_x, grad_q, *grad_params = torch.ops.rrlib_native.hc_step_backward(grad_h, grad_b, grad_mix, x, a, r, q,
                                                                              *saved)
        return grad_x, grad_q, grad_params


# ---- mHC: logits = α_g ⊙ P + b; H_pre = σ(·), H_post = 2σ(·), H_res = Sinkhorn(·)


def mhc_read_and_weigh(streams: torch.Tensor, weight: torch.Tensor, alpha: torch.Tensor, bias: torch.Tensor):
    """mHC's step input h = H_pre x and the step's (H_post, H_res), from x (…, n, d), φ (2n + n², n·d),
    ``alpha`` (α_pre, α_post, α_res) and ``bias``: (…, d), (…, n), (…, n, n); the weights in fp32."""
    n = streams.shape[-2]
    # the kernels make the weights in the streams' dtype, and mHC's weights are fp32: fp64 streams (tests) take
    # the PyTorch path, which casts the projection
    if kernels_for(streams, weight, alpha, bias) is None or streams.dtype != torch.float32:
        pre, post, res = mhc_weights_plain(projected_rms(streams.flatten(-2), weight), alpha, bias, n)
        return stream_read(pre.to(streams.dtype).contiguous(), streams, -2), post, res
    return _ReadAndWeigh.apply(streams, weight, 1, _MHC, alpha, bias)


def mhc_weights_plain(projected, alpha, bias, n, iters=SINKHORN_ITERS):
    """(H_pre, H_post, H_res) from x̃ φ (…, 2n + n²), as PyTorch operations, in fp32."""
    logits = spread(alpha, [n, n, n * n]) * projected.float() + bias
    pre, post = torch.sigmoid(logits[..., :n]), 2 * torch.sigmoid(logits[..., n:2 * n])
    return pre, post, sinkhorn(logits[..., 2 * n:].unflatten(-1, (n, n)), iters)


class _MHC:
    """mHC's weights in the kernels, Sinkhorn included; the backward pass reads the sigmoids' and the
    exponential's derivatives off their outputs."""

    @staticmethod
    def forward(projected, n, alpha, bias):
        pre, post, res, m0 = torch.ops.rrlib_native.mhc_weights(projected, alpha, bias, n, SINKHORN_ITERS)
        return (pre, post, res), (pre, post, m0, projected, alpha)

    @staticmethod
    def backward(grad_h, grad_b, grad_mix, x, a, r, q, saved):
        grad_a, grad_x = torch.ops.rrlib_native.stream_read_backward(grad_h, a, x)
        grad_p, *grad_params = torch.ops.rrlib_native.mhc_weights_backward(grad_a, grad_b, grad_mix, *saved,
                                                                          SINKHORN_ITERS)
        rows = x.view(q.shape[0], -1)
        grad_q, norm = projection_grads(grad_p, r, q, rows.shape[-1])
        grad_x.view(rows.shape).addcmul_(rows, norm)
        return grad_x, grad_q, grad_params


class _ReadAndWeigh(torch.autograd.Function):
    r"""A step's projection, weights and read as one autograd node, in the kernels:

        rows of x (``rows_per_token`` per token) → P = (rows Wᵀ) · rms(rows)^{-1} → (a, b, M) = weights(P) →
        h = Σ_j a_j x_j

    so that the streams have two consumers (this node and the step's write) where the separate projection, norm
    and read made four, each adding a stream-sized gradient in the backward pass. Backward: the kind's kernels
    give the read's and the norm's share of ∂x and ∂q = ∂P r (``project_rows_backward``'s formulas), and the
    projection's share ∂q W is added into ∂x in place.
    """

    @staticmethod
    def forward(ctx, streams, weight, rows_per_token, kind, *params):
        n, d = streams.shape[-2:]
        x = streams.reshape(-1, n, d)
        rows = x.view(-1, n * d // rows_per_token)
        p, r, q = project_rows(rows, weight)
        (a, b, mix), saved = kind.forward(p, n, *params)
        h = stream_read(a, x, -2)  # the op with its FLOP formula, which runs the kernel
        ctx.save_for_backward(x, weight, r, q, a, *saved)
        ctx.kind, ctx.shape = kind, streams.shape
        lead = streams.shape[:-2]
        return h.view(*lead, d), b.view(*lead, n), mix.view(*lead, n, n)

    @staticmethod
    def backward(ctx, grad_h, grad_b, grad_mix):
        x, weight, r, q, a, *saved = ctx.saved_tensors
        tokens, n, d = x.shape
        grad_h, grad_b, grad_mix = (torch.zeros(tokens, *shape, dtype=x.dtype) if g is None
                                    else g.contiguous().view(tokens, *shape)
                                    for g, shape in ((grad_h, (d,)), (grad_b, (n,)), (grad_mix, (n, n))))
        grad_x, grad_q, grad_params = ctx.kind.backward(grad_h, grad_b, grad_mix, x, a, r, q, saved)
        rows = x.view(q.shape[0], -1)
        grad_x.view(rows.shape).addmm_(grad_q.view(q.shape), weight)
        return (grad_x.view(ctx.shape), grad_q.view(q.shape).T @ rows, None, None, *grad_params)
