"""The AttnRes family's weighted sum over depth on rrlib.rules.native's CPU kernel: the PyTorch form's numbers, to
rounding, forward and backward, and the PyTorch form wherever the kernel does not apply."""
import dataclasses

import pytest
import torch

from rrlib.model import GPT, ModelConfig
from rrlib.rules.depth_mixing import attention


def _mix_and_grads(weights, values, grad):
    leaves = [weights.clone().requires_grad_()] + [v.clone().requires_grad_() for v in values]
    out = attention.depth_mix(leaves[0], leaves[1:])
    out.backward(grad)
    return [out.detach()] + [x.grad for x in leaves]


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_depth_mix_kernel_matches_the_pytorch_form(kernels, dtype, tol, monkeypatch):
    torch.manual_seed(0)
    S, shape = 5, (3, 20, 37)
    weights = torch.randn(*shape[:-1], S, dtype=dtype).softmax(-1)
    values = [torch.randn(shape, dtype=dtype) for _ in range(S)]
    grad = torch.randn(shape, dtype=dtype)
    calls = []
    original = kernels.depth_mix
    monkeypatch.setattr(attention, "kernels_for", lambda *t: type("K", (), {
        "depth_mix": lambda self, *a: calls.append(1) or original(*a),
        "depth_mix_backward": lambda self, *a: kernels.depth_mix_backward(*a)})())
    mine = _mix_and_grads(weights, values, grad)
    assert calls, "the kernel was not used"
    monkeypatch.setattr(attention, "kernels_for", lambda *t: None)
    theirs = _mix_and_grads(weights, values, grad)
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def test_depth_mix_takes_the_pytorch_form_for_broadcast_sources(kernels, monkeypatch):
    monkeypatch.setattr(attention, "kernels_for", lambda *t: pytest.fail("the kernel was asked for"))
    weights = torch.rand(2, 4, 2)
    out = attention.depth_mix(weights, [torch.randn(2, 4, 8), torch.randn(1, 4, 8)])
    assert out.shape == (2, 4, 8)


@pytest.mark.parametrize("variant", ["attnres", "attnres_block", "delta_attnres", "delta_attnres_block"])
def test_attnres_models_agree_with_and_without_the_kernel(kernels, variant, monkeypatch):
    config = ModelConfig(d_model=32, n_layers=2, n_heads=4, seq_len=16, vocab_size=97, variant=variant)
    idx = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(0))
    results = []
    for use_kernel in (True, False):
        if not use_kernel:
            monkeypatch.setattr(attention, "_native", lambda *a: None)
        torch.manual_seed(0)
        model = GPT(dataclasses.replace(config)).double()
        with torch.no_grad():
            for p in model.rule.parameters():
                p.normal_(0, 0.3)
        _, loss = model(idx, idx.roll(-1, 1))
        loss.backward()
        results.append([loss.detach()] + [p.grad for p in model.parameters() if p.grad is not None])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
