"""The C library's allocator in a CPU run: freed memory kept for the next step instead of handed back.

glibc's malloc serves a block larger than its mmap threshold from ``mmap`` and unmaps it when it is freed, and
gives the top of its heap back to the kernel once more than its trim threshold is free there. Both thresholds
start at 128 KiB and only creep upwards as blocks are freed. A training step frees its activations at its end
and allocates the same sizes again in the next, so each page handed back is faulted in and zeroed by the kernel
once a step. At the ``family`` size on one thread that was 2,740 page faults a step for the standard residual
(4.3 ms of a 107 ms step, in system time) and about as many for HC; where several models share a process (the
benchmark's interleaved rounds) which of them pays depends on the order of their frees, and the one that did
(HC: 2,700 a step, 4 ms) carried a cost the others did not. With the thresholds fixed (blocks up to 32 MiB from
the heap, the heap's free top kept up to 1 GiB) the standard residual's step took 101 ms with 46 faults and HC's
136 against 143 ms. Numbers are unchanged: this is where memory comes from, not what is computed in it.

The setting is the process's, made once by the commands that train or time a CPU step (rrlib.runs.train,
rrlib.speed.bench); a process on another C library (musl, macOS) or with another allocator preloaded is left as
it is.
"""
from __future__ import annotations

import ctypes
import functools
import platform

# mallopt's parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest on 64-bit (HEAP_MAX_SIZE / 2); larger blocks still come from mmap
TRIM_THRESHOLD = 2**30  # the most free memory at the heap's top kept for later steps


@functools.cache
def keep_freed_memory() -> bool:
    """Fix glibc's thresholds as above; True where they were set (glibc answered both calls), else False."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
