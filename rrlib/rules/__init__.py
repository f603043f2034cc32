"""The residual rules: the stream protocol and its registry, every rule, the depth-mixing operators the
cross-depth rules are built from, and the CPU kernels those call. Imports nothing of rrlib's outside itself.

Importing this package fills the registry: it imports every module that defines rules. A module that needs
every rule (to build one by name, to list them) imports ``rrlib.rules``; a module that defines rules imports
``rrlib.rules.protocol`` and never this package.
"""
from . import cross_depth  # noqa: F401  (registers the cross-depth rules)
from .protocol import (HIGHWAY_GATE_INITS, INIT_STD, RULES, ConfigError, ResidualRule, StreamShape, build_rule,
                       register, rule_class)
