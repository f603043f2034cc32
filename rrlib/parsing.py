"""The pieces every command's parser shares, importing nothing of rrlib's and no torch, so that ``--help`` and a
usage mistake answer at once: the one-line parser, the path type, and ``--rules``."""
from __future__ import annotations

import argparse

RULES_VARIABLE = "RRLIB_RULES"  # rrlib.rules.external reads it; the command line sets it from --rules
# The most seeds one comparison may ask for: a thousand runs a rule is beyond any CPU study here, and a count is
# checked before it becomes a list (--seeds 100000000 would fill the memory first)
MOST_SEEDS = 1000


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake ends in one line naming it, as every other bad input does, not a usage block."""

    def error(self, message):
        self.exit(2, f"error: {message}; see {self.prog} --help\n")


def path_text(text: str) -> str:
    """An argparse type for a path: an empty one would silently mean the current folder (or the default)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give a path, or leave the option out for its default")
    return text


def add_rules_option(parser: argparse.ArgumentParser) -> None:
    """``--rules`` on a command's parser. The command line loads the files before any parser runs (so ``--help``
    and the valid choices list their rules); the option is declared on each parser for its help."""
    parser.add_argument("--rules", action="append", default=[], metavar="FILE_OR_MODULE",
                        help="a file (my_rules.py) or module of residual rules of one's own, each a class with "
                             "@register(\"name\"); repeatable; also read from $" + RULES_VARIABLE)
