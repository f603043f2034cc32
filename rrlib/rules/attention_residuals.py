r"""Attention Residuals and Delta Attention Residuals: each sublayer reads a softmax over depth of earlier outputs
(or block sums, or block deltas), in place of the residual stream (AttnRes) or added to it (Delta AttnRes).
What the cross-depth rules share is rrlib.rules.cross_depth's.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .cross_depth import CrossDepthRule, positive_int
from .depth_mixing.attention import depth_attention_macs, route, scored
from .protocol import ConfigError, StreamShape, register


class _Blocks(NamedTuple):
    queries: torch.Tensor  # (n_steps + 1, d): each read's query, the head's last
    done: list  # _Source: the embedding, then the sum of each completed block
    open: torch.Tensor | None  # running sum of the current block; None before its first sublayer


@register("attnres_block")
class BlockAttnRes(CrossDepthRule):
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

    Against the public code that implements it (the Delta AttnRes authors' ``modeling_qwen3_attnres.py``, modes
    ``block`` and ``full``): the same sources at every read, the head's own query included (``final_res_proj``);
    its first sublayer of a block reads the completed block as its still-open partial sum, which is the same
    source. It differs in the key norm (a ``Qwen3RMSNorm`` with a gain, eps 1e-6, ``train_scratch.py`` l. 117;
    here eps 1e-5, rrlib.rules.cross_depth) and in counting blocks in layers, ⌈layers / num_blocks⌉.
    """

    def __init__(self, shape: StreamShape, block_size: int = 4, recompute: bool = False):
        super().__init__(shape, recompute)
        self.block_size = positive_int("block_size", block_size)
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
class DeltaAttnRes(CrossDepthRule):
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
        x_i     = h_i + g_i · \sum_{k ∈ K_i} softmax_k(w_iᵀ rms(δ_k)) · δ_k
        δ_0 = h_0 = x0,    δ_k = h_{kP} − h_{(k−1)P}                          (P = ``block_size`` sublayers)

    δ_k is what block k − 1 added to the stream, from its start state to the next block's start state. The
    open block is not a source (its work so far is already in h_i). The head reads h. Queries and the optional
    identity gate are Delta AttnRes's. When δ_k becomes a source is ``delta_timing``:

    - ``"block_start"`` (the default): K_i = {0, …, ⌊i/P⌋}. δ_k joins as soon as it is complete, so block k's
      first sublayer, kP, reads it. For an even P that is the block-start layer's *attention* sublayer. In the
      reference code (``modeling_qwen3_attnres.py`` at commit fc11c3e, whose line numbers are cited here) this
      is the accumulation left commented out in the model's forward (l. 1104–1108: after a boundary layer,
      append ``partial_block - block_start_partial``), read with the boundary its docstring names, the last
      layer of a block.
    - ``"after_block_start"``: K_i = {0, …, ⌊(i−1)/P⌋}. δ_k joins after sublayer kP has read its sources, so
      only the later sublayers of block k see it: for an even P, the block-start layer's MLP and on. This is
      the reference code's timing as it runs (mode ``delta_block``): its block-start layer reads its sources
      for the attention sublayer at l. 573, runs attention at l. 577, and only then appends the new source,
      at l. 588–592; the MLP reads at l. 603.

    The two differ exactly at the reads i = kP, k ≥ 1 (tests/test_cross_depth.py). The default stays
    ``"block_start"`` because the committed ``delta_attnres_block`` runs were trained with it (switching would
    change their numbers and fingerprints), and because it is the formula: δ_k is known before sublayer kP
    reads, and nothing we could read of the paper (its abstract) withholds it from that read; the reference
    code's one-sublayer lag follows from where its loop body appends (inside the layer, after attention), not
    from a stated rule.

    Choices, against the reference code:

    - Sources are differences of consecutive block-*start* states, as δ is defined. The code appends
      ``partial_block - blocks[-1]`` (l. 592), and ``blocks[-1]`` is the previous *delta*, not the previous
      boundary state, so from the third source on it routes alternating sums (h_{2P} − h_P + h_0, …).
    - Boundaries are block starts: the code's ``is_block_boundary`` tests ``layer_idx % lpb == 0`` (the first
      layer of a block), though its docstring says "last in its block" (an earlier version's
      ``(layer_idx + 1) % lpb``); we follow the test, which is what δ_k needs.
    - Under either timing x0 is a source from the first read on, as in Delta AttnRes: the code's first
      attention sublayer routes nothing (its source list is still empty at l. 573), ours routes over x0 alone,
      which only rescales its input, (1 + g_0)·x0, and its pre-norm removes that (up to its eps).
    - P counts sublayers, as ``attnres_block``'s block_size does; the code counts layers,
      ⌈layers / ``attnres_num_blocks``⌉ (8 blocks in its config class, 4 in ``train_scratch.py``). An even P
      keeps blocks on transformer-block edges. At P = 4 the 8-sublayer ``family`` model routes over x0 and
      one delta; deeper models get more.
    - Scores read the parameter-free rms with eps 1e-5 (rrlib.rules.cross_depth); the code's key norm is a
      ``Qwen3RMSNorm`` with a learned gain and ``rms_norm_eps`` = 1e-6 (``train_scratch.py`` l. 117). The code's
      default gate (``--gate_type bias``) is none, g ≡ 1, as ours is without ``identity_gate``.

    Unread in an unlooped model: the queries of the reads that see x0 alone, ``queries[:P]`` under
    ``"block_start"`` and ``queries[:P+1]`` under ``"after_block_start"``.
    """

    DELTA_TIMINGS = ("block_start", "after_block_start")

    def __init__(self, shape: StreamShape, block_size: int = 4, identity_gate: bool = False,
                 delta_timing: str = "block_start", recompute: bool = False):
        if delta_timing not in self.DELTA_TIMINGS:
            raise ConfigError(f"unknown delta_timing {delta_timing!r}; valid choices: {', '.join(self.DELTA_TIMINGS)}")
        super().__init__(shape, identity_gate, recompute)
        self.block_size = positive_int("block_size", block_size)
        self.lag = int(delta_timing == "after_block_start")  # steps from δ_k's completion to the write that adds it

    def begin(self, x0):
        return super().begin(x0)._replace(start=x0)

    def write(self, state, i, u):
        h = state.h + u
        # δ_k is complete when step kP − 1 has written; with the lag it joins one step later, after read kP
        done = state.h if self.lag else h  # the stream at the boundary being closed, if step i closes one
        if (i + 1 - self.lag) % self.block_size or i + 1 - self.lag == 0 or i + 1 == self.shape.n_steps:
            return state._replace(h=h)  # inside a block, or the head's turn (the head does not route)
        delta = self.mixing(scored, done - state.start, state.queries, i + 1)
        return state._replace(h=h, sources=state.sources + [delta], start=done)

    def n_sources(self, i):
        return 1 + max(i - self.lag, 0) // self.block_size
