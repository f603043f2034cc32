"""rrlib: Review Residuals (Kramer, 2026) and its family of residual rules in one small PyTorch harness.

The names a user needs are here, so that a script or a notebook needs one import line::

    from rrlib import ResidualRule, StreamShape, register    # a residual rule of one's own
    from rrlib import GPT, resolve_run, train_run, run_sweep   # a model, a run, a sweep

Each is imported from its module on first use (``PUBLIC``), so ``import rrlib`` loads neither torch nor pandas.
The modules themselves: rrlib.rules (the rules, their operators and kernels), rrlib.model (the GPT), rrlib.runs
(config, data, training, sweeps), rrlib.studies (the report's own studies), rrlib.report (the notebooks' page
build and helpers), rrlib.speed (benchmark, memory, budget).
"""
import importlib

from .version import __version__

# the module that defines each public name
PUBLIC = {
    "rrlib.rules": ("ConfigError", "RULES", "ResidualRule", "StreamShape", "build_rule", "register", "rule_class"),
    "rrlib.model": ("GPT", "ModelConfig", "count_params"),
    "rrlib.runs.config": ("DataConfig", "RunConfig", "TrainConfig"),
    "rrlib.runs.presets": ("Preset", "available_sizes", "load_preset", "match_params", "resolve_run"),
    "rrlib.runs.data": ("DataError",),
    "rrlib.runs.train": ("train_run",),
    "rrlib.runs.sweep": ("SweepIncomplete", "results_table", "run_sweep"),
}
_HOME = {name: module for module, names in PUBLIC.items() for name in names}
__all__ = ["__version__", *_HOME]


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'rrlib' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value  # imported once: later lookups find it without this function
    return value


def __dir__():
    return sorted({*globals(), *_HOME})
