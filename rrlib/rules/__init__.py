"""The residual rules: the stream protocol and its registry, every rule, the depth-mixing operators the
cross-depth rules are built from, and the CPU kernels those call. Imports nothing of rrlib's outside itself.

Importing this package fills the registry: it imports every module that defines rules, then the rules from
outside the package that ``$RRLIB_RULES`` or the ``rrlib.rules`` entry points name (rrlib.rules.external). A module that needs
every rule (to build one by name, to list them) imports ``rrlib.rules``; a module that defines rules imports
``rrlib.rules.protocol`` and never this package.
"""
# in this order, the order ``RULES`` lists them in (--help, the tests, the report's tables)
from . import per_sublayer  # noqa: F401
from . import attention_residuals, multi_stream  # noqa: F401
from . import dense_connections, laurel, value_residual  # noqa: F401
from .per_sublayer import HIGHWAY_GATE_INITS
from .protocol import INIT_STD, RULES, ConfigError, ResidualRule, StreamShape, build_rule, register, rule_class
from .value_residual import ValueMixingRule
from .external import load_from_environment, load_rules

# a user's rules named by $RRLIB_RULES or installed as entry points (rrlib.rules.external): a notebook kernel or a
# torchrun worker started by a command that was given --rules gets them here, with the package
load_from_environment()

__all__ = ["HIGHWAY_GATE_INITS", "INIT_STD", "RULES", "ConfigError", "ResidualRule", "StreamShape", "build_rule",
           "ValueMixingRule", "load_rules", "register", "rule_class"]
