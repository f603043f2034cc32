r"""Dense connections over depth: after each transformer block the stream is replaced by a weighted average of
the embedding and every block output so far, with static weights (DenseFormer) or per-token weights a small
network reads off the newest output (MUDDFormer's dynamic dense connection). What the cross-depth rules share is
rrlib.rules.cross_depth's.

Both rules work on transformer blocks (attention then MLP, a standard residual inside), as both papers do: the
average runs after every second sublayer. X_0 = x0 and X_{b+1} is the output of block b, which includes the
block's input (Y_b + attention + MLP); a looped model counts its applied blocks.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .cross_depth import CrossDepthRule, positive_int
from .depth_mixing.attention import depth_mix
from .depth_mixing.dispatch import full_precision
from .protocol import INIT_STD, ConfigError, StreamShape, register, rms


class _Dense(NamedTuple):
    h: torch.Tensor  # the stream inside the open block
    outputs: list  # X_0 = x0, then every finished block's output


def weighted_sum(weights: torch.Tensor, sources: list) -> torch.Tensor:
    r"""\sum_s weights[..., s] · sources[s]: the per-token weighted sum of the AttnRes reads (``depth_mix``), which
    a weight vector shared by every token (DenseFormer's) reaches as an expanded view."""
    return depth_mix(weights.expand(*sources[0].shape[:-1], len(sources)), sources)


class _DenseOverBlocks(CrossDepthRule):
    """What both rules share: the standard residual inside a block, and after the block's MLP the stream replaced by
    ``average(outputs, b)`` over the outputs of the block's group (``sources``)."""

    def __init__(self, shape: StreamShape, recompute: bool = False):
        super().__init__(shape, recompute)
        self.n_blocks = shape.n_layers * shape.n_loops  # applied blocks: each has its own weights

    def begin(self, x0):
        return _Dense(x0, [x0])

    def read(self, state, i):
        return state.h

    def write(self, state, i, u):
        h = state.h + u
        if i % 2 == 0:  # the block's attention: its MLP follows
            return state._replace(h=h)
        block, outputs = i // 2, state.outputs + [h]
        if not self.averages_after(block):
            return _Dense(h, outputs)
        with full_precision(h):
            return _Dense(self.mixing(self.average, self.sources(outputs, block), block), outputs)

    def end(self, state):
        return state.h

    def averages_after(self, block: int) -> bool:
        return True

    def sources(self, outputs: list, block: int) -> list:
        return outputs

    def average(self, sources: list, block: int) -> torch.Tensor:
        raise NotImplementedError

    def n_sources(self, block: int) -> int:
        """Sources of the average after ``block``."""
        return block + 2


@register("denseformer")
class DenseFormer(_DenseOverBlocks):
    r"""DenseFormer (Pagliardini et al., arXiv:2402.02622): a depth-weighted average (DWA) after every block.

        Y_b = \sum_{j ∈ J_b} α_{b,j} X_j,    J_b = {j ≤ b + 1 : j ≡ b + 1 (mod k)}     (k = ``dilation``)
        X_0 = x0,  X_{b+1} = Y_b' + attn + mlp  (block b on its input Y_b', the previous DWA's output)

        x0 ──┬── block 0 ── X_1 ──┬── DWA_0 ── block 1 ── X_2 ──┬── DWA_1 ── … ── head
             └────────────────────┴─────────────────────────────┘

    One static scalar per (block, source), α_{b,b+1} = 1 and the rest 0 at init, so the model starts exactly as
    the standard residual. With ``period`` p a DWA follows only blocks b with (b + 1) mod p = 0 (the paper's
    DenseFormer k×p); the defaults k = p = 1 are its plain DenseFormer. The last block's DWA feeds the head.
    Weights are per applied block (a looped model has one set per block of every loop: the sources grow with
    depth, so no set could be shared).

    Reference equality: against ``denseformer/denseformer.py`` (``DWAModules``) of github.com/epfml/DenseFormer at
    c99a623, driven by this model's blocks at copied weights in float64 (the rule's ``alphas[b]`` is the code's
    ``alphas[b].weight``), for k, p ∈ {(1, 1), (2, 1), (2, 2)}: logits and every parameter's gradient agree to
    8.2e-16 relative (the largest of the three; max |difference| over max |reference| per tensor), unlooped.
    tests/test_dense_and_value_rules.py repeats it where ``$RRLIB_REFERENCE_CODE`` holds that snapshot.
    """

    def __init__(self, shape: StreamShape, dilation: int = 1, period: int = 1, recompute: bool = False):
        super().__init__(shape, recompute)
        self.dilation, self.period = positive_int("dilation", dilation), positive_int("period", period)
        beyond = [f"{name} {value}" for name, value in (("dilation", dilation), ("period", period))
                  if value > self.n_blocks]
        if beyond:  # no average at all, or each over its own block only: the standard residual under another name
            verb = "lies" if len(beyond) == 1 else "lie"
            raise ConfigError(f"denseformer's {' and '.join(beyond)} {verb} beyond the model's {self.n_blocks} blocks, "
                              f"where it averages no two blocks' outputs and so is the standard residual; give a "
                              f"dilation and a period of at most {self.n_blocks} (the defaults are 1)")
        if not any(self.averages_after(b) and self.n_sources(b) > 1 for b in range(self.n_blocks)):
            # each in range, but together: the blocks a DWA follows all come before the first one it reaches back to
            last = self.n_blocks // self.period * self.period  # the last block a DWA follows, counted from 1
            raise ConfigError(f"denseformer's dilation {dilation} with period {period} averages no two blocks' "
                              f"outputs in the model's {self.n_blocks} blocks (its last average follows block {last}), "
                              f"so it is the standard residual; give a dilation of at most {last} at this period")
        self.alphas = nn.ParameterList(nn.Parameter(torch.empty(self.n_sources(b))) if self.averages_after(b) else None
                                       for b in range(self.n_blocks))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            for alpha in self.alphas:
                if alpha is not None:
                    alpha.zero_()
                    alpha[-1] = 1.0

    def averages_after(self, block):
        return (block + 1) % self.period == 0

    def sources(self, outputs, block):
        return outputs[(block + 1) % self.dilation::self.dilation]

    def n_sources(self, block):
        return (block + 1) // self.dilation + 1

    def average(self, sources, block):
        return weighted_sum(self.alphas[block].to(sources[0].dtype), sources)

    def step_macs(self, i):
        block = i // 2
        return self.n_sources(block) * self.shape.d_model if i % 2 and self.averages_after(block) else 0


@register("dynamic_dense")
class DynamicDense(_DenseOverBlocks):
    r"""MUDDFormer's dynamic dense connection, one-way (Xiao et al., arXiv:2502.12170; its "DDFormer").

        Y_b = \sum_{j=0}^{b+1} A_{b,j} X_j,     A_b = W2_b · GELU(W1_b · rms(X_{b+1})) + a_b      (per token)
        W1_b ∈ R^{(b+2)×d},  W2_b ∈ R^{(b+2)×(b+2)},  a_b ∈ R^{b+2}

    The weights of each average are computed per token from the newest block output; a_b is the static part.
    Init (a choice: the public code is an inference port whose ``dense_bs`` start as random placeholders for a
    checkpoint): W1 ~ N(0, 0.02), W2 = 0 and a_b = e_{b+1}, so the model starts exactly as the standard residual
    and W2 gets a gradient from the first step. Weights are per applied block, as DenseFormer's.

    Not here: the multiway form (MUDD proper), which keeps four such averages per block for the attention's
    query, key and value inputs and the residual. Its attention reads three different streams, which rrlib's
    attention (one input, one fused qkv projection) and the rule protocol do not express.

    Reference equality: against ``MultiwayDynamicDenseBlock`` of ``pytorch/muddformer/modeling_muddformer.py`` in
    github.com/Caiyun-AI/MUDDFormer at fc067b2 (``dense_type="l"``, one way; its model loop, l. 178–188, written
    out around this model's blocks, since the module imports ``transformers``), norm eps set to 1e-5 (its default
    is 1e-6; here every cross-depth rule's, rrlib.rules.cross_depth), at copied weights in float64 with random
    W2 and a: logits and every parameter's gradient agree to 1.2e-14 relative (max |difference| over max
    |reference| per tensor). tests/test_dense_and_value_rules.py repeats it
    where ``$RRLIB_REFERENCE_CODE`` holds that snapshot (with ``transformers`` and ``einops`` stubbed).
    """

    def __init__(self, shape: StreamShape, recompute: bool = False):
        super().__init__(shape, recompute)
        sizes = [self.n_sources(b) for b in range(self.n_blocks)]
        self.reads = nn.ParameterList(nn.Parameter(torch.empty(s, shape.d_model)) for s in sizes)  # W1
        self.mixes = nn.ParameterList(nn.Parameter(torch.empty(s, s)) for s in sizes)  # W2
        self.static = nn.ParameterList(nn.Parameter(torch.empty(s)) for s in sizes)  # a
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            for read, mix, static in zip(self.reads, self.mixes, self.static):
                nn.init.normal_(read, 0.0, INIT_STD)
                mix.zero_()
                static.zero_()
                static[-1] = 1.0

    def average(self, sources, block):
        dtype = sources[0].dtype
        hidden = F.gelu(F.linear(rms(sources[-1]), self.reads[block].to(dtype)))
        weights = F.linear(hidden, self.mixes[block].to(dtype)) + self.static[block].to(dtype)
        return depth_mix(weights, sources)

    def step_macs(self, i):
        if i % 2 == 0:  # an attention write, or the head's turn (n_steps is even)
            return 0
        s, d = self.n_sources(i // 2), self.shape.d_model
        return s * d + s * s + s * d  # W1, W2, the weighted sum
