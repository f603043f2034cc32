"""The rules whose state is the residual stream h itself: each sublayer's update is committed to h by a formula.

    standard        h + u                          the pre-norm residual (post_norm=True: RMSNorm(h + u), u = f(h))
    review          h + r ⊙ u,  r = σ(W_r [rms(h); rms(u)] + b_r)     the paper's method
    review_convex   (1 − r) ⊙ h + r ⊙ u            the same gate, no identity path
    review_state_only, review_update_only   h + r ⊙ u with the gate fed only rms(h), or only rms(u)
    highway         h + σ(W_g h + b) ⊙ u            the paper's Highway baseline
    highway_convex  (1 − g) ⊙ h + g ⊙ u             the classic Highway layer
    rezero          h + α·u                        one scalar per sublayer, 0 at init (pre_norm=False: u = f(h))
    layerscale      h + diag(λ)·u                  one vector per sublayer, small at init
    scaled          h + ε·u                        a fixed 1/N loop scaling (looped models); scaled_loops: 1/√N
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .protocol import INIT_STD, ConfigError, ResidualRule, StreamShape, register, rms
from .review_gate import fused_review

HIGHWAY_GATE_INITS = ("gpt2", "zero")
POST_NORM_EPS = 1e-5  # the model's own norms' (rrlib.model.NORM_EPS)


@register("standard")
class Standard(ResidualRule):
    r"""The pre-norm residual: every proposal is committed blindly.

        post_norm=False (default)   h ──────────────(+)── h'            h' = h + u,  u = f(RMSNorm(h))
                                      └─ norm ─ f ─ u ─┘
        post_norm=True              h ──────────────(+)── norm ── h'    h' = RMSNorm(h + u),  u = f(h)
                                      └────── f ─ u ─┘

    ``post_norm=True`` is the original Transformer's residual (Vaswani et al., 2017), the baseline ReZero's paper
    measures its speed against (``rezero``'s docstring cites it): the sublayer reads the stream without a norm of its own, and a
    norm with its own gain (1 at init) follows every addition. RMSNorm, not LayerNorm, as every norm of this
    model; the final RMSNorm before the tied head stays (after the last sublayer's norm it only rescales by its
    gain).
    """

    def __init__(self, shape: StreamShape, post_norm: bool = False):
        super().__init__(shape)
        if not isinstance(post_norm, bool):
            raise ConfigError(f"standard's post_norm must be true or false, got {post_norm!r}")
        self.pre_norm = not post_norm  # the model drops the sublayers' own norms when False (rrlib.model.GPT)
        self.norms = nn.ModuleList(nn.RMSNorm(shape.d_model, eps=POST_NORM_EPS) for _ in range(shape.n_unique)) \
            if post_norm else None

    def reset_parameters(self):
        for norm in self.norms or ():
            nn.init.ones_(norm.weight)

    def step_params(self, i):
        return (self.norms[self.shape.unique(i)],) if self.norms is not None else ()

    def commit(self, h, u, norm=None):
        return h + u if norm is None else norm(h + u)


class _ReviewGate(ResidualRule):
    r"""The Review gate, shared by the additive and the convex form.

        r = σ(W_r [rms(h); rms(u)] + b_r),   W_r ∈ R^{d×2d}, b_r ∈ R^d, both zero at init (r = 0.5)

    One gate per unique sublayer, per channel and per token. ``W_r`` is applied as written, to the (B, T, 2d)
    concatenation: one matmul, and a weight gradient in one piece. Two products on its column halves save the
    concatenation but cost a second matmul, their sum and a weight gradient assembled from two slices; at the
    ``mini`` size on CPU they left Review's training step 3.6 % (1 thread) and 7.6 % (2 threads) slower than
    the parameter-matched standard's, against 1.3 % and 5.7 % with the concatenation (medians of interleaved
    ``python -m rrlib bench`` runs).
    """

    def __init__(self, shape: StreamShape):
        super().__init__(shape)
        d = shape.d_model
        self.gates = nn.ModuleList(nn.Linear(2 * d, d) for _ in range(shape.n_unique))

    def reset_parameters(self):
        for gate in self.gates:
            nn.init.zeros_(gate.weight)
            nn.init.zeros_(gate.bias)

    def step_params(self, i):
        return (self.gates[self.shape.unique(i)],)

    def gate(self, h, i, u):
        return self.review(*self.step_params(i), h, u)

    def review(self, gate: nn.Linear, h, u):
        return torch.sigmoid(gate(torch.cat(self.gate_inputs(h, u), dim=-1)))

    @staticmethod
    def gate_inputs(h, u):
        return [rms(h), rms(u)]


@register("review")
class Review(_ReviewGate):
    r"""Review residual, additive form (the paper's method): the update is reviewed, the identity path kept.

        h ───────────────────────(+)── h'       h' = h + r ⊙ u
          ├─ norm ─ f ─ u ──(⊙)──┘              r  = σ(W_r [rms(h); rms(u)] + b_r)
          └──────── gate(h, u) ─ r

    At init r = 0.5, so the block computes h + u/2.
    """

    def commit(self, h, u, gate):
        # the ablations below feed the gate other inputs, and a probe that wraps ``review`` for a pass
        # (rrlib.studies.gates.gate_records) must see every r: both take the method's form
        if type(self).gate_inputs is Review.gate_inputs and "review" not in vars(self):
            fused = fused_review(gate, h, u)  # one node on a CPU (rrlib.rules.review_gate), else None
            if fused is not None:
                return fused
        return h + self.review(gate, h, u) * u


@register("review_state_only")
class ReviewStateOnly(Review):
    r"""Review with the gate fed only the state: r = σ(W_r [rms(h); 0] + b_r), the additive form.

    The ablation of which half of the gate's input matters (the paper's claim: seeing the update is what sets
    Review apart from Highway). The update's half of the input is zero, not removed, so the model is Review's in
    every other respect: the same W_r ∈ R^{d×2d} (whose update columns, zero at init, get no gradient and stay
    zero), the same width, parameter count and FLOP count, so parameter matching leaves its width at Review's.
    """

    @staticmethod
    def gate_inputs(h, u):
        return [rms(h), torch.zeros_like(u)]


@register("review_update_only")
class ReviewUpdateOnly(Review):
    r"""Review with the gate fed only the update: r = σ(W_r [0; rms(u)] + b_r); otherwise ``review_state_only``."""

    @staticmethod
    def gate_inputs(h, u):
        return [torch.zeros_like(h), rms(u)]


@register("review_convex")
class ReviewConvex(_ReviewGate):
    r"""Review residual, convex form: h' = (1 − r) ⊙ h + r ⊙ u, same gate as ``review``.

    No identity path: at r = 0.5 the embedding's contribution halves at every sublayer, which per the paper
    stops training beyond about 20 blocks.
    """

    def commit(self, h, u, gate):
        r = self.review(gate, h, u)
        return h + r * (u - h)


@register("highway")
class Highway(ResidualRule):
    r"""The paper's Highway baseline: an additive gate that sees only the raw state.

        h' = h + σ(W_g h + b) ⊙ u,    W_g ∈ R^{d×d}, b ∈ R^d

    Init (``shape.highway_gate_init``): "gpt2" is the paper's code, where every ``nn.Linear`` gets N(0, 0.02)
    with bias 0 and only the Review gate is zeroed afterwards, so g starts near, not at, 0.5; "zero" zeroes
    W_g and b (g = 0.5 exactly, the same start as Review's r), rrlib's CPU studies' choice.
    """

    def __init__(self, shape: StreamShape):
        super().__init__(shape)
        if shape.highway_gate_init not in HIGHWAY_GATE_INITS:
            raise ConfigError(f"unknown highway_gate_init {shape.highway_gate_init!r}; valid choices: "
                              f"{', '.join(HIGHWAY_GATE_INITS)}")
        self.gates = nn.ModuleList(nn.Linear(shape.d_model, shape.d_model) for _ in range(shape.n_unique))

    def reset_parameters(self):
        for gate in self.gates:
            if self.shape.highway_gate_init == "gpt2":
                nn.init.normal_(gate.weight, 0.0, INIT_STD)
            else:
                nn.init.zeros_(gate.weight)
            nn.init.zeros_(gate.bias)

    def step_params(self, i):
        return (self.gates[self.shape.unique(i)],)

    def commit(self, h, u, gate):
        return h + torch.sigmoid(gate(h)) * u


@register("highway_convex")
class HighwayConvex(Highway):
    r"""Classic Highway layer (Srivastava et al., 2015): h' = (1 − g) ⊙ h + g ⊙ u,  g = σ(W_g h + b).

    ``carry_bias`` initialises b; Srivastava et al. use a negative value so layers start by carrying h.
    The default 0 gives g = 0.5 at init, the same starting point as ``review_convex``.
    """

    def __init__(self, shape: StreamShape, carry_bias: float = 0.0):
        super().__init__(shape)
        self.carry_bias = carry_bias

    def reset_parameters(self):
        super().reset_parameters()
        for gate in self.gates:
            nn.init.constant_(gate.bias, self.carry_bias)

    def commit(self, h, u, gate):
        g = torch.sigmoid(gate(h))
        return h + g * (u - h)


@register("rezero")
class ReZero(ResidualRule):
    r"""ReZero (Bachlechner et al., 2020): h' = h + α·u, one scalar α per sublayer, α = 0 at init.

        pre_norm=True (default)   h ──────────────────(+)── h'     u = f(RMSNorm(h))
                                    └─ norm ─ f ─ u ─ α ─┘
        pre_norm=False            h ──────────────────(+)── h'     u = f(h): the paper's form
                                    └──────── f ─ u ─ α ─┘

    The default keeps the sublayer's pre-norm, so that only the residual rule differs from ``standard``. The paper
    (arXiv 2003.04887) removes every LayerNorm, x_{i+1} = x_i + α_i·F(x_i); ``pre_norm=False`` runs it that way. The final RMSNorm before the tied head stays in both forms: it is the head's, not a
    sublayer's (the paper's models feed their last state to a softmax through a linear decoder of their own).
    The model reads ``pre_norm`` once, when it builds its sublayers (``rrlib.model.GPT``).
    """

    def __init__(self, shape: StreamShape, pre_norm: bool = True):
        super().__init__(shape)
        if not isinstance(pre_norm, bool):
            raise ConfigError(f"rezero's pre_norm must be true or false, got {pre_norm!r}")
        self.pre_norm = pre_norm
        self.alpha = nn.Parameter(torch.zeros(shape.n_unique))

    def reset_parameters(self):
        nn.init.zeros_(self.alpha)

    def step_params(self, i):
        return (self.alpha[self.shape.unique(i)],)

    def commit(self, h, u, alpha):
        return h + alpha * u


@register("layerscale")
class LayerScale(ResidualRule):
    r"""LayerScale (Touvron et al., 2021, CaiT): h' = h + diag(λ)·u, one λ ∈ R^d per sublayer.

    λ starts at ``init``; by default CaiT's depth rule: 0.1 up to 18 blocks, 1e-5 up to 24, 1e-6 beyond.
    """

    def __init__(self, shape: StreamShape, init: float | None = None):
        super().__init__(shape)
        depth = shape.n_layers * shape.n_loops
        self.init = init if init is not None else (0.1 if depth <= 18 else 1e-5 if depth <= 24 else 1e-6)
        self.scale = nn.Parameter(torch.empty(shape.n_unique, shape.d_model))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.constant_(self.scale, self.init)

    def step_params(self, i):
        return (self.scale[self.shape.unique(i)],)

    def commit(self, h, u, scale):
        return h + scale * u


@register("scaled")
class Scaled(ResidualRule):
    r"""Fixed residual scaling for looped models (Wang et al., 2026, arXiv 2606.18524): h' = h + ε·u.

        ε = λ · N^(−p) · (L / 12)^(−1/2)     L unique blocks, looped N times
        p = 1    (``scaling="depth"``, the paper's factored rule, λ/(N·√m_L) with m_L = L/12: see below)
        p = 1/2  (``scaling="loops"``, the 1/√N rule the paper tests it against, with the same depth factor)

    As in the paper: ε multiplies each sublayer's update (attention and MLP alike; the factor 2 of two
    branches per block is absorbed into λ), λ = 1 is not tuned, and ε *owns* the depth scaling, so the output
    projections start at N(0, 0.02) like every other weight instead of also shrinking by 1/√(2·L·N)
    (``owns_depth_scaling``). Not followed: the paper's per-group learning rates (the looped stack at
    η·m_L^(−1/2)); at a fixed L that is one constant factor for every N, so it moves the whole learning-rate
    curve but not whether its optimum moves with N.

    The reference depth 12, and λ in the paper's convention. The paper's abstract and introduction (the part of
    its text we could read; arxiv.org/html/2606.18524) write ε = λ/(N√L), with L the unique layers: no
    reference depth. m_L = L/12 is how this rule factors it, as the paper's body does; that reference
    depth is not in the text we could read. So ε here is the abstract's with λ_abstract = √12 · λ: the
    default λ = 1 is λ_abstract = √12 ≈ 3.46 (ε = √6/N ≈ 2.45/N at the looped study's L = 2, where λ_abstract
    = 1 would give 0.71/N). Whether the paper's experiments used λ_abstract = 1 or √12 is not settled by the
    text we have; the study's question (does the best learning rate move with N?) compares N at one L, where
    λ is one constant for every N.
    """

    owns_depth_scaling = True
    REFERENCE_DEPTH = 12
    LOOP_EXPONENT = {"depth": 1.0, "loops": 0.5}

    def __init__(self, shape: StreamShape, lam: float = 1.0, scaling: str = "depth"):
        super().__init__(shape)
        if scaling not in self.LOOP_EXPONENT:
            raise ConfigError(f"unknown scaling {scaling!r}; valid choices: {', '.join(self.LOOP_EXPONENT)}")
        depth_factor = math.sqrt(shape.n_layers / self.REFERENCE_DEPTH)
        self.eps = lam / (shape.n_loops ** self.LOOP_EXPONENT[scaling] * depth_factor)

    def commit(self, h, u):
        return h + self.eps * u


@register("scaled_loops")
class ScaledLoops(Scaled):
    r"""h' = h + λ/(√N·√(L/12))·u: the 1/√N loop scaling that ``scaled``'s 1/N is tested against."""

    def __init__(self, shape: StreamShape, lam: float = 1.0):
        super().__init__(shape, lam=lam, scaling="loops")
