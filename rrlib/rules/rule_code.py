"""The whole code of a rule from outside the package, as one SHA-256: what a run's fingerprint carries for it.

A rule's code is the file that defines its class and every module of the rule's own folder that the file imports,
at any depth: a rule file ``my_rules.py`` that does ``from consts import SCALE`` (``consts.py`` beside it) runs
``consts.py`` too, so an edit there makes other runs. The folder is the rule file's own for a file or a top-level
module, and its top-level package's for a module of a package (``mypkg.rules``: everything under ``mypkg/``). A
module is found by the names the code imports (``import a.b``, ``from . import c``, ``from a import b``), anywhere in
the file (inside functions too), so an import that has not run yet counts as well. Left out: rrlib itself and
installed packages and the standard library, which are recorded by their versions instead (``result.json``'s
torch and rrlib versions).

A rule whose file imports nothing of its folder keeps the hash of that file alone, the hash runs have always
recorded, so their fingerprints still answer. Otherwise the hash covers the file's hash and each module's, by its
path inside the folder.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import json
import marshal
import sys
import sysconfig
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # rrlib itself: recorded by its version and commit
INSTALLED = {Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
             if (p := sysconfig.get_paths().get(key))}


def code_hash(cls: type) -> str:
    """SHA-256 of the whole code of the rule class ``cls`` (the module docstring)."""
    module = sys.modules.get(cls.__module__)
    own = _own_hash(cls, module)
    imported = imported_files(module)
    if not imported:
        return own
    return hashlib.sha256(json.dumps({"rule": own, "imports": imported}, sort_keys=True).encode()).hexdigest()


def _own_hash(cls: type, module) -> str:
    """The file the class came from: as executed (rrlib.rules.external sets ``__rrlib_source__``), else as it reads
    now, else the class's own source, else its methods' code (a class typed into a console has no file)."""
    if getattr(module, "__rrlib_source__", None):
        return module.__rrlib_source__
    try:
        return hashlib.sha256(open(module.__file__, "rb").read()).hexdigest()
    except (AttributeError, TypeError, OSError):
        pass
    try:
        return hashlib.sha256(inspect.getsource(cls).encode()).hexdigest()
    except (OSError, TypeError):
        code = b"".join(marshal.dumps(v.__code__) for _, v in sorted(vars(cls).items()) if hasattr(v, "__code__"))
        return hashlib.sha256(cls.__qualname__.encode() + code).hexdigest()


def imported_files(module) -> dict[str, str]:
    """{path inside the rule's folder: SHA-256} of every module of that folder the rule's module imports, at any
    depth (the module's own file left out); empty for a module without a file."""
    path = _file(module)
    if path is None:
        return {}
    package = getattr(module, "__package__", None) or ""
    root = _root(path, package)
    if root is None:
        return {}
    return _walk(path, package, root)[0]


def names_imported_by(path: Path) -> list[str]:
    """Every module name that the rule file ``path`` and the modules of its folder it imports (at any depth) name
    in an import statement: what the file may change as it imports (rrlib.rules.import_guard)."""
    path = path.resolve()
    return _walk(path, "", path.parent)[1]


def _walk(path: Path, package: str, root: Path) -> tuple[dict[str, str], list[str]]:
    """({path inside ``root``: SHA-256} of every module of ``root`` that ``path`` imports, at any depth; every
    module name their import statements name)."""
    found, names, queue = {}, [], [(path, package)]
    done = {path}
    while queue:
        file, package = queue.pop()
        for name in _imported_names(file, package):
            names.append(name)
            located = _locate(name)
            if located is None or located in done or not _inside(located, root):
                continue
            done.add(located)
            found[located.relative_to(root).as_posix()] = hashlib.sha256(located.read_bytes()).hexdigest()
            if located.suffix == ".py":
                queue.append((located, name if located.name == "__init__.py" else name.rpartition(".")[0]))
    return found, list(dict.fromkeys(names))


def _file(module) -> Path | None:
    try:
        path = Path(module.__file__).resolve()
    except (AttributeError, TypeError):
        return None
    return path if path.is_file() else None


def _root(path: Path, package: str) -> Path | None:
    """The rule's folder: its top-level package's (a module of a package), else its file's."""
    if not package:  # a top-level module installed among others has no folder of its own
        return None if path.parent.resolve() in INSTALLED else path.parent
    top = sys.modules.get(package.partition(".")[0])
    top_file = _file(top)
    return top_file.parent if top_file is not None and top_file.name == "__init__.py" else None


def _inside(path: Path, root: Path) -> bool:
    if not path.is_relative_to(root) or path.is_relative_to(PACKAGE_DIR):
        return False
    return not any(path.is_relative_to(p) for p in INSTALLED if not root.is_relative_to(p)) and not (
        {"site-packages", "dist-packages"} & set(path.relative_to(root).parts))


def _imported_names(file: Path, package: str) -> list[str]:
    """Every module name an import statement of ``file`` may load, each with the packages above it."""
    try:
        tree = ast.parse(file.read_bytes(), str(file))
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts) or not parts:
                    continue
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names += [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    parents = [".".join(n.split(".")[:k]) for n in names for k in range(1, n.count(".") + 1)]
    return list(dict.fromkeys(parents + names))


def _locate(name: str) -> Path | None:
    """The file of module ``name``: the loaded module's, else where an import would find it, without importing
    anything (a name whose package is not loaded is left alone)."""
    module = sys.modules.get(name)
    if module is not None:
        return _file(module)
    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.has_location or not spec.origin:
        return None
    path = Path(spec.origin).resolve()
    return path if path.is_file() else None
