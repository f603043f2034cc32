"""What a rule file may not change as it imports: torch's global settings and the functions every run calls.

A run's fingerprint records its settings and, for a rule from outside the package, that rule's code. A rule file
that sets ``torch.set_default_dtype(torch.float64)`` or replaces ``F.gelu`` by its tanh form as it imports changes
every run of the process, a ``standard`` baseline trained beside it included, under fingerprints a clean process
also produces. So the loader (rrlib.rules.external) takes a ``snapshot`` before a rule file imports and asks
``changes`` after: anything changed refuses the file in one sentence, and ``restore`` puts everything back. The
same check runs as a rule from outside the package is built (rrlib.rules.protocol.build_rule) and over compare's
one-step trial of each rule's model.

Settings: the ones below (``SETTINGS``), each with how to read and set it. Functions: every function, class and
module bound in a module of torch, rrlib, ``math`` or numpy (and every method of a class defined there), compared by
identity; a method set on such a class where it had only inherited one (``torch.Tensor.softmax``, inherited from
torch's C base class; ``torch.optim.AdamW.step``, Adam's) replaces it too. Values: every other name bound in a
module of rrlib (``rrlib.model.NORM_EPS``), compared by value. Importing more of torch rebinds a few of its own
(``torch.manual_seed`` wrapped by dynamo), so a value replaced by one whose code lies inside the same package is
torch's own doing and not a change; a value from anywhere else (a lambda, ``functools.partial``, a function of the
rule file) is.

Refused rather than recorded: the change belongs to the process, not to the rule, so recording it would mark
every run of the process (a ``standard`` baseline too) with a fingerprint no clean process produces, and such runs
could never be reused by one; a rule that needs another function calls it in its own code, which its hash covers.
Not seen: a kernel registered with torch's dispatcher (``torch.library``) and a change made inside a mutable value
without rebinding it.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import types
from pathlib import Path

import torch

ROOTS = ("torch", "rrlib", "math", "numpy")  # the packages whose functions a run calls (numpy: its batches)
VALUES_OF = ("rrlib",)  # the packages whose other module-level names (constants) a run reads


def _set_device(device) -> None:
    # setting the default device, even to the CPU, installs a function mode every later torch call passes through
    torch.set_default_device(None if device.type == "cpu" else device)


def _set_deterministic(flags) -> None:
    torch.use_deterministic_algorithms(flags[0], warn_only=flags[1])


def _sdp(kind):
    return (getattr(torch.backends.cuda, f"{kind}_sdp_enabled"), getattr(torch.backends.cuda, f"enable_{kind}_sdp"))


def _attribute(owner, name):
    return lambda: getattr(owner, name), lambda value: setattr(owner, name, value)


# what a setting is called in a message → (read it, set it)
SETTINGS = {
    "torch.get_default_dtype()": (torch.get_default_dtype, torch.set_default_dtype),
    "torch.get_default_device()": (torch.get_default_device, _set_device),
    "torch.are_deterministic_algorithms_enabled()": (
        lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
        _set_deterministic),
    "torch.get_num_threads()": (torch.get_num_threads, torch.set_num_threads),
    "torch.get_float32_matmul_precision()": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "torch.is_grad_enabled()": (torch.is_grad_enabled, torch.set_grad_enabled),
    "torch.is_anomaly_enabled()": (torch.is_anomaly_enabled, torch.set_anomaly_enabled),
    "torch.backends.cudnn.deterministic": _attribute(torch.backends.cudnn, "deterministic"),
    "torch.backends.cudnn.benchmark": _attribute(torch.backends.cudnn, "benchmark"),
    "torch.backends.cudnn.allow_tf32": _attribute(torch.backends.cudnn, "allow_tf32"),
    "torch.backends.cuda.matmul.allow_tf32": _attribute(torch.backends.cuda.matmul, "allow_tf32"),
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
        _attribute(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
        _attribute(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
    "torch.backends.cuda.flash_sdp_enabled()": _sdp("flash"),
    "torch.backends.cuda.mem_efficient_sdp_enabled()": _sdp("mem_efficient"),
    "torch.backends.cuda.math_sdp_enabled()": _sdp("math"),
    "torch.backends.mkldnn.enabled": _attribute(torch.backends.mkldnn, "enabled"),
}


def torch_state() -> dict:
    """Every setting of ``SETTINGS`` as it is now."""
    return {name: read() for name, (read, _) in SETTINGS.items()}


def restore_torch_state(state: dict) -> None:
    """Put back each setting that changed since ``state`` (only those)."""
    now = torch_state()
    for name, (_, write) in SETTINGS.items():
        if now[name] != state[name]:
            write(state[name])


def functions() -> tuple[dict, dict]:
    """({(id(owner), name): (owner, value)} for every function, class and module bound in a module of ``ROOTS``,
    every method of a class defined there (read from the class's own ``__dict__``: no descriptor runs) and, in a
    module of ``VALUES_OF``, every other name; {id(class): (class, its own names)} for those classes, so that a
    method set where one was only inherited is seen)."""
    bound, classes = {}, {}
    for module_name, module in list(sys.modules.items()):
        root = module_name.partition(".")[0]
        if root not in ROOTS or not isinstance(module, types.ModuleType):
            continue
        for name, value in list(vars(module).items()):
            if issubclass(type(value), type):  # not isinstance: it may read a deprecated object's __class__
                bound[(id(module), name)] = (module, value)
                if vars(value).get("__module__") == module_name:
                    classes[id(value)] = (value, frozenset(vars(value)))
                    for attribute, member in list(vars(value).items()):
                        if _code_like(member):
                            bound[(id(value), attribute)] = (value, member)
            elif _code_like(value) or (root in VALUES_OF and not name.startswith("__")):
                bound[(id(module), name)] = (module, value)
    return bound, classes


def _code_like(value) -> bool:
    return callable(value) or issubclass(type(value), (staticmethod, classmethod, property, types.ModuleType))


def preload(names) -> None:
    """Import each module of ``ROOTS`` among ``names`` (or, for a name that is no module, ``from rrlib import GPT``,
    its package's attribute) before the snapshot: a module the rule file is the first to import would otherwise
    enter the snapshot only after the file had changed it. The file imports them anyway; one that fails to import
    is left for the file's own import to report."""
    for name in names:
        if name.partition(".")[0] not in ROOTS:
            continue
        try:
            importlib.import_module(name)
        except ImportError:
            package, _, attribute = name.rpartition(".")
            with contextlib.suppress(Exception):
                getattr(importlib.import_module(package), attribute)
        except Exception:  # noqa: BLE001 - the file's own import says what fails, in its words
            pass


def snapshot() -> tuple[dict, dict, dict]:
    return torch_state(), *functions()


def changes(before: tuple[dict, dict, dict]) -> tuple[list[str], list[str]]:
    """(settings changed since ``before``, as 'NAME from A to B'; functions and values replaced or removed, and
    inherited methods overridden, by name)."""
    state, bound, classes = before
    after = torch_state()
    settings = [f"{name} from {state[name]!r} to {after[name]!r}" for name in state if after[name] != state[name]]
    replaced = [f"{_owner_name(owner)}.{name}" for owner, name, _ in _rebound(bound)]
    replaced += [f"{_owner_name(cls)}.{name}" for cls, name in _overridden(classes)]
    return settings, replaced


def refusal(before: tuple[dict, dict, dict], rule: str, when: str, whose: str) -> str | None:
    """Where ``rule`` changed what every run computes since ``before`` (``changes``): everything put back, and the
    sentence that refuses it (``when`` it did so, ``whose`` runs it would change); None where it changed nothing."""
    settings, replaced = changes(before)
    if not (settings or replaced):
        return None
    restore(before)
    return (f"the rule {rule} changes what every run computes {when} ({'; '.join([*settings, *replaced][:4])}), "
            f"which would change {whose} under their clean fingerprints; keep such a change inside the rule's own "
            f"code")


_MISSING = object()
PLAIN = (int, float, complex, str, bytes, bool, type(None))  # a value of these is the same where it is equal


def _same_value(now, value) -> bool:
    """Whether a rebound module-level value is still the same (``NORM_EPS = 1e-5`` again): plain values compared by
    value, in their own type (1 is not 1.0 nor True), everything else only by identity."""
    if isinstance(value, tuple) and type(now) is tuple and len(now) == len(value):
        return all(a is b or _same_value(a, b) for a, b in zip(now, value))
    return type(now) is type(value) and isinstance(value, PLAIN) and now == value


def _rebound(bound: dict):
    """(owner, name, value before) for each function or value of ``bound`` rebound or removed since its snapshot,
    but not by torch itself (``_own_doing``)."""
    for (_, name), (owner, value) in bound.items():
        now = vars(owner).get(name, _MISSING)
        if now is not value and not _same_value(now, value) and not _own_doing(owner, now):
            yield owner, name, value


def _overridden(classes: dict) -> list[tuple[type, str]]:
    """(class, name) for each method set on a class of ``classes`` since its snapshot, where it had inherited one."""
    found = []
    for cls, names in classes.values():
        for name in set(vars(cls)) - names:
            member = vars(cls)[name]
            inherited = any(name in vars(base) for base in cls.__mro__[1:])
            if inherited and _code_like(member) and not _own_doing(cls, member):
                found.append((cls, name))
    return found


def restore(before: tuple[dict, dict, dict]) -> None:
    """Put back every setting, function and value changed since ``before`` (those ``changes`` names: torch's own
    rebinding stays), and take away the methods set over inherited ones."""
    state, bound, classes = before
    restore_torch_state(state)
    for owner, name, value in list(_rebound(bound)):
        setattr(owner, name, value)
    for cls, name in _overridden(classes):
        delattr(cls, name)


def _owner_name(owner) -> str:
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    return f"{vars(owner).get('__module__', '?')}.{owner.__qualname__}"


def _root_of(owner) -> str:
    name = owner.__name__ if isinstance(owner, types.ModuleType) else vars(owner).get("__module__", "")
    return str(name).partition(".")[0]


def _own_doing(owner, value) -> bool:
    """Whether ``value``, now bound where another was, comes from the same package's code as its owner (importing
    more of torch rebinds a few of its names)."""
    if value is _MISSING:
        return False
    root = sys.modules.get(_root_of(owner))
    home = Path(getattr(root, "__file__", "") or "").parent
    if not getattr(root, "__file__", None):
        return False
    for candidate in (value, getattr(value, "__func__", None), getattr(value, "fget", None),
                      getattr(value, "func", None)):  # a method, a property, a functools.partial
        if candidate is None:
            continue
        try:
            where = Path(inspect.getfile(candidate)).resolve()
        except (TypeError, OSError):
            continue
        return where.is_relative_to(home.resolve())
    return False
