r"""Depth attention, the Attention Residuals family's read: a softmax over depth of scored sources, one weight
per source and token, and the per-token weighted sum it takes (``depth_mix``).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch.utils.flop_counter import register_flop_formula

from .dispatch import full_precision, kernels_for
from .norms import inverse_rms


@torch.library.custom_op("rrlib::depth_mix", mutates_args=())
def depth_mix(weights: torch.Tensor, values: list[torch.Tensor]) -> torch.Tensor:
    r"""Per-token weighted sum over sources:  out = \sum_s weights[..., s] · values[s]  (broadcasting).

    ``weights`` is (..., S), ``values`` S tensors (..., d). Run as S fused multiply-adds, not as a matmul:
    einsum turns a weight per token into B·T products of a 1×S and an S×d matrix, which cost 9 ms for one
    AttnRes read of 5 sources at the ``family`` size on CPU (forward and backward, one thread) against 0.8 ms
    here; nor are the sources stacked, a copy of them all at every read. A custom op, so that FLOP counters see the S·d multiply-adds per output row
    (``register_flop_formula`` below) and ``torch.compile`` keeps it whole. On a CPU, rrlib.rules.native's kernel
    makes each token's row in one pass over its sources (``_native``), where the multiply-adds made S passes over
    the output (AttnRes at ``family`` reads up to nine sources).
    """
    kernels = _native(weights, values)
    if kernels is not None:
        flat = kernels.depth_mix(weights.view(-1, len(values)), [v.view(-1, v.shape[-1]) for v in values])
        return flat.view(values[0].shape)
    out = values[0] * weights[..., 0, None]
    for s in range(1, len(values)):
        out.addcmul_(values[s], weights[..., s, None])
    return out


@depth_mix.register_fake
def _(weights, values):
    return values[0] * weights[..., 0, None]


def _depth_mix_context(ctx, inputs, output):
    weights, values = inputs
    ctx.save_for_backward(weights, *values)


def _native(weights, values):
    """rrlib.rules.native's kernels where ``depth_mix`` can run on them (every source of the weights' leading
    shape, all contiguous CPU tensors of one float dtype), else None."""
    if any(v.shape != values[0].shape for v in values) or weights.shape[:-1] != values[0].shape[:-1]:
        return None
    return kernels_for(weights, *values)


def _depth_mix_backward(ctx, grad):
    weights, *values = ctx.saved_tensors
    kernels = _native(weights, values) if grad.shape == values[0].shape else None
    if kernels is not None:
        grad, d = grad.contiguous(), grad.shape[-1]
        flat_weights, flat_values = kernels.depth_mix_backward(grad.view(-1, d), weights.view(-1, len(values)),
                                                               [v.view(-1, d) for v in values])
        return flat_weights.view(weights.shape), [g.view(grad.shape) for g in flat_values]
    grad_weights = torch.stack([torch.linalg.vecdot(grad, v) for v in values], -1)
    grad_values = [(grad * weights[..., s, None]).sum_to_size(v.shape) for s, v in enumerate(values)]
    return grad_weights, grad_values


depth_mix.register_autograd(_depth_mix_backward, setup_context=_depth_mix_context)


@register_flop_formula(torch.ops.rrlib.depth_mix)
def _depth_mix_flops(weights_shape, values_shape, out_shape=None, **kwargs) -> int:
    return 2 * math.prod(out_shape) * len(values_shape)


def depth_attention(scores: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
    r"""Softmax over depth, one weight per source and token:  h = \sum_s softmax_s(score_s) · v_s.

    ``scores`` are S tensors (B, T), each source's w^T rms(v_s) for this read; ``values`` S tensors (B, T, d).
    """
    with full_precision(values[0]):
        return depth_mix(torch.stack(scores, -1).softmax(-1), values)


class _Source(NamedTuple):
    value: torch.Tensor  # (B, T, d)
    scores: torch.Tensor  # (B, T, R): w_jᵀ rms(value) for the reads j = first, first + 1, … that will see it
    first: int


def scored(value: torch.Tensor, queries: torch.Tensor, first: int) -> _Source:
    """A source and its scores against the queries of every read from ``first`` on: one matmul when it is made."""
    with full_precision(value):
        return _Source(value, (value @ queries[first:].T) * inverse_rms(value), first)


def route(sources: list[_Source], i: int, open_value: torch.Tensor | None = None,
          query: torch.Tensor | None = None) -> torch.Tensor:
    """Read i's depth attention over ``sources``, and over ``open_value`` (scored here with ``query``) if given.

    One source is returned as it is (its weight is 1, so it needs no score).
    """
    values = [s.value for s in sources] + ([] if open_value is None else [open_value])
    if len(values) == 1:
        return values[0]
    scores = [s.scores[..., i - s.first] for s in sources]
    if open_value is not None:
        with full_precision(open_value):
            scores.append(((open_value @ query[:, None]) * inverse_rms(open_value)).squeeze(-1))
    return depth_attention(scores, values)


def depth_attention_macs(n_sources: int, d: int) -> int:
    """Multiply-adds per token of ``depth_attention``: the scores and the weighted sum."""
    return 0 if n_sources == 1 else 2 * n_sources * d
