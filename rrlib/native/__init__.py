"""The multi-stream rules' CPU kernels (``stream_ops.cpp``), built on first use with the system's C++ compiler.

``kernels()`` returns the compiled module, or None where it cannot be built (no compiler, or
``RRLIB_NATIVE=0`` in the environment); rrlib.depth_mixing then runs the same formulas as PyTorch operations,
so a rule's numbers never depend on whether it was built (tests/test_native.py compares the two). The build
takes about a minute once and is cached by PyTorch (``TORCH_EXTENSIONS_DIR``, by default under
``~/.cache/torch_extensions``), keyed by the source, so a changed kernel is rebuilt.
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
        return torch.ops.rrlib_native
    except Exception as error:  # no compiler or ninja, or a failed build: fall back, and say so once
        warnings.warn(f"rrlib's CPU kernels could not be built ({type(error).__name__}: {error}); the "
                      "multi-stream rules run as PyTorch operations, with the same numbers and slower",
                      stacklevel=3)
        return None


def kernels():
    """The compiled kernels, or None (not built here, or turned off by ``RRLIB_NATIVE=0``)."""
    return _build() if enabled() else None
