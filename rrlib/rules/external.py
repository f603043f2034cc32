"""Rules from outside the package: a file or module named by ``--rules``, by ``$RRLIB_RULES``, or installed under
the ``rrlib.rules`` entry-point group.

A rule of one's own is a class with ``@register("name")`` (rrlib.rules.protocol), in a file such as
``my_rules.py``. Three ways bring it in, all through ``load_rules``:

- ``--rules my_rules.py`` (or a module name, ``--rules mypkg.rules``; repeatable) on every command that builds a
  model; the command line also writes what it loaded into ``$RRLIB_RULES``, so the processes it starts (the
  report's notebook kernels, ``torchrun`` workers) load the same files;
- ``RRLIB_RULES=my_rules.py:mypkg.rules`` (``os.pathsep``-separated) in the environment: importing
  ``rrlib.rules`` loads them, which is how a papermill kernel or a DDP worker gets them;
- an installed package that declares ``[project.entry-points."rrlib.rules"] name = "mypkg.rules"``: loaded when
  ``rrlib.rules`` is imported.

What a run records. Each rule from outside the package has a *source*: the SHA-256 of its whole code
(rrlib.rules.rule_code): the file it was defined in, hashed from the very bytes that were executed (a file loaded
here) or read when the class was registered (a module imported otherwise), and every module of its own folder or
package that the file imports, so an edited helper (``from consts import SCALE``) is other code too.
``rrlib.runs.presets.resolve_run`` puts it in the model's settings (``ModelConfig.rule_source``, part of the
fingerprint) with its origin beside it (``rule_origin``, a file's name or a module's, not a path of this machine),
so a rule edited after its runs trained is another run, never "done already".

Every failure is one sentence (ConfigError), whichever of the three routes brought the rule: a file that is not
there or does not import, a module that cannot be found, a name that another rule has already taken or that is
not a plain name, and a file that changes torch's behaviour as it imports: its global settings (default dtype or
device, deterministic algorithms, threads, matmul precision, ...) or a function every run calls (``F.gelu``
replaced by its tanh form; rrlib.rules.import_guard). Such a file is refused, and everything put back, rather
than recorded: a ``standard`` run trained beside it would otherwise be another computation under the clean run's
fingerprint. The rules a refused file registered before it failed are removed again. The same change made as
the rule is built is refused by ``build_rule`` (rrlib.rules.protocol), and one made as its model runs by compare's
one-step trial.

An installed entry point that fails belongs to another package, and a command that does not ask for its rule
must not fail on it: it is named in a warning on stderr and skipped; asking for an unknown rule then names it
(``known_rule``).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from ..parsing import RULES_VARIABLE as ENV
from .import_guard import changes, preload, restore, snapshot
from .protocol import RULES, SOURCES, ConfigError
from .rule_code import code_hash, names_imported_by

ENTRY_POINTS = __package__  # the group is named after this package: "rrlib.rules"
_LOADED: dict[str, list[str]] = {}  # what each spec loaded (by its resolved path or module name): loaded once
GIVEN: dict[str, str] = {}  # a loaded rule's name → the --rules value (or $RRLIB_RULES entry) that brought it
BROKEN: dict[str, str] = {}  # entry points that did not load: their name → the sentence saying why


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_rules(spec: str) -> list[str]:
    """Import the rule file or module ``spec`` names; the rule names it registered. Loading one twice is a no-op.

    A spec ending in ``.py``, or naming an existing file, is a file (relative to the current folder); anything
    else is a module name to import.
    """
    spec = spec.strip()
    if not spec:
        raise ConfigError("an empty --rules value; give a rule file (my_rules.py) or a module name (mypkg.rules)")
    path = _file_of(spec)
    if path is None:
        names = _registered(spec, f"module {spec}", lambda: _import_module(spec))
    else:
        names = _registered(str(path.resolve()), f"file {path.name}", lambda: _load_file(path, spec), path)
    for name in names:
        GIVEN[name] = spec
    return names


def _file_of(spec: str) -> Path | None:
    """The file ``spec`` names, or None when it names a module. A folder that cannot be a module's name (a path)
    is a mistaken file, named as such by _load_file."""
    path = Path(spec).expanduser()
    as_file = spec.endswith(".py") or path.is_file() or (path.is_dir() and not spec.replace(".", "").isidentifier())
    return path if as_file else None


def _registered(key: str, origin: str, load, path: Path | None = None) -> list[str]:
    """Run ``load`` once per ``key``; the rule names it registered, each recorded as coming from ``origin``. For a
    rule file (``path``), the torch and rrlib modules it imports are imported first, so that the guard sees them as
    they were before the file ran."""
    if key in _LOADED:
        return _LOADED[key]
    before = set(RULES)
    if path is not None and path.is_file():
        preload(names_imported_by(path))
    clean = snapshot()
    try:
        load()
        settings, replaced = changes(clean)
        if settings:
            raise ConfigError(f"the rules of {origin} change torch's global state as they import ("
                              f"{'; '.join(settings)}), which would change every run beside them under the same "
                              f"fingerprint; set it inside the rule's own code, not at import")
        if replaced:
            raise ConfigError(f"the rules of {origin} replace functions that every run calls (or values it reads) "
                              f"as they import "
                              f"({', '.join(replaced[:4])}{' and more' if len(replaced) > 4 else ''}), which would "
                              f"change every run beside them under the same fingerprint; call your own function "
                              f"inside the rule instead")
    except BaseException:
        restore(clean)
        for name in [name for name in RULES if name not in before]:
            RULES.pop(name)
            SOURCES.pop(name, None)
        raise
    added = [name for name in RULES if name not in before]
    for name in added:
        # hashed again now that the file has imported all it imports (register() saw it halfway)
        SOURCES[name].update(origin=origin, sha256=code_hash(RULES[name]))
    _LOADED[key] = added
    return added


def _load_file(path: Path, spec: str) -> None:
    if path.is_dir():
        raise ConfigError(f"--rules {spec!r} is a folder; give a rule file (a .py file) or a module name")
    try:
        source = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read the rule file {spec!r} ({err.strerror or err}); give a .py file that "
                          f"exists, or a module name") from None
    name = f"rrlib_user_rules_{sha256_of(str(path.resolve()).encode())[:12]}_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None:
        raise ConfigError(f"cannot load {spec!r} as Python; give a .py file or a module name")
    module = importlib.util.module_from_spec(module_spec)
    module.__rrlib_source__ = sha256_of(source)  # what register() records: the hash of the bytes executed here
    sys.modules[name] = module  # so that dataclasses, pickling and tracebacks find it
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except ConfigError as err:  # e.g. a name already taken, raised by register()
        del sys.modules[name]
        raise ConfigError(f"rule file {path.name}: {err}") from None
    except Exception as err:  # a user's file: any error it raises is reported as one sentence, with its line
        del sys.modules[name]
        raise ConfigError(f"the rule file {path.name} does not import: {_where(err, path)}{type(err).__name__}: "
                          f"{err}") from None


def _import_module(spec: str) -> None:
    try:
        importlib.import_module(spec)
    except ConfigError as err:
        raise ConfigError(f"rule module {spec}: {err}") from None
    except ModuleNotFoundError as err:
        if err.name and spec.startswith(err.name):
            raise ConfigError(f"no rule file or module {spec!r}: not a file here, and no module of that name can "
                              f"be imported; give a .py file or an importable module name") from None
        raise ConfigError(f"the rule module {spec} does not import: {err}") from None
    except Exception as err:
        raise ConfigError(f"the rule module {spec} does not import: {type(err).__name__}: {err}") from None


def _where(err: Exception, path: Path) -> str:
    """'line 12: ' for the deepest frame of the user's own file in the error's traceback (or of a syntax error)."""
    if isinstance(err, SyntaxError) and err.lineno:
        return f"line {err.lineno}: "
    line = None
    tb = err.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"line {line}: " if line else ""


def load_from_environment() -> list[str]:
    """Load what ``$RRLIB_RULES`` names, then the installed ``rrlib.rules`` entry points; the names registered.

    A spec of ``$RRLIB_RULES`` that fails is the caller's own: one ConfigError naming the variable. An entry point
    that fails is another package's: a warning naming it, and it is skipped (``BROKEN``)."""
    names = []
    for spec in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(os.pathsep))):
        try:
            names += load_rules(spec)
        except ConfigError as err:
            raise ConfigError(f"${ENV} names {spec!r}: {err}") from None
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS):
        key = f"entry point {point.name}"
        if key in _LOADED or point.name in BROKEN:
            continue
        try:
            names += _registered(key, f"entry point {point.name} ({point.value})", lambda: _load_entry_point(point))
        except ConfigError as err:
            BROKEN[point.name] = str(err)
            print(f"warning: {err}; skipped, so its rules are not available", file=sys.stderr)
    return names


def known_rule(variant: str):
    """The rule class named ``variant``; for an unknown name, the sentence also names the installed rules that
    did not load (BROKEN), whose rule it may have been."""
    from .protocol import rule_class

    try:
        return rule_class(variant)
    except ConfigError as err:
        if not BROKEN:
            raise
        raise ConfigError(f"{err} (not loaded: {'; '.join(BROKEN.values())})") from None


def _load_entry_point(point) -> None:
    try:
        point.load()
    except ConfigError as err:
        raise ConfigError(f"the installed rules {point.value!r} ({_entry_point_name(point)}): {err}") from None
    except Exception as err:
        raise ConfigError(f"the installed rules {point.value!r} ({_entry_point_name(point)}) do not import: "
                          f"{type(err).__name__}: {err}") from None


def _entry_point_name(point) -> str:
    """'entry point NAME of package DIST (group rrlib.rules)': who to ask about it."""
    dist = getattr(getattr(point, "dist", None), "name", None)
    return f"entry point {point.name!r}" + (f" of package {dist}" if dist else "") + f", group {ENTRY_POINTS}"


def export(specs) -> None:
    """Add ``specs`` to ``$RRLIB_RULES`` (absolute paths for files), so child processes load them too."""
    have = [s for s in os.environ.get(ENV, "").split(os.pathsep) if s]
    for spec in specs:
        path = _file_of(spec)
        entry = spec if path is None else str(path.resolve())
        if entry not in have:
            have.append(entry)
    os.environ[ENV] = os.pathsep.join(have)


def rule_source(variant: str) -> tuple[str | None, str | None]:
    """(origin, sha256) of a rule from outside the package; (None, None) for rrlib's own rules."""
    record = SOURCES.get(variant)
    if record is None:
        return None, None
    return record["origin"], record["sha256"]
