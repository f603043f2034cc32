"""Review's commit as one node on a CPU (rrlib.rules.review_gate): the ATen form's numbers, to rounding, forward and
backward, and the ATen form itself wherever the node does not apply."""
import dataclasses

import pytest
import torch

from rrlib.model import GPT, ModelConfig
from rrlib.rules.per_sublayer import Review
from rrlib.rules import review_gate

SMALL = ModelConfig(d_model=48, n_layers=2, n_heads=4, seq_len=32, vocab_size=97, variant="review")


def _commit(h, u, gate, fused):
    rule = Review.__new__(Review)  # commit needs no state of its own
    if fused:
        return Review.commit(rule, h, u, gate)
    return h + torch.sigmoid(gate(torch.cat([review_gate_rms(h), review_gate_rms(u)], -1))) * u


def review_gate_rms(x):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=review_gate.RMS_EPS)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_fused_review_matches_the_aten_form(kernels, dtype, tol):
    torch.manual_seed(0)
    gate = torch.nn.Linear(2 * 24, 24).to(dtype)
    h, u, g = (torch.randn(3, 40, 24, dtype=dtype) * s for s in (1.0, 3.0, 1.0))
    results = []
    for fused in (True, False):
        leaves = [h.clone().requires_grad_(), u.clone().requires_grad_()]
        gate.zero_grad()
        out = _commit(*leaves, gate, fused)
        out.backward(g)
        results.append([out.detach(), *(x.grad for x in leaves), gate.weight.grad.clone(), gate.bias.grad.clone()])
    for mine, theirs in zip(*results):
        torch.testing.assert_close(mine, theirs, rtol=tol, atol=tol)


def test_review_model_takes_the_fused_node_and_its_ablations_do_not(kernels, monkeypatch):
    calls = []
    original = review_gate._Review.apply
    monkeypatch.setattr(review_gate._Review, "apply", lambda *a: calls.append(1) or original(*a))
    idx = torch.randint(0, 97, (2, 32))
    for variant, expected in (("review", 4), ("review_state_only", 0), ("review_update_only", 0)):
        calls.clear()
        GPT(dataclasses.replace(SMALL, variant=variant))(idx, idx)[1].backward()
        assert len(calls) == expected, variant


def test_fused_review_declines_where_it_does_not_apply(kernels):
    gate = torch.nn.Linear(16, 8)
    h = torch.randn(2, 5, 8)
    assert review_gate.fused_review(gate, h, torch.randn(2, 5, 8)) is not None
    assert review_gate.fused_review(gate, h, torch.randn(2, 8, 5).transpose(1, 2)) is None  # not contiguous
    assert review_gate.fused_review(gate.to(torch.bfloat16), h.bfloat16(), h.bfloat16()) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert review_gate.fused_review(gate.float(), h, h) is None
