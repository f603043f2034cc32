"""DenseFormer, MUDDFormer's dynamic dense connection, LAuReL (RW, LR) and value residual learning: their equations on
constructed cases, their counts, the protocol extension that value residuals need, and, where
``$RRLIB_REFERENCE_CODE`` names a folder holding the authors' code, equality with it in float64.

``$RRLIB_REFERENCE_CODE`` is a folder with a checkout of each reference under its repository's name:
``DenseFormer`` (github.com/epfml/DenseFormer), ``MUDDFormer`` (github.com/Caiyun-AI/MUDDFormer) and
``Value-Residual-Learning`` (github.com/Zcchill/Value-Residual-Learning); a test whose snapshot is absent is
skipped. Each rule's docstring names the commit compared against and the largest relative error found.
"""
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from rrlib.model import GPT, Attention, ModelConfig
from rrlib.rules import RULES, ConfigError
from rrlib.rules.protocol import rms
from rrlib.rules.value_residual import ValueMixingRule

D, L, VOCAB, T = 32, 3, 97, 16
NEW_RULES = ["denseformer", "dynamic_dense", "laurel_rw", "laurel_lr", "value_residual"]


def gpt(variant="standard", options=(), n_loops=1, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    model = GPT(ModelConfig(d_model=D, n_layers=L, n_heads=4, seq_len=T, vocab_size=VOCAB, variant=variant,
                            n_loops=n_loops, rule_options=dict(options)))
    return model.to(dtype)


def perturb(module, std=0.3, seed=1):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * std)


def same_blocks(model, variant="standard"):
    """A GPT with rule ``variant`` carrying ``model``'s embeddings, blocks and norms."""
    other = gpt(variant, n_loops=model.cfg.n_loops, dtype=next(model.parameters()).dtype)
    other.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("rule.")}, strict=False)
    return other


def tokens(seed=2, batch=2):
    return torch.randint(0, VOCAB, (batch, T), generator=torch.Generator().manual_seed(seed))


def embed(model, idx):
    return model.wte(idx) + model.wpe(torch.arange(idx.shape[1]))


def blocks(model, x, mix=None):
    """Yield (block index, stream after the block) of the standard residual inside each block, ``mix`` applied
    to the stream after every block (the dense rules' written-out form)."""
    for b in range(model.shape.n_steps // 2):
        for i in (2 * b, 2 * b + 1):
            x = x + model.sublayers[model.shape.unique(i)](x)
        x = yield b, x


# ---- the protocol extension ----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(RULES))
def test_every_rule_runs_the_protocol_as_written(variant):
    """The model's forward is the protocol of rrlib.rules.protocol call for call, bitwise, for every registered rule;
    a ValueMixingRule's attention sublayers also get ``rule.values(state, i)``."""
    model = gpt(variant)
    perturb(model.rule)
    idx = tokens()
    rule = model.rule
    state = rule.begin(embed(model, idx))
    for i in range(model.shape.n_steps):
        sub = model.sublayers[model.shape.unique(i)]
        h = sub.norm(rule.read(state, i))
        if isinstance(rule, ValueMixingRule) and isinstance(sub.fn, Attention):
            u = sub.fn(h, rule.values(state, i))
        else:
            u = sub.fn(h)
        state = rule.write(state, i, u)
    assert torch.equal(model.norm_f(rule.end(state)), model.hidden(idx))


def attention_with_values(attn, x, values):
    """rrlib's attention written out, with ``values`` applied to v (B, heads, T, head dim)."""
    B, T_, C = x.shape
    q, k, v = attn.qkv(x).view(B, T_, 3, attn.n_heads, C // attn.n_heads).permute(2, 0, 3, 1, 4)
    scores = (q @ k.transpose(-1, -2)) / (C // attn.n_heads) ** 0.5
    scores = scores.masked_fill(torch.ones(T_, T_, dtype=torch.bool).triu(1), float("-inf"))
    y = scores.softmax(-1) @ values(v)
    return attn.proj(y.transpose(1, 2).reshape(B, T_, C))


@pytest.mark.parametrize("n_loops", [1, 2])
def test_value_residual_mixes_the_first_attentions_values_into_every_later_one(n_loops):
    """V_n' = λ V_1 + (1 − λ) V_n for every attention after the first (later loops' too), the stream standard."""
    weight = 0.3
    model = gpt("value_residual", {"first_weight": weight}, n_loops=n_loops, dtype=torch.float64)
    idx = tokens()
    h, first = embed(model, idx), None
    for i in range(model.shape.n_steps):
        sub = model.sublayers[model.shape.unique(i)]
        if i % 2:
            h = h + sub(h)
            continue
        x = sub.norm(h)
        if first is None:
            first = sub.fn.qkv(x).view(*x.shape[:2], 3, 4, D // 4).permute(2, 0, 3, 1, 4)[2]
            h = h + attention_with_values(sub.fn, x, lambda v: v)
        else:
            h = h + attention_with_values(sub.fn, x, lambda v: weight * first + (1 - weight) * v)
    torch.testing.assert_close(model.hidden(idx), model.norm_f(h), rtol=1e-12, atol=1e-12)


def test_value_residual_with_no_weight_on_the_first_values_is_the_standard_residual():
    model = gpt("value_residual", {"first_weight": 0.0})
    idx = tokens()
    assert torch.equal(model.hidden(idx), same_blocks(model).hidden(idx))  # 0·V_1 + 1·V_n is V_n exactly
    assert model.n_params() == same_blocks(model).n_params()
    assert model.flops_per_token() == same_blocks(model).flops_per_token()


def test_value_residual_at_half_differs_from_standard_and_reaches_the_first_attention_through_later_ones():
    model = gpt("value_residual", dtype=torch.float64)
    idx = tokens()
    assert not torch.allclose(model.hidden(idx), same_blocks(model).hidden(idx))
    # the first attention's value weights get gradient through the mixed values of later attentions as well
    _, loss = model(idx, idx)
    qkv = model.sublayers[0].fn.qkv
    grad = torch.autograd.grad(loss, qkv.weight)[0]
    standard = same_blocks(model)
    _, loss_std = standard(idx, idx)
    grad_std = torch.autograd.grad(loss_std, standard.sublayers[0].fn.qkv.weight)[0]
    assert not torch.allclose(grad[2 * D:], grad_std[2 * D:])


@pytest.mark.parametrize("bad", [-0.1, 1.5, "half", True])
def test_value_residual_refuses_a_weight_outside_zero_to_one(bad):
    with pytest.raises(ConfigError, match="first_weight must be a number from 0 to 1"):
        gpt("value_residual", {"first_weight": bad})


# ---- DenseFormer and dynamic dense -----------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["denseformer", "dynamic_dense", "laurel_rw", "laurel_lr"])
def test_new_rules_start_as_the_standard_residual(variant):
    """At init every new rule computes the standard residual: DenseFormer's and dynamic dense's averages pick the
    newest output (weights e_last, W2 = 0), LAuReL's α = β = 1 and B = 0. Bitwise where the extra terms are exact
    zeros and ones."""
    model = gpt(variant)
    idx = tokens()
    assert torch.equal(model.hidden(idx), same_blocks(model).hidden(idx))


@pytest.mark.parametrize("dilation,period", [(1, 1), (2, 1), (2, 2), (3, 1)])
def test_denseformer_is_the_depth_weighted_average_written_out(dilation, period):
    """Y_b = Σ_{j ≡ b+1 (mod k), j ≤ b+1} α_{b,j} X_j after every block b with (b + 1) mod p = 0."""
    model = gpt("denseformer", {"dilation": dilation, "period": period}, dtype=torch.float64)
    perturb(model.rule)
    idx = tokens()
    outputs = [embed(model, idx)]
    walk = blocks(model, outputs[0])
    b, x = next(walk)
    while True:
        outputs.append(x)
        if (b + 1) % period == 0:
            group = list(range((b + 1) % dilation, b + 2, dilation))
            alphas = model.rule.alphas[b]
            assert len(alphas) == len(group)
            x = sum(alphas[m] * outputs[j] for m, j in enumerate(group))
        try:
            b, x = walk.send(x)
        except StopIteration:
            break
    torch.testing.assert_close(model.hidden(idx), model.norm_f(x), rtol=1e-12, atol=1e-12)
    # periods without a DWA hold no weights
    assert [a is None for a in model.rule.alphas] == [(b + 1) % period != 0 for b in range(L)]


def test_dynamic_dense_is_the_per_token_average_written_out():
    """A_b = W2 GELU(W1 rms(X_{b+1})) + a_b, per token, then Y_b = Σ_j A_{b,j} X_j."""
    model = gpt("dynamic_dense", dtype=torch.float64)
    perturb(model.rule)
    rule, idx = model.rule, tokens()
    outputs = [embed(model, idx)]
    walk = blocks(model, outputs[0])
    b, x = next(walk)
    while True:
        outputs.append(x)
        weights = F.gelu(rms(x) @ rule.reads[b].T) @ rule.mixes[b].T + rule.static[b]
        assert weights.shape == (*x.shape[:2], b + 2)
        x = sum(weights[..., j, None] * outputs[j] for j in range(b + 2))
        try:
            b, x = walk.send(x)
        except StopIteration:
            break
    torch.testing.assert_close(model.hidden(idx), model.norm_f(x), rtol=1e-12, atol=1e-12)


def test_dense_weights_are_per_applied_block_in_a_looped_model():
    assert len(gpt("denseformer", n_loops=2).rule.alphas) == 2 * L
    assert [len(a) for a in gpt("denseformer", n_loops=2).rule.alphas] == [b + 2 for b in range(2 * L)]
    assert len(gpt("dynamic_dense", n_loops=2).rule.static) == 2 * L


@pytest.mark.parametrize("option", ["dilation", "period"])
def test_denseformer_refuses_a_non_positive_dilation_or_period(option):
    with pytest.raises(ConfigError, match=f"{option} must be a positive whole number"):
        gpt("denseformer", {option: 0})


# ---- LAuReL ----------------------------------------------------------------------------------------------------


def test_laurel_rw_commit_by_hand():
    model = gpt("laurel_rw")
    h, u = torch.tensor([[[1.0, -2.0]]]), torch.tensor([[[0.5, 4.0]]])
    weights = torch.tensor([2.0, -3.0])  # (α, β)
    assert torch.equal(model.rule.commit(h, u, weights), torch.tensor([[[2 * 0.5 - 3 * 1.0, 2 * 4.0 - 3 * -2.0]]]))


def test_laurel_lr_commit_by_hand():
    model = gpt("laurel_lr", {"rank": 1})
    down, up = model.rule.down[0], model.rule.up[0]
    with torch.no_grad():
        down.weight.zero_()
        down.weight[0, :2] = torch.tensor([1.0, 2.0])  # A h = h_0 + 2 h_1
        up.weight.zero_()
        up.weight[:2, 0] = torch.tensor([3.0, -1.0])  # B a = (3a, −a, 0, …)
    h, u = torch.zeros(1, 1, D), torch.ones(1, 1, D)
    h[..., 0], h[..., 1] = 1.0, 1.0  # A h = 3
    expected = h + u
    expected[..., 0] += 9.0
    expected[..., 1] -= 3.0
    assert torch.equal(model.rule.commit(h, u, down, up), expected)


def test_laurel_counts():
    rank = 3
    assert gpt("laurel_rw").n_params() - gpt().n_params() == 2 * 2 * L
    lr = gpt("laurel_lr", {"rank": rank})
    assert lr.n_params() - gpt().n_params() == 2 * L * 2 * rank * D
    assert lr.flops_per_token() - gpt().flops_per_token() == 6 * 2 * L * 2 * rank * D
    with pytest.raises(ConfigError, match="rank must be a positive whole number"):
        gpt("laurel_lr", {"rank": 0})


# ---- every new rule: counts and gradients ------------------------------------------------------------------------


@pytest.mark.parametrize("n_loops", [1, 2])
@pytest.mark.parametrize("variant", NEW_RULES)
def test_flops_match_torch_flop_counter(variant, n_loops):
    """6·N_matmul + attention equals 3× what torch counts (the rules' ``matmul_weights`` convention), to the per-loop
    rounding of growing sources (rrlib.rules.cross_depth)."""
    model = gpt(variant, n_loops=n_loops)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(torch.randint(0, VOCAB, (1, T)))
    rounding = 6 * T * (n_loops // 2)  # ≤ n_loops/2 multiply-adds per token, 6 FLOPs each
    assert abs(3 * counter.get_total_flops() - T * model.flops_per_token()) <= rounding


def test_dense_rules_count_their_weights_and_sums():
    s = [b + 2 for b in range(L)]  # sources of each block's average
    dense, dynamic, standard = gpt("denseformer"), gpt("dynamic_dense"), gpt()
    assert dense.n_params() - standard.n_params() == sum(s)
    assert dense.rule.matmul_weights() == sum(s) * D
    assert dynamic.n_params() - standard.n_params() == sum(n * D + n * n + n for n in s)
    assert dynamic.rule.matmul_weights() == sum(2 * n * D + n * n for n in s)


@pytest.mark.parametrize("variant", NEW_RULES)
def test_gradients_match_finite_differences_in_float64(variant):
    """The loss's gradient in the rule's parameters (and the first block's value weights, for value_residual),
    against central differences, at perturbed parameters."""
    model = gpt(variant, dtype=torch.float64)
    perturb(model.rule)
    idx = tokens(batch=1)
    params = [p for p in model.rule.parameters()] or [model.sublayers[0].fn.qkv.bias]

    def loss_of():  # the plain cross-entropy on the logits: the training loss accumulates its sum in fp32
        return F.cross_entropy(model(idx)[0].flatten(0, 1), idx.flatten())

    for p in params:
        grad = torch.autograd.grad(loss_of(), p)[0]
        flat, eps = p.detach().view(-1), 1e-6
        for k in range(0, flat.numel(), max(1, flat.numel() // 5)):
            with torch.no_grad():
                flat[k] += eps
                up = loss_of()
                flat[k] -= 2 * eps
                down = loss_of()
                flat[k] += eps
            assert abs((up - down).item() / (2 * eps) - grad.view(-1)[k].item()) < 1e-7


@pytest.mark.parametrize("variant", NEW_RULES)
def test_parameter_matching_widens_the_new_rules_to_reviews_count(variant):
    from rrlib.runs.presets import resolve_run
    review = resolve_run("family", "review", 0).model
    cfg = resolve_run("family", variant, 0).model
    from rrlib.model import count_params
    assert count_params(cfg) >= count_params(review)
    assert cfg.d_model > review.d_model  # each adds fewer parameters than Review's gates, so it is widened


# ---- against the authors' code (where $RRLIB_REFERENCE_CODE holds it) --------------------------------------------


def snapshot(name: str) -> Path:
    root = os.environ.get("RRLIB_REFERENCE_CODE")
    if not root or not (Path(root) / name).is_dir():
        pytest.skip(f"no {name} snapshot: set RRLIB_REFERENCE_CODE to a folder holding its checkout")
    return Path(root) / name


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def assert_equal_to_reference(model, params, reference_params, run_reference, idx):
    """Logits and the gradient of every parameter (the reference's own ones as ``reference_params``, the same
    tensors in the rule as ``params``) agree to 1e-12 relative."""
    logits = model(idx)[0]
    loss = logits.square().mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    shared = {id(p): g for p, g in zip(model.parameters(), grads)}
    ref_logits = run_reference(idx)
    ref_loss = ref_logits.square().mean()
    block_params = [p for n, p in model.named_parameters() if not n.startswith("rule.")]
    ref_grads = torch.autograd.grad(ref_loss, block_params + list(reference_params))
    assert relative_error(logits, ref_logits) < 1e-12
    for p, g in zip(block_params + list(params), ref_grads):
        assert relative_error(shared[id(p)], g.reshape(p.shape)) < 1e-12


@pytest.mark.parametrize("dilation,period", [(1, 1), (2, 1), (2, 2)])
def test_denseformer_equals_the_authors_dwa_modules(dilation, period):
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the code's accumulator slices are made as torch.Tensor() (the default)
    try:
        check_denseformer(dilation, period)
    finally:
        torch.set_default_dtype(default)


def check_denseformer(dilation, period):
    reference = load_module(snapshot("DenseFormer") / "denseformer" / "denseformer.py", "denseformer_reference")
    model = gpt("denseformer", {"dilation": dilation, "period": period}, dtype=torch.float64)
    perturb(model.rule)
    dwa = reference.DWAModules(L, dilation=dilation, period=period).double()
    with torch.no_grad():
        for mine, theirs in zip(model.rule.alphas, dwa.alphas):
            if mine is not None:
                theirs.weight.copy_(mine.view(1, -1))

    def run(idx):
        x = embed(model, idx)
        dwa.init_accumulators(x)
        for b in range(L):
            for i in (2 * b, 2 * b + 1):
                x = x + model.sublayers[i](x)
            x = dwa(x, b)
        return model.head(model.norm_f(x))

    pairs = [(mine, theirs.weight) for mine, theirs in zip(model.rule.alphas, dwa.alphas) if mine is not None]
    assert_equal_to_reference(model, [m for m, _ in pairs], [t for _, t in pairs], run, tokens())


def stub_mudd_imports(monkeypatch):
    """The two packages the MUDDFormer module imports but this comparison does not use: ``transformers`` (its
    model base class and config) and ``einops`` (one rearrange, written here)."""
    transformers = types.ModuleType("transformers")
    modeling_utils = types.ModuleType("transformers.modeling_utils")
    modeling_utils.PreTrainedModel = torch.nn.Module
    configuration_utils = types.ModuleType("transformers.configuration_utils")
    configuration_utils.PretrainedConfig = object
    einops = types.ModuleType("einops")

    def rearrange(x, pattern, C):
        assert pattern == "B T (C L) -> C B T L"
        return x.unflatten(-1, (C, -1)).movedim(-2, 0)

    einops.rearrange = rearrange
    for name, module in [("transformers", transformers), ("transformers.modeling_utils", modeling_utils),
                         ("transformers.configuration_utils", configuration_utils), ("einops", einops)]:
        monkeypatch.setitem(sys.modules, name, module)


def test_dynamic_dense_equals_the_authors_dense_blocks(monkeypatch):
    folder = snapshot("MUDDFormer") / "pytorch" / "muddformer"
    stub_mudd_imports(monkeypatch)
    monkeypatch.syspath_prepend(str(folder))
    reference = load_module(folder / "modeling_muddformer.py", "muddformer_reference")
    model = gpt("dynamic_dense", dtype=torch.float64)
    perturb(model.rule)
    rule = model.rule
    config = types.SimpleNamespace(norm_eps=1e-5, dense_type="l", dim=D, expand_last=False, round64=False)
    dense = [reference.MultiwayDynamicDenseBlock(config, b, last_layer=b == L - 1).double() for b in range(L)]
    statics = []
    with torch.no_grad():
        for b, block in enumerate(dense):
            block.w1.weight.copy_(rule.reads[b])
            block.w2.weight.copy_(rule.mixes[b])
            statics.append(rule.static[b].detach().clone().view(1, -1).requires_grad_())

    def run(idx):  # the model loop of modeling_muddformer.py l. 178-188, dense_type "l", around our blocks
        x = embed(model, idx)
        hiddens = [x]
        for b in range(L):
            for i in (2 * b, 2 * b + 1):
                x = x + model.sublayers[i](x)
            hiddens.append(x)
            dw = dense[b](x) + statics[b][:, None, None, :]
            x = dense[b].layer_mix(hiddens, dw)[0]
        return model.head(model.norm_f(x))

    params = [p for b in range(L) for p in (rule.reads[b], rule.mixes[b], rule.static[b])]
    reference_params = [p for b in range(L) for p in (dense[b].w1.weight, dense[b].w2.weight, statics[b])]
    assert_equal_to_reference(model, params, reference_params, run, tokens())


@pytest.mark.parametrize("variant", ["denseformer", "dynamic_dense"])
def test_dense_rules_recompute_gives_the_same_gradients(variant):
    """``recompute=True`` (rrlib.rules.cross_depth) recomputes each average in the backward pass: same numbers."""
    plain, again = gpt(variant, dtype=torch.float64), gpt(variant, {"recompute": True}, dtype=torch.float64)
    perturb(plain.rule)
    again.load_state_dict(plain.state_dict())
    idx = tokens()
    grads = [torch.autograd.grad(m(idx)[0].square().mean(), list(m.parameters())) for m in (plain, again)]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)



class _Anything:
    """Whatever the ResFormer module takes from ``transformers`` at import time and this comparison never runs: a
    decorator applied to a class gives the class back; anything else gives another ``_Anything``."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return args[0] if len(args) == 1 and isinstance(args[0], type) and not kwargs else _Anything()

    def __getattr__(self, name):
        return _Anything()

    def __getitem__(self, key):
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)


def stub_transformers(monkeypatch):
    class Stub(types.ModuleType):
        def __getattr__(self, name):
            return _Anything()

    for name in ["transformers", "transformers.activations", "transformers.cache_utils",
                 "transformers.modeling_attn_mask_utils", "transformers.modeling_flash_attention_utils",
                 "transformers.modeling_outputs", "transformers.modeling_rope_utils", "transformers.modeling_utils",
                 "transformers.pytorch_utils", "transformers.utils", "transformers.models",
                 "transformers.models.llama", "transformers.models.llama.configuration_llama"]:
        monkeypatch.setitem(sys.modules, name, Stub(name))


def test_value_residual_equals_the_authors_attention(monkeypatch):
    """The authors' ``LlamaAttention`` (eager) in place of each attention of this model, at copied weights, with
    rotary embedding off (cos 1, sin 0: this model has learned absolute positions) and a causal mask. Its softmax
    runs in float64 here: the code casts the scores to fp32 for it (``dtype=torch.float32``), a choice for bf16
    training that would cap a float64 comparison at fp32's precision."""
    folder = snapshot("Value-Residual-Learning") / "src" / "modeling"
    stub_transformers(monkeypatch)
    softmax = F.softmax
    monkeypatch.setattr(F, "softmax", lambda x, dim, dtype=None: softmax(x, dim))
    reference = load_module(folder / "modeling_llama_resformer.py", "resformer_reference")
    monkeypatch.setattr(reference, "LlamaRotaryEmbedding", lambda config: None)  # unused: positions come as cos, sin
    model = gpt("value_residual", dtype=torch.float64)
    config = types.SimpleNamespace(attention_dropout=0.0, hidden_size=D, num_attention_heads=4, num_key_value_heads=4,
                                   max_position_embeddings=T, rope_theta=1e4, attention_bias=True, pretraining_tp=1)
    attentions = {}
    with torch.no_grad():
        for i in range(0, model.shape.n_steps, 2):
            theirs = reference.LlamaAttention(config, layer_idx=i // 2).double()
            ours = model.sublayers[i].fn
            for k, proj in enumerate((theirs.q_proj, theirs.k_proj, theirs.v_proj)):
                proj.weight.copy_(ours.qkv.weight[k * D:(k + 1) * D])
                proj.bias.copy_(ours.qkv.bias[k * D:(k + 1) * D])
            theirs.o_proj.weight.copy_(ours.proj.weight)
            theirs.o_proj.bias.copy_(ours.proj.bias)
            attentions[i] = theirs
    position = (torch.ones(1, T, D // 4, dtype=torch.float64), torch.zeros(1, T, D // 4, dtype=torch.float64))
    mask = torch.zeros(T, T, dtype=torch.float64).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))

    def run(idx):
        x, first = embed(model, idx), []
        for i in range(model.shape.n_steps):
            sub = model.sublayers[i]
            if i % 2:
                x = x + sub(x)
            else:
                x = x + attentions[i](sub.norm(x), attention_mask=mask[None, None], position_embeddings=position,
                                      formal_layer_values=first)[0]
        return model.head(model.norm_f(x))

    theirs = [p for a in attentions.values() for p in a.parameters()]
    ours = [p for i in attentions for p in (model.sublayers[i].fn.qkv.weight, model.sublayers[i].fn.qkv.bias,
                                             model.sublayers[i].fn.proj.weight, model.sublayers[i].fn.proj.bias)]
    logits = model(tokens())[0]
    ref_logits = run(tokens())
    assert relative_error(logits, ref_logits) < 1e-12
    grads = torch.autograd.grad(logits.square().mean(), ours)
    ref_grads = dict(zip(map(id, theirs), torch.autograd.grad(ref_logits.square().mean(), theirs)))
    for i, attention in enumerate(attentions.values()):
        q, k, v, o = (ref_grads[id(getattr(attention, n).weight)] for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
        qb, kb, vb, ob = (ref_grads[id(getattr(attention, n).bias)] for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
        assert relative_error(grads[4 * i], torch.cat([q, k, v])) < 1e-12
        assert relative_error(grads[4 * i + 1], torch.cat([qb, kb, vb])) < 1e-12
        assert relative_error(grads[4 * i + 2], o) < 1e-12
        assert relative_error(grads[4 * i + 3], ob) < 1e-12


def test_a_value_mixing_rule_that_only_commits_still_gets_the_values(registry_as_it_was):
    """A ValueMixingRule never takes the fused (sublayer, commit) step, which would pass no values: one written with
    ``commit`` alone still sees every attention's values."""
    from rrlib.rules import register

    seen = []

    class CountsValues(ValueMixingRule):
        def commit(self, h, u):
            return h + u

        def values(self, state, i):
            return lambda v: seen.append(i) or v

    register("counts_values")(CountsValues)
    model = gpt("counts_values")
    model.hidden(tokens())
    assert seen == list(range(0, 2 * L, 2))
    assert torch.equal(model.hidden(tokens()), same_blocks(model).hidden(tokens()))
