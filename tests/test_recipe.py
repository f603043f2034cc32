"""The paper's recipe by default, rrlib's choices as named switches.

The paper's code (its src/train.py) gives every nn.Linear N(0, 0.02) and zeroes only the Review gate
afterwards, decays every tensor with AdamW(model.parameters()), runs fp32 with TF32 matmuls, tokenises with
HF's GPT2TokenizerFast (a literal <|endoftext|> becomes EOS) and cuts the held-out tail at int(0.97 n).
"""
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from rrlib.model import GPT
from rrlib.runs.config import RECIPES, ConfigError, RunConfig, recipe_name
from rrlib.runs.data import get_tokenizer
from rrlib.runs.optim import make_optimizer
from rrlib.runs.presets import available_sizes, load_preset, resolve_run
from rrlib.runs.data.token_cache import load_token_data

ROOT = Path(__file__).resolve().parents[1]
PAPER_SIZES = ("60m", "150m", "320m", "590m", "1b")


@pytest.mark.parametrize("size", PAPER_SIZES)
def test_paper_sizes_run_the_papers_recipe(size):
    run = resolve_run(size, "highway", 0)
    assert recipe_name(run) == "paper"
    assert (run.model.highway_gate_init, run.train.weight_decay_on, run.train.precision,
            run.data.eos_in_text, run.data.heldout_cut, run.data.tokenizer) == \
        ("gpt2", "all", "tf32", "special", "floor", "gpt2")


def test_every_preset_names_its_recipe_and_the_cpu_studies_use_rrlibs():
    for path in sorted((ROOT / "params").glob("*.yaml")):
        assert "\nrecipe: " in path.read_text(), f"{path.name} does not say which recipe it uses"
    # the ablation of notebook 04, and the size × tokens question at the paper's sizes (notebook 06)
    paper_side = set(PAPER_SIZES) | {"mini_paper", "60m_tpp2", "60m_tpp20", "150m_tpp2", "150m_tpp20"}
    for size in available_sizes():
        expected = "paper" if size in paper_side else "rrlib"
        assert load_preset(size).recipe == expected, size
        assert recipe_name(resolve_run(size, "review", 0)) == expected, size


def test_the_recipe_ablation_differs_from_mini_in_the_switches_only():
    mini, paper = resolve_run("mini", "highway", 3), resolve_run("mini_paper", "highway", 3)
    switches = {"highway_gate_init", "weight_decay_on", "eos_in_text", "heldout_cut"}
    for section in ("model", "train", "data"):
        a, b = vars(getattr(mini, section)), vars(getattr(paper, section))
        assert {k for k in a if a[k] != b[k]} <= switches, section
    assert recipe_name(paper) == "paper" and mini.model.d_model == paper.model.d_model


def small(variant, **model):
    """A paper-recipe model small enough to build in milliseconds."""
    run = resolve_run("60m", variant, 0, {"model": {"d_model": 64, "n_layers": 2, "n_heads": 4, **model}})
    torch.manual_seed(0)
    return run, GPT(run.model)


def test_highway_gate_starts_as_every_linear_in_the_papers_code_and_review_at_zero():
    _, highway = small("highway")
    weights = torch.cat([g.weight.flatten() for g in highway.rule.gates])
    assert weights.std().item() == pytest.approx(0.02, rel=0.05) and weights.abs().max() > 0
    assert all(torch.count_nonzero(g.bias) == 0 for g in highway.rule.gates)
    _, review = small("review")
    assert all(torch.count_nonzero(g.weight) == 0 and torch.count_nonzero(g.bias) == 0 for g in review.rule.gates)


def test_zero_highway_gate_switch_starts_at_one_half():
    _, model = small("highway", highway_gate_init="zero")
    assert all(torch.count_nonzero(g.weight) == 0 for g in model.rule.gates)
    h = torch.randn(2, 3, model.cfg.d_model)
    assert torch.equal(torch.sigmoid(model.rule.gates[0](h)), torch.full_like(h, 0.5))


def decayed(run, model):
    groups = make_optimizer(model, run.train, torch.device("cpu")).param_groups
    return {id(p) for g in groups if g["weight_decay"] > 0 for p in g["params"]}


def test_paper_decays_every_tensor_rrlib_only_matrices():
    run, model = small("review")
    every = {id(p) for p in model.parameters()}
    assert decayed(run, model) == every  # biases, norm gains and gate biases too
    rrlib = dataclasses.replace(run, train=dataclasses.replace(run.train, weight_decay_on="matrices"))
    assert decayed(rrlib, model) == {id(p) for p in model.parameters() if p.dim() >= 2} != every


def test_a_literal_eos_in_a_story_is_eos_as_hf_tokenises_it_or_text_when_asked(data):
    text = "The end.<|endoftext|>Once"
    gpt2_dir = data / "gpt2"
    for name, kw in (("gpt2", {"gpt2_dir": gpt2_dir}), ("bytes", {})):
        special = get_tokenizer(name, eos_in_text="special", **kw)
        plain = get_tokenizer(name, eos_in_text="text", **kw)
        ids = special.encode(text)
        assert ids.count(special.eos_id) == 1 and plain.encode(text).count(plain.eos_id) == 0
        cut = ids.index(special.eos_id)
        assert ids[:cut] == plain.encode("The end.") and ids[cut + 1:] == plain.encode("Once")
    with pytest.raises(Exception, match="unknown eos_in_text 'maybe'; valid choices: special, text"):
        get_tokenizer("bytes", eos_in_text="maybe")


def test_heldout_cut_floor_is_int_097_n_and_round_is_rrlibs_first_rule(tmp_path, data):
    sample = data / "tinystories" / "TinyStories-train-sample.txt"
    cuts = {}
    for cut in ("floor", "round"):
        data = load_token_data(data_path=str(sample), tokenizer="bytes", cache_dir=tmp_path, heldout_cut=cut)
        n = len(data.train) + len(data.heldout)
        cuts[cut] = len(data.train)
    assert cuts["floor"] == int(n * 0.97) and cuts["round"] == n - round(n * 0.03)
    assert abs(cuts["floor"] - cuts["round"]) <= 1


def test_switches_are_settings_with_one_sentence_errors():
    run = resolve_run("mini", "highway", 0, {"model": {"highway_gate_init": "gpt2"},
                                            "train": {"weight_decay_on": "all"}})
    assert recipe_name(run).startswith("mixed (data.eos_in_text, data.heldout_cut")
    with pytest.raises(ConfigError, match="unknown train.weight_decay_on 'some'; valid choices: all, matrices"):
        resolve_run("mini", "review", 0, {"train": {"weight_decay_on": "some"}})
    with pytest.raises(ConfigError, match="unknown model.highway_gate_init 'ones'; valid choices: gpt2, zero"):
        resolve_run("60m", "highway", 0, {"model": {"highway_gate_init": "ones"}})


def test_configs_written_before_the_switches_existed_read_as_rrlibs_side():
    committed = json.loads((ROOT / "outputs/runs/mini/highway/seed0/config.json").read_text())["config"]
    assert "highway_gate_init" not in committed["model"]
    assert recipe_name(RunConfig.from_dict(committed)) == "rrlib"
    for section, values in RECIPES["rrlib"].items():
        for name, value in values.items():
            assert getattr(getattr(RunConfig.from_dict(committed), section), name) == value
