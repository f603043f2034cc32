"""Notebook 07's own study (rrlib.studies.claims_study): its conversion runs as planned, at the smallest size."""
import json

import pytest

from rrlib.studies import claims_study
from rrlib.runs.presets import resolve_run


def test_the_conversion_plan_follows_the_papers_command():
    """Rates and schedule as FINE_TUNE derives them from the Delta code's documented command."""
    plan = {s["label"]: s for s in claims_study.conversion_plan()}
    converted = plan["conversion: converted, the code's default gate (none)"]
    run = resolve_run(converted["size"], claims_study.CONVERTED, 0, converted["overrides"], converted["out_root"])
    source = resolve_run(claims_study.CONVERT_SIZE, "standard", 0)
    assert run.train.lr == pytest.approx(source.train.lr / 12)
    assert run.train.rule_lr_scale == pytest.approx(100) and run.train.min_lr_frac == pytest.approx(0.6)
    assert run.train.warmup_steps == round(run.train.steps * 0.025) and run.train.steps == source.train.steps
    assert run.model.rule_options == {"block_size": 2, "delta_timing": "after_block_start"}
    assert run.model.d_model == source.model.d_model  # start_from needs the source's width
    continued = plan["conversion: continued"]
    cont = resolve_run(continued["size"], "standard", 0, continued["overrides"], continued["out_root"])
    assert cont.train.lr == run.train.lr and cont.train.rule_lr_scale == 1
    assert claims_study.overrides_of("outputs/convert_gated", claims_study.CONVERT_SIZE, claims_study.CONVERTED) \
        == plan["conversion: converted, identity gate"]["overrides"]


@pytest.mark.slow
def test_the_gated_conversion_starts_at_the_sources_function(tmp_path):
    """Trained at tiny for a few steps: the gated arm's conversion.json says it starts at the source's logits,
    the ungated one's that it does not, and both record the gates (none without one)."""
    roots = [str(tmp_path / name) for name in ("claims", "convert", "gated")]
    plan = claims_study.conversion_plan(*roots, seeds=[0], size="tiny")
    for sweep in plan:
        sweep["overrides"] = {**sweep["overrides"],
                              "train": {**sweep["overrides"].get("train", {}), "steps": 6, "eval_every": 1000}}
        if "init_from" in sweep["overrides"]["train"]:
            sweep["overrides"]["train"]["warmup_steps"] = 1
    claims_study.run_plan(plan)
    read = lambda root: json.loads(next((tmp_path / root).glob("tiny/*/seed0/conversion.json")).read_text())
    gated, ungated = read("gated"), read("convert")
    assert gated["max_abs_logit_diff"] <= 1e-6 < gated["max_abs_logit_diff_without_gate"]
    assert gated["gate_abs_mean_trained"] > 0
    assert ungated["max_abs_logit_diff"] > 1e-3 and ungated["gate_abs_mean_trained"] is None
