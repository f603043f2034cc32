"""The optimised cross-depth rules compute what their plain formulas give.

Each reference below is the rule's plain formula, kept here and not in the library: every read stacks its
sources and normalises them all again, weighted sums are einsums, Sinkhorn works on (…, n, n). The model's
forward and the gradients of every parameter must agree with it to float tolerance on random inputs and
random (perturbed) rule parameters, unlooped and looped. The ``recompute`` option must give the plain path's
gradients and keep less for the backward pass.
"""
import pytest
import torch

from rrlib.rules.depth_mixing.norms import SINKHORN_ITERS
from rrlib.rules.protocol import rms

from test_cross_depth import gpt, perturb


def _attend(query, sources):
    """Softmax over depth of a (S, B, T, d) stack, by the plain formula."""
    values = torch.stack(sources)
    if len(values) == 1:
        return values[0]
    weights = torch.einsum("d,sbtd->sbt", query, rms(values)).softmax(0)
    return torch.einsum("sbt,sbtd->btd", weights, values)


def _sinkhorn(logits):
    m = logits.float()
    m = (m - m.amax((-2, -1), keepdim=True).detach()).exp()
    for _ in range(SINKHORN_ITERS):
        m = m / m.sum(-2, keepdim=True)
        m = m / m.sum(-1, keepdim=True)
    return m


def _repeat(values, counts):
    return torch.repeat_interleave(values, torch.tensor(counts))


def block_attnres(rule, x0, sublayer, steps):
    done, open_block = [x0], None
    for i in range(steps):
        u = sublayer(i, _attend(rule.queries[rule.shape.unique(i)], done + ([] if open_block is None else [open_block])))
        open_block = u if open_block is None else open_block + u
        if (i + 1) % rule.block_size == 0:
            done, open_block = done + [open_block], None
    return _attend(rule.head_query, done + ([] if open_block is None else [open_block]))


def delta_attnres(rule, x0, sublayer, steps):
    h, sources = x0, [x0]
    for i in range(steps):
        k = rule.shape.unique(i)
        routed = _attend(rule.queries[k], sources)
        u = sublayer(i, h + (routed if rule.gates is None else rule.gates[k] * routed))
        h, sources = h + u, sources + [u]
    return h


def block_delta_attnres(rule, x0, sublayer, steps):
    """Step by step as the reference code's ``delta_block`` loop, with δ_k = h_{kP} − h_{(k−1)P}: the new delta
    joins before block k's first read, or (the code's timing, ``rule.lag``) right after it."""
    h, start, sources = x0, x0, [x0]
    for i in range(steps):
        opens = i > 0 and i % rule.block_size == 0  # step i opens a block: the one before it is complete
        if opens and not rule.lag:
            sources, start = sources + [h - start], h
        k = rule.shape.unique(i)
        routed = _attend(rule.queries[k], sources)
        u = sublayer(i, h + (routed if rule.gates is None else rule.gates[k] * routed))
        if opens and rule.lag:
            sources, start = sources + [h - start], h
        h = h + u
    return h


def mgr(rule, x0, sublayer, steps):
    streams, h, scale = x0.unsqueeze(0), x0, rule.shape.d_model ** -0.5
    for i in range(steps):
        u, k = sublayer(i, h), rule.shape.unique(i)
        if i < rule.n_streams - 1:
            streams = torch.cat([streams, u.unsqueeze(0)])
        else:
            score = torch.einsum("d,nbtd->nbt", rule.gate_queries[k], rms(streams)) * scale
            beta = torch.sigmoid(score + rule.gate_bias[k].view(-1, 1, 1))
            streams = streams + beta.unsqueeze(-1) * (u - streams)
        h = _attend(rule.pool_queries[k] * scale, list(streams))
    return h


def _hc_weights(rule, streams, i):
    k, n = rule.shape.unique(i), rule.n_streams
    c = rule.static[k] + _repeat(rule.scales[k], [n + 1, 1]) * torch.tanh(rms(streams) @ rule.dynamic[k].T)
    return c[..., 0], c[..., n + 1], c[..., 1:n + 1].transpose(-1, -2)


def _mhc_weights(rule, x, i):
    k, n = rule.shape.unique(i), rule.n_streams
    logits = _repeat(rule.alpha[k], [n, n, n * n]) * (rms(x.flatten(-2)) @ rule.phi[k].T) + rule.bias[k]
    return (torch.sigmoid(logits[..., :n]), 2 * torch.sigmoid(logits[..., n:2 * n]),
            _sinkhorn(logits[..., 2 * n:].unflatten(-1, (n, n))))


def hyper_streams(weights):
    def reference(rule, x0, sublayer, steps):
        streams = x0.unsqueeze(-2).expand(*x0.shape[:-1], rule.n_streams, x0.shape[-1])
        read, write, mix = weights(rule, streams, 0)
        for i in range(steps):
            u = sublayer(i, torch.einsum("btn,btnd->btd", read, streams))
            streams = torch.einsum("btij,btjd->btid", mix, streams) + write.unsqueeze(-1) * u.unsqueeze(-2)
            if i + 1 < steps:
                read, write, mix = weights(rule, streams, i + 1)
        return streams.sum(-2)
    return reference


REFERENCES = {
    "attnres": ({}, block_attnres),
    "attnres_block": ({}, block_attnres),
    "attnres_block_2": ({"block_size": 2}, block_attnres),
    "delta_attnres": ({}, delta_attnres),
    "delta_attnres_gated": ({"identity_gate": True}, delta_attnres),
    "delta_attnres_block_2": ({"block_size": 2}, block_delta_attnres),
    "delta_attnres_block_lagged": ({"block_size": 2, "delta_timing": "after_block_start"}, block_delta_attnres),
    "mgr": ({}, mgr),
    "hc": ({}, hyper_streams(_hc_weights)),
    "mhc": ({}, hyper_streams(_mhc_weights)),
}


def _variant(case):
    return case.rsplit("_", 1)[0] if case[-1].isdigit() or case.endswith(("_gated", "_lagged")) else case


def assert_float_close(actual, expected, msg=None):
    """Equal to fp32 rounding at the tensor's own scale: sums over sources and tokens are reordered."""
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item(), msg=msg)


def _forward_and_grads(model, idx, hidden):
    """hidden(idx) projected on a fixed random direction, and the gradients of every parameter."""
    out = hidden(idx)
    loss = (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(7))).sum()
    return out.detach(), torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)


@pytest.mark.parametrize("n_loops", [1, 2])
@pytest.mark.parametrize("case", list(REFERENCES))
def test_optimised_rule_equals_its_first_formula(case, n_loops):
    options, reference = REFERENCES[case]
    torch.manual_seed(0)
    model = gpt(_variant(case), options, n_loops)
    perturb(model.rule)
    if case == "mhc":  # logits of order one, so that Sinkhorn's iterations all matter
        with torch.no_grad():
            model.rule.phi.normal_(0, 0.1)
    idx = torch.randint(0, 97, (2, 16))

    def first_formula(idx):
        x0 = model.wte(idx) + model.wpe(torch.arange(idx.shape[1]))
        sublayer = lambda i, h: model.sublayers[model.shape.unique(i)](h)  # noqa: E731
        return model.norm_f(reference(model.rule, x0, sublayer, model.shape.n_steps))

    out, grads = _forward_and_grads(model, idx, model.hidden)
    ref_out, ref_grads = _forward_and_grads(model, idx, first_formula)
    assert_float_close(out, ref_out)
    for (name, _), grad, ref in zip(model.named_parameters(), grads, ref_grads):
        assert (grad is None) == (ref is None), name
        if grad is not None:
            assert_float_close(grad, ref, msg=name)


def _saved_bytes(model, idx):
    """Bytes the autograd graph of one forward pass keeps for backward (each storage once)."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _, loss = model(idx, idx)
    return sum(storages.values()), loss


@pytest.mark.parametrize("case", list(REFERENCES))
def test_recompute_gives_the_plain_gradients_and_keeps_less(case):
    options, _ = REFERENCES[case]
    torch.manual_seed(0)
    plain = gpt(_variant(case), options)
    perturb(plain.rule)
    recomputed = gpt(_variant(case), {**options, "recompute": True})
    recomputed.load_state_dict(plain.state_dict())
    idx = torch.randint(0, 97, (2, 16))
    kept, loss = _saved_bytes(plain, idx)
    kept_recomputed, loss_recomputed = _saved_bytes(recomputed, idx)
    assert torch.equal(loss, loss_recomputed)
    grads = torch.autograd.grad(loss, list(plain.parameters()))
    grads_recomputed = torch.autograd.grad(loss_recomputed, list(recomputed.parameters()))
    for (name, _), grad, grad_recomputed in zip(plain.named_parameters(), grads, grads_recomputed):
        assert_float_close(grad_recomputed, grad, msg=name)
    assert kept_recomputed < kept


# ---- the hand-written backward passes, each against autograd of its plain formula, in float64 ----


def _grads(fn, inputs, grad_out):
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*inputs)
    out.backward(grad_out)
    return out.detach(), [x.grad for x in inputs]


@pytest.mark.parametrize("shape", [(3, 5, 8), (2, 4, 3, 7)])
def test_inverse_rms_backward_is_autograds(shape):
    from rrlib.rules.depth_mixing.norms import inverse_rms
    from rrlib.rules.protocol import RMS_EPS
    x = torch.randn(shape, dtype=torch.float64) * 3
    plain = lambda x: torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS)  # noqa: E731
    grad = torch.randn(*shape[:-1], 1, dtype=torch.float64)
    (out, (g,)), (ref, (g_ref,)) = _grads(inverse_rms, [x], grad), _grads(plain, [x], grad)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(g, g_ref)


def test_sinkhorn_iterations_backward_is_autograds():
    from rrlib.rules.depth_mixing.norms import _Normalise

    def plain(m):
        for _ in range(SINKHORN_ITERS):
            m = m / m.sum(0, keepdim=True)
            m = m / m.sum(1, keepdim=True)
        return m

    m = torch.rand(4, 4, 37, dtype=torch.float64) + 0.1
    grad = torch.randn(4, 4, 37, dtype=torch.float64)
    (out, (g,)), (ref, (g_ref,)) = _grads(lambda m: _Normalise.apply(m, SINKHORN_ITERS), [m], grad), \
        _grads(plain, [m], grad)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(g, g_ref)
    assert g.abs().max() > 1e-3  # a live gradient, not two zeros


def test_stream_read_and_write_backward_are_autograds():
    from rrlib.rules.depth_mixing.streams import stream_read, stream_write
    B, T, n, d = 2, 5, 4, 6
    f64 = dict(dtype=torch.float64)
    streams, u = torch.randn(B, T, n, d, **f64), torch.randn(B, T, d, **f64)
    weights, mix, write = torch.randn(B, T, n, **f64), torch.randn(B, T, n, n, **f64), torch.randn(B, T, n, **f64)
    read_plain = lambda w, s: torch.einsum("btj,btjd->btd", w, s)  # noqa: E731
    read_first_plain = lambda w, s: torch.einsum("jbt,jbtd->btd", w, s)  # noqa: E731  (MGR's layout)
    write_plain = lambda m, s, b, u: torch.einsum("btij,btjd->btid", m, s) + b[..., None] * u[..., None, :]  # noqa: E731
    for fn, plain, inputs, grad in (
            (lambda w, s: stream_read(w, s, -2), read_plain, [weights, streams], torch.randn(B, T, d, **f64)),
            (lambda w, s: stream_read(w, s, 0), read_first_plain,
             [weights.permute(2, 0, 1).contiguous(), streams.permute(2, 0, 1, 3).contiguous()],
             torch.randn(B, T, d, **f64)),
            (stream_write, write_plain, [mix, streams, write, u], torch.randn(B, T, n, d, **f64))):
        (out, grads), (ref, grads_ref) = _grads(fn, inputs, grad), _grads(plain, inputs, grad)
        torch.testing.assert_close(out, ref)
        for g, g_ref in zip(grads, grads_ref):
            torch.testing.assert_close(g, g_ref)
