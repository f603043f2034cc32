"""rrlib.runs.allocator: a CPU run's freed memory is kept by glibc's malloc for the next step."""
import os
import platform
import subprocess
import sys

import pytest

# in a child process, so the setting does not outlive the test: three 20 MiB blocks written, freed, five times;
# glibc's own thresholds hand them back each time (each round faults all 15,360 pages in again)
ROUNDS = """
import ctypes, resource, sys
from rrlib.runs.allocator import keep_freed_memory
kept = sys.argv[1] == "keep" and keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes, libc.memset.argtypes = (ctypes.c_void_p,), (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
faults = []
for _ in range(5):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc(20 * 2**20) for _ in range(3)]
    for block in blocks:
        libc.memset(block, 1, 20 * 2**20)
    for block in blocks:
        libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(kept, *faults)
"""

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="the setting is glibc's malloc's")


def rounds(mode: str) -> tuple[bool, list[int]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}  # glibc's defaults, as a user's
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True,
                         env=env).stdout
    kept, *faults = out.split()
    return kept == "True", [int(f) for f in faults]


@glibc
def test_freed_blocks_are_reused_without_page_faults():
    kept, faults = rounds("keep")
    pages = 3 * 20 * 2**20 // 4096
    assert kept
    assert faults[0] >= pages // 2  # the first round takes its pages from the kernel
    assert sum(faults[1:]) < pages // 20  # the later ones reuse them


@glibc
def test_without_the_setting_the_same_rounds_fault_again():
    # the pattern above is one glibc's defaults hand back: without this the first test would prove nothing
    kept, faults = rounds("as found")
    assert not kept and sum(faults[1:]) > 2 * 3 * 20 * 2**20 // 4096


def test_elsewhere_nothing_is_set(monkeypatch):
    from rrlib.runs import allocator
    allocator.keep_freed_memory.cache_clear()
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))
    try:
        assert allocator.keep_freed_memory() is False
    finally:
        allocator.keep_freed_memory.cache_clear()
