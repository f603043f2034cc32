"""Size presets (``params/*.yaml``) and one run's full configuration.

``load_preset(size)`` reads a preset (a name from params/, or the path of a ``.yaml`` preset file of one's own,
whose size is then its file name without ``.yaml``) over the dataclass defaults (rrlib.runs.config) and its ``recipe:`` side;
``resolve_run(size, variant, seed, overrides)`` adds a caller's overrides, turns a token budget and a warmup share
into steps, checks the numbers, and widens a baseline until it has Review's parameters (``match_params``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..model import REFERENCE_VARIANT, ModelConfig, count_params
from ..rules import ConfigError
from ..rules.external import known_rule, rule_source
from .config import PARAMS_DIR, PROJECT_ROOT, RECIPES, project_path, TOKENIZER_VOCAB, DataConfig, RunConfig, TrainConfig, vocab_size
from .validate import check_seed, typed, validate


@dataclass
class Preset:
    """One size: its recipe, and the grid (variants × seeds) a sweep runs by default."""

    size: str
    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    variants: list
    seeds: list
    match_params: bool = True
    description: str = ""
    recipe: str = "paper"


def _preset_files(params_dir: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(params_dir.glob("*.yaml"))}


# A preset's top-level keys, and the kind of value each takes.
SECTIONS = {"description": str, "recipe": str, "model": dict, "data": dict, "train": dict, "variants": list,
            "seeds": list, "match_params": bool, "expand": dict}


class _PresetLoader(yaml.SafeLoader):
    """YAML with no key given twice: PyYAML keeps the last of two ``train:`` blocks and drops the first silently."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # a merge may override keys: a second way to give one twice
                raise ConfigError(f"line {key_node.start_mark.line + 1}: a YAML merge key (<<) is not read in a "
                                  f"preset; write its settings out")
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise ConfigError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice (first on line "
                                  f"{seen[key]}); keep one of them")
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def read_preset(path: Path) -> dict:
    """A preset file's settings; one that does not parse, gives a key twice, or has a section rrlib does not know
    is one sentence naming the file and the line."""
    shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
    try:
        loader = _PresetLoader(path.read_text(encoding="utf-8"))
        try:
            node = loader.get_single_node()
            raw = (loader.construct_document(node) if node is not None else None) or {}
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"preset {shown}{where} is not valid YAML ({getattr(err, 'problem', None) or err}); fix "
                          f"it there, or move the file out of {shown.parent}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"preset {shown} is not UTF-8 text; save it as UTF-8") from None
    except OSError as err:  # a folder named *.yaml, a file this user cannot read
        raise ConfigError(f"preset {shown} cannot be read ({err.strerror or err}); make it a readable YAML file, or "
                          f"move it out of {shown.parent}") from None
    except ConfigError as err:  # a key given twice
        raise ConfigError(f"preset {shown} {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"preset {shown} must be a mapping of settings (model:, data:, train:, variants:, ...), "
                          f"not a {type(raw).__name__}")
    if node is None:  # every setting would silently be the default one: the 60M recipe under this file's name
        raise ConfigError(f"preset {shown} is empty; give it its settings (model:, data:, train:, variants:, ...), "
                          f"or move it out of {shown.parent}")
    lines = {key.value: key.start_mark.line + 1 for key, _ in node.value}
    for key, value in raw.items():
        if key not in SECTIONS:
            raise ConfigError(f"preset {shown} line {lines.get(key, '?')}: unknown section {key!r}; valid sections: "
                              f"{', '.join(SECTIONS)}")
        if not isinstance(value, SECTIONS[key]) or (key == "variants" and not all(isinstance(v, str) for v in value)):
            kind = {str: "a word", dict: "a mapping of settings", list: "a list", bool: "true or false"}[SECTIONS[key]]
            kind += " of variant names, e.g. [review, standard]" if key == "variants" else ""
            raise ConfigError(f"preset {shown} line {lines.get(key, '?')}: {key} must be {kind}, got {value!r}")
    try:
        _expansion(raw)
    except ConfigError as err:
        raise ConfigError(f"preset {shown} line {lines.get('expand', '?')}: {err}") from None
    return raw


def _readable_presets(params_dir: Path) -> dict[str, dict]:
    """Every preset that parses, by name: one broken file costs its own sizes, never the others'."""
    presets = {}
    for stem, path in _preset_files(params_dir).items():
        try:
            presets[stem] = read_preset(path)
        except ConfigError:
            continue
    return presets


# Settings a preset may expand over (``expand: {field: [...]}``), and the section each belongs to.
EXPANDABLE = {**{f.name: "model" for f in dataclasses.fields(ModelConfig) if f.type == "int"}, "steps": "train",
              "tokens_per_param": "train"}


def _expansion(raw: dict) -> tuple[str, list] | None:
    """A preset with ``expand: {field: [v1, v2, ...]}`` names one size per value: ``<preset><value>``.

    The field is a whole-number model setting (``n_layers``, ``n_loops``, ...), the training ``steps`` or a
    whole-number ``tokens_per_param``.
    """
    expand = raw.get("expand")
    if not expand:
        return None
    field_name, values = next(iter(expand.items()))
    if len(expand) != 1 or field_name not in EXPANDABLE or not isinstance(values, list) or not values or \
            not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise ConfigError(f"expand must name one of {', '.join(sorted(EXPANDABLE))} with a list of positive whole "
                          f"numbers, e.g. expand: {{n_layers: [2, 4]}}, got {expand!r}")
    return field_name, values


def available_sizes(params_dir: Path = PARAMS_DIR) -> list[str]:
    """Every size name: one per preset file, or ``<name><value>`` per value of a preset's ``expand``."""
    names = []
    for stem, raw in _readable_presets(params_dir).items():
        expansion = _expansion(raw)
        names += [f"{stem}{v}" for v in expansion[1]] if expansion else [stem]
    return names


def _merge(obj, overrides: dict, where: str):
    types = {f.name: f.type for f in dataclasses.fields(obj)}
    unknown = set(overrides) - set(types)
    if unknown:
        raise ConfigError(f"unknown {where} setting(s) {sorted(unknown)}; valid: {', '.join(sorted(types))}")
    if where == "model" and "vocab_size" in overrides:  # it would be overwritten by the tokenizer's, silently
        raise ConfigError(f"model.vocab_size is not set directly: it follows data.tokenizer "
                          f"({', '.join(f'{k}: {v:,}' for k, v in TOKENIZER_VOCAB.items())}); set data.tokenizer")
    return dataclasses.replace(obj, **{k: typed(f"{where}.{k}", v, types[k]) for k, v in overrides.items()})


PRESET_SUFFIXES = (".yaml", ".yml")


def size_name(size: str) -> str:
    """The size a run records and is filed under: a preset's name, or a preset file's name without its suffix."""
    return Path(size).stem if size.endswith(PRESET_SUFFIXES) else size


def _load_raw(size: str, params_dir: Path) -> tuple[dict, dict, Path]:
    """The preset's YAML, the settings its size name implies (for expanded presets) by section, and its file."""
    if size.endswith(PRESET_SUFFIXES):  # a preset file of one's own (relative: to the project root)
        path = project_path(size)
        if not path.is_file():
            raise ConfigError(f"preset file {size} does not exist; name a size ({', '.join(available_sizes(params_dir))}) "
                              f"or an existing .yaml file")
        raw = read_preset(path)
        if _expansion(raw):
            raise ConfigError(f"preset file {size} expands into several sizes; copy it into params/ and name one, "
                              f"or drop its expand:")
        return raw, {}, path
    files = _preset_files(params_dir)
    if size in files:
        raw = read_preset(files[size])  # the size asked for: a broken file is named here
        if not _expansion(raw):
            return raw, {}, files[size]
    for stem, raw in _readable_presets(params_dir).items():
        expansion = _expansion(raw)
        if expansion and size.startswith(stem) and size[len(stem):] in {str(v) for v in expansion[1]}:
            return raw, {EXPANDABLE[expansion[0]]: {expansion[0]: int(size[len(stem):])}}, files[stem]
    broken = sorted(set(files) - set(_readable_presets(params_dir)))
    for stem in broken:
        if size.startswith(stem):  # e.g. depth24 when depth.yaml is broken: name that file's fault
            read_preset(files[stem])
    raise ConfigError(f"unknown size {size!r}; valid sizes: {', '.join(available_sizes(params_dir))}"
                      + (f" (unreadable presets: {', '.join(broken)})" if broken else ""))


def load_preset(size: str, params_dir: Path = PARAMS_DIR) -> Preset:
    raw, implied, path = _load_raw(size, params_dir)
    try:
        recipe = raw.get("recipe", "paper")
        if recipe not in RECIPES:
            raise ConfigError(f"unknown recipe {recipe!r}; valid recipes: {', '.join(RECIPES)}")
        pins = RECIPES[recipe]
        model = _merge(ModelConfig(), {**pins.get("model", {}), **raw.get("model", {}), **implied.get("model", {})},
                       "model")
        data = _merge(DataConfig(), {**pins.get("data", {}), **raw.get("data", {})}, "data")
        model.vocab_size = vocab_size(data.tokenizer)
        train = _with_warmup(_with_budget(_merge(TrainConfig(), {**pins.get("train", {}), **raw.get("train", {}),
                                                                 **implied.get("train", {})}, "train"), model))
        for v in raw.get("variants", []):
            known_rule(v)
        seeds = [check_seed(s) for s in raw.get("seeds", [0, 1, 2])]
    except ConfigError as err:  # a preset's own setting: say which file to fix
        shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
        raise ConfigError(f"preset {shown}: {err}") from None
    return Preset(size=size_name(size), model=model, data=data, train=train,
                  variants=list(raw.get("variants", [REFERENCE_VARIANT, "highway", "standard"])),
                  seeds=seeds, match_params=raw.get("match_params", True),
                  description=raw.get("description", ""), recipe=recipe)


def _with_budget(train: TrainConfig, model: ModelConfig) -> TrainConfig:
    """A token budget in tokens per parameter becomes a step count: ceil(tpp · Review's parameters / tokens
    per step). Every variant of a size gets the same steps (the parameter-matched baselines have at most a
    width step more parameters), so runs stay paired by seed and equal in tokens."""
    if train.tokens_per_param is None:
        return train
    if not isinstance(train.tokens_per_param, (int, float)) or not 0 < train.tokens_per_param < math.inf:
        raise ConfigError(f"tokens_per_param must be a positive finite number, got {train.tokens_per_param!r}")
    reference = count_params(dataclasses.replace(model, variant=REFERENCE_VARIANT, rule_options={}))
    steps = math.ceil(train.tokens_per_param * reference / (train.batch_size * model.seq_len))
    return dataclasses.replace(train, steps=steps)


def _with_warmup(train: TrainConfig) -> TrainConfig:
    """Warmup as a share of the run (``warmup_frac``) becomes a step count once ``steps`` is final."""
    if train.warmup_frac is None:
        return train
    if not isinstance(train.warmup_frac, (int, float)) or not 0 <= train.warmup_frac < 1:
        raise ConfigError(f"warmup_frac must be at least 0 and below 1, got {train.warmup_frac!r}")
    return dataclasses.replace(train, warmup_steps=max(1, round(train.warmup_frac * train.steps)))


def match_params(cfg: ModelConfig, reference: str = REFERENCE_VARIANT, multiple: int = 1) -> ModelConfig:
    """Widen ``cfg`` until it has at least the parameters of the same model with the ``reference`` rule.

    As in the paper: d_model grows in steps of n_heads (so heads stay whole), heads and depth fixed; the first
    width whose count reaches the reference's is taken. A rule that already has as many parameters keeps its
    width. With ``multiple`` (train.bf16_width_multiple under bf16) a widened d_model is also a multiple of it.
    """
    target = count_params(dataclasses.replace(cfg, variant=reference, rule_options={}))
    step = math.lcm(cfg.n_heads, multiple)
    while count_params(cfg) < target:
        cfg = dataclasses.replace(cfg, d_model=(cfg.d_model // step + 1) * step)
    return cfg


def resolve_run(size: str, variant: str, seed: int, overrides: dict | None = None,
                out_root: str = "outputs/runs", params_dir: Path = PARAMS_DIR) -> RunConfig:
    """The full configuration of one run: preset, then overrides, then parameter matching."""
    preset = load_preset(size, params_dir)
    known_rule(variant)
    overrides = overrides or {}
    unknown = set(overrides) - {"model", "data", "train"}
    if unknown:
        raise ConfigError(f"unknown override section(s) {sorted(unknown)}; valid: data, model, train")
    if overrides.get("model", {}).get("variant", variant) != variant:  # the folder is the variant's: one name
        raise ConfigError(f"model.variant {overrides['model']['variant']!r} disagrees with the variant asked for "
                          f"({variant!r}), which names the run's folder; give the variant once (--variant)")
    model = _merge(dataclasses.replace(preset.model, variant=variant), overrides.get("model", {}), "model")
    data = _merge(preset.data, overrides.get("data", {}), "data")
    model.vocab_size = vocab_size(data.tokenizer)
    train = _with_warmup(_with_budget(_merge(preset.train, overrides.get("train", {}), "train"), model))
    validate(model, train, data)
    model.rule_origin, model.rule_source = rule_source(variant)  # whatever --set said: the code is what runs
    if preset.match_params and variant != REFERENCE_VARIANT:
        model = match_params(model, multiple=train.bf16_width_multiple if train.precision == "bf16" else 1)
    return RunConfig(size=preset.size, variant=variant, seed=check_seed(seed), model=model, data=data, train=train,
                     out_root=out_root)
