"""CPU kernels for the multi-stream rules (HC, mHC, MGR) and Review's gate in ``stream_ops.cpp``, built on first use
with the system's C++ compiler and registered as operators (``torch.ops.rrlib_native``).

``kernels()`` returns those operators, or None where they cannot be built (no compiler or ninja) or
``RRLIB_NATIVE=0`` is set; the callers (rrlib.rules.depth_mixing, rrlib.rules.review_gate) then run the
same formulas as PyTorch operations, so a rule computes the same numbers either way, to rounding
(tests/test_native.py compares the two). They run on CPU tensors only; CUDA always takes the PyTorch path. The
build takes about 15 s once and is cached by PyTorch (``TORCH_EXTENSIONS_DIR``, by default under
``~/.cache/torch_extensions``), keyed by the source and flags, so a changed kernel is rebuilt. The flags say
``-march=native`` on every machine, so the build's name (its folder's) carries a hash of what that stands for
here (``build_name``): nodes of a cluster that share a home keep one build per kind of CPU, and none loads
another kind's (an AVX-512 build on an AVX2 node stops at its first illegal instruction). Imports nothing of
rrlib's.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shlex
import subprocess
import warnings
from pathlib import Path

SOURCE = Path(__file__).with_name("stream_ops.cpp")


@functools.cache
def native_target() -> tuple[str, ...]:
    """The target flags ``-march=native`` stands for on this machine, as the C++ compiler that builds the kernels
    expands them (``-###`` prints the command line of the compiler proper). Raises where it cannot be run."""
    compiler = os.environ.get("CXX", "c++")  # the one torch.utils.cpp_extension builds with
    driver = subprocess.run([compiler, "-march=native", "-###", "-E", "-x", "c++", os.devnull],
                            capture_output=True, text=True, timeout=60)
    flags = target_flags(driver.stderr)
    if not flags:
        raise RuntimeError(f"`{compiler} -march=native -###` did not say which CPU it targets")
    return flags


def target_flags(driver_output: str) -> tuple[str, ...]:
    """The target flags in a compiler driver's ``-###`` output: GCC's ``-march=<cpu>``, one ``-m<extension>`` or
    ``-mno-<extension>`` for each instruction-set extension it knows, its cache-size ``--param``s and ``-mtune``;
    clang's ``-target-cpu``, ``-target-feature ±<extension>`` and ``-tune-cpu``. Empty if it names no CPU."""
    for line in driver_output.splitlines():
        words = shlex.split(line)
        pairs = list(zip(words, words[1:]))
        if "-target-cpu" in words:  # clang
            return tuple(f"{w} {v}" for w, v in pairs if w in ("-target-cpu", "-target-feature", "-tune-cpu"))
        if any(w.startswith("-march=") and w != "-march=native" for w in words):  # GCC
            return tuple([w for w in words if w.startswith("-m")] + [f"--param {v}" for w, v in pairs
                                                                      if w == "--param"])
    return ()


def target_isa() -> dict:
    """``native_target`` for a reader: the CPU it names and the extensions it turns on."""
    flags = native_target()
    march = next(f.split("=", 1)[1] if "=" in f else f.split()[1] for f in flags
                 if f.startswith(("-march=", "-target-cpu")))
    on = [f[2:] for f in flags if f.startswith("-m") and not f.startswith(("-mno-", "-march=", "-mtune="))]
    on += [f.split()[1][1:] for f in flags if f.startswith("-target-feature +")]
    return {"march": march, "extensions": sorted(on)}


def build_name() -> str:
    """The build's name, and its folder's: the kernel's name and a hash of ``native_target``."""
    return "rrlib_stream_ops_" + hashlib.sha256("\n".join(native_target()).encode()).hexdigest()[:12]


def enabled() -> bool:
    """False when ``RRLIB_NATIVE=0``: the PyTorch path only, e.g. to compare the two."""
    return os.environ.get("RRLIB_NATIVE", "1") != "0"


@functools.cache
def _build():
    import torch
    from torch.utils.cpp_extension import load
    try:
        # -march=native: the build is made on, and cached for, the kind of CPU that runs it; 256-bit vectors: the
        # rows here are short (d = 64–300), and AVX-512's remainder loops made them up to 2× slower
        load(name=build_name(), sources=[str(SOURCE)],
             extra_cflags=["-O3", "-fopenmp-simd", "-march=native", "-mprefer-vector-width=256"],
             is_python_module=False, verbose=False)
        _register_flop_formulas(torch.ops.rrlib_native)
        return torch.ops.rrlib_native
    except Exception as error:  # no compiler or ninja, or a failed build: fall back, and say so once
        warnings.warn(f"rrlib's CPU kernels could not be built ({type(error).__name__}: {error}); the "
                      "multi-stream rules and Review's gate run as PyTorch operations, with the same numbers and "
                      "slower",
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

    def hyper_step(streams_shape, mix_shape, write_shape, u_shape, weight_shape, *args, out_shape=None, **kwargs):
        # HC's and mHC's step forward: the write where there is one, the projection of the streams' rows (each
        # of the weight's k rows meets every entry of the streams once) and the read; the weights made from
        # the projection (tanh, sigmoids, Sinkhorn) are not contractions
        written = 0 if mix_shape is None else write(mix_shape, streams_shape)
        projection = 2 * streams_shape[0] * streams_shape[1] * streams_shape[2] * weight_shape[0]
        return written + projection + read(None, streams_shape)

    register_flop_formula(ops.hc_step)(hyper_step)
    register_flop_formula(ops.mhc_step)(hyper_step)
    register_flop_formula(ops.stream_read_backward)(lambda grad, weights, streams, *a, **k: 2 * read(weights, streams))
    register_flop_formula(ops.stream_write_backward)(
        lambda grad, mix, streams, *a, **k: 2 * write(mix, streams))


def kernels():
    """The compiled kernels, or None (not built here, or turned off by ``RRLIB_NATIVE=0``)."""
    return _build() if enabled() else None
