"""No module of the library and no notebook reads a page's table back as data (paper/tables/*.csv): results come
from rrlib.results and the claims ledger, so page order is no hidden dependency. The one writer of the tables
(rrlib.views.tables.reader_table) and the build's handling of its output folder (the scratch folder a page is built
in, the folders it checks) name the tables folder; nothing else opens it."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the call names that open, list or test a path, or read a table
READS = {"read_csv", "read_table", "read_json", "read_text", "read_bytes", "open", "glob", "rglob", "iterdir",
         "listdir", "exists", "is_file", "scandir", "loadtxt", "genfromtxt"}
TABLES = re.compile(r"\btables\b|paper/tables")  # the folder, by a name or a path
# the tables' writer, and the build's output folder: checked, a page's scratch folder published into it, and
# fingerprinted as what a page was built from
ALLOWED = {"rrlib/views/tables.py", "rrlib/report/build.py", "rrlib/report/pages.py", "rrlib/report/inputs.py"}


def _docstrings(tree) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, kinds) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def table_reads(source: str) -> list[str]:
    """Each place ``source`` reads the tables folder: a call that opens, lists or tests a path naming it (by a
    string or a variable called so), or a string naming paper/tables outside a docstring."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            text = ast.get_source_segment(source, node) or ""
            if name in READS and TABLES.search(text):
                found.append(f"line {node.lineno}: {text.splitlines()[0]}")
    docs = _docstrings(tree)
    found += [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
              and "paper/tables" in node.value]
    return found


def test_no_module_or_notebook_reads_a_pages_table():
    sources = [*sorted((ROOT / "rrlib").rglob("*.py")), *sorted((ROOT / "notebooks").glob("*.py"))]
    assert len(sources) > 50
    reads = {str(path.relative_to(ROOT)): table_reads(path.read_text(encoding="utf-8")) for path in sources
             if str(path.relative_to(ROOT)) not in ALLOWED}
    assert {path: found for path, found in reads.items() if found} == {}


def test_the_check_sees_a_table_read_back():
    assert table_reads('import pandas as pd\nsummary = pd.read_csv("paper/tables/05_family_summary.csv")\n')
    assert table_reads("def read(tables, name):\n    return pd.read_csv(tables / f'{name}.csv')\n")
    assert table_reads("found = (out / 'tables' / 'x.csv').exists()\n")
    assert table_reads("TABLES = 'paper/tables'\n")
    assert not table_reads('"""Written to paper/tables/x.csv."""\nfrom rrlib.views import tables\n'
                           'tables.reader_table(frame, "x", figures_dir)\n')
