"""What a user types, read the same way by every command and every notebook parameter.

Every subcommand's parser is a ``rrlib.parsing.OneLineParser``: a usage mistake is one sentence and exit status 2, never a usage
block. A list a user gives (variants, seeds) is read by one function whether it comes from ``--variants a,b``, a
papermill ``-p variants review`` (a bare word), ``-p seeds 0`` (a bare number) or a YAML list: a word is never
read letter by letter, and every item is checked (a known rule, a seed torch takes) before any work starts.

It imports no torch or pandas of its own; the rules and the seed check are loaded only when a list is read.
"""
from __future__ import annotations


import yaml

from ..parsing import yaml_value
from ..rules import ConfigError


def listed(value, name: str) -> list:
    """A list parameter as given: a list, a comma-separated word ('review,standard' or 'review'), a YAML list
    in text ('[0, 1]') or one bare value (0)."""
    if isinstance(value, str):
        try:
            parsed = yaml_value(value) if value.strip() else []
        except yaml.YAMLError:
            parsed = value
        value = [x.strip() for x in parsed.split(",") if x.strip()] if isinstance(parsed, str) else parsed
    if isinstance(value, (list, tuple)):
        return list(value)
    if value is None or isinstance(value, dict):
        raise ConfigError(f"{name} must be a list, a comma-separated word or one value, got {value!r}")
    return [value]


def variant_list(value, name: str = "variants", default=None) -> list[str]:
    """Residual rules by name, each one rrlib knows; ``default`` where ``value`` is None."""
    from ..rules.external import known_rule

    if value is None and default is not None:
        return list(default)
    names = listed(value, name)
    for v in names:
        if not isinstance(v, str):
            raise ConfigError(f"{name} must name residual rules (words), got {v!r}")
        known_rule(v)
    if not names:
        raise ConfigError(f"{name} names no rule; give at least one, or leave it out for the default")
    return names


def seed_list(value, name: str = "seeds", default=None) -> list[int]:
    """Seeds, each a whole number torch takes; ``default`` where ``value`` is None."""
    from .validate import check_seed

    if value is None and default is not None:
        return list(default)
    seeds = []
    for s in listed(value, name):
        if isinstance(s, str) and s.strip().isdigit():
            s = int(s)
        seeds.append(check_seed(s))
    if not seeds:
        raise ConfigError(f"{name} names no seed; give at least one, or leave it out for the default")
    return seeds


def loaded_rules(value, name: str = "rules") -> list[str]:
    """A notebook's ``rules`` parameter (None, one rule file or module, or a list of them) loaded as ``--rules``
    loads them (rrlib.rules.external), and passed on to the processes the notebook starts; the names registered."""
    if value is None:
        return []
    from ..rules.external import export, load_rules

    specs = [str(spec) for spec in listed(value, name)]
    names = [n for spec in specs for n in load_rules(spec)]
    export(specs)
    return names
