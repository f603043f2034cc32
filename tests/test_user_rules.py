"""Rules from outside the package (rrlib.rules.external): --rules files and modules, $RRLIB_RULES, entry points;
one sentence for each way loading can fail; the rule's source hash in the run's fingerprint."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("registry_as_it_was")


def rrlib(*args, cwd, monkeypatch, capsys):
    """``python -m rrlib ARGS`` in this process (in ``cwd``): (exit status, stdout, stderr)."""
    from rrlib.__main__ import main

    monkeypatch.chdir(cwd)
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out, out.err


def python(code: str, cwd, env=None):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{cwd}", **(env or {})})


def test_a_rule_file_trains_and_its_run_records_origin_and_hash(tmp_path, data, monkeypatch, capsys, user_rule):
    from rrlib.rules import external

    user_rule(tmp_path)
    args = ("train", "--rules", "my_rules.py", "--size", "tiny", "--variant", "sigmoid_scalar", "--steps", "3",
            "--set", "train.eval_every=3", "--out", "runs")
    status, out, err = rrlib(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 0, err
    config = json.loads((tmp_path / "runs/tiny/sigmoid_scalar/seed0/config.json").read_text())["config"]["model"]
    import hashlib

    assert config["rule_origin"] == "file my_rules.py"
    assert config["rule_source"] == hashlib.sha256((tmp_path / "my_rules.py").read_bytes()).hexdigest()
    status, out, _ = rrlib(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 0 and "'status': 'finished'" in out
    # the same file edited (as a new process would load it): a run of other code, never "done already"
    user_rule(tmp_path, extra="\n# a change\n")
    external._LOADED.clear()
    from rrlib.rules import protocol

    del protocol.RULES["sigmoid_scalar"]
    status, _, err = rrlib(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2
    assert "model.rule_source" in err and "holds a finished run with other settings" in err


def test_builtin_runs_keep_their_fingerprint():
    """A built-in rule's identity has no rule_source (None is left out), so committed runs still answer."""
    from rrlib.runs.folders import asked_identity
    from rrlib.runs.presets import resolve_run

    identity = asked_identity(resolve_run("tiny", "review", 0))
    assert "rule_source" not in identity["model"] and "rule_origin" not in identity["model"]


@pytest.mark.parametrize("content, words", [
    ("raise ValueError('broken on purpose')\n", "the rule file bad.py does not import: line 1: ValueError: broken on purpose"),
    ("def f(:\n", "the rule file bad.py does not import: line 1: SyntaxError"),
    ("RULE review", "rule file bad.py: the rule name 'review' is taken (by Review of module "
                                 "rrlib.rules.per_sublayer); register Scalar under another name"),
])
def test_a_file_that_does_not_load_is_one_sentence_and_exit_2(tmp_path, content, words, monkeypatch, capsys, user_rule):
    if content == "RULE review":
        user_rule(tmp_path, name="review", file="bad.py")
    else:
        (tmp_path / "bad.py").write_text(content)
    status, _, err = rrlib("train", "--rules", "bad.py", "--size", "tiny", "--variant", "review", cwd=tmp_path,
                           monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert words in err


def test_missing_rules_and_bad_values_are_one_sentence(tmp_path, monkeypatch, capsys):
    for args, words in ((("--rules", "no_such_module_here"), "no rule file or module 'no_such_module_here'"),
                        (("--rules", "missing.py"), "cannot read the rule file 'missing.py'"),
                        (("--rules", str(tmp_path)), "is a folder"),
                        (("--rules",), "--rules needs a value")):
        status, _, err = rrlib("sweep", "--size", "tiny", *args, cwd=tmp_path, monkeypatch=monkeypatch,
                               capsys=capsys)
        assert status == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_two_files_claiming_one_name_are_refused(tmp_path, monkeypatch, capsys, user_rule):
    user_rule(tmp_path, file="a.py")
    user_rule(tmp_path, file="b.py")
    status, _, err = rrlib("train", "--rules", "a.py", "--rules", "b.py", "--size", "tiny", "--variant",
                           "sigmoid_scalar", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert status == 2 and "the rule name 'sigmoid_scalar' is taken" in err
    assert "file a.py" in err  # says who holds it


def test_a_module_the_environment_and_an_entry_point_all_register(tmp_path, user_rule):
    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    user_rule(package, name="from_module", file="rules.py")
    user_rule(tmp_path, name="from_env", file="env_rules.py")
    dist = tmp_path / "userpkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: userpkg\nVersion: 1.0\n")
    user_rule(package, name="from_entry_point", file="installed.py")
    (dist / "entry_points.txt").write_text("[rrlib.rules]\nmine = userpkg.installed\n")
    code = ("from rrlib.rules import RULES, load_rules; from rrlib.rules.external import rule_source; "
            "load_rules('userpkg.rules'); "
            "print([n for n in ('from_module', 'from_env', 'from_entry_point') if n in RULES]); "
            "print([rule_source(n)[0] for n in ('from_module', 'from_env', 'from_entry_point')])")
    done = python(code, tmp_path, env={"RRLIB_RULES": str(tmp_path / "env_rules.py")})
    assert done.returncode == 0, done.stderr
    names, origins = done.stdout.strip().splitlines()
    assert names == "['from_module', 'from_env', 'from_entry_point']"
    assert origins == "['module userpkg.rules', 'file env_rules.py', 'entry point mine (userpkg.installed)']"


def test_the_command_line_passes_its_rules_on_to_child_processes(tmp_path, user_rule):
    """--rules is exported to $RRLIB_RULES, which a notebook kernel or torchrun worker reads on import."""
    user_rule(tmp_path)
    code = ("import os, subprocess, sys; from rrlib.__main__ import load_given_rules; "
            "load_given_rules(['train', '--rules', 'my_rules.py']); "
            "print(subprocess.run([sys.executable, '-c', 'from rrlib.rules import RULES; "
            "print(\"sigmoid_scalar\" in RULES)'], capture_output=True, text=True).stdout.strip())")
    done = python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_the_same_class_defined_again_replaces_itself():
    """A notebook cell run twice defines the class again: not a clash with itself."""
    from rrlib.rules import RULES, ResidualRule, register

    for _ in range(2):
        @register("twice_defined_rule")
        class TwiceDefined(ResidualRule):
            def commit(self, h, u):
                return h + u
    assert RULES.pop("twice_defined_rule") is TwiceDefined


def test_the_sweep_notebook_takes_rules_and_variants_as_parameters(tmp_path, data, user_rule):
    """papermill -p rules my_rules.py -p variants review,sigmoid_scalar: the kernel loads the file, the list is a list."""
    import papermill

    from rrlib.report.notebooks import NOTEBOOK_DIR

    user_rule(tmp_path)
    executed = tmp_path / "03.ipynb"
    papermill.execute_notebook(str(NOTEBOOK_DIR / "03_sweep.ipynb"), str(executed), kernel_name="python3",
                               cwd=str(REPO), progress_bar=False,
                               parameters={"size": "tiny", "rules": str(tmp_path / "my_rules.py"),
                                           "variants": "review,sigmoid_scalar", "seeds": "0,1", "steps": 3,
                                           "out_root": str(tmp_path / "runs")})
    results = sorted(p.parent.parent.name for p in (tmp_path / "runs" / "tiny").glob("*/seed*/result.json"))
    assert results == ["review", "review", "sigmoid_scalar", "sigmoid_scalar"]
