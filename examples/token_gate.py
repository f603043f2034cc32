r"""A rule of one's own, judged by ``rrlib compare``: Review's gate with one value per token instead of one per
channel.

    h ─────────────────────────(+)── h'       h' = h + r · u
      ├─ norm ─ f ─ u ──(·)────┘              r  = σ(w_r · [rms(h); rms(u)] + b_r)   (a scalar per token)
      └──────── gate(h, u) ─ r                w_r ∈ R^{2d}, b_r ∈ R, both zero at init (r = 0.5)

Why this one. Review's gate is a d × 2d matrix per sublayer: by the paper's own code 14–23 % of all parameters
at its sizes. If what helps is *how much* of each proposal is committed, token by token, one number per token
would do, at 2d + 1 parameters a sublayer; if it is *which channels*, this rule falls behind Review. So it asks
how much of Review's gain its per-channel gate buys, with Review and the standard residual as the two baselines:

    python -m rrlib compare --rules examples/token_gate.py --variants token_gate --against standard,review \
        --size family --seeds 5 --out examples/token_gate

Like every rule, it is parameter-matched by width to Review (rrlib.runs.presets.match_params), so it trains
at a wider d_model than Review and answers "at equal parameters", as the paper compares its baselines.
"""
import torch
from torch import nn

from rrlib import ResidualRule, StreamShape, register
from rrlib.rules.protocol import rms


@register("token_gate")
class TokenGate(ResidualRule):
    """Review's gate with one scalar per token: h + σ(w·[rms(h); rms(u)] + b)·u, w and b zero at init."""

    def __init__(self, shape: StreamShape):
        super().__init__(shape)
        self.gates = nn.ModuleList(nn.Linear(2 * shape.d_model, 1) for _ in range(shape.n_unique))

    def reset_parameters(self):
        for gate in self.gates:  # r = 0.5 at init, as Review's neutral start
            nn.init.zeros_(gate.weight)
            nn.init.zeros_(gate.bias)

    def step_params(self, i):
        return (self.gates[self.shape.unique(i)],)

    def commit(self, h, u, gate):
        return h + torch.sigmoid(gate(torch.cat([rms(h), rms(u)], dim=-1))) * u
