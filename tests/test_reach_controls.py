"""The settings the reach verdicts hold in (rrlib.studies.reach_control_study): the post-norm baseline ReZero's paper
measured against, an arm that trains longer than its study, and the registered designs of the controls."""
import dataclasses

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from rrlib.claims.records import by_id
from rrlib.model import NORM_EPS, GPT, ModelConfig
from rrlib.rules import ConfigError
from rrlib.runs.presets import resolve_run
from rrlib.runs.folders.runfiles import fingerprint, run_identity
from rrlib.studies import depth_reach_study as depth, looped_reach_study, reach_control_study as controls
from rrlib.studies.study_plan import Arm, Study, cpu_hours, sweep_lines


def small(**options):
    torch.manual_seed(0)
    return GPT(ModelConfig(variant="standard", d_model=32, n_layers=3, n_heads=4, seq_len=16, vocab_size=64,
                           rule_options=options)).eval()


def test_post_norm_standard_normalises_after_each_addition_and_reads_the_raw_stream():
    model, pre = small(post_norm=True), small()
    assert not any(k.startswith("sublayers") and "norm" in k for k in model.state_dict())
    assert model.n_params() == pre.n_params()  # a gain per sublayer moves from before the sublayer to after the sum
    with torch.no_grad():
        for norm in model.rule.norms:
            norm.weight.uniform_(0.5, 1.5)  # gains away from 1, so that each sublayer's own gain is seen
        idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
        h = model.wte(idx) + model.wpe(torch.arange(16))
        for i in range(6):
            gain = model.rule.norms[i].weight
            h = F.rms_norm(h + model.sublayers[i].fn(h), (32,), gain, NORM_EPS)
        expected = F.linear(model.norm_f(h), model.head.weight)
        assert torch.allclose(model(idx)[0], expected, atol=1e-6)
        assert not torch.allclose(pre(idx)[0], model(idx)[0])
    with pytest.raises(ConfigError, match="post_norm must be true or false, got 'yes'"):
        small(post_norm="yes")


def test_post_norm_is_in_the_fingerprint_and_the_default_standard_is_not_changed():
    plain = resolve_run("reach12", "standard", 0)
    post = resolve_run("reach12", "standard", 0, {"model": {"rule_options": {"post_norm": True}}})
    ident = lambda run: run_identity(run, "cpu", "fp32")
    assert ident(plain)["model"].get("rule_options", {}) == {}
    assert fingerprint(ident(plain)) != fingerprint(ident(post))


def test_an_arm_that_trains_longer_gets_its_own_steps_in_its_sweep_line_and_its_cost():
    study = Study(name="s", estimate="e", records=("r",), target=1.0, target_why="w", sizes=("reach4",), steps=300,
                  arms=(Arm("short", "standard"), Arm("long", "standard", steps=3000)))
    short, long = (line.split() for line in sweep_lines(study, study.arms, [0]))
    assert short[short.index("--steps") + 1] == "300" and long[long.index("--steps") + 1] == "3000"
    per_step = {"short": 1.0, "long": 1.0}
    assert study.arm_steps(study.arms[1]) == 3000
    import rrlib.studies.study_plan as plan
    original = plan.step_seconds
    try:
        plan.step_seconds = lambda study, arm, size: per_step[arm.name]
        assert cpu_hours(study, study.arms, [0]) == pytest.approx(3300 / 3600)
    finally:
        plan.step_seconds = original


def test_each_control_answers_a_record_that_names_it_in_its_control_or_design():
    claims = by_id()
    for study in controls.STUDIES.values():
        for cid in study.records:
            claim = claims[cid]
            assert claim.status == "registered", cid
            assert f" {study.name}," in f"{claim.control} " or f"study {study.name} " in claim.design, (cid, study.name)
    for cid in ("highway-hundreds-of-layers", "rezero-converges-faster-as-run", "layerscale-deeper"):
        assert claims[cid].control and "reach_control_study" in claims[cid].control
    assert set(controls.STUDIES) <= set(looped_reach_study.REACH)  # page 07 lists their runs


def test_the_attnres_output_design_follows_from_the_committed_probes_on_fresh_seeds():
    design = controls.design(controls.ATTNRES_OUTPUTS)
    assert design["seeds"] == tuple(range(18, 27))
    assert design["sizing"]["pilot_n"] == len(controls.COMMITTED_OUTPUT_SEEDS)
    assert not set(design["seeds"]) & set(range(18))  # seeds 0-17 were read


def test_the_fixed_designs_state_their_seeds_and_the_rates_bracket_the_registered_rate():
    for name, seeds in controls.FIXED_SEEDS.items():
        assert controls.design(controls.STUDIES[name])["seeds"] == seeds
    assert min(controls.RATES) < 2e-3 < max(controls.RATES) and 2e-3 not in controls.RATES
    registered = {a.lr for a in depth.REZERO_SPEED.arms}
    assert min(controls.SPEED_RATES) < min(registered) and max(controls.SPEED_RATES) > max(registered)


def test_the_rezero_control_reads_post_norm_and_pre_norm_at_each_rules_best_rate(monkeypatch):
    study = dataclasses.replace(controls.REZERO_CONTROL, pilot_seeds=(0, 1, 2),
                                arms=tuple(a for a in controls.REZERO_CONTROL.arms if a.lr in (0.002, 0.004)))
    best = {"rezero_lr0.004", "standard_lr0.002", "postnorm_lr0.002"}
    rows = [{"arm": a.name, "seed": s, "variant": a.variant, "status": "finished",
             "fixed_loss": 2.0 if a.name in best else 2.5} for a in study.arms for s in (0, 1, 2)]
    monkeypatch.setattr(depth, "finished", lambda study, arms=None, seeds=None: pd.DataFrame(rows))
    monkeypatch.setattr(controls, "pilot_done", lambda study: True)
    monkeypatch.setattr(depth, "eval_curve", lambda study, arm, seed: pd.DataFrame(
        {"step": [10, 20, 30], "fixed_loss": [3.0, 2.0 + 0.1 * seed if arm.name.startswith("rezero") else 2.5, 1.9]}))
    design = controls.design(study)
    assert {a.name for a in design["arms"]} == best
    assert "post-norm" in design["spread"] or "pre-norm" in design["spread"]
    assert design["seeds"][0] == 0 and len(design["seeds"]) >= 3


def test_page_07_reads_every_reach_study_root_so_a_finished_run_there_rebuilds_it():
    from rrlib.report.notebooks import NOTEBOOKS, SIDE_ROOTS

    claims_page = next(nb for nb in NOTEBOOKS if nb.name == "07_claims")
    roots = {study.root.split("/", 1)[1] for study in looped_reach_study.REACH.values()}
    assert roots <= set(claims_page.own_roots) and roots <= set(SIDE_ROOTS)
