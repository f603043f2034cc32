r"""Residual rules: how a sublayer's proposed update is committed to the residual stream.

Every rule speaks one protocol, so the model never branches on a rule's name::

    state = rule.begin(x0)                 # x0 = token + position embedding
    for i, sub in enumerate(sublayers):    # 2·L·N steps: attn, mlp, attn, mlp, ...
        h_in  = rule.read(state, i)        # what sublayer i sees (before its pre-norm)
        u     = sub(norm_i(h_in))
        state = rule.write(state, i, u)    # how the update is committed
    h = rule.end(state)                    # then final RMSNorm and tied head

``i`` is the step index over the whole (possibly looped) depth; a rule that owns per-sublayer parameters
uses ``shape.unique(i)`` so a model looped N times has the parameters of its L unique layers only.

Adding a rule is one class and one ``@register("name")`` line. Its docstring shows the formula. The rules
themselves live beside this module (rrlib.rules.per_sublayer, rrlib.rules.attention_residuals,
rrlib.rules.multi_stream); importing ``rrlib.rules`` registers them all.
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import torch
from torch import nn

from .gate_norm import gate_rms
from .import_guard import refusal, snapshot

INIT_STD = 0.02  # GPT-2's (and the paper's code's) init of every linear layer
RMS_EPS = 1e-5  # the eps of every RMS norm of the residual rules


class ConfigError(ValueError):
    """A user-caused configuration error: one sentence naming the valid choices."""


@dataclass(frozen=True)
class StreamShape:
    """What a rule needs to know about the model it sits in."""

    d_model: int
    n_layers: int  # unique transformer blocks (L)
    n_loops: int = 1  # times the L blocks are applied (N)
    highway_gate_init: str = "gpt2"  # how the Highway gates start (ModelConfig.highway_gate_init)

    @property
    def n_unique(self) -> int:
        """Unique sublayers (attention and MLP of each block)."""
        return 2 * self.n_layers

    @property
    def n_steps(self) -> int:
        """Sublayer applications in one forward pass."""
        return 2 * self.n_layers * self.n_loops

    def unique(self, i: int) -> int:
        return i % self.n_unique


def rms(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free RMS normalisation over channels (the gate's view of h and u)."""
    return gate_rms(x, RMS_EPS)


class ResidualRule(nn.Module):
    """Base class for rules whose state is the residual stream h itself.

    Subclasses define the formula, ``commit(h, u, *params)``, and ``step_params(i)``: the parameters step i uses
    (its gate, its scale); ``write`` joins the two. The step index never reaches ``commit``, so one compiled
    (sublayer, commit) graph serves every step of every depth (``rrlib.model.GPT.compile_steps``). Rules that route
    across depth (state carries several sources or streams) override ``begin``, ``read``, ``write`` and ``end``.
    """

    # True for a rule whose own multiplier carries the depth scaling: the model then leaves the sublayers'
    # output projections at N(0, 0.02) instead of shrinking them by 1/√(2·L·N) as well.
    owns_depth_scaling = False

    def __init__(self, shape: StreamShape):
        super().__init__()
        self.shape = shape

    def begin(self, x0: torch.Tensor):
        return x0

    def read(self, state, i: int) -> torch.Tensor:
        return state

    def write(self, state, i: int, u: torch.Tensor):
        return self.commit(state, u, *self.step_params(i))

    def step_params(self, i: int) -> tuple:
        return ()

    def commit(self, h: torch.Tensor, u: torch.Tensor, *params) -> torch.Tensor:
        raise NotImplementedError

    @property
    def commits(self) -> bool:
        """Whether a step is ``commit`` at ``step_params(i)`` on h as read (the step index stays outside)."""
        return type(self).write is ResidualRule.write and type(self).read is ResidualRule.read

    def end(self, state) -> torch.Tensor:
        return state

    def reset_parameters(self) -> None:
        """Called by the model after its own init; gates are zeroed here."""

    def compile_writes(self, backend: str) -> None:
        """Called by ``GPT.compile_steps``. A rule that commits (``commits``) is compiled with its sublayer; one
        whose write runs apart from it may compile its own depth mixing here (rrlib.rules.cross_depth)."""

    def matmul_weights(self) -> int:
        """Weights used in matrix products at each step (FLOP counting); per unique sublayer by default."""
        return sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))


RULES: dict[str, type[ResidualRule]] = {}
# Rules from outside the package: name → {"origin": where it came from, "sha256": its whole code's hash}
# (rrlib.rules.rule_code; rrlib.rules.external fills in the origin of what it loads; a run's fingerprint carries it)
SOURCES: dict[str, dict] = {}
BUILT_IN = "rrlib.rules."  # the modules of rrlib's own rules
RULE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")  # not "-x": a name that starts with "-" reads as a flag
RULE_NAME_MAX = 64  # it names a folder, and the files beside it add to that: far below any file system's 255 bytes


def register(name: str):
    """The decorator that adds a rule class to ``RULES`` under ``name``.

    A name is a plain identifier (letters, digits, ``_`` and ``-``): it becomes a folder of every run and an item
    of comma-separated flags, so a path (``"../x"``, ``"team/gate"``), an empty name, one with a comma or one longer
    than ``RULE_NAME_MAX`` characters is refused in one sentence. A name another rule holds is refused too, so a
    user's rule never silently replaces one of rrlib's or another file's; the same class defined again (a notebook
    cell run twice, a module reloaded) replaces itself.
    """
    if not isinstance(name, str) or not RULE_NAME.fullmatch(name):
        raise ConfigError(f"register({name!r}): a rule's name is a plain identifier of letters, digits, '_' and "
                          f"'-' (it names the runs' folders), e.g. register(\"my_gate\")")
    if len(name) > RULE_NAME_MAX:
        raise ConfigError(f"register({name[:20]}...): a rule's name has at most {RULE_NAME_MAX} characters (it names "
                          f"the runs' folders), this one {len(name)}; give it a shorter name")

    def add(cls: type[ResidualRule]) -> type[ResidualRule]:
        held = RULES.get(name)
        if held is not None and (held.__module__, held.__qualname__) != (cls.__module__, cls.__qualname__):
            where = SOURCES.get(name, {}).get("origin") or f"module {held.__module__}"
            raise ConfigError(f"the rule name {name!r} is taken (by {held.__qualname__} of {where}); register "
                              f"{cls.__qualname__} under another name")
        RULES[name] = cls
        cls.name = name
        if not cls.__module__.startswith(BUILT_IN):
            from .rule_code import code_hash

            SOURCES[name] = {"origin": f"module {cls.__module__}", "sha256": code_hash(cls)}
        return cls

    return add


def rule_class(variant: str) -> type[ResidualRule]:
    try:
        return RULES[variant]
    except KeyError:
        raise ConfigError(f"unknown variant {variant!r}; valid variants: {', '.join(sorted(RULES))}") from None


# An option's kind, read from the rule's own annotation (``recompute: bool = False``): what YAML or --set may give
OPTION_KINDS = {"bool": ((bool,), "true or false"), "int": ((int,), "a whole number"),
                "float": ((int, float), "a number"), "str": ((str,), "text")}


_BUILT: set[type] = set()  # the classes of rules from outside the package built cleanly once in this process


def build_rule(variant: str, shape: StreamShape, **options) -> ResidualRule:
    cls = rule_class(variant)
    # A rule from outside the package may not change torch's settings or functions, or rrlib's, as it is built:
    # every run built after it in the process would change under its clean fingerprint (rrlib.rules.import_guard).
    # Checked at its first build in the process, before any run of it: a snapshot costs a fraction of a second, and
    # resolving a run builds its model several times (rrlib.runs.presets matches parameters)
    clean = snapshot() if variant in SOURCES and cls not in _BUILT else None
    try:
        rule = cls(shape, **options)
    except TypeError as err:  # Python's words name __init__, not the setting: name the options instead
        _check_kinds(variant, cls, options)
        valid = [name for name in inspect.signature(cls).parameters if name != "shape"]
        unknown = sorted(set(options) - set(valid))
        reason = f"unknown option(s) {', '.join(unknown)}" if unknown else f"a value of the wrong kind ({err})"
        raise ConfigError(f"bad options {options} for variant {variant!r} (model.rule_options): {reason}; valid options: "
                          f"{', '.join(valid) or 'none'}") from None
    _check_kinds(variant, cls, options)  # a value its class took without a word (``recompute: maybe``)
    if clean is not None:
        if said := refusal(clean, variant, "as it is built", "the runs built after it"):
            raise ConfigError(said)
        _BUILT.add(cls)
    return rule


def _check_kinds(variant: str, cls: type, options: dict) -> None:
    """Each option of the kind its class's annotation names (``OPTION_KINDS``), or one sentence naming it."""
    for name, parameter in inspect.signature(cls).parameters.items():
        annotation = parameter.annotation if isinstance(parameter.annotation, str) else \
            getattr(parameter.annotation, "__name__", None)
        if name not in options or annotation not in OPTION_KINDS:
            continue
        (kinds, words), value = OPTION_KINDS[annotation], options[name]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ConfigError(f"model.rule_options {name} of variant {variant!r} must be {words}, got {value!r}")
