"""A rule file may not change what every run computes, however it goes about it: a method set on a torch class over
an inherited one, a constant of rrlib rebound (also where the file is the first to import its module), a patch made
as the rule's model is built. Each is refused in one sentence before any run, everything put back; an import that
changes nothing is not refused."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("registry_as_it_was")
TINY = ["--size", "tiny", "--steps", "2", "--set", "train.eval_every=2", "--set", "train.fixed_eval_tokens=2048",
        "--set", "train.paper_eval_batches=1", "--no-timing"]
RULE = '''import torch
import torch.nn.functional as F
from rrlib import ResidualRule, register
{head}


@register("plain_gate")
class PlainGate(ResidualRule):
{body}
    def commit(self, h, u):
        {step}
        return h + u
'''


def rule_file(head: str = "", body: str = "", step: str = "pass") -> str:
    return RULE.format(head=head, body=body, step=step)


def compare(tmp_path, monkeypatch, capsys, **code) -> tuple[int, str]:
    from rrlib.__main__ import main

    (tmp_path / "my_rules.py").write_text(rule_file(**code))
    monkeypatch.chdir(tmp_path)
    status = main(["compare", "--rules", "my_rules.py", "--variants", "plain_gate", "--against", "standard",
                   "--seeds", "2", *TINY, "--out", "verdict"])
    return status, capsys.readouterr().err


# what the file does → the name the sentence gives; each one inherited, not the class's own (AdamW.step: until
# torch wraps it at a first AdamW)
INHERITED = {
    "torch.Tensor.softmax = lambda self, *a, **k: torch.softmax(self, *a, **k)": "torch.Tensor.softmax",
    "torch.Tensor.__add__ = lambda self, other: torch.add(self, other)": "torch.Tensor.__add__",
    "torch.optim.AdamW.step = lambda self, closure=None: None": "torch.optim.adamw.AdamW.step",
}


@pytest.mark.parametrize("patch", sorted(INHERITED))
def test_a_rule_file_that_overrides_an_inherited_torch_method_is_refused_and_put_back(tmp_path, monkeypatch, capsys,
                                                                                       patch):
    from rrlib.rules import RULES

    owner, name = INHERITED[patch].replace("torch.optim.adamw", "torch.optim").rsplit(".", 1)
    cls = eval(owner)  # noqa: S307 - one of the names above
    before = vars(cls).get(name)  # None, or torch's own (a first AdamW wraps AdamW.step for its profiler)
    status, err = compare(tmp_path, monkeypatch, capsys, head=patch)
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "replace functions that every run calls" in err and INHERITED[patch] in err, err
    assert vars(cls).get(name) is before  # the method answers as before
    assert "plain_gate" not in RULES and not (tmp_path / "verdict").exists()


def test_a_rule_file_that_adds_a_method_of_its_own_to_a_torch_class_is_not_refused(tmp_path):
    """A name no class above had changes nothing a run calls; a constant set to the value it holds neither."""
    from rrlib.rules import RULES, load_rules

    head = "torch.Tensor.plain_gate_helper = lambda self: self\nimport rrlib.model\nrrlib.model.NORM_EPS = 1e-5"
    (tmp_path / "fine.py").write_text(rule_file(head=head))
    try:
        assert load_rules(str(tmp_path / "fine.py")) == ["plain_gate"] and "plain_gate" in RULES
    finally:
        del torch.Tensor.plain_gate_helper


def test_a_rule_file_that_rebinds_a_constant_of_rrlib_is_refused_where_it_first_imports_its_module(tmp_path):
    """A fresh ``rrlib train`` has not imported rrlib.model when it loads --rules: the file that imports it first
    and sets its norm's epsilon changes every run of the process, a standard baseline included."""
    head = "import rrlib.model\nrrlib.model.NORM_EPS = 1e-2"
    (tmp_path / "my_rules.py").write_text(rule_file(head=head))
    env = {**os.environ, "RRLIB_RULES": ""}
    out = subprocess.run([sys.executable, "-m", "rrlib", "train", "--rules", "my_rules.py", "--variant", "standard",
                          *[a for a in TINY if a != "--no-timing"], "--out", "runs"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "rrlib.model.NORM_EPS" in out.stderr, out.stderr[-2000:]
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_a_rule_that_patches_torch_as_it_is_built_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    """The import is clean; the rule's constructor replaces F.gelu, which would change the standard runs a sweep
    trains after it in the same process under their clean fingerprints."""
    from rrlib.__main__ import main

    clean = F.gelu
    body = ('    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n'
            '        F.gelu = lambda x, approximate="none": x\n')
    (tmp_path / "my_rules.py").write_text(rule_file(body=body))
    monkeypatch.chdir(tmp_path)
    status = main(["sweep", "--rules", "my_rules.py", "--variants", "plain_gate,standard", *TINY[:-1],
                   "--out", "runs"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "the rule plain_gate changes what every run computes as it is built" in err, err
    assert "torch.nn.functional.gelu" in err and F.gelu is clean and not (tmp_path / "runs").exists()


def test_a_rule_that_patches_torch_as_it_runs_is_refused_by_the_trial(tmp_path, monkeypatch, capsys):
    """The rule replaces F.gelu in its forward pass: compare's one-step trial sees it before any run trains."""
    clean = F.gelu
    status, err = compare(tmp_path, monkeypatch, capsys, step='F.gelu = lambda x, approximate="none": x')
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "the rule plain_gate changes what every run computes as its model is built or run" in err, err
    assert "torch.nn.functional.gelu" in err and F.gelu is clean and not (tmp_path / "verdict").exists()


@pytest.mark.parametrize("layers,dilation,period", [(4, 4, 3), (6, 5, 4)])
def test_denseformer_whose_dilation_and_period_together_average_nothing_is_refused(layers, dilation, period):
    """Each within the depth, but the blocks a DWA follows (every period-th) all come before the first one it reaches
    back to (the dilation-th): every DWA holds its own block's output alone, the standard residual."""
    from rrlib.model import GPT, ModelConfig
    from rrlib.rules import ConfigError

    config = dict(d_model=32, n_layers=layers, n_heads=4, seq_len=16, vocab_size=64, variant="denseformer")
    last = layers // period * period
    with pytest.raises(ConfigError, match=f"give a dilation of at most {last} at this period"):
        GPT(ModelConfig(**config, rule_options={"dilation": dilation, "period": period}))
    GPT(ModelConfig(**config, rule_options={"dilation": last, "period": period}))  # the largest it takes


def test_the_estimate_times_a_rule_by_its_finished_runs_and_says_the_rest_is_rough(tmp_path, monkeypatch):
    """A rule with a finished run in the comparison is timed by it (3 s a step here); the rest by one step timed
    beforehand (0.7 s here), which the message calls rough."""
    from rrlib.compare import engine
    from rrlib.runs import pace
    from rrlib.runs.presets import resolve_run
    from rrlib.runs.provenance import device_name

    monkeypatch.setattr(pace, "named_step_time", lambda run: 0.7)
    overrides = {"data": {"cache_dir": str(tmp_path / "cache")}, "train": {"steps": 10, "device": "cpu"}}
    run = lambda rule, seed: resolve_run("tiny", rule, seed, overrides, str(tmp_path / "runs"))  # noqa: E731
    finished = {"status": "finished", "device": device_name(torch.device("cpu")), "steps": 10, "minutes": 0.5}
    said = []
    engine.describe([(run("review", 0), finished)], [run("review", 1), run("standard", 1)], said.append)
    estimate = said[-1]
    assert estimate.startswith("[compare] about 37 s of training on this CPU"), estimate  # 10 × 3 s + 10 × 0.7 s
    assert "review at the time a step took in its finished runs" in estimate and "rough" in estimate, estimate


def test_a_run_whose_evaluation_turns_nan_during_training_stops_there_diverged(tmp_path, data, monkeypatch, capsys):
    """A rule whose eval mode is NaN from its fifth training call on: the evaluation at step 4 is not finite, and the
    run ends there as diverged, naming that evaluation, instead of training on to a final evaluation that fails."""
    import json

    from rrlib.__main__ import main

    step = 'type(self).calls += self.training\n        if not self.training and self.calls > 4:\n' \
           '            return h + u * float("nan")'
    (tmp_path / "my_rules.py").write_text(rule_file(body="    calls = 0\n", step=step))
    monkeypatch.chdir(tmp_path)
    status = main(["train", "--rules", "my_rules.py", "--variant", "plain_gate", "--size", "tiny", "--steps", "8",
                   "--set", "train.eval_every=2", "--set", "train.fixed_eval_tokens=2048", "--set",
                   "train.paper_eval_batches=1", "--out", "runs"])
    assert status == 0, capsys.readouterr().err
    result = json.loads((tmp_path / "runs/tiny/plain_gate/seed0/result.json").read_text())
    assert result["status"] == "diverged" and result["fixed_loss"] is None, result
    assert result["diverged_step"] < 8 and result["diverged_because"] == \
        f"fixed_loss not finite at the evaluation of step {result['diverged_step']}", result


def test_a_rule_file_that_replaces_a_numpy_function_the_batches_use_is_refused_and_put_back(tmp_path):
    """The evaluation windows' starts are np.arange: a rule file that replaces it changes every run's data."""
    import numpy as np

    from rrlib.rules import RULES, ConfigError, load_rules

    clean = np.arange
    (tmp_path / "bad.py").write_text(rule_file(head="import numpy as np\nnp.arange = lambda *a, **k: np.zeros(1)"))
    with pytest.raises(ConfigError, match=r"\(numpy.arange\)"):
        load_rules(str(tmp_path / "bad.py"))
    assert np.arange is clean and "plain_gate" not in RULES
