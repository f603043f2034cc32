r"""The multi-stream rules: Multi-Gate Residuals (n gated streams, attention-pooled) and Hyper-Connections and mHC
(n streams read and written through per-token weights). What the cross-depth rules share is
rrlib.rules.cross_depth's.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .cross_depth import CrossDepthRule, positive_int
from .depth_mixing.attention import depth_attention_macs
from .depth_mixing.dispatch import full_precision
from .depth_mixing.gate_pool import gate_plain, gate_pool, gate_pool_plain, pool, pool_plain
from .depth_mixing.hyper_weights import (hc_read_and_weigh, hc_read_and_weigh_plain, mhc_read_and_weigh,
                                         mhc_read_and_weigh_plain)
from .depth_mixing.norms import inverse_rms
from .depth_mixing.streams import stream_write_sum
from .protocol import ConfigError, StreamShape, register


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
class MultiGateResiduals(CrossDepthRule):
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
    Choice (seeding): the streams start as x0 alone and the first n − 1 sublayers only append their outputs
    (the gates start once there are n streams), so ``gate_queries[:n-1]`` and ``gate_bias[:n-1]`` are unread in
    an unlooped model. The one public port we found (burn-mamba's ``modules::multi_gate``) seeds all n streams
    with the stack input, so its gates act from the first sublayer on n copies of x0; the paper's own text on
    this is in the part we could not read.

    Searched for the competitive gate (for an option): the paper's page (arxiv.org/html/2605.23259v1, stored
    from its beginning: abstract and introduction only), the stored web pages and public code for "Multi-Gate
    Residuals", "competitive gate", "softmax gate" with carry and stream logits. Nothing gave its equation; the
    burn-mamba port names it and leaves it out. So no option until the text can be read.
    """

    def __init__(self, shape: StreamShape, n_streams: int = 4, recompute: bool = False):
        super().__init__(shape, recompute)
        self.n_streams = positive_int("n_streams", n_streams)
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
                return _Pooled(s, inv, self.form(pool, pool_plain, s)(s, inv, self.pool_queries[k], scale))
            if len(s) == 1:  # one stream: its gate, and the pool is the stream itself
                s, inv = self.form(gate_plain, gate_plain, s)(s, inv, u, self.gate_queries[k], self.gate_bias[k], scale)
                return _Pooled(s, inv, s[0])
            return _Pooled(*self.form(gate_pool, gate_pool_plain, s)(s, inv, u, self.gate_queries[k], self.gate_bias[k],
                                                                  self.pool_queries[k], scale))

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


class _HyperStreams(CrossDepthRule):
    r"""What HC and mHC share: n residual streams, read and written through per-token weights.

        input:   h  = \sum_j a_j x_j            read weights a ∈ R^n
        update:  x' = M x + b ⊗ u                mixing M ∈ R^{n×n} (row i makes stream i), write weights b ∈ R^n
        head:    \sum_j x_j                     x^0 = (x0, …, x0)

    ``read_and_weigh(x, i)`` gives step i's input h and its (b, M) from a projection of ``n_columns`` columns
    (h needs only the streams and a, so it is read at once). ``write`` makes the next step's streams and reads
    them in the same call (one autograd node on the CPU, rrlib.rules.depth_mixing.hyper_weights), so each
    projection runs once per step and each set of streams has one consumer. After the last step only the head
    reads the streams, and only their sum, which ``stream_write_sum`` makes without the streams.
    """

    def __init__(self, shape: StreamShape, n_streams: int, n_columns: int, recompute: bool = False):
        super().__init__(shape, recompute)
        self.n_streams = positive_int("n_streams", n_streams)
        self.n_columns = n_columns

    def read_and_weigh(self, streams, i, write=None):
        """(streams, (h, b, M)): step i's input and weights read from the streams, after writing them with
        ``write`` = (M, b, u) of step i − 1 if given (rrlib.rules.depth_mixing.hyper_weights)."""
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
    Against lucidrains' ``hyper-connections`` (``hyper_connections/hyper_connections.py`` at 4775103), which this rule
    equals at copied weights once the norms agree: H̄ there is an RMSNorm with a learned gain through
    ``F.normalize`` (eps 1e-12 on the L2 norm, l. 86–93; the paper uses a LayerNorm, its comment at l. 208),
    here the parameter-free rms with eps 1e-5; its read lane is ``layer_index mod n``, or a random lane when no
    index is given (l. 215), here k mod n for unique sublayer k; s_α (shared by A_m and A_r) and s_β start at
    0.01 (l. 235, 247) and the head sums the streams (l. 61), as here.
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
        return self.form(hc_read_and_weigh, hc_read_and_weigh_plain, streams)(streams, self.dynamic[k], self.static[k],
                                                                     self.scales[k], write)


@register("mhc")
class ManifoldHyperConnections(_HyperStreams):
    r"""mHC, Manifold-Constrained Hyper-Connections (DeepSeek-AI, arXiv:2512.24880).

        x ∈ R^{n×d},  x^0 = (x0, …, x0)
        x' = H_res x + H_postᵀ F(H_pre x)                      F: the sublayer; head: \sum_j x_j
        x̃  = rms(vec x) ∈ R^{1×nd}                            (one norm over all streams, flattened)
        H_pre  = σ(α_pre · x̃ φ_pre + b_pre)                    φ_pre, φ_post ∈ R^{nd×n}
        H_post = 2σ(α_post · x̃ φ_post + b_post)
        H_res  = SinkhornKnopp(α_res · mat(x̃ φ_res) + b_res)  φ_res ∈ R^{nd×n²}, 20 iterations

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

    Conventions, against the paper (Eq. 7–9, §4.3.1, Table 5) and DeepSeek's reference functions (TileKernels,
    ``tile_kernels/torch/mhc.py``, defaults in ``tile_kernels/modeling/mhc/functional.py`` l. 37–42, at 36d9e45):

    | what                | here    | paper                                  | DeepSeek's code                        |
    |---------------------|---------|----------------------------------------|----------------------------------------|
    | eps in the RMS root | 1e-5    | none (Eq. 15); Table 5's norm ε: 1e-20 | 1e-6 (``norm_eps``)                    |
    | eps on H_pre        | none    | none (Eq. 8)                           | σ(·) + 1e-6 (``pre_eps``)              |
    | eps in Sinkhorn     | none    | none (Eq. 9)                           | 1e-6 after the softmax, in every sum   |
    | Sinkhorn rounds     | 20      | t_max = 20 (§4.2, Table 5)             | 10 (``sinkhorn_repeat``)               |
    | H_post              | 2σ(·)   | 2σ(·) (Eq. 8)                          | σ(·) · ``post_mult_value`` (default 1) |
    | norm gain           | none    | folded into φ (§4.3.1)                 | optional ``norm_weight``               |
    | head read-out       | Σ_j x_j | not in the text                        | ``mhc_head``: learned σ(·) + eps       |
    | n (its "heads")     | 4       | 4 (Table 5)                            | ``mhc_mult`` = 4                       |

    The code applies its matrix transposed, x' = Hᵀx (``mhc.py`` l. 62), and starts Sinkhorn with a softmax
    over rows, then columns; on Hᵀ that is the paper's exp, T_c, T_r order, so H_res here is the code's Hᵀ
    (φ_res's n × n columns transposed), the same map. The rounds, the multiplier and the eps-free H_pre and
    Sinkhorn follow the paper; the RMS eps is every cross-depth rule's (rrlib.rules.cross_depth); the head sums
    the streams, as HC's code does, rather than learning one more read-out.
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
        """Step i's input H_pre x and its (H_post, H_res): (B, T, d), (B, T, n), (B, T, n, n), the weights in fp32
        (fp64 in an fp64 model: rrlib.rules.depth_mixing.dispatch.at_least_fp32)."""
        k = self.shape.unique(i)
        return self.form(mhc_read_and_weigh, mhc_read_and_weigh_plain, x)(x, self.phi[k], self.alpha[k], self.bias[k],
                                                                       write)
