r"""Review's commit on a CPU as one autograd node: h' = h + σ(W_r [rms(h); rms(u)] + b_r) ⊙ u.

As ATen operations Review's gate is some twenty nodes, and each element-wise one a pass over a (B, T, d) tensor:
two norms (five nodes each), their concatenation, the sigmoid, the product and the sum, and as many again
backward. On an AVX-512 Xeon those passes run at about 30 GB/s (the tensors outgrow the core's L2, and the
mesh's L3 is slower per core than an EPYC's), so at ``mini`` they had cost Review 10-16 % of standard's step
where its FLOPs ask 2 % less. Here the two norms and the concatenation are one pass of rrlib.rules.native's
``review_norms`` each way (its backward also adds the gradients h and u get from the sum and the product), and
the rest is ATen's: the matrix products, the sigmoid, one ``addcmul``.

The formula is the same; the numbers agree with the ATen form to rounding (tests/test_review_gate.py compares
them in float64 and fp32). CUDA, autocast, torch.compile, other dtypes and a machine without the kernels take
the ATen form.
"""
from __future__ import annotations

import torch

from .depth_mixing.dispatch import kernels_for
from .protocol import RMS_EPS


def fused_review(gate: torch.nn.Linear, h: torch.Tensor, u: torch.Tensor) -> torch.Tensor | None:
    """h + σ(gate([rms(h); rms(u)])) ⊙ u as one node, or None where the ATen form must run (the module's
    docstring)."""
    if torch.compiler.is_compiling() or torch.is_autocast_enabled("cpu") or h.shape != u.shape:
        return None
    kernels = kernels_for(h, u, gate.weight, gate.bias)
    if kernels is None:
        return None
    return _Review.apply(h, u, gate.weight, gate.bias, kernels).view(h.shape)


class _Review(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, u, weight, bias, kernels):
        ctx.shape = h.shape
        h, u = h.reshape(-1, h.shape[-1]), u.reshape(-1, u.shape[-1])  # (tokens, d), views
        x, inverse_rms = kernels.review_norms(h, u, RMS_EPS)  # [rms(h); rms(u)] per token, (tokens, 2d)
        r = torch.sigmoid(torch.addmm(bias, x, weight.T))
        ctx.save_for_backward(u, weight, x, inverse_rms, r)
        ctx.kernels = kernels
        return torch.addcmul(h, r, u)

    @staticmethod
    def backward(ctx, grad):
        u, weight, x, inverse_rms, r = ctx.saved_tensors
        grad = grad.reshape(u.shape).contiguous()
        grad_z = ctx.kernels.review_gate_backward(grad, u, r)  # g ⊙ u ⊙ σ'(z)
        grad_h, grad_u = ctx.kernels.review_norms_backward(grad_z @ weight, x, inverse_rms, grad, r)
        return grad_h.view(ctx.shape), grad_u.view(ctx.shape), grad_z.T @ x, grad_z.sum(0), None
