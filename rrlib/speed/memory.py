"""Peak tensor memory of a piece of work on any device, CPU included, where no allocator keeps statistics.

``peak_tensor_bytes(fn)`` runs ``fn`` under a dispatch mode that sees every tensor an operator returns, forward
and backward. Each storage allocated during ``fn`` counts from the operator that made it until it is freed (a
weak reference's callback); the result is the highest total reached, so memory held before ``fn`` (parameters,
optimizer state, the batch) is not counted and what ``fn`` frees again still counts at its peak. It counts
tensor storages only: no allocator rounding or caching, no interpreter memory. Kernels that bypass the
dispatcher (a ``torch.compile``'d graph) are not seen, so it measures eager code.
"""
from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class _StorageTracker(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}  # data pointer -> bytes, for storages made under the mode and not yet freed
        self.refs: list = []
        self.current = 0
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._track(t.untyped_storage())
        return out

    def _track(self, storage) -> None:
        key, size = storage.data_ptr(), storage.nbytes()
        if size == 0 or key in self.live:  # a view or an in-place result: its storage is already counted
            return
        self.live[key] = size
        self.current += size
        self.peak = max(self.peak, self.current)
        self.refs.append(weakref.ref(storage, lambda _, key=key: self._free(key)))

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)


def peak_tensor_bytes(fn) -> int:
    """The peak bytes of tensor storage that ``fn()`` allocated and held at once."""
    tracker = _StorageTracker()
    with tracker:
        fn()
    return tracker.peak
