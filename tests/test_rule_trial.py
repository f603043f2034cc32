"""A rule that fails or is not finite only in evaluation (eval mode, no gradients) is named by compare's one-step
trial before anything is written; one that goes NaN in evaluation after training ends its run as diverged, named,
never in a traceback from the evaluation's binning."""
import contextlib
import json

import pytest
import torch

pytestmark = pytest.mark.usefixtures("registry_as_it_was")
TINY = ["--size", "tiny", "--steps", "4", "--set", "train.eval_every=2", "--set", "train.fixed_eval_tokens=2048",
        "--set", "train.paper_eval_batches=1"]
RULE = '''import torch
from rrlib import ResidualRule, register


@register("{name}")
class Odd(ResidualRule):
    def commit(self, h, u):
        {body}
        return h + u
'''


def cli(tmp_path, monkeypatch, capsys, *argv) -> tuple[int, str, str]:
    from rrlib.__main__ import main

    monkeypatch.chdir(tmp_path)
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("name, body, said", [
    ("grad_only", "if not torch.is_grad_enabled():\n            raise RuntimeError('needs gradients')",
     "fails in evaluation (eval mode, no gradients) after a one-step trial"),
    ("eval_nan", "if not self.training:\n            return h + u * float('nan')",
     "gives non-finite logits in evaluation (eval mode, no gradients)"),
])
def test_a_rule_that_fails_only_in_evaluation_is_named_by_the_trial(tmp_path, monkeypatch, capsys, name, body, said):
    (tmp_path / "odd.py").write_text(RULE.format(name=name, body=body))
    status, out, err = cli(tmp_path, monkeypatch, capsys, "compare", "--rules", "odd.py", "--variants", name,
                           "--against", "standard", "--seeds", "2", *TINY, "--out", "verdict")
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert f"the rule {name} {said}" in err and not out and not (tmp_path / "verdict").exists()


def test_an_evaluation_that_is_not_finite_ends_the_run_diverged(tmp_path, data, monkeypatch, capsys):
    """Trained by `train` (no trial), a rule whose eval mode is NaN from its second step on: the evaluations during
    training and at the end run through, and the run is diverged, saying why."""
    body = "if not self.training and self.calls > 2:\n            return h + u * float('nan')"
    rule = RULE.format(name="late_nan", body=body).replace(
        "    def commit(self, h, u):", "    calls = 0\n\n    def commit(self, h, u):\n        type(self).calls += 1")
    (tmp_path / "odd.py").write_text(rule)
    status, _, err = cli(tmp_path, monkeypatch, capsys, "train", "--rules", "odd.py", "--variant", "late_nan", *TINY,
                         "--out", "runs")
    assert status == 0, err
    result = json.loads((tmp_path / "runs/tiny/late_nan/seed0/result.json").read_text())
    assert result["status"] == "diverged" and result["fixed_loss"] is None
    assert "not finite" in result["diverged_because"], result["diverged_because"]


def test_evaluate_scores_nan_logits_as_nan_instead_of_failing():
    from rrlib.runs.evaluate import evaluate

    class NaNModel(torch.nn.Module):
        def forward(self, x):
            return torch.full((*x.shape, 5), float("nan")), None

    batches = [(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))]
    scores = evaluate(NaNModel(), batches, torch.device("cpu"), contextlib.nullcontext)
    assert scores["tokens"] == 6 and scores["loss"] != scores["loss"]  # NaN
