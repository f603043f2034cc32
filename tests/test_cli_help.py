"""--help at every level: every flag explained, the valid choices listed."""
import argparse
import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from rrlib import __main__ as cli
from rrlib.report import build
from rrlib.report.notebooks import NOTEBOOKS
from rrlib.rules import RULES
from rrlib.runs.presets import available_sizes


def help_text(argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        (build.main if argv[:1] == ["report"] else cli.main)(argv[1:] if argv[:1] == ["report"] else argv)
    return out.getvalue()


def parser_actions(argv) -> list[argparse.Action]:
    """The actions of the parser that --help describes, captured as it is built."""
    seen = []
    original = argparse.ArgumentParser.print_help

    def capture(self, file=None):
        seen.extend(self._actions)
        original(self, io.StringIO())

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "print_help", capture)
        help_text(argv)
    return seen


def test_top_level_help_is_plain_text():
    text = help_text(["--help"])
    assert "``" not in text and all(name in text for name in ("train", "sweep", "bench", "report"))


@pytest.mark.parametrize("argv", [["train", "--help"], ["sweep", "--help"], ["report", "--help"]])
def test_every_flag_has_a_help_line(argv):
    actions = [a for a in parser_actions(argv) if a.option_strings]
    assert len(actions) > 5
    missing = [a.option_strings[-1] for a in actions if not a.help]
    assert missing == [], f"{' '.join(argv)}: no help for {missing}"


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_training_help_lists_the_valid_choices(command):
    text = " ".join(help_text([command, "--help"]).split())
    for name in [*available_sizes(), *RULES, "fp32", "bf16", "tf32", "cuda", "cpu", "gpt2", "bytes"]:
        assert name in text, f"{command} --help does not name {name!r}"


def test_report_help_lists_the_notebooks():
    text = " ".join(help_text(["report", "--help"]).split())
    assert all(nb.name in text for nb in NOTEBOOKS)


def test_the_choices_help_spells_are_the_librarys():
    from rrlib.runs.config import PRECISIONS
    from rrlib.runs.data import HELDOUT, TOKENIZERS

    assert cli.RULE_NAMES == tuple(RULES)
    assert (cli.PRECISIONS, cli.TOKENIZERS, cli.HELDOUT) == (tuple(PRECISIONS), tuple(TOKENIZERS), tuple(HELDOUT))
    assert cli.size_names() == available_sizes()


def test_size_names_reads_expansions_and_leaves_out_a_broken_preset(tmp_path):
    (tmp_path / "a.yaml").write_text("expand: {n_layers: [2, 4]}\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("model: {d_model: 64}\n", encoding="utf-8")
    (tmp_path / "c.yaml").write_text("model: [unclosed\n", encoding="utf-8")
    assert cli.size_names(tmp_path) == available_sizes(tmp_path) == ["a2", "a4", "b"]


@pytest.mark.parametrize("argv", [[], ["train"], ["sweep"], ["bench"], ["report"]])
def test_help_loads_neither_torch_nor_pandas(argv):
    """Asked in a fresh interpreter, as a user types it: --help answers before torch or pandas is imported."""
    code = ("import sys, contextlib, io\nfrom rrlib.__main__ import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    try: main({argv + ['--help']!r})\n    except SystemExit: pass\n"
            "print(len(out.getvalue()) > 200, sorted({'torch', 'pandas'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(cli.__file__).parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=1) == ["True", "[]\n"]
