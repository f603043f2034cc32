"""The gates' RMS norm with its backward written out (rrlib.rules.gate_norm): the same numbers, to the bit, as
ATen's ``rms_norm`` it replaces, in a whole model's loss and every gradient, for each rule that takes it."""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from rrlib.model import GPT, ModelConfig
from rrlib.rules import per_sublayer, protocol
from rrlib.rules.gate_norm import _GateRMS

SMALL = ModelConfig(d_model=48, n_layers=2, n_heads=4, seq_len=32, vocab_size=97)
GATED = ["review", "review_convex", "review_state_only", "review_update_only", "dynamic_dense"]


def _loss_and_grads(variant, dtype):
    torch.manual_seed(0)
    model = GPT(dataclasses.replace(SMALL, variant=variant)).to(dtype)
    with torch.no_grad():  # gates away from their zero init, so every path of the norm carries gradient
        for p in model.rule.parameters():
            p.normal_(0, 0.3)
    idx = torch.randint(0, 97, (3, 32), generator=torch.Generator().manual_seed(1))
    _, loss = model(idx, idx.roll(-1, 1))
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("variant", GATED)
def test_gate_norm_gives_atens_numbers_bitwise(variant, dtype, monkeypatch):
    monkeypatch.setattr(per_sublayer, "fused_review", lambda *a: None)  # Review's one-node form on a CPU
    calls = []
    original = _GateRMS.apply
    monkeypatch.setattr(_GateRMS, "apply", lambda *a: calls.append(1) or original(*a))
    written_out = _loss_and_grads(variant, dtype)
    assert calls, "the written-out norm was not used"
    monkeypatch.setattr(protocol, "gate_rms", lambda x, eps: F.rms_norm(x, (x.shape[-1],), eps=eps))
    aten = _loss_and_grads(variant, dtype)
    assert len(written_out) == len(aten)
    for mine, theirs in zip(written_out, aten):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert torch.equal(mine, theirs)


def test_gate_norm_without_gradient_is_atens():
    x = torch.randn(4, 8, 40)
    with torch.no_grad():
        assert torch.equal(protocol.rms(x.requires_grad_()), F.rms_norm(x, (40,), eps=protocol.RMS_EPS))
