r"""MGR's step: the gates of its k streams and the attention pool over them, one autograd node each.

    gates:  β_j = σ(w_βᵀ s_j · inv_j · scale + b_j),  s'_j = s_j + β_j (u − s_j),  inv'_j = rms(s'_j)^{-1}
    pool:   h = Σ_j softmax_j(w_αᵀ s'_j · inv'_j · scale) · s'_j

As PyTorch operations a gated step is a dozen operations on (k, B, T, d) tensors and the new streams have five
consumers (the pool's scores, its weighted sum, their norm, the next gates, the next lerp), each adding a
stream-sized gradient in the backward pass; at the ``family`` size on a CPU MGR's step cost 1.3–1.4× its FLOP
share. On the CPU in fp32 or fp64 an rrlib.rules.native kernel does each token's gates, norms and pool in one pass and
its gradient in another (``_GatePool``, ``_Pool``); elsewhere the same formulas run as PyTorch operations
(``gate_pool_plain``, ``pool_plain``), and tests/test_native.py compares the two.
"""
from __future__ import annotations

import torch

from ..protocol import RMS_EPS
from .dispatch import kernels_for
from .norms import inverse_rms
from .streams import stream_read


def gate_pool(s, inv, u, gate_query, gate_bias, pool_query, scale: float):
    """(s', inv', h) for streams s (k, B, T, d) with inverse RMS inv (k, B, T, 1) and the update u (B, T, d)."""
    if kernels_for(s, inv, u, gate_query, gate_bias, pool_query) is None:
        return gate_pool_plain(s, inv, u, gate_query, gate_bias, pool_query, scale)
    return _GatePool.apply(s, inv, u, gate_query, gate_bias, pool_query, scale)


def pool(s, inv, pool_query, scale: float):
    """h, the attention pool over streams s (k, B, T, d) with inverse RMS inv (k, B, T, 1)."""
    if kernels_for(s, inv, pool_query) is None:
        return pool_plain(s, inv, pool_query, scale)
    return _Pool.apply(s, inv, pool_query, scale)


def gate_pool_plain(s, inv, u, gate_query, gate_bias, pool_query, scale):
    s, inv = gate_plain(s, inv, u, gate_query, gate_bias, scale)
    return s, inv, pool_plain(s, inv, pool_query, scale)


def gate_plain(s, inv, u, gate_query, gate_bias, scale):
    """(s', inv'): the gates alone, as PyTorch operations (also MGR's path with one stream, which has no pool)."""
    beta = torch.sigmoid((s @ gate_query[:, None]) * inv * scale + gate_bias.view(-1, 1, 1, 1))
    s = torch.lerp(s, u, beta)  # s + β (u − s); lerp keeps s, u and β for its backward, not the difference
    return s, inverse_rms(s)


def pool_plain(s, inv, pool_query, scale):
    # softmax over the streams, then one pass over them (``stream_read``)
    weights = ((s @ pool_query[:, None]) * inv * scale).squeeze(-1).softmax(0)
    return stream_read(weights, s, 0)


def _tokens(s, inv):
    """(k, B, T, d) → (k, N, d) and its (k, B, T, 1) inverse RMS → (k, N)."""
    k, d = s.shape[0], s.shape[-1]
    return s.view(k, -1, d), inv.view(k, -1)


def _grads(outputs, *gradients):
    """Each gradient made contiguous, or zeros where its output got none."""
    return [torch.zeros_like(o) if g is None else g.contiguous() for o, g in zip(outputs, gradients)]


class _GatePool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, inv, u, gate_query, gate_bias, pool_query, scale):
        streams, inverse = _tokens(s, inv)
        out, inv_out, h = torch.ops.rrlib_native.mgr_gate_pool(streams, inverse, u.reshape(-1, s.shape[-1]),
                                                               gate_query, gate_bias, pool_query, scale, RMS_EPS)
        ctx.save_for_backward(streams, inverse, u, gate_query, gate_bias, pool_query, out, inv_out)
        ctx.scale, ctx.shapes = scale, (s.shape, inv.shape, u.shape)
        return out.view(s.shape), inv_out.view(inv.shape), h.view(u.shape)

    @staticmethod
    def backward(ctx, grad_s, grad_inv, grad_h):
        streams, inverse, u, gate_query, gate_bias, pool_query, out, inv_out = ctx.saved_tensors
        grad_s, grad_inv, grad_h = _grads((out, inv_out, u), grad_s, grad_inv, grad_h)
        gs, ginv, gu, g_gate, g_bias, g_pool = torch.ops.rrlib_native.mgr_gate_pool_backward(
            grad_s.view(out.shape), grad_inv.view(inv_out.shape), grad_h.view(-1, u.shape[-1]), streams, inverse,
            u.reshape(-1, u.shape[-1]), gate_query, gate_bias, pool_query, out, inv_out, ctx.scale)
        s_shape, inv_shape, u_shape = ctx.shapes
        return gs.view(s_shape), ginv.view(inv_shape), gu.view(u_shape), g_gate, g_bias, g_pool, None


class _Pool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, inv, pool_query, scale):
        streams, inverse = _tokens(s, inv)
        h = torch.ops.rrlib_native.mgr_pool(streams, inverse, pool_query, scale)
        ctx.save_for_backward(streams, inverse, pool_query)
        ctx.scale, ctx.shapes = scale, (s.shape, inv.shape)
        return h.view(*s.shape[1:])

    @staticmethod
    def backward(ctx, grad_h):
        streams, inverse, pool_query = ctx.saved_tensors
        gs, ginv, g_pool = torch.ops.rrlib_native.mgr_pool_backward(
            grad_h.contiguous().view(-1, streams.shape[-1]), streams, inverse, pool_query, ctx.scale)
        s_shape, inv_shape = ctx.shapes
        return gs.view(s_shape), ginv.view(inv_shape), g_pool, None
