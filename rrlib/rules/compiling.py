"""``torch.compile`` once per function in a process: what the model's residual steps, the chunked loss and the
multi-stream rules' depth mixing are compiled through (``GPT.compile_steps``)."""
from __future__ import annotations

import functools

import torch


def compiled(fn, backend: str = "inductor"):
    """``fn`` under torch.compile, one compiled function per (fn, backend) in the process.

    Dynamo keeps its graphs per code object: every sublayer, seed and depth of a rule shares the entries of
    ``residual_step`` (one per sublayer kind, grad mode and input shape), and each further rule adds its own.
    The default limit of 8 entries would send a process that runs the 11-rule family silently back to eager,
    so the limit is raised here, and hitting it raises instead of falling back.
    """
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 256)
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    return _compiled(fn, backend)


@functools.cache
def _compiled(fn, backend):
    return torch.compile(fn, backend=backend, dynamic=False)
