r"""Residual rules that route across depth: the state carries several sources or streams. This module holds what
they share (``CrossDepthRule``); the rules are rrlib.rules.attention_residuals' (the AttnRes family) and
rrlib.rules.multi_stream's (MGR, HC, mHC).

| rule                  | paper (arXiv)                                | state                      | sublayer reads  |
|-----------------------|----------------------------------------------|----------------------------|-----------------|
| `attnres`             | Attention Residuals, Kimi Team, 2603.15031   | every earlier output       | softmax mix     |
| `attnres_block`       | the same, Block AttnRes                      | block sums, the open block | softmax mix     |
| `delta_attnres`       | Delta Attention Residuals, 2605.18855        | h, every earlier output    | h + softmax mix |
| `delta_attnres_block` | the same, Block Delta AttnRes                | h, block deltas            | h + softmax mix |
| `mgr`                 | Multi-Gate Residuals, 2605.23259             | n gated streams            | attention pool  |
| `hc`                  | Hyper-Connections, 2409.19606                | n×d hyper-hidden H         | A_mᵀ H          |
| `mhc`                 | Manifold-Constrained Hyper-Conn., 2512.24880 | n×d streams x              | H_pre x         |

Choices shared by every rule here:

- Scores read the parameter-free ``rms``. The papers put an RMSNorm (HC's paper: a LayerNorm) in front of a
  learned read-out w or φ; a gain g there is a reparametrisation, (g ⊙ k)ᵀw = kᵀ(g ⊙ w), that adds d
  parameters per sublayer and no function the model could not already express. Its eps is 1e-5 inside the
  root (``RMS_EPS``) for every rule; the reference codes differ (each rule's docstring names the source):
  the Delta AttnRes code 1e-6, lucidrains' HC 1e-12 on the L2 norm, DeepSeek's mHC code 1e-6 (and the mHC
  paper's table 1e-20). The difference shows where a source's mean square is small against the eps: the
  embedding at init (rms 0.028) gets scores 0.6% smaller in magnitude here than with 1e-6, an output of rms 1
  by 5e-6.
- Parameters are stacked over the unique sublayers and picked with ``shape.unique(i)``, so a looped model keeps
  the count of its L unique layers while the number of sources grows with the step index. A few rows are
  never read by an unlooped model (named per rule; a looped model reads them in its later loops), but every
  parameter tensor takes part in every forward pass, as DDP without unused-parameter search requires.
- Depth mixing runs with autocast off (``full_precision``), so the stream keeps its dtype (fp32 under bf16
  autocast) exactly as the standard h + u does.
- ``matmul_weights`` counts the multiply-adds per token of every contraction a rule performs: weights against
  activations (queries, projections) and the weighted sums over sources or streams, which the model's FLOP
  convention also counts for sequence attention. Elementwise gates, norms, softmax, sigmoid and Sinkhorn are
  not counted. Where the sources grow from loop to loop the per-loop average is reported (rounded).
"""
from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from .compiling import compiled
from .depth_mixing.dispatch import kernels_for
from .protocol import ConfigError, ResidualRule, StreamShape


def positive_int(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive whole number, got {value!r}")
    return value


class CrossDepthRule(ResidualRule):
    """What the rules below share: FLOP accounting, ``step_macs(i)`` per step (``i = n_steps`` for ``end``), and
    the ``recompute`` option.

    ``recompute=True`` runs each step's depth mixing under activation checkpointing (``mixing``): its
    intermediates (softmax weights, gates, mHC's 40 Sinkhorn iterates) are recomputed in the backward pass
    instead of kept. Off by default: the sources and streams themselves are kept either way (they are the
    state), so it only pays where those intermediates are large; the benchmark measures the saving.
    """

    def __init__(self, shape: StreamShape, recompute: bool = False):
        super().__init__(shape)
        self.recompute = recompute
        self.mixing_backend = None  # set by compile_writes

    def compile_writes(self, backend: str) -> None:
        self.mixing_backend = backend

    def form(self, dispatching, plain, streams: torch.Tensor):
        """The function a step's depth mixing on ``streams`` calls: ``dispatching`` (rrlib.rules.native's CPU
        kernels where they apply, else ``plain``), or once ``compile_writes`` has run and no CPU kernel applies
        (a GPU), ``plain`` (the same formula as PyTorch operations) under torch.compile: its arguments are tensors
        and constants, never the step index, so its graphs (one per shape and grad mode) serve every step at any
        depth. Where the kernels run, compiling would only break its graph around them."""
        if self.mixing_backend is None or kernels_for(streams) is not None:
            return dispatching
        return compiled(plain, self.mixing_backend)

    def mixing(self, fn, *args):
        """fn(*args), under ``torch.utils.checkpoint`` with ``recompute`` while gradients are recorded."""
        if self.recompute and torch.is_grad_enabled():
            return checkpoint(fn, *args, use_reentrant=False)
        return fn(*args)

    def step_macs(self, i: int) -> int:
        raise NotImplementedError

    def matmul_weights(self) -> int:
        """Multiply-adds per token of one loop (the model multiplies by n_loops); averaged over the loops."""
        total = sum(self.step_macs(i) for i in range(self.shape.n_steps + 1))
        return round(total / self.shape.n_loops)
