"""The options the depth-reach studies need (Highway's carry bias, ReZero without its pre-norm), that every other
rule's model is unchanged by them, and the studies' designs (rrlib.studies.depth_reach_study)."""
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from rrlib.model import NORM_EPS, GPT, ModelConfig
from rrlib.rules import RULES, ConfigError, ValueMixingRule
from rrlib.runs.presets import resolve_run
from rrlib.runs.folders.runfiles import fingerprint, recorded_identity, run_identity

ROOT = Path(__file__).resolve().parents[1]


def small(variant, n_layers=3, **options):
    torch.manual_seed(0)
    return GPT(ModelConfig(variant=variant, d_model=32, n_layers=n_layers, n_heads=4, seq_len=16, vocab_size=64,
                           rule_options=options)).eval()


def by_hand(model, idx, pre_norm=True):
    """The model's forward written out: each sublayer's function on RMSNorm(h) with its own gain (or on h)."""
    x0 = model.wte(idx) + model.wpe(torch.arange(idx.shape[1]))
    rule, state = model.rule, model.rule.begin(x0)
    for i in range(model.shape.n_steps):
        sub = model.sublayers[model.shape.unique(i)]
        h = rule.read(state, i)
        u = sub.fn(F.rms_norm(h, (h.shape[-1],), sub.norm.weight, NORM_EPS) if pre_norm else h)
        state = rule.write(state, i, u)
    return F.linear(model.norm_f(rule.end(state)), model.head.weight)


# a value-mixing rule also hands each attention its values (tests/test_dense_and_value_rules.py writes that forward out)
@pytest.mark.parametrize("variant", sorted(v for v, cls in RULES.items() if not issubclass(cls, ValueMixingRule)))
def test_every_rule_keeps_its_pre_norm_and_its_output(variant):
    model = small(variant)
    idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    assert all(isinstance(sub.norm, torch.nn.RMSNorm) for sub in model.sublayers)
    assert sum(k.startswith("sublayers") and k.endswith("norm.weight") for k in model.state_dict()) == 2 * 3
    with torch.no_grad():
        assert torch.equal(model(idx)[0], by_hand(model, idx))


def test_rezero_without_pre_norm_is_the_papers_form():
    model = small("rezero", pre_norm=False)
    assert not any(k.startswith("sublayers") and "norm" in k for k in model.state_dict())
    assert model.n_params() == small("rezero").n_params() - 2 * 3 * 32  # one gain vector per sublayer fewer
    with torch.no_grad():
        model.rule.alpha.normal_()  # α = 0 makes the sublayers invisible; open them to see what they read
        idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
        assert torch.equal(model(idx)[0], by_hand(model, idx, pre_norm=False))
        kept = small("rezero")
        kept.load_state_dict(model.state_dict(), strict=False)
        assert not torch.allclose(kept(idx)[0], model(idx)[0])  # the norm changes the function
    with pytest.raises(ConfigError, match="pre_norm must be true or false, got 'no'"):
        small("rezero", pre_norm="no")


def test_highway_carry_bias_starts_the_gates_carrying():
    model = small("highway_convex", n_layers=4, carry_bias=-3.0)
    g = torch.sigmoid(torch.stack([gate.bias for gate in model.rule.gates]))
    torch.testing.assert_close(g, torch.full_like(g, 1 / (1 + math.exp(3))))
    # the paper's N(0, 0.02) weights stay: only the bias moves, and the gates' inputs barely move it
    h = torch.randn(2, 5, 32)
    transform = torch.sigmoid(model.rule.gates[0](h))
    assert 0.02 < transform.min() and transform.max() < 0.09
    assert torch.all(small("highway_convex", n_layers=4).rule.gates[0].bias == 0)


@pytest.mark.parametrize("variant, options", [("highway_convex", {"carry_bias": -3.0}), ("rezero", {"pre_norm": False})])
def test_an_option_that_changes_numbers_changes_the_fingerprint(variant, options):
    plain = resolve_run("reach12", variant, 0)
    optioned = resolve_run("reach12", variant, 0, {"model": {"rule_options": options}})
    ident = lambda run: run_identity(run, "cpu", "fp32")
    assert ident(optioned)["model"]["rule_options"] == options
    assert fingerprint(ident(plain)) != fingerprint(ident(optioned))


def test_committed_runs_keep_their_fingerprints():
    headers = [json.loads(p.read_text()) for p in sorted((ROOT / "outputs").glob("**/seed*/config.json"))]
    fingerprinted = [h for h in headers if "fingerprint" in h]
    assert len(fingerprinted) >= 100
    assert [fingerprint(recorded_identity(h)) for h in fingerprinted] == [h["fingerprint"] for h in fingerprinted]


def test_reach_preset_is_the_depth_ablations_recipe_at_more_depths():
    reach, depth = resolve_run("reach24", "standard", 0), resolve_run("depth24", "standard", 0)
    assert dataclasses.replace(reach, size="depth24") == depth
    assert resolve_run("reach300", "standard", 0).model.n_layers == 300


# ---------------------------------------------------------------- sizing and the designs

from scipy import stats as sps  # noqa: E402
import yaml  # noqa: E402

from rrlib.studies import depth_reach_study as reach, looped_reach_study, looped_study, probes, sizing  # noqa: E402
from rrlib.studies.study_plan import Arm, Study, sweep_lines  # noqa: E402
from rrlib.stats import verdict  # noqa: E402


def test_sd_upper_bound_is_the_chi_square_bound():
    # χ² with 2 degrees of freedom has CDF 1 − exp(−x/2): its 20 % point is −2·ln 0.8
    assert verdict.sd_upper_bound(1.0, 3) == pytest.approx(math.sqrt(2 / (-2 * math.log(0.8))))
    assert verdict.sd_upper_bound(2.0, 9) == pytest.approx(2 * math.sqrt(8 / sps.chi2.ppf(0.2, 8)))
    assert math.isnan(verdict.sd_upper_bound(1.0, 1))


def test_size_needs_more_seeds_for_a_stricter_level_and_never_fewer_than_asked():
    values = [0.1, 0.5, 0.3, 0.2]
    plain, holm, one_sided = (sizing.size(values, 0.3, family=f, one_sided=o) for f, o in ((1, False), (3, False),
                                                                                           (1, True)))
    assert holm["alpha"] == pytest.approx(0.05 / 3)
    assert holm["seeds"] > plain["seeds"] >= one_sided["seeds"]
    for sized in (plain, holm, one_sided):
        assert sized["detectable"] <= 0.3
        assert sized["sd_upper"] > sized["sd"] == pytest.approx(np.std(values, ddof=1))
    assert sizing.size(values, 100.0, least=5)["seeds"] == 5


def test_steps_to_a_loss_interpolates_between_evaluations():
    curve = pd.DataFrame({"step": [10, 20, 30], "fixed_loss": [3.0, 2.0, 1.0]})
    assert reach.steps_to(curve, 2.5) == pytest.approx(15.0)
    assert reach.steps_to(curve, 3.5) == 10.0
    assert math.isnan(reach.steps_to(curve, 0.5))


def test_a_slope_over_three_doublings_is_wider_than_over_four_points():
    assert looped_reach_study.slope_sd_factor() == pytest.approx(math.sqrt(5 / 2))


def test_loop_norms_read_the_stream_after_each_loop():
    torch.manual_seed(0)
    model = GPT(ModelConfig(variant="scaled_loops", d_model=32, n_layers=2, n_loops=3, n_heads=4, seq_len=16,
                            vocab_size=64)).eval()
    idx = torch.randint(0, 64, (2, 16))
    scales = probes.read_scales(model, idx)
    norms = probes.loop_norms(scales, n_layers=2)
    assert list(norms["loop"]) == [0, 1, 2, 3]
    x0 = model.wte(idx) + model.wpe(torch.arange(16))
    assert norms["stream_rms"].iloc[0] == pytest.approx(probes._rms(x0))
    assert norms["stream_rms"].iloc[-1] == scales["read_rms"].iloc[-1]
    with pytest.raises(ValueError, match="no whole number of loops of 5 blocks"):
        probes.loop_norms(scales, n_layers=5)


def test_sweep_lines_give_untested_arms_the_first_seeds_and_options_as_yaml():
    study = Study(name="s", estimate="e", records=("r",), target=1.0, target_why="w", sizes=("reach4", "reach12"),
                  steps=300,
                  arms=(Arm("carry", "highway_convex", (("carry_bias", -3.0),)), Arm("plain", "standard", tested=False),
                        Arm("short", "standard", sizes=("reach4",))))
    lines = sweep_lines(study, study.arms, range(5))
    assert len(lines) == 5 and lines[-1].split()[:3] == ["s_short_reach4", "--size", "reach4"]
    carry = lines[0].split()
    assert carry[:3] == ["s_carry_reach4", "--size", "reach4"]
    assert carry[carry.index("--seeds") + 1] == "0,1,2,3,4"
    assert yaml.safe_load(carry[carry.index("--set") + 1].split("=", 1)[1]) == {"carry_bias": -3.0}
    assert carry[carry.index("--out") + 1] == "outputs/s/carry"
    plain = lines[3].split()
    assert plain[plain.index("--seeds") + 1] == "0,1" and "--set" not in plain


def test_the_l_sweep_plans_sizes_over_unique_layers_and_leaves_the_loop_designs_alone():
    """On its base grid, before any run: the committed runs may extend it (an optimum on an edge asks for more)."""
    design = looped_study.UNIQUE_LAYERS
    no_runs = pd.DataFrame(columns=looped_study.RUN_COLUMNS)
    lines = looped_study.plan(no_runs, [0], design)
    assert len(lines) == 3 * 5
    assert {line.split()[2] for line in lines} == {"looped_l1", "looped_l2", "looped_l4"}
    assert all(resolve_run(f"looped_l{n}", "scaled", 0).model.n_loops == 2 for n in (1, 2, 4))
    assert looped_study.POWER.counts == looped_study.GRID.counts == looped_study.LOOPS
    assert looped_study.plan(looped_study.study_runs(), [0])[0].split()[2] == "looped1"


def test_registered_designs_follow_from_the_committed_runs():
    """The seeds each committed-spread design fixed before its runs, recomputed from the committed files."""
    assert reach.design(reach.HIGHWAY)["seeds"] == (0, 1, 2, 3)
    assert reach.design(reach.MECHANISMS)["seeds"] == tuple(range(3, 18))
    sized = looped_reach_study.unique_layers_sizing().set_index("estimator")["seeds"]
    assert sized["parabola"] == len(looped_study.UNIQUE_LAYERS.seeds)  # the primary estimator's
    assert not set(reach.design(reach.MECHANISMS)["seeds"]) & set(reach.COMMITTED_MECHANISM_SEEDS)


def test_a_pilot_design_waits_for_its_pilot():
    empty = dataclasses.replace(reach.LAYERSCALE, name="nothing_run_yet")
    assert reach.design(empty)["seeds"] is None


def test_a_diverged_run_ends_its_pilot_and_its_rate_is_never_best(monkeypatch):
    """The ReZero speed pilot at 8e-3 diverged on one seed: the pilot is still over, and that rate is not chosen
    even where the other seeds' mean is the lowest."""
    study = dataclasses.replace(reach.REZERO_SPEED, pilot_seeds=(0, 1),
                                arms=tuple(a for a in reach.REZERO_SPEED.arms if a.lr in (0.004, 0.008)))
    rows = [{"arm": a.name, "seed": s, "variant": a.variant, "status": "finished",
             "fixed_loss": 2.0 if a.lr == 0.008 else 2.5} for a in study.arms for s in (0, 1)]
    rows[2] = {**rows[2], "status": "diverged", "fixed_loss": None}  # rezero at 8e-3, seed 0
    monkeypatch.setattr(reach, "finished", lambda study, arms=None, seeds=None: pd.DataFrame(rows))
    monkeypatch.setattr(reach, "eval_curve", lambda study, arm, seed: pd.DataFrame(
        {"step": [10, 20], "fixed_loss": [3.0, 2.0 if arm.variant == "standard" else 2.5]}))
    reading = reach.speed_reading(study, (0, 1))
    assert [a.name for a in reading["arms"]] == ["rezero_lr0.004", "standard_lr0.008"]
    assert reading["target_loss"] == pytest.approx(2.55)


def test_stream_slopes_need_every_loop_count(monkeypatch):
    study = dataclasses.replace(looped_reach_study.LOOP_NORMS, name="norms_test")

    def probes_of(root, size, variants, seeds):
        n = int(size[len("looped"):])
        if root.endswith("/scaled") and n == 8:
            return pd.DataFrame(columns=["variant", "seed", "state", "sublayer", "index", "read_rms"])
        rows = [{"seed": 0, "state": "trained", "read_rms": 1.0} for _ in range(4 * n)]
        return pd.DataFrame(rows + [{"seed": 0, "state": "trained", "read_rms": float(n) ** 0.5}])

    monkeypatch.setattr(looped_reach_study, "read_probes", probes_of)
    slopes = looped_reach_study.stream_slopes(study, (0,))
    assert slopes.loc[0, "scaled_loops"] == pytest.approx(0.5)
    assert math.isnan(slopes.loc[0, "scaled"])  # its N = 8 run left no probe


def test_every_study_answers_records_that_name_it():
    """A study's claims live in the records alone: each id it names is a registered record whose design names the
    study, and every record whose design names a study is answered by it."""
    from rrlib.claims.records import by_id

    claims, studies = by_id(), {**reach.STUDIES, **looped_reach_study.STUDIES}
    for study in studies.values():
        for cid in study.records:
            assert claims[cid].status == "registered" and f"study {study.name} " in claims[cid].design + " ", cid
    named = {c.id for c in claims.values() if c.status == "registered" and any(
        f"study {name} " in c.design + " " or f"study {name}," in c.design for name in studies)}
    assert named == {cid for study in studies.values() for cid in study.records}
    sweep = looped_reach_study.L_SWEEP  # the L sweep's claims too, by its design's name
    for cid in looped_reach_study.claims_answered()[sweep.name]:
        assert claims[cid].status == "registered" and f"design {sweep.name} " in claims[cid].design, cid


def test_a_size_holding_only_a_stopped_run_has_no_ended_run(tmp_path, monkeypatch):
    """A sitting killed mid-run leaves a size folder with the run's log and checkpoint and no result: the study
    resumes past it (results_table's empty table had no status column, so ``finished`` failed and the study could
    not restart)."""
    import shutil
    from rrlib.studies.study_plan import Arm, Study, finished
    study = Study(name="s", estimate="", records=(), target=1.0, target_why="", sizes=("depth8", "depth16"),
                  arms=(Arm("standard", "standard"),), steps=300)
    monkeypatch.setattr("rrlib.home.PROJECT_ROOT", tmp_path)  # the study's arms live under tmp_path/outputs/s/
    arm = tmp_path / "outputs" / "s" / "standard"
    stopped = arm / "depth16" / "standard" / "seed3"
    stopped.mkdir(parents=True)
    (stopped / "metrics.jsonl").write_text('{"step": 20, "loss": 5.0}\n')
    assert finished(study).empty
    shutil.copytree(ROOT / "outputs" / "mechanisms" / "standard" / "depth8", arm / "depth8")  # 15 ended runs
    runs = finished(study)
    assert set(runs["size"]) == {"depth8"} and sorted(runs["seed"]) == list(range(3, 18))
    assert set(runs["arm"]) == {"standard"}


def test_the_loop_norm_design_is_capped_and_says_what_its_seeds_detect(monkeypatch):
    from rrlib.studies import looped_reach_study as looped_reach
    from rrlib.stats import detectable_gap

    study = looped_reach.LOOP_NORMS
    monkeypatch.setattr(looped_reach, "pilot_done", lambda s: True)
    wide = pd.DataFrame({"scaled": [0.0, 0.3, -0.25], "scaled_loops": [0.4, 0.5, 0.6]})  # the TOST asks for many
    monkeypatch.setattr(looped_reach, "stream_slopes", lambda s, seeds: wide)
    design = looped_reach.design(study)
    sized = design["sizing"]
    assert sized["seeds"] > looped_reach.LOOP_NORM_MOST_SEEDS
    assert design["seeds"] == tuple(range(looped_reach.LOOP_NORM_MOST_SEEDS))
    capped = detectable_gap(sized["sd_upper"], looped_reach.LOOP_NORM_MOST_SEEDS, sized["alpha"] * 2)
    assert capped > looped_reach.LOOP_NORM_MARGIN and f"which detect {capped:.3g} there" in design["spread"]
    narrow = pd.DataFrame({"scaled": [0.0, 0.01, -0.01], "scaled_loops": [0.4, 0.5, 0.6]})
    monkeypatch.setattr(looped_reach, "stream_slopes", lambda s, seeds: narrow)
    small = looped_reach.design(study)
    assert len(small["seeds"]) == small["sizing"]["seeds"] < 16 and "capped" not in small["spread"]
