"""The claims ledger's pieces: Review's gate halves, starting a run from another's weights (the conversion into
Delta AttnRes), the probes of what sublayers read and how depth attention routes, the verdict rules, the abstract."""
import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as stats_t
import torch

from rrlib.model import GPT, ModelConfig, count_params
from rrlib.report import index
from rrlib.studies import probes
from rrlib.stats import ledger, paired_comparison
from rrlib.runs.folders.checkpoints import WEIGHTS_FILE, start_from
from rrlib.runs.config import ConfigError
from rrlib.runs.presets import resolve_run
from rrlib.runs.folders.runfiles import fingerprint, recorded_identity, run_identity

ROOT = Path(__file__).resolve().parents[1]


def small(variant, **kw):
    torch.manual_seed(0)
    return GPT(ModelConfig(variant=variant, d_model=32, n_layers=2, n_heads=4, seq_len=16, vocab_size=64, **kw)).eval()


def randomised_gates(model):
    with torch.no_grad():
        for gate in model.rule.gates:
            gate.weight.normal_(0, 0.5)
            gate.bias.normal_(0, 0.5)
    return model


# ---------------------------------------------------------------- Review's gate halves


@pytest.mark.parametrize("variant, blind_to", [("review_state_only", "u"), ("review_update_only", "h")])
def test_a_gate_half_ignores_the_other_input_and_keeps_reviews_size(variant, blind_to):
    model = randomised_gates(small(variant))
    full = randomised_gates(small("review"))
    gate = model.rule.gates[0]
    h, u = torch.randn(2, 3, 32), torch.randn(2, 3, 32)
    other = torch.randn(2, 3, 32) * 3
    changed = (h, other) if blind_to == "u" else (other, u)
    torch.testing.assert_close(model.rule.review(gate, h, u), model.rule.review(gate, *changed), rtol=0, atol=0)
    assert not torch.allclose(full.rule.review(gate, h, u), full.rule.review(gate, *changed))
    assert model.n_params() == full.n_params() and model.flops_per_token() == full.flops_per_token()
    assert resolve_run("family", variant, 0).model.d_model == resolve_run("family", "review", 0).model.d_model == 64


def test_the_zeroed_half_of_the_gate_gets_no_gradient():
    model = small("review_state_only")
    idx = torch.randint(0, 64, (2, 16))
    model.train()
    model(idx, idx)[1].backward()
    grad = model.rule.gates[0].weight.grad
    assert grad[:, :32].abs().sum() > 0 and grad[:, 32:].abs().sum() == 0


# ---------------------------------------------------------------- starting from another run's weights


def _kept(model, folder: Path) -> Path:
    folder.mkdir(parents=True)
    torch.save({"model": model.state_dict(), "dtype": "fp32"}, folder / WEIGHTS_FILE)
    return folder


def test_delta_attnres_with_its_identity_gate_starts_at_the_standard_models_function(tmp_path):
    source = small("standard")
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.05 * torch.randn_like(p))  # a "trained" model, not the init
    folder = _kept(source, tmp_path / "standard" / "seed0")
    idx = torch.randint(0, 64, (2, 16))
    converted = small("delta_attnres", rule_options={"identity_gate": True})
    start_from(folder, converted)
    torch.testing.assert_close(converted(idx)[0], source(idx)[0], rtol=0, atol=0)
    # the reference code's default, no gate: the routed mean of the sources is added from the first step
    ungated = small("delta_attnres")
    start_from(folder, ungated)
    assert (ungated(idx)[0] - source(idx)[0]).abs().max() > 1e-5
    assert all(torch.equal(a, b) for a, b in zip(converted.rule.parameters(), small("delta_attnres", rule_options={
        "identity_gate": True}).rule.parameters())), "the rule's own parameters stay at their init"


def test_a_model_of_another_width_or_no_weights_is_one_sentence(tmp_path):
    folder = _kept(small("standard"), tmp_path / "run")
    wider = GPT(ModelConfig(variant="delta_attnres", d_model=36, n_layers=2, n_heads=4, seq_len=16, vocab_size=64))
    with pytest.raises(ConfigError, match=r"tensors differ \(e\.g\. wte\.weight: \(64, 32\) there, \(64, 36\) here\)"):
        start_from(folder, wider)
    with pytest.raises(ConfigError, match="holds no weights.pt: train that run with --set train.keep_weights=fp32"):
        start_from(tmp_path / "nothing", wider)
    with pytest.raises(ConfigError, match=r"may name only \{seed\}"):
        resolve_run("tiny", "standard", 0, {"train": {"init_from": "outputs/claims/tiny/standard/seed{run}"}})


def test_init_from_is_fingerprinted_when_set_and_committed_runs_keep_their_fingerprints():
    run = resolve_run("tiny", "standard", 0)
    started = dataclasses.replace(run, train=dataclasses.replace(run.train, init_from="x/seed{seed}"))
    assert "init_from" not in run_identity(run, "cpu", "fp32")["train"]
    assert run_identity(started, "cpu", "fp32")["train"]["init_from"] == "x/seed{seed}"
    headers = [json.loads(p.read_text()) for p in sorted((ROOT / "outputs" / "runs").glob("*/*/seed*/config.json"))]
    fingerprinted = [h for h in headers if "fingerprint" in h]
    assert len(fingerprinted) >= 10
    assert [fingerprint(recorded_identity(h)) for h in fingerprinted] == [h["fingerprint"] for h in fingerprinted]


@pytest.mark.slow
def test_a_run_started_from_weights_trains_from_them(tmp_path):
    from rrlib.runs.train import train_run

    base = {"train": {"steps": 2, "keep_weights": "fp32", "eval_every": 100, "ckpt_every": 100, "log_every": 1}}
    source = resolve_run("tiny", "standard", 0, base, out_root=str(tmp_path / "a"))
    train_run(source, progress=False)
    follow = {"train": {**base["train"], "init_from": str(tmp_path / "a" / "tiny" / "standard" / "seed{seed}"),
                        "lr": 1e-12}, "model": {"rule_options": {"identity_gate": True}}}
    result = train_run(resolve_run("tiny", "delta_attnres", 0, follow, out_root=str(tmp_path / "b")), progress=False)
    first = json.loads((tmp_path / "a" / "tiny" / "standard" / "seed0" / "result.json").read_text())
    # at a learning rate of 1e-12 the converted model is still the source's function
    assert result["fixed_loss"] == pytest.approx(first["fixed_loss"], abs=1e-6)


# ---------------------------------------------------------------- probes


def test_read_scales_sees_the_embedding_first_and_every_sublayer_then_the_head():
    model = small("standard")
    idx = torch.randint(0, 64, (2, 16))
    table = probes.read_scales(model, idx)
    x0 = model.wte(idx) + model.wpe(torch.arange(16))
    assert list(table["sublayer"]) == ["attn0", "mlp0", "attn1", "mlp1", "head"]
    assert table["read_rms"].iloc[0] == pytest.approx(x0.pow(2).mean(-1).sqrt().mean().item(), rel=1e-6)
    assert np.isnan(table["update_rms"].iloc[-1]) and (table["update_rms"].iloc[:-1] > 0).all()
    torch.testing.assert_close(model(idx)[0], small("standard")(idx)[0])  # the probe leaves the model as it was


def test_depth_growth_fits_every_sublayer_with_a_level_per_kind():
    """Attention at 2^(b/2) and the MLP 20× above it in every block b of 4: the growth is 1.5 log₂ units from the
    first block to the last, where the last MLP over the first attention would read log₂(20) more."""
    blocks = np.arange(4)
    rows = [{"sublayer": f"{kind}{b}", "read_rms": scale * 2 ** (b / 2)} for b in blocks
            for kind, scale in (("attn", 1.0), ("mlp", 20.0))] + [{"sublayer": "head", "read_rms": 1e6}]
    scales = pd.DataFrame(rows)
    assert probes.depth_growth(scales, "read_rms") == pytest.approx(1.5)
    ends = scales[scales["sublayer"] != "head"]["read_rms"]
    assert np.log2(ends.iloc[-1] / ends.iloc[0]) == pytest.approx(1.5 + np.log2(20))
    assert np.isnan(probes.depth_growth(scales[scales["sublayer"].isin(["attn0", "mlp0"])], "read_rms"))
    assert np.isnan(probes.depth_growth(scales.assign(read_rms=0.0), "read_rms"))


def test_routing_contrast_is_uniform_at_init_and_refuses_a_rule_that_does_not_route():
    idx = torch.randint(0, 64, (2, 16))
    table = probes.routing_contrast(small("attnres"), idx)
    assert list(table["n_sources"]) == [1, 2, 3, 4, 5]  # four sublayers, then the head
    np.testing.assert_allclose(table["max_weight"], table["uniform"], rtol=1e-6)  # zero queries: the mean
    delta = probes.routing_contrast(small("delta_attnres"), idx)
    assert list(delta["sublayer"]) == ["attn0", "mlp0", "attn1", "mlp1"]  # its head reads h
    with pytest.raises(ValueError, match="does not route over depth; probe attnres"):
        probes.routing_contrast(small("standard"), idx)


# ---------------------------------------------------------------- verdicts


def test_the_verdict_rule_on_constructed_cases():
    judge = ledger.judge
    # directional: significance decides the sign; on the paper's regime a gain below the paper's own contradicts
    assert judge("directional", 0.02, 0.01) == "supported"
    assert judge("directional", -0.02, 0.01) == "contradicted"
    assert judge("directional", 0.02, 0.2) == judge("directional", 0.02, np.nan) == "inconclusive"
    assert judge("directional", 0.001, 0.6, p_margin=0.01) == "contradicted"
    assert judge("directional", 0.001, 0.6, p_margin=0.3) == "inconclusive"
    # null ("no gain"): judged at its margin; a significant gain inside the margin does not contradict it
    assert judge("null", 0.003, 0.001, p_margin=0.01, p_beyond=0.99) == "supported"
    assert judge("null", 0.003, 0.001, p_margin=0.2, p_beyond=0.8) == "inconclusive"
    assert judge("null", 0.03, 0.001, p_margin=0.999, p_beyond=0.001) == "contradicted"
    assert judge("null", -0.03, 0.001, p_margin=0.001) == "supported"
    assert judge("null", 0.001, 0.5, p_margin=0.2) == judge("null", 0.001, 0.5) == "inconclusive"
    # equivalence: the TOST is looked at first; only an effect shown beyond the margin contradicts
    assert judge("equivalence", 0.05, 0.001, p_margin=0.01, p_beyond=0.99) == "supported"
    assert judge("equivalence", -0.5, 0.01, 0.6, p_beyond=0.001) == "contradicted"
    assert judge("equivalence", -0.5, 0.01, 0.6) == "inconclusive"
    assert judge("equivalence", 0.01, 0.8, 0.01) == "supported"
    assert judge("equivalence", 0.01, 0.8, 0.2) == "inconclusive"
    assert judge("measured", holds=True) == "supported" and judge("measured", holds=False) == "contradicted"
    with pytest.raises(ValueError, match="none of directional, null, equivalence, measured"):
        judge("probably")
    with pytest.raises(ValueError, match="needs holds"):
        judge("measured")


def test_below_margin_p_is_the_one_sided_t_test_read_off_the_interval():
    d = np.array([0.001, 0.004, -0.002, 0.003, 0.0])
    t = paired_comparison(d)
    expected = stats_t.cdf((d.mean() - 0.01) / (d.std(ddof=1) / np.sqrt(len(d))), len(d) - 1)
    assert ledger.below_margin_p(t.gap, t.ci_low, t.ci_high, len(d), 0.01) == pytest.approx(expected)
    assert np.isnan(ledger.below_margin_p(0.0, np.nan, 0.1, 5, 0.01))


def test_an_effect_inside_the_margin_never_contradicts_a_no_gain_claim():
    """A constructed case: a gain of 0.004 ± 0.001 over 20 seeds is significant (p far below 0.05) but lies inside
    a margin of 0.009, so the claim of no gain as large as 0.009 is supported, not contradicted."""
    d = np.random.default_rng(0).normal(0.004, 0.002, 20)
    t = paired_comparison(d)
    assert t.p < 1e-4
    below = ledger.below_margin_p(t.gap, t.ci_low, t.ci_high, 20, 0.009)
    beyond = ledger.beyond_margin_p(t.gap, t.ci_low, t.ci_high, 20, 0.009)
    assert below == pytest.approx(1 - beyond) and below < 0.05
    assert ledger.judge("null", t.gap, t.p, below, p_beyond=beyond) == "supported"
    # the same spread around a gain of 0.02: shown beyond the margin, the claim is contradicted
    far = paired_comparison(d + 0.016)
    assert ledger.judge("null", far.gap, far.p, ledger.below_margin_p(far.gap, far.ci_low, far.ci_high, 20, 0.009),
                        p_beyond=ledger.beyond_margin_p(far.gap, far.ci_low, far.ci_high, 20, 0.009)) == \
        "contradicted"


def test_beyond_margin_on_both_sides_reads_the_side_the_estimate_lies():
    upper = ledger.beyond_margin_p(0.3, 0.2, 0.4, 8, 1 / 6, sides="both")
    lower = ledger.beyond_margin_p(-0.3, -0.4, -0.2, 8, 1 / 6, sides="both")
    assert upper == pytest.approx(lower) and upper < 0.05
    assert ledger.beyond_margin_p(0.0, -0.1, 0.1, 8, 1 / 6, sides="both") > 0.5
    with pytest.raises(ValueError, match="none of upper, both"):
        ledger.beyond_margin_p(0.0, -0.1, 0.1, 8, 0.1, sides="two")


def test_a_rows_interval_and_p_come_from_one_comparison():
    """Every part must hold: the largest p, with that part's own effect and interval."""
    assert ledger.intersection([0.03, 0.01], [0.02, -0.01], [0.04, 0.03], [0.001, 0.2]) == (0.01, -0.01, 0.03, 0.2)
    assert ledger.intersection([0.01, 0.03], [-0.01, 0.0], [0.03, 0.06], [0.001, 0.04]) == (0.03, 0.0, 0.06, 0.04)
    effect, _, _, p = ledger.intersection([0.01, 0.03], [-0.01, np.nan], [0.03, np.nan], [0.001, np.nan])
    assert effect == 0.03 and np.isnan(p)  # a part not tested: the claim cannot hold on it


def test_a_part_shown_against_the_claim_decides_every_part_holds():
    """One part significantly against the claim contradicts it, whatever p the other parts have (the largest p
    alone would pick the other part: inconclusive here, supported where that part is significant too)."""
    effect, low, high, p = ledger.intersection([0.02, -0.03], [-0.01, -0.04], [0.05, -0.02], [0.2, 0.001])
    assert (effect, p) == (-0.03, 0.001) and ledger.judge("directional", effect, p) == "contradicted"
    effect, _, _, p = ledger.intersection([0.02, -0.03], [0.01, -0.04], [0.03, -0.02], [0.01, 0.001])
    assert ledger.judge("directional", effect, p) == "contradicted"
    # against the claim but not shown: still the weakest part, so the claim is not supported
    assert ledger.binding([0.3, 0.6], [-0.01, 0.02]) == 0
    assert ledger.binding([0.01, 0.04], [0.02, 0.03]) == 1 and ledger.binding([0.01, 0.04]) == 1


def test_some_form_holds_is_decided_by_the_form_most_in_the_claims_favour():
    """Holm over the forms, then: a significant gain in any form supports; only every form significantly worse
    contradicts (a tie in Holm p must not hand the row to a worse form)."""
    assert ledger.union([-0.0044, 0.0023], [0.0037, 0.0037]) == 1
    assert ledger.union([0.001, 0.003], [0.01, 0.2]) == 0  # the significant gain, not the larger one
    assert ledger.union([-0.004, -0.001], [0.003, 0.6]) == 1  # one form is not worse: inconclusive, not contradicted
    assert ledger.union([-0.004, -0.001], [0.003, 0.01]) == 1  # both worse: the weaker evidence still contradicts
    assert ledger.union([np.nan, -0.002], [np.nan, 0.01]) == 1
    effects, ps = [-0.0044, 0.0023], [0.0037, 0.0037]
    k = ledger.union(effects, ps)
    assert ledger.judge("directional", effects[k], ps[k]) == "supported"


def test_ledger_rows_and_helpers():
    assert ledger.detectable_coefficient(0.01, 3) == pytest.approx(0.0416, abs=1e-4)  # (3.182 + 0.978) · SE
    assert np.isnan(ledger.detectable_coefficient(0.01, 0))
    d = paired_comparison([0.01, 0.02, 0.03]).effect_row()
    assert d["effect"] == pytest.approx(0.02) and d["ci_low"] < 0.02 < d["ci_high"] and d["mde"] > 0
    with pytest.raises(ValueError, match="is none of supported, contradicted, inconclusive, out of reach, untested"):
        ledger.row("p", "c", "t", "probably", "e")
    assert ledger.row("p", "c", "t", ledger.out_of_reach("590M on a GPU"), "e")["verdict"] == \
        "out of reach: 590M on a GPU"
    assert ledger.verdict_kind("out of reach: 590M on a GPU") == "out of reach"
    # counted by kind in the ledger's order of kinds, whatever order the rows come in; a kind with none left out
    counts = ledger.verdict_counts(["inconclusive", "out of reach: 590M on a GPU", "supported", "inconclusive"])
    assert list(counts.items()) == [("supported", 1), ("inconclusive", 2), ("out of reach", 1)]
    unsure = ledger.row("p", "c", "a test", "inconclusive", "e", 0.001, detectable=0.02, paper_effect=0.009)
    assert unsure["test"] == "a test; the design detects 0.02 against the paper's 0.009"
    assert list(unsure) == ledger.COLUMNS


def test_a_row_on_the_papers_own_runs_states_its_detectable_gap_with_no_power_statement():
    from rrlib.claims import records, rows

    assert ledger.OWN_RUNS in records.SCOPES
    elsewhere = {"verdict": "inconclusive", "detectable": 0.0135, "paper_effect": 0.00898, "margin": np.nan,
                 "scope": "this harness at CPU scale"}
    assert ledger.could_see(elsewhere) == "no: detects 0.0135 vs the paper's 0.00898"
    own = elsewhere | {"scope": ledger.OWN_RUNS}
    assert ledger.could_see(own) == ("detects 0.0135; the paper's own runs: its effect is this data's estimate, so "
                                     "no power statement")
    for answered in ("supported", "contradicted"):  # a verdict reached on them is no power statement either
        assert ledger.could_see(own | {"verdict": answered}).startswith("detects 0.0135; the paper's own runs")
    null = own | {"paper_effect": np.nan, "margin": 0.009}  # the margin comes from the same runs' table
    assert "vs the margin" not in ledger.could_see(null)
    assert ledger.could_see(own | {"verdict": "untested: waiting"}) == "not yet: waiting"
    mine_null = elsewhere | {"paper_effect": np.nan, "margin": 0.009}
    assert ledger.could_see(mine_null | {"margin_sides": "upper"}) == "no: detects 0.0135 vs the margin +0.009"
    assert ledger.could_see(mine_null | {"margin_sides": "both"}) == "no: detects 0.0135 vs the margin ±0.009"
    mine = ledger.row("p", "c", "a test", "inconclusive", "e", 0.009, detectable=0.0135, paper_effect=0.00898,
                      own_runs=True)
    assert mine["test"] == "a test; the design detects 0.0135" and mine["paper_effect"] == 0.00898
    claims = records.by_id()
    made = rows.row(claims["review-grows-with-scale"], "a test", "inconclusive", "e", 0.009, detectable=0.0135,
                    paper_effect=0.00898)
    assert made["test"] == "a test; the design detects 0.0135"
    beside = rows.row(claims["review-size-not-budget"], "a test", "inconclusive", "e", 0.09, detectable=0.19,
                      paper_effect=0.00898)  # the CPU grid against the paper's slope: a power statement
    assert beside["test"] == "a test; the design detects 0.19 against the paper's 0.00898"


class Given:
    """Results made of what a test gives (a frame, a reading, or a function of the accessor's arguments); for the
    rest, what a report without those pages has: no result, no finished powered design."""

    def __init__(self, **given):
        self.given = {"shows": lambda page: True, "powered_designs": [],
                      "looped_ledger": SimpleNamespace(transfer=None)} | given

    def __getattr__(self, name):
        value = self.given.get(name)
        return lambda *args, **kwargs: value(*args, **kwargs) if callable(value) else value


def test_the_abstract_states_each_finding_from_the_results_and_leaves_out_missing_ones():
    summary = pd.DataFrame({"variant": ["standard", "review", "rezero"], "loss": [2.2, 2.21, 2.4], "seeds": [3, 3, 3],
                            "gap": [np.nan, -0.01, -0.2], "p_holm": [np.nan, 0.5, 0.01],
                            "detectable": [np.nan, 0.03, 0.05]})
    claims = ledger.ledger([ledger.row("Looped transformers", index.LOOPED_CLAIM, "", ledger.untested("running"), "")])
    lines = index.abstract(Given(claims=claims, family_summary=summary))
    assert len(lines) == 3
    assert lines[0].endswith("This report tests 1 registered claims of it and 0 related papers: 1 untested.")
    assert "a larger one at 1B that it calls a strong trend rather than significant" in lines[0]
    assert lines[1] == ("In the family (3 methods, 3 seeds) none beats standard after Holm; rezero is worse.")
    assert "still running; no verdict yet" in lines[2]
    without = index.abstract(Given(claims=claims, family_summary=summary, shows=lambda page: page != "07_claims"))
    assert "registered claims" not in without[0] and len(without) == 2  # the report holds no page 07: no ledger


def test_the_abstract_leaves_the_family_screen_out_once_the_leaderboard_has_judged():
    """One finding per question: the board, which detects the smaller gap, speaks of the gains over standard."""
    given = {"claims": ledger.ledger([]), "family_summary": pd.DataFrame(
        {"variant": ["standard", "hc"], "loss": [2.2, 2.21], "seeds": [3, 3], "gap": [np.nan, -0.004],
         "p_holm": [np.nan, 1.0], "detectable": [np.nan, 0.014]})}
    assert any(line.startswith("In the family") for line in index.abstract(Given(**given)))
    board = pd.DataFrame({"rule": ["standard", "hc"], "stage": ["baseline", "judged"], "gap": [np.nan, 0.027],
                          "verdict": ["", "better"], "seeds": [47, 47]})
    lines = index.abstract(Given(**given, board=board))
    assert not any(line.startswith("In the family") for line in lines)
    assert lines[-1].startswith("Leaderboard (1 of 1 rules judged, 47 seeds, Holm): 1 beats standard")


def test_the_abstract_gives_each_powered_design_in_the_compare_engines_words():
    micro = pd.DataFrame({"size": "micro", "variant": "review", "baseline": ["highway", "standard"], "seeds": 37,
                          "gap": [0.0245, 0.001], "p_holm": [1.3e-6, 0.4], "p_equivalent_holm": [1.0, 0.2],
                          "margin": 0.01, "detectable": [0.0117, 0.0092], "verdict": ["better", "inconclusive"]})
    family = pd.DataFrame({"size": "family_power", "variant": "mgr", "baseline": ["standard"], "seeds": 47,
                           "gap": [0.0038], "p_holm": [0.21], "p_equivalent_holm": [0.021], "margin": 0.01,
                           "detectable": [0.0085], "verdict": ["equivalent"]})
    assert index.powered_finding([None, None]) is None
    assert index.powered_finding([micro, None, family]) == (
        "Powered CPU designs: at micro review is better than highway (+0.0245 nats), review against standard is "
        "inconclusive; at family_power mgr is equivalent to standard within ±0.01 nats.")


def test_the_abstract_names_the_leaderboards_judged_rules_in_the_engines_words():
    board = pd.DataFrame({"rule": ["denseformer", "attnres", "standard", "hc", "dynamic_dense"],
                          "stage": ["judged", "judged", "baseline", "planned", "judged"],
                          "seeds": [47, 47, np.nan, np.nan, 47], "gap": [0.0101, 0.0053, 0.0, np.nan, 0.0254],
                          "verdict": ["better", "inconclusive", np.nan, np.nan, "better"]})
    assert index.leaderboard_finding(board) == (
        "Leaderboard (3 of 4 rules judged, 47 seeds, Holm): 2 beat standard, 0 fall behind; the largest gap is "
        "dynamic_dense's (+0.0254 nats, better).")
    one_each = board.assign(verdict=["better", "worse", np.nan, np.nan, "inconclusive"])
    assert "Holm): 1 beats standard, 1 falls behind;" in index.leaderboard_finding(one_each)
    assert index.leaderboard_finding(board.assign(stage=["planned", "planned", "baseline", "planned", "planned"])) is None
    assert index.leaderboard_finding(None) is None


def test_the_abstracts_looped_verdict_is_the_ledgers_not_the_studys():
    """Page 05's primary estimator says "transfers"; page 07 weighs the supplementary runs and says otherwise: the
    abstract repeats page 07."""
    transfer = pd.DataFrame({"variant": ["scaled", "scaled"], "estimator": ["parabola", "parabola"], "seeds": [3, 5],
                             "slope": [0.03, 0.001], "ci_low": [-0.12, -0.27], "ci_high": [0.18, 0.28], "p": [0.5, 0.9],
                             "p_equivalent": [0.031, 0.088], "verdict": ["transfers (within ±0.17)", "undecided"],
                             "runs": ["all runs", "edge cells extended"]})
    claims = ledger.ledger([ledger.row("Looped transformers", index.LOOPED_CLAIM, "t", "inconclusive", "", 0.001,
                                       -0.27, 0.28)])
    found = index.abstract(Given(claims=claims, looped_ledger=SimpleNamespace(transfer=transfer)))[-1]
    assert 'is "inconclusive"' in found and "transfers" not in found
    assert "+0.00 [-0.27, +0.28], 5 seeds, TOST p 0.088" in found


def test_the_abstracts_looped_finding_reads_the_powered_design_once_it_has_finished(monkeypatch):
    """The ledger switches its looped rows to the powered design once it has finished; the abstract's TOST p and
    seed count must come from the same reading, not the 200-step study's."""
    def reading(seeds, slope, p_equivalent):
        return SimpleNamespace(transfer=pd.DataFrame(
            {"variant": ["scaled"], "estimator": ["parabola"], "seeds": [seeds], "slope": [slope],
             "ci_low": [slope - 0.16], "ci_high": [slope + 0.16], "p": [0.1], "p_equivalent": [p_equivalent],
             "verdict": ["undecided"], "runs": ["all runs"]}))

    claims = ledger.ledger([ledger.row("Looped transformers", index.LOOPED_CLAIM, "t", "inconclusive", "", -0.13,
                                       -0.29, 0.03)])
    results = index.Results(claims=claims)
    for name in ("board", "final_loss", "family_summary"):
        monkeypatch.setattr(results, name, lambda *args: None)
    monkeypatch.setattr(results, "tests", lambda source: None)
    monkeypatch.setattr(results, "powered_designs", lambda page=None: [])
    monkeypatch.setattr(index.looped, "reading", lambda: reading(5, 0.004, 0.088))
    monkeypatch.setattr(index.looped_power, "reading", lambda: None)  # the powered design has not finished
    assert "5 seeds" not in index.abstract(results)[-1]  # the ledger's slope is not the 200-step study's
    monkeypatch.setattr(index.looped_power, "reading", lambda: reading(7, -0.13, 0.3))
    assert "-0.13 [-0.29, +0.03], 7 seeds, TOST p 0.3)" in index.abstract(results)[-1]


# a measured number: with a decimal point (counts are integers), in full where it has an exponent (a small p)
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d+\.\d+(?:e[-+]\d+)?")


def table_cells(frames) -> set[str]:
    """Every number of the frames, as the abstract formats one: 2, 3 or 4 decimals, signed or not, or two
    significant digits (p-values)."""
    cells = set()
    for frame in frames:
        values = frame.select_dtypes("number").to_numpy(dtype=float).ravel()
        for v in values[np.isfinite(values)]:
            cells |= {f"{v:.2g}"} | {f"{v:{sign}.{d}f}" for d in (2, 3, 4) for sign in ("", "+")}
    return cells


def test_every_number_in_the_abstract_is_a_value_of_the_results_it_read():
    results = index.Results()  # the committed runs, each page's own parameters
    lines = index.abstract(results)
    numbers = NUMBER.findall(" ".join(lines))
    assert len(numbers) > 10  # the abstract states its findings with their numbers
    assert sum(len(line.split()) for line in lines) <= 240  # about 200 words: the pages hold the rest
    read = [results.claims(), results.final_loss(), results.tests("paper"), results.family_summary(),
            results.looped_ledger().transfer, results.board(),
            *(design for design in results.powered_designs() if design is not None)]
    stray = [n for n in numbers if n not in table_cells(frame for frame in read if frame is not None)
             | {f"{index.LAG_NATS:g}"}]
    assert stray == [], f"numbers in the index abstract that no result holds: {stray}"


def test_the_abstract_check_sees_a_number_that_is_no_cell():
    cells = table_cells([pd.DataFrame({"x": [0.12345]})])
    assert {"0.12", "+0.123", "0.1235"} <= cells and "0.124" not in cells and NUMBER.findall("p 0.124, 5 seeds") == ["0.124"]
    assert NUMBER.findall("Holm p 1.3e-06, 12.5 CPU-hours") == ["1.3e-06", "12.5"]


def test_the_ledgers_run_roots_count_for_its_page_only(tmp_path):
    from rrlib.report.inputs import page_inputs
    from rrlib.report.notebooks import NOTEBOOKS

    by_name = {nb.name: nb for nb in NOTEBOOKS}
    runs = tmp_path / "outputs" / "runs"
    (runs / "family" / "standard" / "seed0").mkdir(parents=True)
    (runs / "family" / "standard" / "seed0" / "result.json").write_text("{}")
    before = {name: page_inputs(by_name[name], {}, runs, None, tmp_path / "none.csv")
              for name in ("05_related_methods", "07_claims")}
    probe = tmp_path / "outputs" / "claims" / "family" / "attnres" / "seed0"
    probe.mkdir(parents=True)
    (probe / "probes.json").write_text("{}")
    after = {name: page_inputs(by_name[name], {}, runs, None, tmp_path / "none.csv")
             for name in ("05_related_methods", "07_claims")}
    assert after["05_related_methods"] == before["05_related_methods"]
    assert after["07_claims"] != before["07_claims"]
    assert [nb.name for nb in sorted(NOTEBOOKS, key=lambda nb: not nb.summary)][0] == "07_claims"


@pytest.mark.parametrize("size", ["60m", "1b"])
def test_the_review_gate_is_two_d_by_d_maps_per_block_at_the_papers_sizes(size):
    """Page 07's parameter-share row counts the gate as Review minus the same model with the standard residual: that
    difference is W_r ∈ R^{d×2d} with its bias in each of a block's two sublayers, nothing else."""
    model = resolve_run(size, "review", 0).model
    gate = count_params(model) - count_params(dataclasses.replace(model, variant="standard"))
    assert gate == model.n_layers * 2 * (2 * model.d_model ** 2 + model.d_model)
    assert (model.vocab_size, model.seq_len) == (50257, 256)
