"""The README and docs/ as a reader uses them: every rrlib command in their code blocks parses with the command
line's own parser, every relative link and image points at a file that exists, and the README fits one screen."""
import argparse
import importlib
import re
import shlex
from pathlib import Path

import pytest

from rrlib import __main__ as cli

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# `python -m rrlib ...`, `scripts/py -m rrlib ...`, `torchrun ... -m rrlib ...` or the console script `rrlib ...`
COMMAND = re.compile(r"(?:^|\s)(?:-m rrlib|^rrlib)\s+(.*)$")


def commands() -> list[tuple[str, list[str]]]:
    found = []
    for doc in DOCUMENTS:
        for block in FENCE.findall(doc.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                match = COMMAND.search(line.split(" # ")[0].strip())
                if match:  # a command inside bash -c '...' ends with the quote
                    found.append((doc.relative_to(ROOT).as_posix(), shlex.split(match.group(1).rstrip("'"))))
    return found


def subcommands() -> set[str]:
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices) | set(cli.DELEGATED)


def test_the_docs_hold_the_commands_a_reader_types():
    typed = {argv[0] for _, argv in commands()}
    assert {"train", "sweep", "report", "bench", "compare"} <= typed
    with pytest.raises(SystemExit):  # what the next test would meet in a command that does not parse
        cli.build_parser().parse_args(["train", "--variant", "review"])


@pytest.mark.parametrize("where, argv", commands(), ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_every_command_in_a_code_block_parses(where, argv):
    assert argv[0] in subcommands(), f"{where}: no subcommand {argv[0]!r}"
    if argv[0] in cli.DELEGATED:
        importlib.import_module(cli.DELEGATED[argv[0]][0]).parse_args(argv[1:])
    else:
        cli.build_parser().parse_args(argv)


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.name)
def test_every_relative_link_exists(doc):
    text = doc.read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    missing = [t for t in targets if t and not (doc.parent / t).exists()]
    assert missing == []


def test_every_doc_page_is_linked_from_the_readme_and_the_readme_fits_a_screen():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200 and len(readme.split()) <= 2000
    assert all(f"(docs/{doc.name})" in readme for doc in DOCUMENTS[1:])
    for machine in ("2-core", "load average", "this machine"):
        assert machine not in readme
    start = readme.index("## The finding at a glance")
    finding = readme[start:readme.index("![", start)]  # up to its forest plot
    assert len(re.sub(r"<!--.*?-->", "", finding).split()) <= 150  # the finding, its generated lines included



def written_by_the_readme_s_examples() -> list[str]:
    """The files the README's examples write in the project's folder: a file it shows to write (a code block that
    starts with its name as a comment), papermill's output, a run that `train` makes, what `compare` and `bench`
    write in --out (bench without it writes outputs/bench/, the committed benchmarks that pages read). `sweep` and
    `report` write into the committed results and report, which they find done already: .ci/run runs the main job
    and checks it leaves them as committed. The GPU lines (torchrun, sbatch) train the paper's sizes, whose results
    the project commits."""
    written = []
    for block in FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8")):
        if re.match(r"# [\w.]+\.py\n", block):
            written.append(block.split("\n")[0][2:])
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line.split(" # ")[0])
            if argv[:1] == ["papermill"]:
                written.append(argv[2])
            match = COMMAND.search(line.split(" # ")[0].strip())
            if not match or argv[0] in ("torchrun", "sbatch"):
                continue
            argv = shlex.split(match.group(1))
            if argv[0] == "bench":
                written.append(importlib.import_module(cli.DELEGATED["bench"][0]).parse_args(argv[1:]).out
                               or "outputs/bench/cpu-mini.json")
            elif argv[0] in ("train", "compare"):
                args = cli.build_parser().parse_args(argv)
                written.append(f"{args.out}/verdict.json" if argv[0] == "compare" else
                               f"outputs/runs/{Path(args.size).stem}/{args.variant}/seed{args.seed}/result.json")
    return written


def test_every_file_the_readme_s_examples_write_is_ignored_by_git():
    import subprocess

    written = written_by_the_readme_s_examples()
    assert {"my_rules.py", "out.ipynb", "outputs/runs/tiny/review/seed0/result.json"} <= set(written)
    tracked_or_not_ignored = [path for path in written if subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode != 0]
    assert tracked_or_not_ignored == [], "the README's examples leave these in git status"
