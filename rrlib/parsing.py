"""The pieces every command's parser shares, importing nothing of rrlib's and no torch, so that ``--help`` and a
usage mistake answer at once: the one-line parser, the path type, and ``--rules``."""
from __future__ import annotations

import argparse
import re
import sys

RULES_VARIABLE = "RRLIB_RULES"  # rrlib.rules.external reads it; the command line sets it from --rules
# The most seeds one comparison may ask for: a thousand runs a rule is beyond any CPU study here, and a count is
# checked before it becomes a list (--seeds 100000000 would fill the memory first)
MOST_SEEDS = 1000


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake ends in one line naming it, as every other bad input does, not a usage block."""

    def error(self, message):
        self.exit(2, f"error: {message}; see {self.prog} --help\n")

    def parse_known_args(self, args=None, namespace=None):
        return super().parse_known_args(self.values_joined(sys.argv[1:] if args is None else list(args)), namespace)

    def values_joined(self, args: list[str]) -> list[str]:
        """``--seeds -1,2`` read as ``--seeds=-1,2``: argparse takes a value that starts with a dash for an option
        and answers "expected one argument", where the option's own check names what is wrong with the value. A
        word that is one of this parser's options stays an option."""
        options = {s for action in self._actions for s in action.option_strings}
        takes_one = {s for action in self._actions if action.option_strings and action.nargs is None
                     for s in action.option_strings}
        joined, k = [], 0
        while k < len(args):
            if (args[k] in takes_one and k + 1 < len(args) and args[k + 1].startswith("-")
                    and args[k + 1] not in options and args[k + 1] != "--"):
                joined.append(f"{args[k]}={args[k + 1]}")
                k += 2
            else:
                joined.append(args[k])
                k += 1
        return joined


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


# YAML 1.1 (PyYAML) reads a float only with a dot: "1e-5" and JSON's "1e-05" would be strings, and a rule option
# such as {"init": 1e-05} would reach the rule as text. YAML 1.2 and JSON read them as numbers, and so does this.
EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_LOADER = None


def yaml_value(text: str):
    """A value written on the command line (``--set``, ``-p``, a list), read as YAML with the numbers YAML 1.2 and
    JSON write: ``1e-5`` is a float."""
    global _LOADER
    import yaml

    if _LOADER is None:
        class Loader(yaml.SafeLoader):
            pass

        # a copy of SafeLoader's resolvers: adding to a subclass would otherwise extend the shared lists
        Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
        Loader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, list("-+0123456789."))
        _LOADER = Loader
    return yaml.load(text, Loader=_LOADER)
