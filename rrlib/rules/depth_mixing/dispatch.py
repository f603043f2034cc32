"""How depth mixing runs: in the stream's dtype (autocast off), and through rrlib.rules.native's CPU kernels where
they apply, else as the PyTorch operations that compute the same formulas."""
from __future__ import annotations

import torch

from .. import native

_KERNEL_DTYPES = (torch.float32, torch.float64)


def full_precision(x: torch.Tensor):
    """Autocast off, so depth mixing runs in the stream's dtype: fp32 under bf16 autocast, as the standard
    residual's h + u does. The products are small, and autocast would first copy the sources to bf16."""
    return torch.autocast(x.device.type, enabled=False)


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in fp32, or in its own dtype where that is wider: mHC's weights and Sinkhorn never run below fp32
    (bf16's 8 mantissa bits would put every normalised sum off by up to 0.4%), and an fp64 model stays fp64,
    so that its weights meet its fp64 streams in the write."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def kernels_for(*tensors: torch.Tensor):
    """rrlib.rules.native's CPU kernels where they apply to ``tensors`` (all contiguous fp32 or fp64 on the CPU, one
    dtype), else None: the PyTorch form, which computes the same formula (CUDA, bf16, or no kernels built)."""
    if not all(t.device.type == "cpu" and t.dtype in _KERNEL_DTYPES and t.dtype == tensors[0].dtype
               and t.is_contiguous() for t in tensors):
        return None
    return native.kernels()
