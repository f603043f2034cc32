"""--help at every level: every flag explained, the valid choices listed."""
import argparse
import contextlib
import io

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
