"""A run's fingerprint covers a rule's whole code (every module of its folder or package it imports), and a rule
file that changes what every run computes (a patched torch function, one of rrlib's) is refused before any run
trains beside it, everything put back."""
import hashlib
import json
import sys

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("registry_as_it_was")
TINY = ["--size", "tiny", "--steps", "3", "--set", "train.eval_every=3", "--set", "train.fixed_eval_tokens=2048",
        "--set", "train.paper_eval_batches=1"]
SCALED_RULE = '''import torch
from rrlib import ResidualRule, register
{imports}


@register("scaled_gate")
class ScaledGate(ResidualRule):
    def commit(self, h, u):
        return h + SCALE * u
'''


def cli(tmp_path, monkeypatch, capsys, *argv) -> tuple[int, str, str]:
    from rrlib.__main__ import main

    monkeypatch.chdir(tmp_path)
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def fresh_process(monkeypatch, *modules):
    """What a new process would see: no rule file loaded yet and none of ``modules`` imported."""
    from rrlib.rules import external, protocol

    external._LOADED.clear()
    protocol.RULES.pop("scaled_gate", None)
    protocol.SOURCES.pop("scaled_gate", None)
    for name in modules:
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_a_helper_module_edited_after_its_runs_is_another_run(tmp_path, data, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "consts.py").write_text("SCALE = 1.0\n")
    (tmp_path / "my_rules.py").write_text(SCALED_RULE.format(imports="from consts import SCALE"))
    args = ("train", "--rules", "my_rules.py", "--variant", "scaled_gate", *TINY, "--out", "runs")
    fresh_process(monkeypatch, "consts")
    status, _, err = cli(tmp_path, monkeypatch, capsys, *args)
    assert status == 0, err
    model = json.loads((tmp_path / "runs/tiny/scaled_gate/seed0/config.json").read_text())["config"]["model"]
    assert model["rule_source"] != hashlib.sha256((tmp_path / "my_rules.py").read_bytes()).hexdigest()
    fresh_process(monkeypatch, "consts")
    status, out, _ = cli(tmp_path, monkeypatch, capsys, *args)
    assert status == 0 and "'status': 'finished'" in out  # the same code: the same run, done already
    # only the helper changes: other code, never "done already"
    (tmp_path / "consts.py").write_text("SCALE = 0.5\n")
    fresh_process(monkeypatch, "consts")
    status, _, err = cli(tmp_path, monkeypatch, capsys, *args)
    assert status == 2 and "model.rule_source" in err and "holds a finished run with other settings" in err, err


def test_a_rule_s_package_modules_count_and_an_unrelated_file_does_not(tmp_path, monkeypatch):
    from rrlib.rules import load_rules
    from rrlib.rules.external import rule_source

    package = tmp_path / "gatepkg"
    (package / "util").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "util" / "__init__.py").write_text("")
    (package / "util" / "consts.py").write_text("SCALE = 1.0\n")
    (package / "unused.py").write_text("X = 1\n")
    (package / "rules.py").write_text(SCALED_RULE.format(imports="from .util.consts import SCALE"))
    monkeypatch.syspath_prepend(str(tmp_path))

    def source():
        fresh_process(monkeypatch, "gatepkg", "gatepkg.rules", "gatepkg.util", "gatepkg.util.consts")
        load_rules("gatepkg.rules")
        return rule_source("scaled_gate")[1]

    first = source()
    (package / "unused.py").write_text("X = 2\n")  # not imported by the rule: not its code
    assert source() == first
    (package / "util" / "consts.py").write_text("SCALE = 2.0\n")
    assert source() != first


def test_a_rule_file_that_imports_nothing_of_its_folder_keeps_its_file_s_hash(tmp_path, user_rule):
    from rrlib.rules import load_rules
    from rrlib.rules.external import rule_source

    path = user_rule(tmp_path)
    (tmp_path / "consts.py").write_text("SCALE = 1.0\n")  # beside it, not imported
    load_rules(str(path))
    assert rule_source("sigmoid_scalar")[1] == hashlib.sha256(path.read_bytes()).hexdigest()


PATCHES = {
    "torch.nn.functional.gelu": "import torch.nn.functional as F\n_gelu = F.gelu\n"
                                "F.gelu = lambda x, approximate='none': _gelu(x, approximate='tanh')",
    "torch.nn.modules.linear.Linear.forward": "import torch\nimport torch.nn.functional as F\n"
                                              "torch.nn.Linear.forward = lambda self, x: F.linear(x, self.weight)",
    "rrlib.rules.per_sublayer.Standard.commit": "from rrlib.rules import per_sublayer\n"
                                                "per_sublayer.Standard.commit = lambda self, h, u: h + 0.5 * u",
}


@pytest.mark.parametrize("patched", sorted(PATCHES))
def test_a_rule_file_that_patches_what_every_run_calls_is_refused_and_put_back(tmp_path, monkeypatch, capsys,
                                                                                patched):
    from rrlib.rules import RULES
    from rrlib.rules import per_sublayer

    clean = F.gelu, torch.nn.Linear.forward, per_sublayer.Standard.commit
    (tmp_path / "bad.py").write_text(PATCHES[patched] + "\n" + SCALED_RULE.format(imports="SCALE = 1.0"))
    status, _, err = cli(tmp_path, monkeypatch, capsys, "compare", "--rules", "bad.py", "--variants", "scaled_gate",
                         "--against", "standard", "--seeds", "2", *TINY, "--out", "verdict")
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "replace functions that every run calls" in err and patched in err, err
    assert (F.gelu, torch.nn.Linear.forward, per_sublayer.Standard.commit) == clean
    assert "scaled_gate" not in RULES and not (tmp_path / "verdict").exists()


def test_a_rule_file_that_imports_more_of_torch_is_not_refused(tmp_path):
    """Importing torch's own modules rebinds a few of torch's names (dynamo wraps torch.manual_seed): that is not
    the rule file's patch."""
    from rrlib.rules import RULES, load_rules

    code = "import torch._dynamo\nimport torch.distributions\nimport torch.utils.checkpoint\nSCALE = 1.0"
    (tmp_path / "fine.py").write_text(SCALED_RULE.format(imports=code))
    assert load_rules(str(tmp_path / "fine.py")) == ["scaled_gate"] and "scaled_gate" in RULES


def test_a_setting_beyond_the_first_ones_is_refused_too(tmp_path, monkeypatch, capsys):
    from rrlib.rules.import_guard import torch_state

    before = torch_state()
    head = "torch.backends.cuda.matmul.allow_tf32 = not torch.backends.cuda.matmul.allow_tf32\nSCALE = 1.0"
    (tmp_path / "bad.py").write_text(SCALED_RULE.format(imports=head))
    status, _, err = cli(tmp_path, monkeypatch, capsys, "train", "--rules", "bad.py", "--variant", "standard", *TINY,
                         "--out", "runs")
    assert status == 2 and "torch.backends.cuda.matmul.allow_tf32" in err, err
    assert torch_state() == before and not (tmp_path / "runs").exists()


def test_a_rule_name_longer_than_a_folder_may_be_is_one_sentence(tmp_path, monkeypatch, capsys):
    from rrlib.rules import RULES

    name = "g" * 300
    (tmp_path / "bad.py").write_text(SCALED_RULE.replace("scaled_gate", name).format(imports="SCALE = 1.0"))
    status, _, err = cli(tmp_path, monkeypatch, capsys, "train", "--rules", "bad.py", "--variant", "standard", *TINY,
                         "--out", "runs")
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "at most 64 characters" in err and name not in RULES and not (tmp_path / "runs").exists()
