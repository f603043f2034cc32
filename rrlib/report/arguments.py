"""The command line of ``python -m rrlib report`` (rrlib.report.build runs it): its own module, importing nothing
that loads torch or pandas, so that ``--help`` and a usage mistake answer at once."""
from __future__ import annotations

import argparse
import os

from ..home import REFERENCE_CSV
from ..parsing import OneLineParser, add_rules_option, path_text
from .notebooks import NOTEBOOKS

DESCRIPTION = "The report in one command: execute the notebooks, render them, export the figures, write the index."
PAPER_CSV = REFERENCE_CSV  # the paper's 42 runs: the committed copy (a wheel carries it inside the package)


def thread_count(text: str) -> int:
    """--threads: a whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of threads of at least 1, got {text!r}")
    return n


def runs_folder(text: str) -> str:
    """--runs: a folder of runs (<size>/<variant>/seed<k>/), or a path where none is yet; anything else is refused
    here, before any notebook runs."""
    text = path_text(text)
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is not a folder; give the folder that holds the runs "
                                         f"(<size>/<variant>/seed<k>/), e.g. outputs/runs")
    return text


def parse_args(argv):
    p = OneLineParser(prog="python -m rrlib report", description=DESCRIPTION)
    p.add_argument("--sizes", nargs="+", default=None,
                   help="sizes for the sweep notebook, one execution each (default: every size with results "
                        "under --runs, after tiny; tiny alone with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="tiny parameters for CI; folders default to build/quick/{paper,runs}")
    p.add_argument("--out", default=None, type=path_text, help="where the rendered report goes (default: paper)")
    add_rules_option(p)
    p.add_argument("--runs", default=None, type=runs_folder, help="root of the run folders (default: outputs/runs)")
    p.add_argument("--build", default=None, type=path_text,
                   help="executed notebooks and local retraining go here (default: build)")
    p.add_argument("--compare", action="append", default=[], type=path_text, metavar="DIR",
                   help="a folder written by `rrlib compare`: its verdict page joins the report (repeatable)")
    p.add_argument("--only", nargs="+", default=None, metavar="NOTEBOOK",
                   help=f"build only these notebooks: {', '.join(nb.name for nb in NOTEBOOKS)}")
    p.add_argument("--paper-csv", default=None, type=path_text, help="the paper's runs (default: the committed copy, outputs/reference/scaling_v8.csv)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter for every notebook that declares it (a YAML value), e.g. -p device=cuda")
    p.add_argument("--threads", type=thread_count, default=None,
                   help="CPU threads per notebook kernel (OMP_NUM_THREADS); --quick uses 1, as tiny models gain "
                        "nothing from more and a shared CPU loses much to oversubscription")
    p.add_argument("--verbose", action="store_true", help="stream the notebooks' output while they run")
    p.add_argument("--train-missing", action="store_true",
                   help="train the runs a page needs and the run folders lack (listed with their cost without "
                        "this flag; only the tiny sweep trains unasked)")
    p.add_argument("--force", action="store_true",
                   help="execute every page, also those whose notebook, parameters and results are unchanged "
                        "since the last build (needed after a change to the library itself)")
    return p.parse_args(argv)
