"""CPU kernels for the multi-stream rules (HC, mHC, MGR) in ``stream_ops.cpp``, built on first use with the
system's C++ compiler and registered as operators (``torch.ops.rrlib_native``).

``kernels()`` returns those operators, or None where they cannot be built (no compiler or ninja) or
``RRLIB_NATIVE=0`` is set; the callers (rrlib.rules.depth_mixing) then run the same formulas as PyTorch
operations, so a rule computes the same numbers either way, to rounding (tests/test_native.py compares the two).
They run on CPU tensors only; CUDA always takes the PyTorch path. The build takes about 15 s once and is cached
by PyTorch (``TORCH_EXTENSIONS_DIR``, by default under ``~/.cache/torch_extensions``), keyed by the source and
flags, so a changed kernel is rebuilt. Imports nothing of rrlib's.
"""
from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

SOURCE = Path(__file__).with_name("stream_ops.cpp")


def enabled() -> bool:
    """False when ``RRLIB_NATIVE=0``: the PyTorch path only, e.g. to compare the two."""
    return os.environ.get("RRLIB_NATIVE", "1") != "0"


@functools.cache
def _build():
    import torch
    from torch.utils.cpp_extension import load
    try:
        # -march=native: the build is made on, and cached for, the machine that runs it; 256-bit vectors: the
        # rows here are short (d = 64–300), and AVX-512's remainder loops made them up to 2× slower
        load(name="rrlib_stream_ops", sources=[str(SOURCE)],
             extra_cflags=["-O3", "-fopenmp-simd", "-march=native", "-mprefer-vector-width=256"],
             is_python_module=False, verbose=False)
        _register_flop_formulas(torch.ops.rrlib_native)
        return torch.ops.rrlib_native
    except Exception as error:  # no compiler or ninja, or a failed build: fall back, and say so once
        warnings.warn(f"rrlib's CPU kernels could not be built ({type(error).__name__}: {error}); the "
                      "multi-stream rules run as PyTorch operations, with the same numbers and slower",
                      stacklevel=3)
        return None


def _register_flop_formulas(ops) -> None:
    """The contractions of the kernels that rrlib calls directly, for torch's FLOP counter (the others run
    inside rrlib's own operators, which carry their formulas). MGR's: per token and stream, the gate's and the
    pool's scores and the pool's weighted sum are d multiply-adds each (the pool alone: two); a backward pass
    costs twice its forward."""
    from torch.utils.flop_counter import register_flop_formula

    def contractions(per_row):
        def flops(streams_shape, *args, out_shape=None, **kwargs) -> int:
            return 2 * per_row * streams_shape[0] * streams_shape[1] * streams_shape[2]
        return flops

    register_flop_formula(ops.mgr_gate_pool)(contractions(3))
    register_flop_formula(ops.mgr_pool)(contractions(2))
    register_flop_formula(ops.mgr_pool_backward)(lambda grad, streams, *a, **k: 2 * contractions(2)(streams))
    register_flop_formula(ops.mgr_gate_pool_backward)(
        lambda grad_streams, *a, **k: 2 * contractions(3)(grad_streams))

    # HC's and mHC's read and write (N, n, d): n·d multiply-adds per token, the write's n² · d, as
    # rrlib.rules.depth_mixing.streams' operators count them
    def read(weights_shape, streams_shape, *args, out_shape=None, **kwargs) -> int:
        return 2 * streams_shape[0] * streams_shape[1] * streams_shape[2]

    def write(mix_shape, streams_shape, *args, out_shape=None, **kwargs) -> int:
        return read(None, streams_shape) * mix_shape[-1]

    register_flop_formula(ops.stream_read)(read)
    register_flop_formula(ops.stream_write)(write)
    register_flop_formula(ops.stream_read_backward)(lambda grad, weights, streams, *a, **k: 2 * read(weights, streams))
    register_flop_formula(ops.stream_write_backward)(
        lambda grad, mix, streams, *a, **k: 2 * write(mix, streams))


def kernels():
    """The compiled kernels, or None (not built here, or turned off by ``RRLIB_NATIVE=0``)."""
    return _build() if enabled() else None
