r"""Rules that also reach into attention: each attention sublayer's values pass through the rule before they are
attended (value residual learning). The one extension of the stream protocol, and the rule that uses it.

The protocol (rrlib.rules.protocol) sees a sublayer only through its input and its output. A ``ValueMixingRule``
also gives each attention sublayer a function of its values::

    h_in = rule.read(state, i)
    u    = sub(norm_i(h_in), rule.values(state, i))   # attention sublayers: v ↦ rule.values(state, i)(v)
    state = rule.write(state, i, u)

The model passes it only to attention sublayers and only for rules of this class; every other rule's forward is
the protocol's, call for call (tests/test_dense_and_value_rules.py checks every registered rule's output against the
protocol written out, bitwise).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from .protocol import ConfigError, ResidualRule, StreamShape, register


class ValueMixingRule(ResidualRule):
    """A rule whose attention sublayers attend over values it has seen: ``values(state, i)`` is applied to sublayer
    i's values v (B, heads, T, head dim) after the qkv projection, before attention."""

    @property
    def commits(self) -> bool:
        """Never: the model's fused (sublayer, commit) step passes no ``values`` to the attention."""
        return False

    def values(self, state, i: int) -> Callable[[torch.Tensor], torch.Tensor]:
        raise NotImplementedError


class _FirstValues:
    """The first attention's values. Mutable, because they are made inside a sublayer call (between ``read`` and
    ``write``), which returns only the sublayer's output; one holder per forward pass (``begin``)."""

    def __init__(self, weight: float):
        self.weight, self.first = weight, None

    def keep(self, v: torch.Tensor) -> torch.Tensor:
        self.first = v
        return v

    def mix(self, v: torch.Tensor) -> torch.Tensor:
        return self.weight * self.first + (1 - self.weight) * v


class _ValueStream(NamedTuple):
    h: torch.Tensor
    values: _FirstValues


@register("value_residual")
class ValueResidual(ValueMixingRule):
    r"""Value residual learning, ResFormer (Zhou et al., arXiv:2410.17897): every attention after the first attends
    over its own values mixed with the first attention's.

        V_n' = λ·V_1 + (1 − λ)·V_n        n ≥ 2 (attention sublayers in order),  λ = ``first_weight`` = 0.5
        h'   = h + u                        (the residual stream is the standard one)

        attn_1 ── V_1 ──────────────┐
        attn_n ── V_n ── (1−λ)V_n + λV_1 ── softmax(QKᵀ)·V'

    V is the value projection's output with its bias (rrlib's qkv is biased), per head, before attention. A looped
    model mixes V_1 of the first step into every later attention, later loops' included.

    Against the authors' code (github.com/Zcchill/Value-Residual-Learning at 95652f6,
    ``src/modeling/modeling_llama_resformer.py`` l. 377–381, the eager and flash attention alike): the first
    layer's ``v_proj`` output is kept and every later layer uses ``0.5*formal_layer_values[0] + 0.5*value_states``,
    as here with λ = 0.5 (the same expression, operand for operand). Reference equality: its ``LlamaAttention``
    (eager) in place of each attention of this model, at copied weights in float64, rotary embedding off (cos 1,
    sin 0; this model has learned absolute positions), its fp32 softmax upcast lifted (a bf16 training choice
    that would cap a float64 comparison at fp32's precision): logits and every attention weight's gradient agree
    to 7.3e-16 relative (max |difference| over max |reference| per tensor). The module imports ``transformers``,
    which the comparison does not run; tests/test_dense_and_value_rules.py stubs it and repeats the comparison where
    ``$RRLIB_REFERENCE_CODE`` holds the snapshot.

    Cost: one elementwise mix per attention, no weights (no FLOPs by the model's convention).
    """

    def __init__(self, shape: StreamShape, first_weight: float = 0.5):
        super().__init__(shape)
        if isinstance(first_weight, bool) or not isinstance(first_weight, (int, float)) or not 0 <= first_weight <= 1:
            raise ConfigError(f"first_weight must be a number from 0 to 1, got {first_weight!r}")
        self.first_weight = float(first_weight)

    def begin(self, x0):
        return _ValueStream(x0, _FirstValues(self.first_weight))

    def read(self, state, i):
        return state.h

    def values(self, state, i):
        return state.values.keep if i == 0 else state.values.mix

    def write(self, state, i, u):
        return state._replace(h=state.h + u)

    def end(self, state):
        return state.h
