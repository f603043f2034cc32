r"""LAuReL, the Learned Augmented Residual Layer (Menghani, Kumar, Kumar; arXiv:2411.07501, ICML 2025): the
identity path of each sublayer is replaced by a learned linear map of the state,

    h' = α·u + g(h)

in two of the paper's versions (its third, LAuReL-PA, mixes earlier activations through a low-rank map and is
not here):

    laurel_rw   h' = α·u + β·h              α, β learned scalars per sublayer, 1 at init
    laurel_lr   h' = u + h + B(A h)         A ∈ R^{r×d}, B ∈ R^{d×r} per sublayer, rank r (``rank``)

No public code of the paper: its authors (Google Research) have not released their implementation, so the
equations are tested on constructed cases (tests/test_dense_and_value_rules.py). The nearest public code is a production
model's: Gemma 3n's model code has a LAuReL-LR block, with a normalisation after the low-rank map and used beside
the attention sublayer, a different form from the paper's equation; it is not compared against. Both rules start
exactly as the standard residual.
"""
from __future__ import annotations

import torch
from torch import nn

from .cross_depth import positive_int
from .protocol import INIT_STD, ResidualRule, StreamShape, register


@register("laurel_rw")
class LaurelRW(ResidualRule):
    r"""LAuReL-RW, the residual-weights version: h' = α·u + β·h, one learned (α, β) per sublayer.

        h ──(×β)──────────────(+)── h'
          └─ norm ─ f ─ u ─(×α)─┘

    Init α = β = 1 (the standard residual). Choice: α and β are used as they are, not normalised (the text we
    could read writes the formula with free scalars; a softmax over (α, β) would start at h/2 + u/2, which is
    not the standard residual and halves the embedding at every sublayer, the convex form's failure).
    """

    def __init__(self, shape: StreamShape):
        super().__init__(shape)
        self.weights = nn.Parameter(torch.empty(shape.n_unique, 2))  # (α, β)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.weights)

    def step_params(self, i):
        return (self.weights[self.shape.unique(i)],)

    def commit(self, h, u, weights):
        return weights[0] * u + weights[1] * h


@register("laurel_lr")
class LaurelLR(ResidualRule):
    r"""LAuReL-LR, the low-rank version: h' = u + h + B(A h), so the identity path is (I + BA) h.

        h ──┬─────────────────(+)── h'
            ├─ A ─ B ─────────(+)
            └─ norm ─ f ─ u ───┘

    A ∈ R^{r×d}, B ∈ R^{d×r} per sublayer, no biases. Init (a choice; the paper's text on it was not available
    here): A ~ N(0, 0.02) like every other linear, B = 0, so BA = 0 (the standard residual) and B gets a gradient
    from the first step. Rank 4 by default (r ≪ d, as the paper's; at the ``family`` width d ≈ 64 it adds 2·4·d
    weights per sublayer). FLOPs: 2·r·d multiply-adds per token per sublayer, the two linears.
    """

    def __init__(self, shape: StreamShape, rank: int = 4):
        super().__init__(shape)
        self.rank = positive_int("rank", rank)
        self.down = nn.ModuleList(nn.Linear(shape.d_model, rank, bias=False) for _ in range(shape.n_unique))  # A
        self.up = nn.ModuleList(nn.Linear(rank, shape.d_model, bias=False) for _ in range(shape.n_unique))  # B
        self.reset_parameters()

    def reset_parameters(self):
        for down, up in zip(self.down, self.up):
            nn.init.normal_(down.weight, 0.0, INIT_STD)
            nn.init.zeros_(up.weight)

    def step_params(self, i):
        k = self.shape.unique(i)
        return self.down[k], self.up[k]

    def commit(self, h, u, down, up):
        return h + u + up(down(h))
