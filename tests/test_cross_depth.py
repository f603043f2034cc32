"""Cross-depth rules (AttnRes, Block AttnRes, Delta AttnRes, MGR, HC, mHC): each one's init, invariants and counts,
through the whole GPT and on the rule alone."""
import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from rrlib.model import GPT, ModelConfig, count_params
from rrlib.rules import RULES, ConfigError, StreamShape, build_rule
from rrlib.rules.depth_mixing.hyper_weights import mhc_weights_plain
from rrlib.rules.depth_mixing.norms import projected_rms, sinkhorn
from rrlib.rules.multi_stream import mgr_carry_bias

D, L, N_STREAMS = 32, 3, 4
U = 2 * L  # unique sublayers
# (variant, options) -> rule parameters the model adds: the formula each docstring gives
OVERHEAD = {
    ("attnres", ()): (U + 1) * D,  # a query per sublayer and one for the head
    ("attnres_block", ()): (U + 1) * D,
    ("delta_attnres", ()): U * D,
    ("delta_attnres", (("identity_gate", True),)): U * D + U,
    ("delta_attnres_block", ()): U * D,
    ("delta_attnres_block", (("block_size", 2), ("identity_gate", True))): U * D + U,
    ("delta_attnres_block", (("block_size", 2), ("delta_timing", "after_block_start"))): U * D,
    ("mgr", ()): U * (2 * D + N_STREAMS),  # w_β, w_α, b
    ("hc", ()): U * (N_STREAMS * (N_STREAMS + 2) + D * (N_STREAMS + 2) + 2),  # static, dynamic, s_α and s_β
    ("mhc", ()): U * ((N_STREAMS * D + 1) * (N_STREAMS ** 2 + 2 * N_STREAMS) + 3),  # φ, b, α
}
VARIANTS = list(OVERHEAD)
IDS = [v + "".join(f"-{k}" for k, _ in opts) for v, opts in VARIANTS]
# rows an unlooped model never reads (each docstring names them); a looped model reads every row
UNREAD = {"attnres": {"queries": [0]}, "attnres_block": {"queries": [0]}, "delta_attnres": {"queries": [0]},
          "mgr": {"gate_queries": [0, 1, 2], "gate_bias": [0, 1, 2]}}


def unread(variant, options, n_loops):
    """Rows an unlooped model never reads; Block Delta AttnRes's first block sees x0 alone (and, with the reference
    code's timing, the second block's first sublayer too)."""
    if n_loops > 1:
        return {}
    if variant == "delta_attnres_block":
        options = dict(options)
        lag = options.get("delta_timing") == "after_block_start"
        return {"queries": list(range(options.get("block_size", 4) + lag))}
    return UNREAD.get(variant, {})


def gpt(variant="standard", options=(), n_loops=1):
    """The test GPT; ``options`` as a dict or as (name, value) pairs."""
    return GPT(ModelConfig(d_model=D, n_layers=L, n_heads=4, seq_len=16, vocab_size=97, variant=variant,
                           n_loops=n_loops, rule_options=dict(options)))


def perturb(module, std=0.3):
    """Non-zero rule parameters, so that neither a gate nor a zero query can hide a leak or a dead path."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, std)


def run_stream(model, idx):
    """The model's residual loop by hand: every sublayer's input, and what the head reads before its norm."""
    x0 = model.wte(idx) + model.wpe(torch.arange(idx.shape[1]))
    rule, state, inputs = model.rule, model.rule.begin(x0), []
    for i in range(model.shape.n_steps):
        inputs.append(rule.read(state, i))
        state = rule.write(state, i, model.sublayers[model.shape.unique(i)](inputs[-1]))
    return inputs, rule.end(state)


def with_blocks_of(model):
    """A standard GPT carrying ``model``'s embeddings, blocks and norms."""
    standard = gpt("standard", n_loops=model.cfg.n_loops)
    standard.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("rule.")})
    return standard


def test_all_cross_depth_rules_are_registered():
    assert {"attnres", "attnres_block", "delta_attnres", "delta_attnres_block", "mgr", "hc", "mhc"} <= set(RULES)


# ---- through the whole GPT ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_loops", [1, 2])
@pytest.mark.parametrize("variant,options", VARIANTS, ids=IDS)
def test_shapes_and_causality(variant, options, n_loops):
    model = gpt(variant, options, n_loops)
    perturb(model.rule)
    idx = torch.randint(0, 97, (2, 16))
    logits, _ = model(idx)
    changed = idx.clone()
    changed[:, 9] = (changed[:, 9] + 1) % 97
    logits2, _ = model(changed)
    assert logits.shape == (2, 16, 97) and torch.isfinite(logits).all()
    torch.testing.assert_close(logits[:, :9], logits2[:, :9])
    assert not torch.allclose(logits[:, 9:], logits2[:, 9:])


@pytest.mark.parametrize("variant,options", VARIANTS, ids=IDS)
def test_parameter_overhead_and_looping(variant, options):
    model, looped = gpt(variant, options), gpt(variant, options, n_loops=2)
    overhead = model.n_params() - gpt().n_params()
    assert overhead == OVERHEAD[variant, options] == sum(p.numel() for p in model.rule.parameters())
    assert looped.n_params() == model.n_params()  # loops reuse the unique layers' rule parameters
    assert count_params(model.cfg) == model.n_params()  # also builds on the meta device (parameter matching)


@pytest.mark.parametrize("n_loops", [1, 2])
@pytest.mark.parametrize("variant,options", VARIANTS, ids=IDS)
def test_backward_reaches_every_read_parameter(variant, options, n_loops):
    torch.manual_seed(1)
    model = gpt(variant, options, n_loops)
    perturb(model.rule)
    _, loss = model(torch.randint(0, 97, (2, 16)), torch.randint(0, 97, (2, 16)))
    loss.backward()
    never = unread(variant, options, n_loops)
    for name, p in model.rule.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        rows = p.grad.abs().reshape(p.shape[0], -1).sum(1) if p.shape[0] == U else p.grad.abs().sum().view(1)
        for row, size in enumerate(rows):
            assert (size == 0) == (row in never.get(name, [])), (name, row)


@pytest.mark.parametrize("n_loops", [1, 2])
@pytest.mark.parametrize("variant,options", VARIANTS, ids=IDS)
def test_flops_match_torch_flop_counter(variant, options, n_loops):
    """6·N_matmul + attention equals 3× what torch counts, to the per-loop rounding of growing sources."""
    model = gpt(variant, options, n_loops)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(torch.randint(0, 97, (1, 16)))
    rounding = 6 * 16 * (n_loops // 2)  # ≤ n_loops/2 multiply-adds per token, 6 FLOPs each, 16 tokens
    assert abs(3 * counter.get_total_flops() - 16 * model.flops_per_token()) <= rounding
    assert model.flops_per_token() > gpt(n_loops=n_loops).flops_per_token()


@pytest.mark.parametrize("variant,options", VARIANTS, ids=IDS)
def test_depth_mixing_keeps_the_fp32_stream_under_autocast(variant, options):
    """Like the standard h + u, every sublayer input and the head's state stay fp32 under bf16 autocast."""
    model = gpt(variant, options)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inputs, end = run_stream(model, torch.randint(0, 97, (2, 16)))
    assert all(h.dtype == torch.float32 for h in inputs + [end])


# ---- AttnRes and Block AttnRes -------------------------------------------------------------------------------


def _stream_of(rule, steps, shape=(2, 5, 16)):
    """begin, then ``steps`` writes of random outputs; returns what each read saw, the outputs and the end."""
    x0, outputs, reads = torch.randn(shape), [], []
    state = rule.begin(x0)
    for i in range(steps):
        reads.append(rule.read(state, i))
        outputs.append(torch.randn(shape))
        state = rule.write(state, i, outputs[-1])
    return x0, outputs, reads, rule.end(state)


def _mean(sources):
    return torch.stack(sources).mean(0)


def test_attnres_at_zero_queries_is_the_mean_of_all_sources():
    rule = build_rule("attnres", StreamShape(16, n_layers=3))
    x0, u, reads, end = _stream_of(rule, 6)
    for i, h in enumerate(reads):
        torch.testing.assert_close(h, _mean([x0] + u[:i]))
    torch.testing.assert_close(end, _mean([x0] + u))


def test_block_attnres_sources_are_the_embedding_blocks_and_the_open_block():
    rule = build_rule("attnres_block", StreamShape(16, n_layers=3), block_size=2)
    x0, u, reads, end = _stream_of(rule, 6)
    b1, b2, b3 = u[0] + u[1], u[2] + u[3], u[4] + u[5]
    expected = [[x0], [x0, u[0]], [x0, b1], [x0, b1, u[2]], [x0, b1, b2], [x0, b1, b2, u[4]]]
    for h, sources in zip(reads, expected):
        torch.testing.assert_close(h, _mean(sources))
    torch.testing.assert_close(end, _mean([x0, b1, b2, b3]))
    assert [rule.n_sources(i) for i in range(7)] == [len(s) for s in expected] + [4]


def test_full_attnres_is_block_attnres_with_blocks_of_one():
    full = gpt("attnres", n_loops=2)
    perturb(full.rule)
    blocks = gpt("attnres_block", {"block_size": 1}, n_loops=2)
    blocks.load_state_dict(full.state_dict())
    idx = torch.randint(0, 97, (2, 16))
    assert torch.equal(full(idx)[0], blocks(idx)[0])


# ---- Delta AttnRes --------------------------------------------------------------------------------------------


def test_delta_attnres_with_identity_gate_is_exactly_standard_at_init():
    model = gpt("delta_attnres", {"identity_gate": True})
    idx = torch.randint(0, 97, (2, 16))
    assert torch.equal(model(idx)[0], with_blocks_of(model)(idx)[0])


def test_delta_attnres_adds_the_mean_of_the_sources_to_the_stream():
    rule = build_rule("delta_attnres", StreamShape(16, n_layers=3))
    x0, u, reads, end = _stream_of(rule, 6)
    for i, h in enumerate(reads):
        stream = x0 + sum(u[:i], torch.zeros_like(x0))
        torch.testing.assert_close(h, stream + _mean([x0] + u[:i]))
    torch.testing.assert_close(end, x0 + sum(u, torch.zeros_like(x0)))  # the head reads the stream


def test_block_delta_attnres_sources_are_block_start_differences():
    """δ_0 = x0, δ_k = h_{kP} − h_{(k−1)P}, from the stream itself; each read adds their mean to h at init."""
    rule = build_rule("delta_attnres_block", StreamShape(16, n_layers=4), block_size=2)
    x0, u, reads, end = _stream_of(rule, 8)
    h = [x0]
    for step in u:
        h.append(h[-1] + step)  # the standard stream: h_i after i sublayers
    for i, read in enumerate(reads):
        deltas = [x0] + [h[2 * k] - h[2 * (k - 1)] for k in range(1, i // 2 + 1)]
        torch.testing.assert_close(read, h[i] + _mean(deltas))
    torch.testing.assert_close(end, h[8])
    state = rule.begin(x0)
    for i in range(7):
        state = rule.write(state, i, u[i])
    assert [s.value.shape for s in state.sources] == [x0.shape] * 4  # x0 and the deltas of blocks 1-3
    for k, source in enumerate(state.sources[1:], start=1):
        torch.testing.assert_close(source.value, h[2 * k] - h[2 * (k - 1)])
        torch.testing.assert_close(source.value, u[2 * k - 2] + u[2 * k - 1])  # what block k − 1 added
    assert [rule.n_sources(i) for i in range(8)] == [1, 1, 2, 2, 3, 3, 4, 4]


@pytest.mark.parametrize("block_size", [2, 3])
def test_block_delta_timings_differ_exactly_at_the_block_start_reads(block_size):
    """Fed the same outputs, the two timings read the same everywhere but at i = kP, k ≥ 1 (for P = 2 the
    block-start layers' attention sublayers), where the reference code's timing reads the sources without δ_k."""
    torch.manual_seed(4)
    shape, x0 = StreamShape(16, n_layers=4), torch.randn(2, 5, 16)
    outputs = [torch.randn(2, 5, 16) for _ in range(shape.n_steps)]
    rules = {timing: build_rule("delta_attnres_block", shape, block_size=block_size, delta_timing=timing)
             for timing in ("block_start", "after_block_start")}
    perturb(rules["block_start"])
    rules["after_block_start"].load_state_dict(rules["block_start"].state_dict())
    reads = {}
    for timing, rule in rules.items():
        state, reads[timing] = rule.begin(x0), []
        for i, u in enumerate(outputs):
            reads[timing].append(rule.read(state, i))
            state = rule.write(state, i, u)
        torch.testing.assert_close(rule.end(state), x0 + sum(outputs))  # the head reads the stream either way
    block_starts = set(range(block_size, shape.n_steps, block_size))
    for i, (ours, reference) in enumerate(zip(reads["block_start"], reads["after_block_start"])):
        # equal to rounding (a source's scores are one matmul over the queries from its first read on, which
        # starts one row later under the lag), apart by O(1) where the timings differ
        assert torch.allclose(ours, reference, rtol=1e-5, atol=1e-5) != (i in block_starts), i
    lagged = rules["after_block_start"]
    assert [lagged.n_sources(i) for i in range(shape.n_steps)] == [
        1 + max(i - 1, 0) // block_size for i in range(shape.n_steps)]
    # at zero queries the lagged read at a block start is h plus the mean of the sources before δ_k
    with torch.no_grad():
        lagged.queries.zero_()
    state, h = lagged.begin(x0), x0
    for i, u in enumerate(outputs):
        if i in block_starts:
            starts = [x0 + sum(outputs[:j], torch.zeros_like(x0)) for j in range(0, i, block_size)]
            deltas = [x0] + [b - a for a, b in zip(starts, starts[1:])]
            torch.testing.assert_close(lagged.read(state, i), h + _mean(deltas))
        state, h = lagged.write(state, i, u), h + u


def test_unknown_delta_timing_names_the_choices():
    with pytest.raises(ConfigError, match="unknown delta_timing 'late'; valid choices: block_start, after_block_start"):
        build_rule("delta_attnres_block", StreamShape(16, n_layers=3), delta_timing="late")


def test_block_delta_attnres_with_identity_gate_is_exactly_standard_at_init():
    model = gpt("delta_attnres_block", {"identity_gate": True})
    idx = torch.randint(0, 97, (2, 16))
    assert torch.equal(model(idx)[0], with_blocks_of(model)(idx)[0])


# ---- MGR ------------------------------------------------------------------------------------------------------


def test_mgr_carry_bias_is_depth_aware():
    assert mgr_carry_bias(21, 1) == pytest.approx(-3.0)  # D = D_base, one stream: b_base
    # four streams at D_base: the sigmoid gate opens at 0.055, not σ(−3) = 0.047 (the docstring's note on the
    # competitive reading, under which every stream would get σ(−3) at D_base whatever n is)
    assert torch.sigmoid(torch.tensor(mgr_carry_bias(21, 4))).item() == pytest.approx(0.0553, abs=1e-4)
    assert mgr_carry_bias(48, 4) < mgr_carry_bias(16, 4) < mgr_carry_bias(6, 4) < 0  # deeper: more carry
    rule = build_rule("mgr", StreamShape(16, n_layers=3))
    assert torch.equal(rule.gate_bias, torch.full((6, 4), mgr_carry_bias(6, 4)))
    assert mgr_carry_bias(6, 4) == pytest.approx(-math.log(math.sqrt(6 / 21) * (1 + math.exp(3)) - 4))
    with pytest.raises(ConfigError, match="fewer than 4.6 streams at 1 residual steps"):
        mgr_carry_bias(1, 5)
    with pytest.raises(ConfigError, match="needs at least 4 sublayers"):
        build_rule("mgr", StreamShape(16, n_layers=1))


def test_mgr_appends_then_gates_and_pools_the_mean_at_init():
    rule = build_rule("mgr", StreamShape(16, n_layers=3))
    x0 = torch.randn(2, 5, 16)
    state, u = rule.begin(x0), [torch.randn(2, 5, 16) for _ in range(4)]
    for i in range(3):
        state = rule.write(state, i, u[i])
    assert torch.equal(state.streams, torch.stack([x0] + u[:3]))  # the first n − 1 outputs are appended
    torch.testing.assert_close(rule.read(state, 3), state.streams.mean(0))
    beta = torch.sigmoid(torch.tensor(rule.carry_bias))
    gated = rule.write(state, 3, u[3])
    torch.testing.assert_close(gated.streams, (1 - beta) * state.streams + beta * u[3])
    torch.testing.assert_close(rule.end(gated), gated.streams.mean(0))


def test_mgr_stream_norm_is_bounded():
    """‖s'‖ ≤ max(‖s‖, ‖F‖) per stream and token, and the pool stays inside the streams, for random gates."""
    torch.manual_seed(2)
    rule = build_rule("mgr", StreamShape(16, n_layers=3))
    perturb(rule, std=2.0)
    state = rule.begin(torch.randn(2, 5, 16))
    for i in range(6):
        u = torch.randn(2, 5, 16) * torch.randn(2, 5, 1).exp()  # per-token scales over two decades
        new = rule.write(state, i, u)
        if i >= 3:
            bound = torch.maximum(state.streams.norm(dim=-1), u.norm(dim=-1))
            assert (new.streams.norm(dim=-1) <= bound * (1 + 1e-6)).all()
        assert (new.h.norm(dim=-1) <= new.streams.norm(dim=-1).amax(0) * (1 + 1e-6)).all()
        state = new


# ---- Hyper-Connections and mHC --------------------------------------------------------------------------------


def test_hc_at_init_is_the_standard_residual_read_through_its_streams():
    model = gpt("hc")
    standard = with_blocks_of(model)
    idx = torch.randint(0, 97, (2, 16))
    inputs, end = run_stream(model, idx)
    standard_inputs, standard_end = run_stream(standard, idx)
    # bit for bit at every sublayer: one-hot read weights, M = I and b = 1 only add exact zeros to h + u
    assert all(torch.equal(a, b) for a, b in zip(inputs, standard_inputs))
    # the head sums n copies, rounding at each add where standard's h + u rounds once: equal to fp32 rounding
    # (eps 1.2e-7) at the tensor's scale, since an entry where h and u cancel keeps its terms' absolute error
    torch.testing.assert_close(end, N_STREAMS * standard_end, rtol=1e-6, atol=1e-6 * standard_end.abs().max().item())
    assert torch.equal(model.norm_f(end), model.hidden(idx))  # run_stream is the model's own loop


def test_mhc_at_init_carries_the_standard_residual_in_every_stream():
    """Fed the same outputs as the standard rule, every stream is h and the input is (1 + (n−2)σ(−4))·h."""
    rule, standard = build_rule("mhc", StreamShape(16, n_layers=3)), build_rule("standard", StreamShape(16, 3))
    x0 = torch.randn(2, 5, 16)
    state, h = rule.begin(x0), x0
    lane = torch.sigmoid(torch.tensor(4.0)) + (N_STREAMS - 1) * torch.sigmoid(torch.tensor(-4.0))
    for i in range(6):
        torch.testing.assert_close(rule.read(state, i), lane * h)  # a scale the pre-norm removes
        u = torch.randn(2, 5, 16)
        state, h = rule.write(state, i, u), standard.write(h, i, u)
        if i < 5:
            torch.testing.assert_close(state.streams, h.unsqueeze(-2).expand_as(state.streams))
    torch.testing.assert_close(rule.end(state), N_STREAMS * h)
    assert state.pending is None  # no weights are computed for a step after the last
    assert state.streams is None  # whose write is made as the head's sum


def test_mhc_mappings_stay_on_their_manifolds():
    """H_res doubly stochastic (to 1e-3 after 20 Sinkhorn rounds), H_pre in (0, 1), H_post in (0, 2)."""
    torch.manual_seed(3)
    rule = build_rule("mhc", StreamShape(32, n_layers=3))
    with torch.no_grad():  # a live dynamic part; logits moved by about 0.3 from the init
        rule.phi.normal_(0, 0.1)
        rule.alpha.normal_(0, 0.1)
        rule.bias.add_(torch.randn_like(rule.bias) * 0.3)
    state = rule.begin(torch.randn(2, 5, 32))
    for i in range(6):
        _, post, res = state.pending
        k = rule.shape.unique(i)
        pre, *_ = mhc_weights_plain(projected_rms(state.streams.flatten(-2), rule.phi[k]), rule.alpha[k],
                                    rule.bias[k], 4)
        assert res.dtype == torch.float32 and (res >= 0).all()
        torch.testing.assert_close(res.sum(-1), torch.ones(2, 5, 4), rtol=0, atol=1e-3)
        torch.testing.assert_close(res.sum(-2), torch.ones(2, 5, 4), rtol=0, atol=1e-3)
        assert ((pre > 0) & (pre < 1)).all() and ((post > 0) & (post < 2)).all()
        state = rule.write(state, i, torch.randn(2, 5, 32))
    assert res.std(0).max() > 0.01  # the mapping depends on the token: the dynamic part is live


def test_sinkhorn_runs_in_fp32_under_autocast():
    logits = (torch.randn(3, 4, 4) / 2).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        m = sinkhorn(logits)
    assert m.dtype == torch.float32
    torch.testing.assert_close(m.sum(-1), torch.ones(3, 4), rtol=0, atol=1e-6)
    torch.testing.assert_close(m.sum(-2), torch.ones(3, 4), rtol=0, atol=1e-5)


# ---- options --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant,options", [("attnres_block", {"block_size": 0}), ("mgr", {"n_streams": 0}),
                                             ("hc", {"n_streams": 1.5}), ("mhc", {"n_streams": -1})])
def test_bad_option_values_are_one_sentence(variant, options):
    with pytest.raises(ConfigError, match="must be a positive whole number"):
        build_rule(variant, StreamShape(16, n_layers=3), **options)


def test_unknown_option_is_a_config_error():
    with pytest.raises(ConfigError, match="bad options"):
        build_rule("attnres", StreamShape(16, n_layers=3), block_size=2)
