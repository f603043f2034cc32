"""Each residual rule's formula at init, and the registry's contract."""
import copy
import math

import pytest
import torch

from rrlib.model import GPT, ModelConfig
from rrlib.rules import RULES, ConfigError, StreamShape, build_rule
from rrlib.rules.protocol import rms

# zero-init Highway gates, so every rule's formula at init is exact (the paper's N(0, 0.02) Highway init is
# pinned in tests/test_recipe.py)
SHAPE = StreamShape(d_model=16, n_layers=3, highway_gate_init="zero")


def _hu():
    return torch.randn(2, 5, 16), torch.randn(2, 5, 16)


def _fresh(name, shape=SHAPE, **options):
    rule = build_rule(name, shape, **options)
    rule.reset_parameters()
    return rule


def test_registry_has_the_paper_rules():
    assert {"standard", "review", "review_convex", "highway", "highway_convex", "rezero", "layerscale",
            "scaled"} <= set(RULES)


def test_unknown_variant_names_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown variant 'nope'; valid variants: .*review.*standard"):
        build_rule("nope", SHAPE)


def test_review_gate_is_exactly_one_half_at_init():
    h, u = _hu()
    rule = _fresh("review")
    for i in range(SHAPE.n_steps):
        assert torch.equal(rule.gate(h, i, u), torch.full_like(h, 0.5))


@pytest.mark.parametrize("name,expected", [
    ("standard", lambda h, u: h + u),
    ("review", lambda h, u: h + u / 2),
    ("highway", lambda h, u: h + u / 2),
    ("review_convex", lambda h, u: (h + u) / 2),
    ("highway_convex", lambda h, u: (h + u) / 2),
    ("rezero", lambda h, u: h),
    ("layerscale", lambda h, u: h + 0.1 * u),
    ("scaled", lambda h, u: h + u * math.sqrt(12 / 3)),  # N = 1, L = 3: ε = 1/√(L/12)
    ("scaled_loops", lambda h, u: h + u * math.sqrt(12 / 3)),
])
def test_write_at_init(name, expected):
    h, u = _hu()
    rule = _fresh(name)
    torch.testing.assert_close(rule.write(h, 0, u), expected(h, u), rtol=1e-6, atol=1e-6)


def test_review_gate_reads_state_and_proposal_through_rms():
    h, u = _hu()
    rule = _fresh("review")
    d = SHAPE.d_model
    g = rule.gates[1]
    with torch.no_grad():
        g.weight.normal_()
        g.bias.normal_()
    expected = torch.sigmoid(torch.cat([rms(h), rms(u)], -1) @ g.weight.T + g.bias)
    torch.testing.assert_close(rule.gate(h, 1, u), expected, rtol=1e-5, atol=1e-6)
    # rms is scale-free: the gate does not change when h or u is rescaled
    torch.testing.assert_close(rule.gate(3 * h, 1, 2 * u), expected, rtol=1e-4, atol=1e-5)
    assert g.weight.shape == (d, 2 * d)


def test_gate_parameter_counts():
    d, n = SHAPE.d_model, SHAPE.n_unique
    count = lambda name: sum(p.numel() for p in build_rule(name, SHAPE).parameters())
    assert count("review") == count("review_convex") == n * (2 * d * d + d)
    assert count("highway") == count("highway_convex") == n * (d * d + d)
    assert count("rezero") == n and count("layerscale") == n * d
    assert count("standard") == count("scaled") == 0


def test_highway_convex_carry_bias():
    h, u = _hu()
    rule = _fresh("highway_convex", carry_bias=-2.0)
    g = torch.sigmoid(torch.tensor(-2.0))
    torch.testing.assert_close(rule.write(h, 0, u), (1 - g) * h + g * u)


def test_layerscale_follows_cait_depth_rule():
    assert _fresh("layerscale", StreamShape(8, 12)).scale[0, 0].item() == pytest.approx(0.1)
    assert _fresh("layerscale", StreamShape(8, 24)).scale[0, 0].item() == pytest.approx(1e-5)
    assert _fresh("layerscale", StreamShape(8, 36)).scale[0, 0].item() == pytest.approx(1e-6)


def test_scaled_epsilon_follows_the_looped_scaling_paper():
    # ε = λ / (N^p · √(L/12)): at its reference depth L = 12, 1/N and 1/√N exactly
    assert _fresh("scaled", StreamShape(8, n_layers=12, n_loops=8)).eps == pytest.approx(1 / 8)
    assert _fresh("scaled_loops", StreamShape(8, n_layers=12, n_loops=8)).eps == pytest.approx(1 / math.sqrt(8))
    looped = StreamShape(8, n_layers=3, n_loops=4)
    assert _fresh("scaled", looped, lam=2.0).eps == pytest.approx(2.0 / (4 * 0.5))
    assert _fresh("scaled", looped, scaling="loops").eps == pytest.approx(1 / (2 * 0.5))
    with pytest.raises(ConfigError, match="valid choices: depth, loops"):
        build_rule("scaled", looped, scaling="wrong")
    # in the abstract's convention ε = λ_abstract/(N√L): λ = 1 here is λ_abstract = √12 (the docstring's note)
    study = StreamShape(8, n_layers=2, n_loops=4)  # the looped study's L = 2
    assert _fresh("scaled", study).eps == pytest.approx(math.sqrt(12) / (4 * math.sqrt(2)))
    assert _fresh("scaled", study, lam=1 / math.sqrt(12)).eps == pytest.approx(1 / (4 * math.sqrt(2)))


def test_bad_rule_option_is_one_sentence():
    with pytest.raises(ConfigError, match="bad options"):
        build_rule("review", SHAPE, carry_bias=1.0)


def test_looped_rule_reuses_unique_parameters():
    looped = StreamShape(16, n_layers=3, n_loops=4)
    rule = _fresh("review", looped)
    assert len(rule.gates) == 6
    h, u = _hu()
    with torch.no_grad():
        rule.gates[2].bias.fill_(1.0)
    torch.testing.assert_close(rule.write(h, 2, u), rule.write(h, 2 + 6 * 3, u))


@pytest.mark.parametrize("native_setting", ["1", "0"], ids=["kernels", "pytorch"])
@pytest.mark.parametrize("variant", list(RULES))
def test_every_rule_runs_forward_and_backward_in_float64(monkeypatch, variant, native_setting):
    """A float64 model stays float64 through every registered rule, on both code paths (rrlib.rules.native's CPU
    kernels where they apply, and ``RRLIB_NATIVE=0``), with float64 gradients, and computes what the float32
    model computes, to float32 rounding."""
    monkeypatch.setenv("RRLIB_NATIVE", native_setting)
    torch.manual_seed(0)
    single = GPT(ModelConfig(d_model=32, n_layers=3, n_heads=4, seq_len=16, vocab_size=97, variant=variant))
    with torch.no_grad():  # off the init, so that no gate or coefficient hides a path behind a zero
        for p in single.rule.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    double = copy.deepcopy(single).double()
    idx = torch.randint(0, 97, (2, 16))
    hidden = double.hidden(idx)
    assert hidden.dtype == torch.float64
    (hidden * torch.randn(hidden.shape, dtype=torch.float64)).sum().backward()
    for name, p in double.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.float64 and torch.isfinite(p.grad).all(), name
    assert double.wte.weight.grad.abs().max() > 0
    expected = single.hidden(idx)
    torch.testing.assert_close(hidden.float(), expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item())
