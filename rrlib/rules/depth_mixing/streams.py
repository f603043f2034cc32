r"""Reads and writes of stacked streams (HC, mHC, MGR): a per-token weighted sum over the streams, HC's and mHC's
write x' = M x + b ⊗ u, and the sum of the last write's streams without making them. Custom operators, so FLOP
counters see their multiply-adds and ``torch.compile`` keeps them whole.
"""
from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import register_flop_formula

from .dispatch import kernels_for


@torch.library.custom_op("rrlib::stream_read", mutates_args=())
def stream_read(weights: torch.Tensor, streams: torch.Tensor, dim: int) -> torch.Tensor:
    r"""A weighted sum over stacked streams:  h = \sum_j weights_j · streams_j,  j along axis ``dim`` of ``streams``.

    ``streams`` (..., d) holds the streams along ``dim`` (HC and mHC: (B, T, n, d), dim −2; MGR: (k, B, T, d),
    dim 0), ``weights`` has its shape without the last axis; both contiguous. ``vecdot`` over the stream axis
    reads the streams once: at the family size on CPU, forward and backward, HC's read took 0.57 ms against
    0.92 for depth_mix over the unbound streams (and 3.1 ms as a (1×n)·(n×d) bmm per token), MGR's pool 0.73
    against 1.36. In HC's layout on the CPU rrlib.rules.native's kernel runs it, each token's n rows at once (vecdot
    materialises the product before summing): 0.05 ms against 0.25 forward, 0.11 against 0.31 backward.
    """
    return _weighted_sum(weights, streams, dim)


def _weighted_sum(weights, streams, dim):
    """stream_read's arithmetic, outside autograd."""
    kernels = _stream_kernels(weights, streams, dim)
    if kernels is not None:
        return kernels.stream_read(*_tokens(weights, streams)).view(weights.shape[:-1] + streams.shape[-1:])
    return torch.linalg.vecdot(weights.unsqueeze(-1), streams, dim=dim)


def _weighted_sum_backward(grad, weights, streams, dim):
    """(∂weights, ∂streams) of ``_weighted_sum``."""
    kernels = _stream_kernels(weights, streams, dim)
    if kernels is not None:
        w, x = _tokens(weights, streams)
        grad_weights, grad_streams = kernels.stream_read_backward(grad.reshape(x.shape[0], -1).contiguous(), w, x)
        return grad_weights.view(weights.shape), grad_streams.view(streams.shape)
    grad = grad.unsqueeze(dim)
    return torch.linalg.vecdot(grad, streams), weights.unsqueeze(-1) * grad


def _stream_kernels(weights, streams, dim):
    """The kernels for the (…, n, d) layout (HC, mHC); MGR's (k, …, d) stays with vecdot."""
    return kernels_for(weights, streams) if dim in (-2, streams.dim() - 2) else None


def _tokens(*tensors):
    """Each tensor with its leading (token) axes flattened: (…, n) → (N, n), (…, n, d) → (N, n, d)."""
    streams = tensors[1]
    lead = streams.shape[:-2].numel()
    return [t.reshape(lead, *t.shape[streams.dim() - 2:]) for t in tensors]


@stream_read.register_fake
def _(weights, streams, dim):
    return streams.sum(dim)


def _stream_read_context(ctx, inputs, output):
    weights, streams, ctx.dim = inputs
    ctx.save_for_backward(weights, streams)


def _stream_read_backward(ctx, grad):
    return *_weighted_sum_backward(grad, *ctx.saved_tensors, ctx.dim), None


stream_read.register_autograd(_stream_read_backward, setup_context=_stream_read_context)


@register_flop_formula(torch.ops.rrlib.stream_read)
def _stream_read_flops(weights_shape, streams_shape, dim, out_shape=None, **kwargs) -> int:
    return 2 * math.prod(streams_shape)


@torch.library.custom_op("rrlib::stream_write", mutates_args=())
def stream_write(mix: torch.Tensor, streams: torch.Tensor, write: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""HC's and mHC's write:  x' = M x + b ⊗ u,  one n×n product per token and the update added to each stream.

    ``mix`` (..., n, n), ``streams`` (..., n, d), ``write`` (..., n), ``u`` (..., d), all contiguous. The product
    is a bmm, 3× faster than depth_mix's broadcast form here (forward and backward at the family size on CPU);
    b ⊗ u is added in place. The backward is written out: autograd's addcmul backward made a product and a sum
    over the full streams for each of b and u, where one ``vecdot`` each does (2.6 ms against 2.3 in all).
    Only M x counts as FLOPs (``register_flop_formula`` below): the outer product is elementwise work, as the
    standard residual's h + u is. On the CPU rrlib.rules.native's kernel does each token's product, outer product
    and their backward in one pass: 0.11 ms against 0.42 forward, 0.41 against 1.24 backward.
    """
    kernels = kernels_for(mix, streams, write, u)
    if kernels is not None:
        m, x, b = _tokens(mix, streams, write)
        return kernels.stream_write(m, x, b, u.reshape(x.shape[0], -1)).view(streams.shape)
    return (mix @ streams).addcmul_(write.unsqueeze(-1), u.unsqueeze(-2))


@stream_write.register_fake
def _(mix, streams, write, u):
    return torch.empty_like(streams)


def _stream_write_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _stream_write_backward(ctx, grad):
    mix, streams, write, u = ctx.saved_tensors
    grad = grad.contiguous()  # bmm copies a strided operand token by token
    kernels = kernels_for(grad, mix, streams, write, u)
    if kernels is not None:
        m, x, b = _tokens(mix, streams, write)
        grads = kernels.stream_write_backward(grad.view(x.shape), m, x, b, u.reshape(x.shape[0], -1))
        return tuple(g.view(t.shape) for g, t in zip(grads, (mix, streams, write, u)))
    return (grad @ streams.transpose(-1, -2), mix.transpose(-1, -2) @ grad,
            torch.linalg.vecdot(grad, u.unsqueeze(-2)), torch.linalg.vecdot(grad, write.unsqueeze(-1), dim=-2))


stream_write.register_autograd(_stream_write_backward, setup_context=_stream_write_context)


@register_flop_formula(torch.ops.rrlib.stream_write)
def _stream_write_flops(mix_shape, streams_shape, write_shape, u_shape, out_shape=None, **kwargs) -> int:
    return 2 * math.prod(streams_shape) * mix_shape[-1]


@torch.library.custom_op("rrlib::stream_write_sum", mutates_args=())
def stream_write_sum(mix: torch.Tensor, streams: torch.Tensor, write: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""The sum over the streams of HC's and mHC's last write, the head's input, without making those streams:

        \sum_i (M x + b ⊗ u)_i = \sum_j (\sum_i M_ij) x_j + (\sum_i b_i) u

    Arguments as ``stream_write``'s. One weighted read of the streams where the write and the sum made a new set
    of streams and a pass over them each way (at the ``family`` size on a CPU the write alone took 0.8 ms forward
    and 1.8 ms backward in a profiled training step). FLOPs: counted as the write it stands for
    (``register_flop_formula`` below), as the model's accounting counts the method's arithmetic, not an
    implementation's (attention too is counted over the full square that the causal kernel halves).
    """
    total = write.sum(-1, keepdim=True)
    return _weighted_sum(mix.sum(-2).contiguous(), streams, -2).addcmul_(total, u)


@stream_write_sum.register_fake
def _(mix, streams, write, u):
    return torch.empty_like(u)


def _stream_write_sum_backward(ctx, grad):
    mix, streams, write, u = ctx.saved_tensors
    grad = grad.contiguous()
    grad_columns, grad_streams = _weighted_sum_backward(grad, mix.sum(-2).contiguous(), streams, -2)
    # ∂/∂M_ij = <g, x_j> and ∂/∂b_i = <g, u> for every i
    return (grad_columns.unsqueeze(-2).expand(mix.shape), grad_streams,
            torch.linalg.vecdot(grad, u).unsqueeze(-1).expand(write.shape), grad * write.sum(-1, keepdim=True))


stream_write_sum.register_autograd(_stream_write_sum_backward, setup_context=_stream_write_context)


@register_flop_formula(torch.ops.rrlib.stream_write_sum)
def _stream_write_sum_flops(mix_shape, streams_shape, write_shape, u_shape, out_shape=None, **kwargs) -> int:
    return _stream_write_flops(mix_shape, streams_shape, write_shape, u_shape)
