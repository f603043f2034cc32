r"""The parameter-free RMS norm of the gates (``rrlib.rules.protocol.rms``) with its backward written out.

ATen's ``rms_norm`` on a CPU tensor that needs a gradient runs as five autograd nodes (pow, mean, add, rsqrt,
mul), and their backward makes about seven passes over the (B, T, d) tensor: the mean's gradient is expanded to
full size and divided there, the square's is doubled there, and each is its own kernel. Review takes two of these
norms per sublayer; on an AVX-512 Xeon at ``mini`` they were the largest part of its step over standard's.

``_GateRMS`` computes the same numbers bitwise, forward and backward, with four passes each way less the waste:
the per-token factors (the mean's 1/d and the square's 2) are applied to the (B, T, 1) gradient before it
meets x (scaling by 2 is exact, so (g/d · 2) · x = (g/d) · (2x) to the bit), and the two gradients x gets
(through the product and through the square) are returned as two gradients of x, so autograd adds them to
the other gradients of x in the order it did before.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def gate_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) over the last dimension; ``_GateRMS`` where autograd would otherwise decompose ATen's norm (a
    CPU tensor in fp32 or fp64 that needs a gradient, eager), else ``F.rms_norm`` as before."""
    if (x.requires_grad and torch.is_grad_enabled() and x.device.type == "cpu"
            and x.dtype in (torch.float32, torch.float64) and not torch.compiler.is_compiling()):
        return _GateRMS.apply(x, x, eps)
    return F.rms_norm(x, (x.shape[-1],), eps=eps)


class _GateRMS(torch.autograd.Function):
    """y = x · r,  r = (mean(x²) + eps)^{-1/2}; x is passed twice (see the module's docstring)."""

    @staticmethod
    def forward(ctx, x, x_again, eps):
        # ATen's composite, op for op (aten/src/ATen/native/layer_norm.cpp, rms_norm_composite), so y is its
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True).add_(eps))
        ctx.save_for_backward(x, r)
        return x.mul(r)

    @staticmethod
    def backward(ctx, grad):
        x, r = ctx.saved_tensors
        through_product = grad * r  # MulBackward0's gradient of x
        grad_r = (grad * x).sum(-1, keepdim=True)  # ... and of r, summed to its shape
        grad_mean = -0.5 * grad_r * r.pow(3)  # RsqrtBackward0; the eps's add passes it on
        # MeanBackward1 (expand, / d) and PowBackward0 (· 2x), per token first: the same numbers, one pass
        through_square = x * (grad_mean / x.shape[-1] * 2.0)
        return through_product, through_square, None
