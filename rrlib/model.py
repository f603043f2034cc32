"""The paper's GPT: a pre-norm decoder whose residual stream is owned by a pluggable rule.

Architecture (Kramer 2026, §3): RMSNorm with gain (eps 1e-5) before every sublayer and after the last one;
causal multi-head attention through ``F.scaled_dot_product_attention`` with biased qkv and output
projections; GELU MLP of width 4d with biases; learned absolute positions; embeddings tied to the head.
A looped model applies its L unique blocks N times (``n_loops``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .residuals import StreamShape, build_rule

NORM_EPS = 1e-5
INIT_STD = 0.02


class Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


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

    def forward(self, h):
        return self.fn(self.norm(h))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.shape = StreamShape(d, cfg.n_layers, cfg.n_loops)
        self.wte = nn.Embedding(cfg.vocab_size, d)
        self.wpe = nn.Embedding(cfg.seq_len, d)
        self.sublayers = nn.ModuleList()
        for _ in range(cfg.n_layers):
            self.sublayers.append(Sublayer(Attention(d, cfg.n_heads), d))
            self.sublayers.append(Sublayer(MLP(d), d))
        self.rule = build_rule(cfg.variant, self.shape, **cfg.rule_options)
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
        | attention and MLP output projections    | N(0, 0.02/√(2·L·N))           |
        | all biases                              | 0                             |
        | RMSNorm gains                           | 1                             |
        | residual-rule parameters (gates, ...)   | the rule's ``reset_parameters`` (gates: 0) |

        2·L·N is the number of residual additions in one pass (2L for an unlooped model, as in GPT-2).
        """
        out_std = INIT_STD / math.sqrt(self.shape.n_steps)
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
        for i in range(self.shape.n_steps):
            u = self.sublayers[self.shape.unique(i)](self.rule.read(state, i))
            state = self.rule.write(state, i, u)
        return self.norm_f(self.rule.end(state))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits (B, T, V); with targets, also the mean next-token cross-entropy."""
        logits = self.head(self.hidden(idx))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

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
