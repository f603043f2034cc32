r"""Residual rules that route across depth: the state carries several sources or streams.

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

- Scores read the parameter-free ``rms``. The papers put an RMSNorm (HC's code: a LayerNorm) in front of a
  learned read-out w or φ; a gain g there is a reparametrisation, (g ⊙ k)ᵀw = kᵀ(g ⊙ w), that adds d
  parameters per sublayer and no function the model could not already express.
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

import math
from typing import NamedTuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .depth_mixing.streams import (depth_attention_macs, full_precision,
                           inverse_rms, route, scored, stream_write_sum)
from .depth_mixing.gate_pool import gate_plain, gate_pool, pool
from .depth_mixing.hyper_weights import hc_read_and_weigh, mhc_read_and_weigh
from .protocol import ConfigError, ResidualRule, StreamShape, register


def _positive_int(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive whole number, got {value!r}")
    return value


class _CrossDepthRule(ResidualRule):
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


# ---- Attention Residuals -------------------------------------------------------------------------------------


class _Blocks(NamedTuple):
    queries: torch.Tensor  # (n_steps + 1, d): each read's query, the head's last
    done: list  # _Source: the embedding, then the sum of each completed block
    open: torch.Tensor | None  # running sum of the current block; None before its first sublayer


@register("attnres_block")
class BlockAttnRes(_CrossDepthRule):
    r"""Block Attention Residuals (Kimi Team, arXiv:2603.15031): depth attention over block summaries.

    The sublayers are cut into blocks of S (``block_size``); b_0 = x0 and b_n is the sum of the outputs of
    block n. Sublayer i, the j-th of its block, reads the completed blocks and the open block's partial sum:

        h_i = \sum_{v ∈ V_i} softmax_v(w_iᵀ rms(v)) · v,     V_i = [b_0, b_1, …, b_{n-1}] + [u_{i-j} + … + u_{i-1}]

    The input *replaces* the residual stream. The head reads the same mix over every source with its own query
    w_head. Every w ∈ R^d starts at zero, so each input starts as the mean of its sources (not their sum).

        x0 ─┬──────────── b_0 ──┐
            ├ f_0 ─ f_1 ─ b_1 ──┼── softmax_v(wᵀ rms(v)) · v ── sublayer i
            └ f_2 …  (open) ────┘

    Choices: the embedding is one source and is never added to a block sum; the partial sum joins only once its
    block has an output (the first sublayer of a block reads completed blocks only: a zero source would still
    take a share of the softmax); block boundaries run on the global step index, so a looped model keeps
    cutting blocks across loops. ``block_size`` counts sublayers. The paper settles on about 8 blocks; our
    8–24-layer models (16–48 sublayers) get 4–12 with S = 4, which also keeps blocks on transformer-block edges.
    Unread in an unlooped model: ``queries[0]`` (the first sublayer has one source, which needs no score).
    """

    def __init__(self, shape: StreamShape, block_size: int = 4, recompute: bool = False):
        super().__init__(shape, recompute)
        self.block_size = _positive_int("block_size", block_size)
        self.queries = nn.Parameter(torch.empty(shape.n_unique, shape.d_model))
        self.head_query = nn.Parameter(torch.empty(shape.d_model))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.zeros_(self.queries)
        nn.init.zeros_(self.head_query)

    def begin(self, x0):
        # row i is read i's query, queries[unique(i)]: a looped model repeats its unique rows
        queries = torch.cat([self.queries.repeat(self.shape.n_loops, 1), self.head_query[None]])
        return _Blocks(queries, [self.mixing(scored, x0, queries, 1)], None)

    def read(self, state, i):
        return self.mixing(route, state.done, i, state.open, state.queries[i])

    def write(self, state, i, u):
        # block sums accumulate in the embedding's dtype (fp32 under autocast), as the standard h + u does
        partial = u.to(state.done[0].value.dtype) if state.open is None else state.open + u
        if (i + 1) % self.block_size:
            return state._replace(open=partial)
        return state._replace(done=state.done + [self.mixing(scored, partial, state.queries, i + 1)], open=None)

    def end(self, state):
        return self.read(state, self.shape.n_steps)

    def n_sources(self, i: int) -> int:
        """Sources read at step i (i = n_steps: the head)."""
        return 1 + i // self.block_size + int(i % self.block_size > 0)

    def step_macs(self, i):
        return depth_attention_macs(self.n_sources(i), self.shape.d_model)


@register("attnres")
class AttnRes(BlockAttnRes):
    r"""Attention Residuals (Kimi Team, arXiv:2603.15031): every sublayer attends over all earlier outputs.

        h_i = \sum_{s=0}^{i} softmax_s(w_iᵀ rms(v_s)) · v_s,      v_0 = x0,  v_s = u_{s-1}
        h_head = \sum_{s=0}^{2LN} softmax_s(w_headᵀ rms(v_s)) · v_s

    One static pseudo-query w ∈ R^d per unique sublayer (zero at init: the mean of the sources) and one for the
    head; the input replaces the residual stream. It is Block AttnRes with blocks of one sublayer, as in the
    paper, so it shares that code; a looped model's later steps attend over every earlier step of every loop.
    """

    def __init__(self, shape: StreamShape, recompute: bool = False):
        super().__init__(shape, block_size=1, recompute=recompute)


class _Routed(NamedTuple):
    h: torch.Tensor  # the ordinary additive stream
    queries: torch.Tensor  # (n_steps, d): each read's query
    sources: list  # _Source: the embedding, then every sublayer output (or block delta) that a later read sees
    start: torch.Tensor | None = None  # Block Delta AttnRes: the stream at the start of the open block


@register("delta_attnres")
class DeltaAttnRes(_CrossDepthRule):
    r"""Delta Attention Residuals (Luo, Cai, Hu; arXiv:2605.18855): depth attention *added* to the stream.

        h_{i+1} = h_i + u_i                                              (the standard residual, kept)
        x_i     = h_i + g_i · \sum_{s=0}^{i} softmax_s(w_iᵀ rms(v_s)) · v_s,    v_0 = x0,  v_s = u_{s-1}

    Sublayer i reads x_i; the head reads h. w_i starts at zero. Without the gate (g_i ≡ 1, the paper's default)
    the routed term starts as the mean of the sources; ``identity_gate=True`` adds one scalar g_i per sublayer,
    zero at init, so the model starts exactly as the standard residual (the reference code's
    ``learnable_alpha`` gate).

    Choice: the first sublayer is routed over its one source, x0, as the formula reads; the reference code
    skips it. The difference only rescales the first input, (1 + g_0)·x0, which the sublayer's pre-norm removes
    (up to its eps). The head does not route (the reference code routes the head only for replacement forms).
    Unread in an unlooped model: ``queries[0]`` (one source needs no score).
    """

    def __init__(self, shape: StreamShape, identity_gate: bool = False, recompute: bool = False):
        super().__init__(shape, recompute)
        self.queries = nn.Parameter(torch.empty(shape.n_unique, shape.d_model))
        self.gates = nn.Parameter(torch.empty(shape.n_unique)) if identity_gate else None
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.zeros_(self.queries)
        if self.gates is not None:
            nn.init.zeros_(self.gates)

    def begin(self, x0):
        queries = self.queries.repeat(self.shape.n_loops, 1)
        # x0 is scored for the reads that see a second source too: before them its weight is 1
        first = next((i for i in range(self.shape.n_steps) if self.n_sources(i) > 1), self.shape.n_steps)
        return _Routed(x0, queries, [self.mixing(scored, x0, queries, first)])

    def read(self, state, i):
        return self.mixing(self.routed_input, state, i)

    def routed_input(self, state, i):
        routed = route(state.sources, i)
        return state.h + (routed if self.gates is None else self.gates[self.shape.unique(i)] * routed)

    def write(self, state, i, u):
        sources = state.sources
        if i + 1 < self.shape.n_steps:  # the last output is read by the head only, which does not route
            # kept in the stream's dtype (fp32 under autocast), as the sum with the stream would promote it
            sources = sources + [self.mixing(scored, u.to(state.h.dtype), state.queries, i + 1)]
        return state._replace(h=state.h + u, sources=sources)

    def end(self, state):
        return state.h

    def step_macs(self, i):
        return 0 if i == self.shape.n_steps else depth_attention_macs(self.n_sources(i), self.shape.d_model)

    def n_sources(self, i: int) -> int:
        """Sources read at step i."""
        return i + 1


@register("delta_attnres_block")
class BlockDeltaAttnRes(DeltaAttnRes):
    r"""Block Delta AttnRes (arXiv:2605.18855, the paper's recommended form): Delta AttnRes over block deltas.

        h_{i+1} = h_i + u_i                                                   (the standard residual, kept)
        x_i     = h_i + g_i · \sum_{k=0}^{⌊i/P⌋} softmax_k(w_iᵀ rms(δ_k)) · δ_k
        δ_0 = h_0 = x0,    δ_k = h_{kP} − h_{(k−1)P}                          (P = ``block_size`` sublayers)

    δ_k is what block k − 1 added to the stream, from its start state to the next block's start state. A
    block's delta joins the sources when the block is complete, before the first sublayer of the next block
    reads; the open block is not a source (its work so far is already in h_i). The head reads h. Queries and
    the optional identity gate are Delta AttnRes's.

    Choices, against the reference code (``modeling_qwen3_attnres.py``, mode ``delta_block``):

    - Sources are differences of consecutive block-*start* states, as δ is defined. The code appends
      ``partial_block - blocks[-1]``, and ``blocks[-1]`` is the previous *delta*, not the previous boundary
      state, so from the third source on it routes alternating sums (h_{2P} − h_P + h_0, …).
    - Boundaries are block starts: the code's ``is_block_boundary`` tests ``layer_idx % lpb == 0`` (the first
      layer of a block, whose attention sublayer sees the new source), though its comment says "last in its
      block"; we follow the test, which is what δ_k needs.
    - P counts sublayers, as ``attnres_block``'s block_size does; an even P keeps blocks on transformer-block
      edges, as the code's layers-per-block do. At P = 4 the 8-sublayer ``family`` model routes over x0 and
      one delta; deeper models get more.

    Unread in an unlooped model: ``queries[:P]`` (the first block's sublayers see x0 alone).
    """

    def __init__(self, shape: StreamShape, block_size: int = 4, identity_gate: bool = False,
                 recompute: bool = False):
        super().__init__(shape, identity_gate, recompute)
        self.block_size = _positive_int("block_size", block_size)

    def begin(self, x0):
        return super().begin(x0)._replace(start=x0)

    def write(self, state, i, u):
        h = state.h + u
        if (i + 1) % self.block_size or i + 1 == self.shape.n_steps:  # inside a block, or the head's turn
            return state._replace(h=h)
        delta = self.mixing(scored, h - state.start, state.queries, i + 1)
        return state._replace(h=h, sources=state.sources + [delta], start=h)

    def n_sources(self, i):
        return 1 + i // self.block_size


# ---- Multi-Gate Residuals --------------------------------------------------------------------------------------


CARRY_BASE_DEPTH = 21  # D_base and b_base of MGR's depth-aware carry bias
CARRY_BASE_BIAS = -3.0


def mgr_carry_bias(depth: int, n_streams: int) -> float:
    """MGR's initial gate bias for ``depth`` residual steps: −ln(√(D/D_base)·(1 + e^{−b_base}) − n)."""
    carry_odds = math.sqrt(depth / CARRY_BASE_DEPTH) * (1 + math.exp(-CARRY_BASE_BIAS))
    if carry_odds <= n_streams:
        raise ConfigError(f"mgr's carry bias needs fewer than {carry_odds:.1f} streams at {depth} residual steps, "
                          f"got n_streams={n_streams}")
    return -math.log(carry_odds - n_streams)


class _Pooled(NamedTuple):
    streams: torch.Tensor  # (k, B, T, d), k ≤ n
    inverse_rms: torch.Tensor  # (k, B, T, 1): read by this step's pool and the next step's gates
    h: torch.Tensor  # their attention pool: the next sublayer's input


@register("mgr")
class MultiGateResiduals(_CrossDepthRule):
    r"""Multi-Gate Residuals (Zheng et al., arXiv:2605.23259): n streams, each gated toward every output.

        streams after step i:  [x0, u_0, …, u_i]                                  for i < n − 1   (append)
                               s_j ← (1 − β_j) s_j + β_j u_i,                       otherwise       (gate)
                               β_j = σ(w_βᵀ rms(s_j)/√d + b_j)
        next input, and the head's:  h = \sum_j softmax_j(w_αᵀ rms(s_j)/√d) · s_j

    The gate and the pool are convex combinations, so ‖s_j'‖ ≤ max(‖s_j‖, ‖u‖) and ‖h‖ ≤ max_j ‖s_j‖ per
    token: the stream cannot grow with depth. Per unique sublayer: w_β, w_α ∈ R^d (zero at init: β_j = σ(b_j)
    and h = the mean of the streams) and one bias b ∈ R^n. The pool after sublayer i uses that sublayer's w_α
    (the mixer and the aggregator are one module per layer).

    Carry bias (depth-aware), in this gate's convention (β is the update weight):

        b_j = −ln(√(D/D_base)·(1 + e^{−b_base}) − n),    D_base = 21,  b_base = −3,  D = 2LN steps per pass

    MGR's depth-scaled initialisation, ln(√(D/D_base)(e^{−b_base}+1) − n) (its depth D is called L there), is
    read as the *carry* logit, so its negative starts the update gates nearly closed (Highway's carry bias)
    and closes them further with depth: 1/β − 1 grows like √D, and at D = D_base with one stream b = b_base.
    D counts sublayers, the residual steps a carried stream has to survive.
    Not here: the paper's competitive (softmax) gate. Its definition is not in the part of the paper we could
    read (the abstract and introduction); the one second-hand account describes a softmax over a carry logit
    and the n stream logits. That reading is what gives the formula's −n a meaning: with the carry logit at
    ln(√(D/D_base)(1 + e^{−b_base}) − n) and zero stream logits, every β_i = σ(b_base)·√(D_base/D) whatever n is.
    Under the sigmoid gate used here the same bias gives β = 1/(1 + √(D/D_base)(1 + e^{−b_base}) − n): 0.055
    at n = 4, D = 21, against σ(−3) = 0.047 (equal for n = 1). Kept as written until the paper's text settles it.
    Choice: the first n − 1 sublayers only append (the gates start once there are n streams), so
    ``gate_queries[:n-1]`` and ``gate_bias[:n-1]`` are unread in an unlooped model.
    """

    def __init__(self, shape: StreamShape, n_streams: int = 4, recompute: bool = False):
        super().__init__(shape, recompute)
        self.n_streams = _positive_int("n_streams", n_streams)
        if shape.n_steps < n_streams:
            raise ConfigError(f"mgr with n_streams={n_streams} needs at least {n_streams} sublayers (the first "
                              f"{n_streams - 1} only append), got {shape.n_steps}; use fewer streams")
        self.carry_bias = mgr_carry_bias(shape.n_steps, n_streams)
        U, d = shape.n_unique, shape.d_model
        self.gate_queries = nn.Parameter(torch.empty(U, d))
        self.gate_bias = nn.Parameter(torch.empty(U, n_streams))
        self.pool_queries = nn.Parameter(torch.empty(U, d))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.zeros_(self.gate_queries)
        nn.init.zeros_(self.pool_queries)
        nn.init.constant_(self.gate_bias, self.carry_bias)

    def begin(self, x0):
        return _Pooled(x0.unsqueeze(0), inverse_rms(x0).unsqueeze(0), x0)

    def read(self, state, i):
        return state.h

    def write(self, state, i, u):
        return self.mixing(self.gate_and_pool, state, i, u)

    def gate_and_pool(self, state, i, u):
        k, scale = self.shape.unique(i), self.shape.d_model ** -0.5
        s, inv, u = state.streams, state.inverse_rms, u.to(state.streams.dtype)
        with full_precision(s):
            if i < self.n_streams - 1:
                s, inv = torch.cat([s, u.unsqueeze(0)]), torch.cat([inv, inverse_rms(u).unsqueeze(0)])
                return _Pooled(s, inv, pool(s, inv, self.pool_queries[k], scale))
            if len(s) == 1:  # one stream: its gate, and the pool is the stream itself
                s, inv = gate_plain(s, inv, u, self.gate_queries[k], self.gate_bias[k], scale)
                return _Pooled(s, inv, s[0])
            return _Pooled(*gate_pool(s, inv, u, self.gate_queries[k], self.gate_bias[k], self.pool_queries[k],
                                      scale))

    def end(self, state):
        return state.h

    def step_macs(self, i):
        d, n = self.shape.d_model, self.n_streams
        if i == self.shape.n_steps:
            return 0
        if i < n - 1:
            return depth_attention_macs(i + 2, d)  # pool the grown streams
        return n * d + depth_attention_macs(n, d)  # the gate scores, then the pool


# ---- Hyper-Connections -----------------------------------------------------------------------------------------


class _Hyper(NamedTuple):
    streams: torch.Tensor | None  # (B, T, n, d); None after the last step, whose write is made as its sum
    pending: tuple | None  # the pending step's input h and its (write, mix) weights, computed from ``streams``
    head: torch.Tensor | None = None  # after the last step: the sum of the streams (B, T, d)


class _HyperStreams(_CrossDepthRule):
    r"""What HC and mHC share: n residual streams, read and written through per-token weights.

        input:   h  = \sum_j a_j x_j            read weights a ∈ R^n
        update:  x' = M x + b ⊗ u                mixing M ∈ R^{n×n} (row i makes stream i), write weights b ∈ R^n
        head:    \sum_j x_j                     x^0 = (x0, …, x0)

    ``read_and_weigh(x, i)`` gives step i's input h and its (b, M) from a projection of ``n_columns`` columns
    (h needs only the streams and a, so it is read at once). ``write`` makes the next step's streams and reads
    them in the same call (one autograd node on the CPU, rrlib.hyper_weights), so each projection runs once per
    step and each set of streams has one consumer. After the last step only the head reads the streams, and only
    their sum, which ``stream_write_sum`` makes without the streams.
    """

    def __init__(self, shape: StreamShape, n_streams: int, n_columns: int, recompute: bool = False):
        super().__init__(shape, recompute)
        self.n_streams = _positive_int("n_streams", n_streams)
        self.n_columns = n_columns

    def read_and_weigh(self, streams, i, write=None):
        """(streams, (h, b, M)): step i's input and weights read from the streams, after writing them with
        ``write`` = (M, b, u) of step i − 1 if given (rrlib.hyper_weights)."""
        raise NotImplementedError

    def begin(self, x0):
        # contiguous: CPU bmm copies each token's matrix of a broadcast (stride-0) operand apart, 11 ms a step
        streams = x0.unsqueeze(-2).expand(*x0.shape[:-1], self.n_streams, x0.shape[-1]).contiguous()
        with full_precision(streams):
            return _Hyper(*self.mixing(self.read_and_weigh, streams, 0))

    def read(self, state, i):
        return state.pending[0]

    def write(self, state, i, u):
        return self.mixing(self.mix_and_weigh, state, i, u)

    def mix_and_weigh(self, state, i, u):
        """The streams after step i, and the weights step i + 1 reads them with."""
        _, write, mix = state.pending
        with full_precision(state.streams):
            mix, write, u = mix.contiguous(), write.contiguous(), u.to(state.streams.dtype).contiguous()
            if i + 1 == self.shape.n_steps:  # only the head reads the last streams, and only their sum
                return _Hyper(None, None, stream_write_sum(mix, state.streams, write, u))
            return _Hyper(*self.read_and_weigh(state.streams, i + 1, (mix, write, u)))

    def end(self, state):
        return state.head  # the last write made it (``mix_and_weigh``)

    def step_macs(self, i):
        n, d = self.n_streams, self.shape.d_model
        return 0 if i == self.shape.n_steps else n * d * self.n_columns + n * d + n * n * d  # projection, a, M


@register("hc")
class HyperConnections(_HyperStreams):
    r"""Dynamic Hyper-Connections (Zhu et al., arXiv:2409.19606): n residual copies mixed by learned weights.

        H ∈ R^{n×d},  H^0 = (x0, …, x0)
        input:   h   = A_mᵀ H                      A_m ∈ R^n
        update:  H'  = Bᵀ u + A_rᵀ H               B ∈ R^{1×n},  A_r ∈ R^{n×n}
        head:    \sum_j H_j
        dynamic: A_m = A_m^0 + s_α tanh(H̄ W_m),  A_r = A_r^0 + s_α tanh(H̄ W_r),  B = B^0 + s_β tanh(H̄ W_β)ᵀ
                 H̄ = rms(H) row by row,  W_m, W_β ∈ R^{d×1},  W_r ∈ R^{d×n}

    Init (the paper's): A_m^0 = e_{k mod n} for unique sublayer k, A_r^0 = I, B^0 = 1, W = 0, s_α = s_β = 0.01.
    Every stream then carries exactly the standard pre-norm h and each sublayer reads one of them, so the model
    starts as the standard residual; the head reads Σ_j H_j = n·h, equal after the final RMSNorm up to its eps.
    Storage: ``static`` holds [A_m^0 | A_r^0 | B^0ᵀ] per stream (n × (n+2)), ``dynamic`` holds
    [W_m | W_r | W_β]ᵀ ((n+2) × d, laid out as ``nn.Linear`` keeps its weight: the projection's backward on CPU
    took 2.2 ms against 0.8 in the d × (n+2) layout at the family size) and ``scales`` (s_α, s_β).
    """

    def __init__(self, shape: StreamShape, n_streams: int = 4, recompute: bool = False):
        super().__init__(shape, n_streams, n_columns=n_streams + 2, recompute=recompute)
        n = self.n_streams
        self.static = nn.Parameter(torch.empty(shape.n_unique, n, n + 2))
        self.dynamic = nn.Parameter(torch.empty(shape.n_unique, n + 2, shape.d_model))
        self.scales = nn.Parameter(torch.empty(shape.n_unique, 2))
        self.reset_parameters()

    def reset_parameters(self):
        n, unique = self.n_streams, torch.arange(self.shape.n_unique)
        with torch.no_grad():
            self.static.zero_()
            self.static[unique, unique % n, 0] = 1.0
            self.static[:, :, 1:n + 1] = torch.eye(n, device=self.static.device)
            self.static[:, :, n + 1] = 1.0
        nn.init.zeros_(self.dynamic)
        nn.init.constant_(self.scales, 0.01)

    def read_and_weigh(self, streams, i, write=None):
        """Step i's input A_mᵀ H and its (B, A_rᵀ): (B, T, d), (B, T, n), (B, T, n, n)."""
        k = self.shape.unique(i)
        return hc_read_and_weigh(streams, self.dynamic[k], self.static[k], self.scales[k], write)


@register("mhc")
class ManifoldHyperConnections(_HyperStreams):
    r"""mHC, Manifold-Constrained Hyper-Connections (DeepSeek-AI, arXiv:2512.24880).

        x ∈ R^{n×d},  x^0 = (x0, …, x0)
        x' = H_res x + H_postᵀ F(H_pre x)                      F: the sublayer; head: \sum_j x_j
        x̃  = rms(vec x) ∈ R^{1×nd}                            (one norm over all streams, flattened)
        H_pre  = σ(α_pre · x̃ φ_pre + b_pre)                    φ_pre, φ_post ∈ R^{nd×n}
        H_post = 2σ(α_post · x̃ φ_post + b_post)
        H_res  = SinkhornKnopp(α_res · mat(x̃ φ_res) + b_res)  φ_res ∈ R^{nd×n²}, 20 iterations, fp32

    H_res is doubly stochastic, so the residual mixing neither grows nor shrinks the mean stream. Per unique
    sublayer: φ = [φ_pre | φ_post | φ_res] (zero at init, as HC's W; stored transposed, (n + n + n²) × nd, as
    ``nn.Linear`` keeps its weight, which CPU matmuls take faster), b in the same column order, and α
    (α_pre, α_post, α_res), 0.01 at init.

    Init (a choice; the paper gives α only): HC's static init, within the constraints. b_pre = ±4 (σ: 0.98 on
    lane k mod n, 0.02 elsewhere), b_post = 0 (H_post = 1 on every stream), b_res = 2·I (H_res = 0.71 on the
    diagonal for n = 4). All streams then carry exactly the standard h and each sublayer reads
    (1 + (n−2)σ(−4))·h, which its pre-norm turns into the standard input (up to its eps). The lane offsets
    matter: with a uniform H_pre every stream would get the same gradient forever and the n streams would stay
    one. The diagonal stays moderate because 20 Sinkhorn rounds converge slowly near a permutation: measured
    for n = 4 with logits c·I + noise of std 0.3, no column sum is off by more than 1e-3 at c = 2, but 76% of
    matrices are at c = 4 (H_res ≈ 0.95·I).
    """

    PRE_LANE_LOGIT = 4.0
    RES_DIAGONAL_LOGIT = 2.0

    def __init__(self, shape: StreamShape, n_streams: int = 4, recompute: bool = False):
        super().__init__(shape, n_streams, n_columns=n_streams * n_streams + 2 * n_streams, recompute=recompute)
        U, n = shape.n_unique, self.n_streams
        self.phi = nn.Parameter(torch.empty(U, self.n_columns, n * shape.d_model))
        self.bias = nn.Parameter(torch.empty(U, self.n_columns))
        self.alpha = nn.Parameter(torch.empty(U, 3))
        self.reset_parameters()

    def reset_parameters(self):
        n, c, unique = self.n_streams, self.PRE_LANE_LOGIT, torch.arange(self.shape.n_unique)
        with torch.no_grad():
            self.bias.zero_()
            self.bias[:, :n] = -c
            self.bias[unique, unique % n] = c
            self.bias[:, 2 * n:] = self.RES_DIAGONAL_LOGIT * torch.eye(n, device=self.bias.device).flatten()
        nn.init.zeros_(self.phi)
        nn.init.constant_(self.alpha, 0.01)

    def read_and_weigh(self, x, i, write=None):
        """Step i's input H_pre x and its (H_post, H_res): (B, T, d), (B, T, n), (B, T, n, n), the weights fp32."""
        k = self.shape.unique(i)
        return mhc_read_and_weigh(x, self.phi[k], self.alpha[k], self.bias[k], write)
