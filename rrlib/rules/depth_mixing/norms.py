r"""The normalisations of the cross-depth rules: the inverse RMS by which every score is scaled, the RMS-normalised
projection of HC's and mHC's streams, and Sinkhorn onto the doubly stochastic matrices (mHC).
"""
from __future__ import annotations

import torch

from .. import native
from ..protocol import RMS_EPS
from .dispatch import at_least_fp32, kernels_for

SINKHORN_ITERS = 20  # mHC's t_max


def inverse_rms(x: torch.Tensor) -> torch.Tensor:
    r"""1 / rms(x) over channels, with a trailing 1: w^T rms(v) = (w^T v) / rms(v).

    Scores are taken on the raw sources and scaled by this, so a source is normalised once, when it is made,
    and not again at every later read (the O(depth²) norms the first form spent its time on), and no
    normalised copy of each source is kept for the backward pass. Its backward is written out (``_InverseRMS``).
    """
    return _InverseRMS.apply(x)


class _InverseRMS(torch.autograd.Function):
    r"""r = (mean(x²) + eps)^{-1/2},  ∂r/∂x = −r³ x / d: one pass over x each way.

    Autograd's form (``vector_norm``, then square, divide, rsqrt) made two full-size passes in the backward (a
    product and a zero-norm ``masked_fill_``); the sources here are the largest tensors the rules touch, so
    each pass over them shows in the step time.
    """

    @staticmethod
    def forward(ctx, x):
        r = inverse_rms_values(x)
        ctx.save_for_backward(x, r)
        return r

    @staticmethod
    def backward(ctx, grad):
        x, r = ctx.saved_tensors
        return x * (grad * r.pow(3) * (-1.0 / x.shape[-1]))


def inverse_rms_values(x: torch.Tensor) -> torch.Tensor:
    """rms(x)^{-1} over channels, (…, 1), outside autograd: rrlib.rules.native's kernel on the CPU, else ATen."""
    kernels = kernels_for(x)
    if kernels is not None:
        return kernels.inverse_rms(x.view(-1, x.shape[-1]), RMS_EPS).view(*x.shape[:-1], 1)
    return torch.rsqrt(torch.linalg.vecdot(x, x).unsqueeze(-1) / x.shape[-1] + RMS_EPS)


def project_rows(rows: torch.Tensor, weight: torch.Tensor):
    """(P, r, q) for ``rows`` (N, len) and ``weight`` (k, len): q = rows Wᵀ, r = rms(rows)^{-1}, P = q r, outside
    autograd (``_ProjectedRMS`` and rrlib.rules.depth_mixing.hyper_weights' step node keep r and q for
    ``project_rows_backward``)."""
    r = inverse_rms_values(rows)
    # on the CPU MKL makes the k × N product (k rows of W by the rows) 2× faster than the N × k one for HC's
    # k = n + 2 = 6 (0.16 ms against 0.38 at the family size; mHC's k = 24: 0.36 against 0.43); q is its
    # transpose, a view (N × k laid out column by column), and so is P
    q = (weight @ rows.T).T if rows.device.type == "cpu" else rows @ weight.T
    return q * r, r, q


def project_rows_backward(grad_p, rows, weight, r, q):
    r"""(∂rows, ∂W) of ``project_rows``:  ∂rows = (∂P r) W − (r³/len)(Σ_k ∂P_k q_k) rows,  ∂W = (∂P r)ᵀ rows,
    the norm's share and the projection's in one ``addmm``."""
    grad_q, norm = projection_grads(grad_p, r, q, rows.shape[-1])
    return torch.addmm(rows * norm, grad_q, weight), grad_q.T @ rows


def projection_grads(grad_p, r, q, length):
    """(∂q = ∂P r, the norm's coefficient −(r³/len)(Σ_k ∂P_k q_k) per row) of ``project_rows``."""
    return grad_p * r, torch.linalg.vecdot(grad_p, q).unsqueeze(-1) * r.pow(3) * (-1.0 / length)


def projected_rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    r"""(x Wᵀ) · rms(x)^{-1} row by row, ``weight`` (k, d) as ``nn.Linear`` keeps it: HC's and mHC's projection of
    their normalised streams.

    One autograd node where ``F.linear(x, W) * inverse_rms(x)`` made three: the streams then have one consumer
    less, whose stream-sized gradient the backward pass had to add to the others, and the norm's share of the
    gradient is added in the same matrix product as the projection's (``addmm``): at the ``family`` size on CPU
    HC's step took about 11 ms less (median of 16 interleaved rounds). Since then, with the kernels built, HC and
    mHC take their step node instead (rrlib.rules.depth_mixing.hyper_weights), which does the same arithmetic
    (``project_rows``); this is their PyTorch path.
    """
    return _ProjectedRMS.apply(x, weight)


class _ProjectedRMS(torch.autograd.Function):
    r"""q = x Wᵀ,  r = rms(x)^{-1},  P = q r;   ∂x = (∂P r) W − (r³/d)(Σ_k ∂P_k q_k) x,   ∂W = (∂P r)ᵀ x."""

    @staticmethod
    def forward(ctx, x, weight):
        rows = x.reshape(-1, x.shape[-1])
        p, r, q = project_rows(rows, weight)
        ctx.save_for_backward(rows, weight, r, q)
        ctx.shape = x.shape
        return p.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        rows, weight, r, q = ctx.saved_tensors
        grad_rows, grad_weight = project_rows_backward(grad.reshape(q.shape), rows, weight, r, q)
        return grad_rows.view(ctx.shape), grad_weight


def sinkhorn(logits: torch.Tensor, iters: int = SINKHORN_ITERS) -> torch.Tensor:
    r"""Sinkhorn-Knopp onto the doubly stochastic matrices (mHC):  M_0 = exp(logits),  M_t = T_r(T_c(M_{t-1})).

    T_c and T_r divide by column and row sums; after ``iters`` rounds the rows sum to 1 exactly and the columns
    nearly. At least fp32 (``at_least_fp32``: fp64 logits stay fp64), also under autocast: bf16 keeps 8 mantissa
    bits, so every normalised sum would be off by up to 0.4%, and the n×n matrices cost nothing to keep in fp32.

    The iterations run on the matrices laid out (n, n, tokens), so every sum and division is a contiguous,
    vectorised pass over the tokens rather than a reduction over runs of n values: at the ``family`` size on
    CPU (n = 4, 2048 tokens, one thread) one call, forward and backward, took 4.5 ms against 14.8 ms. Their
    backward is written out (``_Normalise``). On the CPU rrlib.rules.native's kernel runs all the rounds on 64 tokens at
    a time in one loop, forward and backward (``_NativeSinkhorn``), for 2-4 streams with each group of 16 tokens'
    matrices held in vector registers through every round: 0.6 ms a call, forward and backward, where this
    function's PyTorch path takes 7.2 ms (``family``, one thread, an AVX-512 Xeon).
    """
    with torch.autocast(logits.device.type, enabled=False):
        m = at_least_fp32(logits).contiguous()
        if kernels_for(m) is not None:
            return _NativeSinkhorn.apply((m - m.amax((-2, -1), keepdim=True).detach()).exp(), iters)
        m = m.movedim((-2, -1), (0, 1))
        # a constant factor cancels in the first normalisation; removing the max keeps exp finite
        m = _Normalise.apply((m - m.amax((0, 1), keepdim=True).detach()).exp(), iters)
    # returned contiguous in (…, n, n), as bmm needs it, while the gradient flowing back through the iterations
    # is made contiguous in their layout: strided, it made the backward 2.6× slower (12.0 ms against 4.6)
    return contiguous_grad(m).movedim((0, 1), (-2, -1)).contiguous()


class _Normalise(torch.autograd.Function):
    r"""``iters`` rounds of  m ← m / Σ_0 m,  m ← m / Σ_1 m  on (n, n, tokens) matrices.

    Backward of one division y = m / s, s = Σ_a m:  ∂m = (∂y − Σ_a(∂y · y)) / s,  three passes (a vecdot, a
    difference, a division in place), where autograd spent six (the quotient rule's two products, a negation, a
    sum, the broadcast back, an add).
    """

    @staticmethod
    def forward(ctx, m, iters):
        saved = []
        for _ in range(iters):
            for axis in (0, 1):
                s = m.sum(axis, keepdim=True)
                m = m / s
                saved += [m, s]
        ctx.save_for_backward(*saved)
        return m

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        for j in reversed(range(0, len(saved), 2)):
            y, s, axis = saved[j], saved[j + 1], j // 2 % 2  # the forward's pairs alternate axes 0 and 1
            grad = (grad - torch.linalg.vecdot(grad, y, dim=axis).unsqueeze(axis)).div_(s)
        return grad, None


class _NativeSinkhorn(torch.autograd.Function):
    """``_Normalise`` in rrlib.rules.native's kernels, on (…, n, n) matrices: all ``iters`` rounds of a chunk of tokens
    in one loop, forward and backward (which recomputes the iterates rather than keeping 2·iters copies)."""

    @staticmethod
    def forward(ctx, m, iters):
        ctx.iters = iters
        ctx.save_for_backward(m)
        n = m.shape[-1]
        return native.kernels().sinkhorn(m.view(-1, n, n), iters).view(m.shape)

    @staticmethod
    def backward(ctx, grad):
        (m,) = ctx.saved_tensors
        n = m.shape[-1]
        grad = grad.contiguous().view(-1, n, n)
        return native.kernels().sinkhorn_backward(grad, m.view(-1, n, n), ctx.iters).view(m.shape), None


def contiguous_grad(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself, whose gradient is made contiguous on its way back."""
    return _ContiguousGrad.apply(x)


class _ContiguousGrad(torch.autograd.Function):
    """Identity forward; the backward hands on a contiguous copy of the gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous()
