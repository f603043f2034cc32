"""The package's shape: no import circle, dependencies pointing one way between subpackages, small modules,
and the public names one import line away (``from rrlib import ...``) without loading torch."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rrlib"
MAX_LINES = 450
# Who may import whom: a module imports only modules of its own layer or a lower one. stats (the tests, the verdict
# rule and compare's words) imports nothing of rrlib's. The studies (what the report's own runs train, size and
# measure) sit beside speed and apart from it; what a study reads lives on its floor or below (reading a run folder
# back is runs.loading's, measuring a trained model the studies' own). results reads each study's result from its run
# folders; views (what pages and compare draw with) shows results; the claims and compare share the floor above
# and stay apart; the report's build (papermill, nbconvert, the index, the README's blocks) renders the claims, at
# the top but for the package's public names, the command line and budget's address.
LAYERS = {"stats": 0, "rules": 0, "model": 1, "runs": 2, "studies": 3, "speed": 3, "results": 4, "views": 5,
          "claims": 6, "compare": 6, "report": 7}
APART = (0, 3, 6)  # the layers whose packages stay apart
TOP = 8


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its __init__.py)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = module_files()


def imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports: by any import statement, at any depth (inside functions
    too), or by a string that names one (``importlib.import_module`` of a table: rrlib's public names, the
    command line's subcommands). ``from pkg import x`` counts as importing ``pkg.x`` when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            if source in MODULES:
                found |= {f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names}
        elif isinstance(node, ast.Constant) and node.value in MODULES and "." in node.value:  # not the word rrlib
            found.add(node.value)
    return found - {name}


GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle a depth-first walk meets, as the modules along it."""
    state, stack, found = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for child in sorted(graph[node]):
            if state.get(child) == "open":
                found.append(stack[stack.index(child):] + [child])
            elif child not in state:
                visit(child)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def layer(name: str) -> int:
    """A module's layer; rrlib.version, rrlib.home and rrlib.parsing import nothing of rrlib's, so every layer may
    import them."""
    parts = name.split(".")
    if name in ("rrlib.version", "rrlib.home", "rrlib.parsing"):
        return -1
    return LAYERS.get(parts[1], TOP) if len(parts) > 1 else TOP


def test_the_graph_sees_imports_inside_functions_and_the_subpackages():
    assert "rrlib.runs.presets" in GRAPH["rrlib.report.notebooks"]  # _depth_sweeps imports it when it runs
    assert {"rrlib.speed.bench", "rrlib.report.build"} <= GRAPH["rrlib.__main__"]  # the delegated subcommands
    rule_modules = {"rrlib.rules.per_sublayer", "rrlib.rules.attention_residuals", "rrlib.rules.multi_stream"}
    assert rule_modules <= GRAPH["rrlib.rules"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_circle():
    assert cycles(GRAPH) == []


def test_dependencies_point_one_way():
    upward = [f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets
              if layer(b) > layer(a) or (layer(a) == layer(b) in APART and a.split(".")[1] != b.split(".")[1])]
    assert upward == []


def test_the_rule_modules_register_through_the_package_only():
    """A module that defines rules imports the protocol, never the package that imports it."""
    for name in ("rrlib.rules.per_sublayer", "rrlib.rules.attention_residuals", "rrlib.rules.multi_stream"):
        assert "rrlib.rules.protocol" in GRAPH[name] and "rrlib.rules" not in GRAPH[name]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_the_line_limit(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it along a seam it has"


@pytest.mark.parametrize("name", sorted(n for n, p in MODULES.items() if p.name == "__init__.py"))
def test_every_package_says_what_it_holds(name):
    doc = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8")))
    assert doc and len(doc.split()) > 12, f"{name} needs a docstring saying what it holds and may import"


def test_public_names_are_one_import_away_and_import_rrlib_stays_light():
    code = ("import sys, rrlib; print(not {'torch', 'pandas'} & set(sys.modules)); "
            "from rrlib import ResidualRule, StreamShape, register, RULES, GPT, resolve_run, train_run, run_sweep; "
            "import rrlib.rules.protocol as protocol; print(ResidualRule is protocol.ResidualRule, 'hc' in RULES); "
            "print(all(getattr(rrlib, name) is not None for name in rrlib.__all__))")
    out = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] * 4


def test_every_module_imports_first_in_a_fresh_interpreter():
    """An import circle through a package's __init__ (a submodule importing its parent package, which imports it
    back) fails only when that module is imported first: each module is imported first once, rrlib cleared between."""
    code = ("import importlib, sys\nfailed = []\nfor name in sys.argv[1:]:\n"
            "    for loaded in [m for m in sys.modules if m == 'rrlib' or m.startswith('rrlib.')]:\n"
            "        del sys.modules[loaded]\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except ImportError as err:\n        failed.append(f'{name}: {err}')\n"
            "print('\\n'.join(failed))")
    names = sorted(n for n in MODULES if n not in ("rrlib.__main__",))
    out = subprocess.run([sys.executable, "-c", code, *names], cwd=PACKAGE.parent, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
