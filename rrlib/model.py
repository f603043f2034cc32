"""The paper's GPT: a pre-norm decoder whose residual stream is owned by a pluggable rule.

Architecture (Kramer 2026, §3): RMSNorm with gain (eps 1e-5) before every sublayer and after the last one;
causal multi-head attention through ``F.scaled_dot_product_attention`` with biased qkv and output
projections; GELU MLP of width 4d with biases; learned absolute positions; embeddings tied to the head.
A looped model applies its L unique blocks N times (``n_loops``).

Speed, with every number unchanged: the head's matmul runs on the embedding padded to a multiple of 64 rows
(padded logits are sliced off before any softmax, so the function and the parameter count stay); with targets,
the loss is computed in chunks of tokens that never hold the full fp32 logits (``chunked_cross_entropy``);
``compile_steps`` compiles one residual step (a sublayer and its rule's commit), not the unrolled model.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .rules import INIT_STD, StreamShape, ValueMixingRule, build_rule
from .rules.compiling import compiled

NORM_EPS = 1e-5
HEAD_MULTIPLE = 64  # tensor-core tiles want matmul dimensions in multiples of 64; GPT-2's 50,257 is prime-ish
HEAD_MAX_PAD = 0.01  # pad only when that adds under 1 % of the head's work (50,257 → 50,304: 0.09 %; 257 → 320: 25 %)
LOSS_CHUNK_TOKENS = 2048  # at 50,304 rows a chunk's fp32 logits are 0.4 GB, a 64 × 256 batch's would be 3.3 GB
REFERENCE_VARIANT = "review"  # the paper's method: a model's rule unless told otherwise, and what baselines match


@dataclass
class ModelConfig:
    d_model: int = 512
    n_layers: int = 8
    n_heads: int = 8
    seq_len: int = 256
    vocab_size: int = 50257
    n_loops: int = 1
    variant: str = REFERENCE_VARIANT
    rule_options: dict = field(default_factory=dict)
    highway_gate_init: str = "gpt2"  # "gpt2": N(0, 0.02), bias 0, as every linear in the paper's code; "zero"
    # A rule from outside the package (rrlib.rules.external): the SHA-256 of its source, which the fingerprint
    # carries, and where it came from (a file's or module's name); None for rrlib's own rules. Set by resolve_run.
    rule_source: str | None = None
    rule_origin: str | None = None


class Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, values=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, hd).permute(2, 0, 3, 1, 4)
        if values is not None:  # a rule that mixes attention values (rrlib.rules.value_residual)
            v = values(v)
        pad = sdpa_head_dim(hd, x.device.type) - hd
        if pad:  # zero columns add nothing to q·k (the scale stays the true head dim's) and give outputs sliced off
            q, k, v = (F.pad(t, (0, pad)) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=hd ** -0.5)[..., :hd]
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def sdpa_head_dim(head_dim: int, device_type: str) -> int:
    """The head dim attention runs at: on CUDA the next multiple of 8, since the flash and memory-efficient
    kernels need one (bf16 head_dim % 8, TF32 % 4) and the matched baselines' widths give 69, 71, 73, ...,
    which would otherwise fall back to the math kernel while Review's 64 and 96 do not; on a CPU unchanged."""
    return -(-head_dim // 8) * 8 if device_type == "cuda" else head_dim


class MLP(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Sublayer(nn.Module):
    """u = f(RMSNorm(h)): the proposal a residual rule decides how to commit."""

    def __init__(self, fn: nn.Module, d_model: int):
        super().__init__()
        self.norm = nn.RMSNorm(d_model, eps=NORM_EPS)
        self.fn = fn

    def forward(self, h, *values):
        return self.fn(self.norm(h), *values)


def head_rows(vocab_size: int, multiple: int = HEAD_MULTIPLE) -> int:
    """Rows of the padded head matmul: the vocabulary rounded up to ``multiple`` when that costs little."""
    padded = -(-vocab_size // multiple) * multiple
    return padded if padded - vocab_size <= HEAD_MAX_PAD * vocab_size else vocab_size


def padded_head(weight: torch.Tensor, rows: int) -> torch.Tensor:
    return weight if rows == weight.shape[0] else F.pad(weight, (0, 0, 0, rows - weight.shape[0]))


class ChunkedCrossEntropy(torch.autograd.Function):
    """mean CE(h Wᵀ, y) over N tokens, chunk by chunk; the gradients are made in the forward pass.

    Each chunk's logits (in the ambient autocast dtype, as ``F.linear`` makes them), their fp32 copy and the
    softmax gradient live only while the chunk is processed: what is kept for backward is dL/dh (N × d) and
    dL/dW (V × d), not the N × V logits. Per chunk it runs the very ops of the plain path (``F.linear``, then
    ``F.cross_entropy`` on ``.float()`` logits, through autograd), so with one chunk and no padding the loss
    and the gradients are bitwise the plain path's on CPU; with several, sums over chunks round differently.
    With ``chunk_fn`` (a compiled ``chunk_loss_and_grads``, from ``GPT.compile_steps``) each chunk is that one
    graph instead: the same function, its gradient written out, equal to float rounding.
    """

    @staticmethod
    def forward(ctx, h, weight, targets, chunk, rows, grad, chunk_fn=None):
        n, vocab = h.shape[0], weight.shape[0]
        w = padded_head(weight.detach(), rows).requires_grad_(grad and chunk_fn is None)
        total = torch.zeros((), device=h.device)
        grad_h = torch.empty_like(h) if grad else None
        grad_w = torch.zeros_like(w) if grad else None
        scale = torch.ones((), device=h.device) / n  # the plain mean's 1/N, in fp32 as its backward makes it
        for start in range(0, n, chunk):
            if chunk_fn is not None:
                loss, gh, gw = chunk_fn(h[start:start + chunk].detach(), w, targets[start:start + chunk], vocab, scale,
                                        grad)
            else:
                loss, gh, gw = _chunk_through_autograd(h[start:start + chunk], w, targets[start:start + chunk],
                                                       vocab, scale, grad)
            if grad:
                grad_h[start:start + chunk] = gh
                grad_w += gw
            total += loss.detach()
        ctx.save_for_backward(grad_h, grad_w[:vocab] if grad else None)
        return total / n

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None, None, None, None


def _chunk_through_autograd(h, w, targets, vocab: int, scale, grad: bool):
    """One chunk's summed loss and its scaled gradients, by the plain path's own ops and autograd."""
    hc = h.detach().requires_grad_(grad)
    with torch.enable_grad() if grad else contextlib.nullcontext():
        logits = F.linear(hc, w)[:, :vocab]  # the padded rows' logits are sliced off, never scored
        loss = F.cross_entropy(logits.float(), targets, reduction="sum")
    if not grad:
        return loss, None, None
    return (loss, *torch.autograd.grad(loss, (hc, w), scale))


def chunk_loss_and_grads(h, w, targets, vocab: int, scale, grad: bool):
    """One chunk's summed cross-entropy and, with ``grad``, (dL/dh, dL/dW) scaled by ``scale``, with the
    softmax's gradient written out (p − onehot(y)): the form torch.compile traces as one graph (it cannot trace
    the eager path's ``autograd.grad``). Logits and the two gradient matmuls run in the ambient autocast dtype,
    as the plain path's forward and backward do; the softmax in fp32."""
    raw = F.linear(h, w)
    logits = raw[:, :vocab].float()
    lse = torch.logsumexp(logits, -1)
    loss = (lse - logits.gather(1, targets[:, None]).squeeze(1)).sum()
    if not grad:
        return loss, None, None
    probs = torch.exp(logits - lse[:, None])
    probs[torch.arange(len(targets), device=targets.device), targets] -= 1
    grad_logits = F.pad(probs * scale, (0, w.shape[0] - vocab)).to(raw.dtype)
    return loss, (grad_logits @ w).to(h.dtype), (grad_logits.T @ h).to(w.dtype)


def chunked_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                          chunk: int = LOSS_CHUNK_TOKENS, rows: int | None = None, chunk_fn=None) -> torch.Tensor:
    """Mean next-token cross-entropy of the tied head on ``h`` (N, d) against ``targets`` (N,)."""
    grad = torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad)  # forward runs without grad mode
    return ChunkedCrossEntropy.apply(h, weight, targets, chunk, rows or weight.shape[0], grad, chunk_fn)


def residual_step(sub: nn.Module, rule, h: torch.Tensor, params: tuple) -> torch.Tensor:
    """One sublayer and its rule's commit: the unit ``compile_steps`` compiles (no step index inside)."""
    return rule.commit(h, sub(h), *params)


def proposal(sub: nn.Module, h: torch.Tensor, *values) -> torch.Tensor:
    """The sublayer alone: what is compiled for rules whose state is not h (their state changes per step)."""
    return sub(h, *values)


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig, plain_head: bool = False):
        super().__init__()
        self.cfg = cfg
        # plain_head: the unpadded head and loss (plain matmul, full fp32 logits): the reference the padded,
        # chunked path is checked against
        self.head_rows = cfg.vocab_size if plain_head else head_rows(cfg.vocab_size)
        self.loss_chunk = None if plain_head else LOSS_CHUNK_TOKENS
        self.step_fn, self.proposal_fn, self.chunk_fn = residual_step, proposal, None
        d = cfg.d_model
        self.shape = StreamShape(d, cfg.n_layers, cfg.n_loops, cfg.highway_gate_init)
        self.wte = nn.Embedding(cfg.vocab_size, d)
        self.wpe = nn.Embedding(cfg.seq_len, d)
        self.sublayers = nn.ModuleList()
        for _ in range(cfg.n_layers):
            self.sublayers.append(Sublayer(Attention(d, cfg.n_heads), d))
            self.sublayers.append(Sublayer(MLP(d), d))
        self.rule = build_rule(cfg.variant, self.shape, **cfg.rule_options)
        if not getattr(self.rule, "pre_norm", True):  # a rule that drops the sublayers' own norm (ReZero's paper)
            for sub in self.sublayers:
                sub.norm = nn.Identity()
        self.norm_f = nn.RMSNorm(d, eps=NORM_EPS)
        self.head = nn.Linear(d, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # tied embeddings
        self.init_weights()

    def init_weights(self):
        """One place for every initial value.

        | parameter                               | init                          |
        |-----------------------------------------|-------------------------------|
        | token and position embeddings (= head)  | N(0, 0.02)                    |
        | qkv, MLP fc weights                     | N(0, 0.02)                    |
        | attention and MLP output projections    | N(0, 0.02/√(2·L·N)); N(0, 0.02) under a rule that |
        |                                         | owns the depth scaling (``scaled``, ``scaled_loops``) |
        | all biases                              | 0                             |
        | RMSNorm gains                           | 1 (a rule with ``pre_norm`` False has no sublayer norms) |
        | residual-rule parameters (gates, ...)   | the rule's ``reset_parameters`` (Review gate: 0;    |
        |                                         | Highway gate: N(0, 0.02) or 0, ``highway_gate_init``) |

        2·L·N is the number of residual additions in one pass (2L for an unlooped model, as in GPT-2). A rule
        whose multiplier ε already shrinks with depth would otherwise shrink the initial update twice.
        """
        out_std = INIT_STD if self.rule.owns_depth_scaling else INIT_STD / math.sqrt(self.shape.n_steps)
        for name, module in self.named_modules():
            if name.startswith("rule"):
                continue
            if isinstance(module, nn.Linear):
                std = out_std if name.endswith(".proj") else INIT_STD
                nn.init.normal_(module.weight, 0.0, std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, INIT_STD)
            elif isinstance(module, nn.RMSNorm):
                nn.init.ones_(module.weight)
        self.rule.reset_parameters()

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The final normalised hidden state, (B, T, d)."""
        T = idx.shape[1]
        if T > self.cfg.seq_len:
            raise ValueError(f"sequence of {T} tokens exceeds the context of {self.cfg.seq_len}")
        x0 = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        state = self.rule.begin(x0)
        mixes_values = isinstance(self.rule, ValueMixingRule)
        for i in range(self.shape.n_steps):
            sub = self.sublayers[self.shape.unique(i)]
            if self.rule.commits:
                state = self.step_fn(sub, self.rule, state, self.rule.step_params(i))
            else:
                values = (self.rule.values(state, i),) if mixes_values and isinstance(sub.fn, Attention) else ()
                state = self.rule.write(state, i, self.proposal_fn(sub, self.rule.read(state, i), *values))
        return self.norm_f(self.rule.end(state))

    def compile_steps(self, backend: str = "inductor") -> "GPT":
        """Compile per residual step, not the unrolled model: compile time stays flat in depth (``compiled``).

        Also compiled: each chunk of the loss (``chunk_loss_and_grads``) and a rule's own depth mixing where it
        runs apart from the sublayer (``rule.compile_writes``: MGR's gates and pool, HC's and mHC's weights and
        reads). None of them sees a step index, so each keeps a few graphs (one per shape and grad mode) at any
        depth.
        """
        self.step_fn, self.proposal_fn = compiled(residual_step, backend), compiled(proposal, backend)
        self.chunk_fn = compiled(chunk_loss_and_grads, backend)
        self.rule.compile_writes(backend)
        return self

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits (B, T, V) without targets; with targets, (None, the mean next-token cross-entropy)."""
        h = self.hidden(idx)
        if targets is None:
            return F.linear(h, padded_head(self.head.weight, self.head_rows))[..., :self.cfg.vocab_size], None
        if self.loss_chunk is None:
            logits = self.head(h)
            return None, F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        return None, chunked_cross_entropy(h.flatten(0, 1), self.head.weight, targets.flatten(), self.loss_chunk,
                                           self.head_rows, self.chunk_fn)

    # ---- counting: every number here is read off the module tree, never typed in ----

    def n_params(self) -> int:
        """Total trainable parameters (the tied embedding counted once)."""
        return sum(p.numel() for p in self.parameters())

    def n_embedding_params(self) -> int:
        return self.wte.weight.numel() + self.wpe.weight.numel()

    def n_non_embedding_params(self) -> int:
        return self.n_params() - self.n_embedding_params()

    def n_matmul_params(self) -> int:
        """Weights multiplied per token in one forward pass.

        Block and rule weights count once per loop (a looped model reuses them N times); the tied head
        counts once (its product with the hidden state is a real matmul; the embedding lookup is not).
        """
        block = sum(m.weight.numel() for m in self.sublayers.modules() if isinstance(m, nn.Linear))
        return (block + self.rule.matmul_weights()) * self.cfg.n_loops + self.head.weight.numel()

    def flops_per_token(self) -> int:
        """Training FLOPs per token: 6·N_matmul + 12·L·N·d·T.

        Convention (Kaplan et al. 2020; PaLM appendix B): forward + backward = 3 × forward; a forward matmul
        costs 2 FLOPs per weight; attention scores and the weighted sum cost 2·2·T·d per token per attention
        sublayer, counted over the full T×T square (no discount for the causal mask), so the attention term is
        6·2·2·T·d = 12·T·d per attention application (L·N of them). Norms, activations and gate
        nonlinearities are not counted.
        """
        attention = 12 * self.cfg.n_layers * self.cfg.n_loops * self.cfg.d_model * self.cfg.seq_len
        return 6 * self.n_matmul_params() + attention


def count_params(cfg: ModelConfig) -> int:
    """Parameters of the model ``cfg`` describes, built on the meta device (no memory, no init cost)."""
    with torch.device("meta"):
        return GPT(cfg).n_params()
