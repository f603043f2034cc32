"""The GPT: architecture invariants, init, counting, and the paper's parameter counts."""
import dataclasses
import math

import pandas as pd
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from rrlib.home import REFERENCE_CSV
from rrlib.model import GPT, ModelConfig, count_params
from rrlib.rules import RULES
from rrlib.runs.presets import match_params, resolve_run

SMALL = ModelConfig(d_model=32, n_layers=2, n_heads=4, seq_len=16, vocab_size=97)


def small(variant="review", **kw):
    return GPT(dataclasses.replace(SMALL, variant=variant, **kw))


@pytest.mark.parametrize("variant", sorted(RULES))
def test_causal_every_variant(variant):
    model = small(variant)
    with torch.no_grad():  # give gates non-trivial values so they cannot hide a leak
        for p in model.rule.parameters():
            p.normal_(0, 0.3)
    idx = torch.randint(0, 97, (2, 16))
    logits, _ = model(idx)
    changed = idx.clone()
    changed[:, 9] = (changed[:, 9] + 1) % 97
    logits2, _ = model(changed)
    assert logits.shape == (2, 16, 97)
    torch.testing.assert_close(logits[:, :9], logits2[:, :9])
    assert not torch.allclose(logits[:, 9:], logits2[:, 9:])


def test_tied_embeddings():
    model = small()
    assert model.head.weight is model.wte.weight
    _, loss = model(torch.randint(0, 97, (2, 16)), torch.randint(0, 97, (2, 16)))
    loss.backward()
    assert model.wte.weight.grad is not None


def test_init_statistics():
    cfg = ModelConfig(d_model=256, n_layers=4, n_heads=4, seq_len=64, vocab_size=1000)
    model = GPT(cfg)
    sub = model.sublayers
    assert sub[0].fn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.03)
    assert sub[1].fn.fc.weight.std().item() == pytest.approx(0.02, rel=0.03)
    for proj in (sub[0].fn.proj, sub[1].fn.proj):
        assert proj.weight.std().item() == pytest.approx(0.02 / 8 ** 0.5, rel=0.03)
        assert torch.count_nonzero(proj.bias) == 0
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.03)
    assert torch.equal(sub[0].norm.weight, torch.ones(256))
    assert all(torch.count_nonzero(p) == 0 for p in model.rule.parameters())


def test_review_at_init_is_half_update():
    """The whole review model at init equals a standard model whose updates are halved."""
    torch.manual_seed(1)
    review = small("review")
    standard = small("standard")
    standard.load_state_dict({k: v for k, v in review.state_dict().items() if not k.startswith("rule.")})
    idx = torch.randint(0, 97, (2, 16))
    for sub in standard.sublayers:  # u/2 through the last linear of each sublayer
        with torch.no_grad():
            sub.fn.proj.weight.mul_(0.5)
            sub.fn.proj.bias.mul_(0.5)
    torch.testing.assert_close(review(idx)[0], standard(idx)[0], rtol=1e-5, atol=1e-5)


def _embedding_grad(variant, n_layers=24):
    torch.manual_seed(0)
    model = GPT(ModelConfig(d_model=32, n_layers=n_layers, n_heads=4, seq_len=16, vocab_size=97,
                            variant=variant))
    idx = torch.randint(0, 97, (4, 16))
    _, loss = model(idx, torch.randint(0, 97, (4, 16)))
    loss.backward()
    return model.wpe.weight.grad.norm().item()  # positions are not tied to the head


def test_identity_path_through_48_sublayers():
    shallow = _embedding_grad("standard", n_layers=1)
    for additive in ("standard", "review", "highway"):
        assert _embedding_grad(additive) > 0.1 * shallow
    for convex in ("review_convex", "highway_convex"):
        assert _embedding_grad(convex) < 1e-3 * _embedding_grad("review")


def test_looped_model_has_unique_layer_parameters():
    once = small("review")
    looped = small("review", n_loops=4)
    assert looped.n_params() == once.n_params()
    assert looped.n_matmul_params() - looped.head.weight.numel() == 4 * (
        once.n_matmul_params() - once.head.weight.numel())


def test_counts_add_up():
    model = small("highway")
    d, L, V, T = 32, 2, 97, 16
    per_block = 12 * d * d + 9 * d + 2 * d  # qkv, proj, fc, proj weights and biases; two norm gains
    gates = 2 * (d * d + d)
    assert model.n_params() == V * d + T * d + L * (per_block + gates) + d
    assert model.n_non_embedding_params() == model.n_params() - V * d - T * d
    assert model.n_matmul_params() == L * (12 * d * d + 2 * d * d) + V * d


@pytest.mark.parametrize("variant", ["standard", "review", "highway"])
def test_flops_match_torch_flop_counter(variant):
    """6·N_matmul + 12·L·d·T equals 3× the forward FLOPs torch counts (matmuls and attention)."""
    model = small(variant)
    idx = torch.randint(0, 97, (1, 16))
    # the math backend runs attention as two batched matmuls, which the counter sees (the fused CPU
    # kernel is invisible to it)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(idx)
    assert 3 * counter.get_total_flops() == 16 * model.flops_per_token()


def test_paper_parameter_counts():
    """Every (size, variant) cell of the paper's table, parameter-matched, to 0.01 M."""
    ref = pd.read_csv(REFERENCE_CSV).drop_duplicates(["size", "variant"])
    assert len(ref) == 15
    for row in ref.itertuples():
        variant = "review" if row.variant == "review_neutral" else row.variant
        cfg = resolve_run(row.size.lower(), variant, 0).model
        assert round(count_params(cfg) / 1e6, 2) == row.params_M, (row.size, variant, cfg.d_model)


def test_match_params_takes_first_width_that_reaches_review():
    base = ModelConfig(d_model=64, n_layers=4, n_heads=4, seq_len=32, vocab_size=257, variant="standard")
    matched = match_params(base)
    target = count_params(dataclasses.replace(base, variant="review"))
    assert matched.d_model % 4 == 0 and matched.d_model > 64
    assert count_params(matched) >= target
    assert count_params(dataclasses.replace(matched, d_model=matched.d_model - 4)) < target


def test_forward_is_deterministic():
    torch.manual_seed(3)
    a = small()
    torch.manual_seed(3)
    b = small()
    idx = torch.randint(0, 97, (2, 16))
    assert torch.equal(a(idx)[0], b(idx)[0])


def test_rejects_sequences_longer_than_context():
    with pytest.raises(ValueError, match="exceeds the context of 16"):
        small()(torch.zeros(1, 17, dtype=torch.long))


def test_scaled_rules_own_the_depth_scaling_so_output_projections_do_not_shrink_with_n():
    from rrlib.runs.presets import load_preset

    base = load_preset("looped8").model
    for variant, shrinks in (("scaled", False), ("scaled_loops", False), ("review", True), ("standard", True)):
        torch.manual_seed(0)
        model = GPT(dataclasses.replace(base, variant=variant, d_model=128))
        proj = torch.cat([m.proj.weight.flatten() for m in model.modules() if hasattr(m, "proj")])
        expected = 0.02 / math.sqrt(2 * 2 * 8) if shrinks else 0.02
        assert proj.std().item() == pytest.approx(expected, rel=0.05), variant
