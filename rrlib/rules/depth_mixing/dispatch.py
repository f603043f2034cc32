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


def kernels_for(*tensors: torch.Tensor):
    """rrlib.rules.native's CPU kernels where they apply to ``tensors`` (all contiguous fp32 or fp64 on the CPU, one
    dtype), else None: the PyTorch form, which computes the same formula (CUDA, bf16, or no kernels built)."""
    if not all(t.device.type == "cpu" and t.dtype in _KERNEL_DTYPES and t.dtype == tensors[0].dtype
               and t.is_contiguous() for t in tensors):
        return None
    return native.kernels()
