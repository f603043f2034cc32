"""Presets, overrides and the one-sentence errors users see."""
import pytest

from rrlib.runs.config import PARAMS_DIR, ConfigError
from rrlib.runs.presets import available_sizes, load_preset, resolve_run


def test_presets_exist():
    sizes = available_sizes()
    for size in ("tiny", "mini", "60m", "150m", "320m", "590m", "1b", "depth24"):
        assert size in sizes


def test_paper_sizes_carry_the_paper_recipe():
    for size, steps in {"60m": 8000, "150m": 8000, "320m": 8000, "590m": 7000, "1b": 6000}.items():
        p = load_preset(size)
        t = p.train
        assert (t.steps, t.batch_size, t.lr, t.betas, t.weight_decay, t.grad_clip, t.warmup_steps,
                t.min_lr_frac) == (steps, 64, 2e-4, (0.9, 0.95), 0.1, 1.0, 500, 0.1)
        assert (p.model.seq_len, p.model.vocab_size, p.data.max_stories) == (256, 50257, 400_000)
    assert load_preset("320m").seeds == [0, 1]


def test_unknown_size_lists_valid_sizes():
    with pytest.raises(ConfigError, match=r"unknown size 'huge'; valid sizes: .*1b.*tiny"):
        load_preset("huge")
    with pytest.raises(ConfigError, match="unknown size 'depth7'"):
        load_preset("depth7")


def test_depth_presets_set_the_depth():
    assert load_preset("depth24").model.n_layers == 24
    assert load_preset("depth2").model.n_layers == 2


def test_unknown_variant_and_override():
    with pytest.raises(ConfigError, match="unknown variant 'reveiw'"):
        resolve_run("tiny", "reveiw", 0)
    with pytest.raises(ConfigError, match=r"unknown train setting\(s\) \['stepz'\]"):
        resolve_run("tiny", "review", 0, {"train": {"stepz": 3}})


def test_overrides_apply_before_matching():
    run = resolve_run("tiny", "standard", 2, {"train": {"steps": 3}, "model": {"d_model": 128}})
    assert run.train.steps == 3 and run.model.d_model > 128 and run.seed == 2
    assert str(run.run_dir).endswith("tiny/standard/seed2")


def test_run_config_round_trips_through_dict():
    run = resolve_run("mini", "highway", 1)
    assert type(run).from_dict(run.to_dict()) == run


def test_expanded_presets_set_their_field():
    assert load_preset("looped8").model.n_loops == 8 and load_preset("looped8").model.n_layers == 2
    assert "looped1" in available_sizes() and "looped" not in available_sizes()


def test_family_mini_is_mini_with_the_family_methods():
    family, family_mini, mini = load_preset("family"), load_preset("family_mini"), load_preset("mini")
    assert (family_mini.model, family_mini.data, family_mini.train) == (mini.model, mini.data, mini.train)
    assert family_mini.variants == family.variants and family_mini.seeds == family.seeds


def test_steps_grid_expands_over_steps_with_warmup_a_tenth():
    for stem, width in (("micro_steps", 64), ("mini_steps", 128)):
        base = load_preset(stem.split("_")[0])
        for steps in (100, 300, 1200):
            p = load_preset(f"{stem}{steps}")
            assert (p.model.d_model, p.train.steps, p.train.warmup_steps) == (width, steps, steps // 10)
            # the same recipe as the CPU-scale study in every other setting
            assert (p.model, p.data, p.variants) == (base.model, base.data, base.variants)
            assert {k: v for k, v in vars(p.train).items() if k not in ("steps", "warmup_steps", "warmup_frac",
                                                                         "eval_every")} == \
                {k: v for k, v in vars(base.train).items() if k not in ("steps", "warmup_steps", "warmup_frac",
                                                                        "eval_every")}
    # an override of steps rescales the warmup; a bad share is one sentence
    assert resolve_run("micro_steps300", "review", 0, {"train": {"steps": 50}}).train.warmup_steps == 5
    with pytest.raises(ConfigError, match="warmup_frac must be at least 0 and below 1"):
        resolve_run("micro_steps300", "review", 0, {"train": {"warmup_frac": 1.5}})


def test_a_preset_file_of_ones_own_is_a_size_named_after_the_file(tmp_path):
    from rrlib.runs.presets import resolve_run

    own = tmp_path / "narrow_tiny.yaml"
    own.write_text((PARAMS_DIR / "tiny.yaml").read_text(encoding="utf-8").replace("d_model: 64", "d_model: 32"),
                   encoding="utf-8")
    run = resolve_run(str(own), "review", 0)
    assert (run.size, run.model.d_model) == ("narrow_tiny", 32)
    assert run.run_dir.parts[-3:] == ("narrow_tiny", "review", "seed0")
    with pytest.raises(ConfigError, match=r"preset file nowhere\.yaml does not exist; name a size \(.*tiny"):
        resolve_run("nowhere.yaml", "review", 0)
