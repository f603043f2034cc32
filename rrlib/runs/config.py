"""Configuration: small dataclasses, size presets from ``params/*.yaml``, and parameter matching.

A run is named by ``size`` (a preset in params/) × ``variant`` (a residual rule) × ``seed``, as in the
paper's CSV. The dataclass defaults are the paper's recipe (DESIGN.md, "Fidelity to the paper"); a preset
overrides only what differs, and a caller's overrides (``{"train": {"steps": 5}}``) come last.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..model import REFERENCE_VARIANT, ModelConfig, count_params
from ..rules import HIGHWAY_GATE_INITS, RULES, ConfigError, rule_class
from .data import EOS_IN_TEXT, HELDOUT_CUTS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS_DIR = PROJECT_ROOT / "params"
PRECISIONS = ("auto", "fp32", "tf32", "bf16")
WEIGHT_DECAY_ON = ("all", "matrices")  # every tensor (the paper's AdamW(model.parameters())), or dim >= 2 only
KEEP_WEIGHTS = ("none", "bf16", "fp32")  # what a finished run keeps of its model (rrlib.checkpoints)
# Vocabulary sizes of the tokenizers in rrlib.data (a test checks they agree), so that a model can be sized
# and parameter-matched without loading any data.
TOKENIZER_VOCAB = {"gpt2": 50257, "bytes": 257}


def project_path(path: str | os.PathLike) -> Path:
    """A relative path as the user meant it: from the current folder if it exists there, else the project."""
    p = Path(path).expanduser()
    return p if p.is_absolute() or p.exists() else PROJECT_ROOT / p


def run_folder(out_root, size: str, variant: str, seed: int) -> Path:
    """Where a run lives: ``<out_root>/<size>/<variant>/seed<k>``."""
    return project_path(out_root) / size / variant / f"seed{seed}"


@dataclass
class DataConfig:
    dataset: str = "tinystories"
    data_path: str | None = None  # local raw-text / jsonl / parquet file instead of the hub dataset
    val_path: str | None = None  # local validation file, for heldout="validation"
    tokenizer: str = "gpt2"
    max_stories: int | None = 400_000
    heldout: str = "tail"  # "tail": the paper's last 3 % of the stream; "validation": the official split
    heldout_frac: float = 0.03
    cache_dir: str = "outputs/cache"
    gpt2_dir: str | None = None
    eos_in_text: str = "special"  # a literal <|endoftext|> in a story: "special" (EOS, as HF's tokenizer), "text"
    heldout_cut: str = "floor"  # the tail starts at "floor": int(0.97 n), the paper's; "round": n - round(0.03 n)


@dataclass
class TrainConfig:
    steps: int = 8000
    batch_size: int = 64  # sequences per optimizer step, over all processes
    micro_batch_size: int | None = None  # per forward pass per process; None = the whole share
    lr: float = 2e-4
    betas: tuple = (0.9, 0.95)
    weight_decay: float = 0.1
    weight_decay_on: str = "all"  # "all": every tensor, as the paper's AdamW(model.parameters()); "matrices"
    grad_clip: float = 1.0
    warmup_steps: int = 500
    warmup_frac: float | None = None  # when set, warmup_steps = round(warmup_frac · steps), after overrides
    tokens_per_param: float | None = None  # when set, steps give Review's model this many tokens per parameter
    min_lr_frac: float = 0.1
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU), fp32, tf32, bf16
    compile: bool = False
    device: str = "auto"
    eval_every: int = 1000
    ckpt_every: int = 500
    log_every: int = 10
    paper_eval_batches: int = 80
    fixed_eval_tokens: int = 262_144  # held-out tokens in the fixed evaluation (1024 windows of 256)
    keep_weights: str = "none"  # a finished run keeps its final weights: "none", "bf16" or "fp32" (rrlib.checkpoints)


@dataclass
class RunConfig:
    size: str
    variant: str
    seed: int
    model: ModelConfig
    data: DataConfig
    train: TrainConfig
    out_root: str = "outputs/runs"

    @property
    def run_dir(self) -> Path:
        return run_folder(self.out_root, self.size, self.variant, self.seed)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """A config as written to config.json; one written before a recipe switch existed ran rrlib's side."""
        d = copy.deepcopy(d)
        for section, values in RECIPES["rrlib"].items():
            d[section] = {**values, **d[section]}
        d["train"]["betas"] = tuple(d["train"]["betas"])
        return cls(
            **{k: v for k, v in d.items() if k not in ("model", "data", "train")},
            model=ModelConfig(**d["model"]), data=DataConfig(**d["data"]), train=TrainConfig(**d["train"]),
        )


# Where rrlib can differ from the paper's code (its src/train.py): each switch is a setting of its own; a
# preset's ``recipe:`` picks a side for all of them, and the preset's own settings and a caller's overrides
# still come after. The dataclass defaults are the paper's side, so "paper" changes nothing.
# Each switch's choices as its owning module defines them, the paper's first, rrlib's second.
SWITCH_CHOICES = {("model", "highway_gate_init"): HIGHWAY_GATE_INITS, ("train", "weight_decay_on"): WEIGHT_DECAY_ON,
                  ("data", "eos_in_text"): EOS_IN_TEXT, ("data", "heldout_cut"): tuple(HELDOUT_CUTS)}
RECIPES = {"paper": {}, "rrlib": {}}
for (_section, _name), (_, _rrlib) in SWITCH_CHOICES.items():
    RECIPES["rrlib"].setdefault(_section, {})[_name] = _rrlib


def recipe_name(run: "RunConfig") -> str:
    """Which side of the paper/rrlib switches a run is on: "paper", "rrlib", or "mixed (<the rrlib ones>)"."""
    sections = {"model": run.model, "train": run.train, "data": run.data}
    rrlib_side = [f"{section}.{name}" for (section, name), (paper, _) in SWITCH_CHOICES.items()
                  if getattr(sections[section], name) != paper]
    if not rrlib_side:
        return "paper"
    return "rrlib" if len(rrlib_side) == len(SWITCH_CHOICES) else f"mixed ({', '.join(rrlib_side)})"


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


def read_preset(path: Path) -> dict:
    """A preset file's settings; one that does not parse is one sentence naming the file and the line."""
    shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"preset {shown}{where} is not valid YAML ({getattr(err, 'problem', None) or err}); fix "
                          f"it there, or move the file out of {shown.parent}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"preset {shown} is not UTF-8 text; save it as UTF-8") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"preset {shown} must be a mapping of settings (model:, data:, train:, variants:, ...), "
                          f"not a {type(raw).__name__}")
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
    if len(expand) != 1 or next(iter(expand)) not in EXPANDABLE:
        raise ConfigError(f"expand must name one of {', '.join(sorted(EXPANDABLE))} with a list of values, "
                          f"got {expand!r}")
    field_name, values = next(iter(expand.items()))
    return field_name, list(values)


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
    return dataclasses.replace(obj, **{k: _typed(f"{where}.{k}", v, types[k]) for k, v in overrides.items()})


KIND_WORDS = {"int": "a whole number", "float": "a number", "str": "a word", "bool": "true or false",
              "None": "null", "tuple": "a list", "dict": "a mapping"}


def _typed(name: str, value, annotation: str):
    """``value`` checked against the setting's declared type (as written in the dataclass), or one sentence."""
    kinds = [k.strip() for k in annotation.split("|")]
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (value is None and "None" in kinds) or (isinstance(value, bool) and "bool" in kinds) \
            or (is_number and "float" in kinds) or (is_number and isinstance(value, int) and "int" in kinds) \
            or (isinstance(value, str) and "str" in kinds) or (isinstance(value, dict) and "dict" in kinds):
        return value
    if isinstance(value, (list, tuple)) and "tuple" in kinds:
        return tuple(value)
    if isinstance(value, str) and "float" in kinds:
        try:
            return float(value)  # YAML 1.1 reads 2e-4 (no dot) as text
        except ValueError:
            pass
    raise ConfigError(f"{name} must be {' or '.join(KIND_WORDS.get(k, k) for k in kinds)}, got {value!r}")


def _load_raw(size: str, params_dir: Path) -> tuple[dict, dict]:
    """The preset's YAML and the settings its size name implies (for expanded presets), by section."""
    files = _preset_files(params_dir)
    if size in files:
        raw = read_preset(files[size])  # the size asked for: a broken file is named here
        if not _expansion(raw):
            return raw, {}
    for stem, raw in _readable_presets(params_dir).items():
        expansion = _expansion(raw)
        if expansion and size.startswith(stem) and size[len(stem):] in {str(v) for v in expansion[1]}:
            return raw, {EXPANDABLE[expansion[0]]: {expansion[0]: int(size[len(stem):])}}
    broken = sorted(set(files) - set(_readable_presets(params_dir)))
    for stem in broken:
        if size.startswith(stem):  # e.g. depth24 when depth.yaml is broken: name that file's fault
            read_preset(files[stem])
    raise ConfigError(f"unknown size {size!r}; valid sizes: {', '.join(available_sizes(params_dir))}"
                      + (f" (unreadable presets: {', '.join(broken)})" if broken else ""))


def load_preset(size: str, params_dir: Path = PARAMS_DIR) -> Preset:
    raw, implied = _load_raw(size, params_dir)
    recipe = raw.get("recipe", "paper")
    if recipe not in RECIPES:
        raise ConfigError(f"unknown recipe {recipe!r} in preset {size!r}; valid recipes: {', '.join(RECIPES)}")
    pins = RECIPES[recipe]
    model = _merge(ModelConfig(), {**pins.get("model", {}), **raw.get("model", {}), **implied.get("model", {})},
                   "model")
    data = _merge(DataConfig(), {**pins.get("data", {}), **raw.get("data", {})}, "data")
    model.vocab_size = vocab_size(data.tokenizer)
    train = _with_warmup(_with_budget(_merge(TrainConfig(), {**pins.get("train", {}), **raw.get("train", {}),
                                                             **implied.get("train", {})}, "train"), model))
    for v in raw.get("variants", []):
        rule_class(v)
    return Preset(size=size, model=model, data=data, train=train,
                  variants=list(raw.get("variants", [REFERENCE_VARIANT, "highway", "standard"])),
                  seeds=list(raw.get("seeds", [0, 1, 2])), match_params=raw.get("match_params", True),
                  description=raw.get("description", ""), recipe=recipe)


def _with_budget(train: TrainConfig, model: ModelConfig) -> TrainConfig:
    """A token budget in tokens per parameter becomes a step count: ceil(tpp · Review's parameters / tokens
    per step). Every variant of a size gets the same steps (the parameter-matched baselines have at most a
    width step more parameters), so runs stay paired by seed and equal in tokens."""
    if train.tokens_per_param is None:
        return train
    if not isinstance(train.tokens_per_param, (int, float)) or not train.tokens_per_param > 0:
        raise ConfigError(f"tokens_per_param must be a positive number, got {train.tokens_per_param!r}")
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


def vocab_size(tokenizer: str) -> int:
    if tokenizer not in TOKENIZER_VOCAB:
        raise ConfigError(f"unknown tokenizer {tokenizer!r}; valid tokenizers: {', '.join(TOKENIZER_VOCAB)}")
    return TOKENIZER_VOCAB[tokenizer]


def match_params(cfg: ModelConfig, reference: str = REFERENCE_VARIANT) -> ModelConfig:
    """Widen ``cfg`` until it has at least the parameters of the same model with the ``reference`` rule.

    As in the paper: d_model grows in steps of n_heads (so heads stay whole), heads and depth fixed; the first
    width whose count reaches the reference's is taken. A rule that already has as many parameters keeps its
    width.
    """
    target = count_params(dataclasses.replace(cfg, variant=reference, rule_options={}))
    while count_params(cfg) < target:
        cfg = dataclasses.replace(cfg, d_model=cfg.d_model + cfg.n_heads)
    return cfg


def resolve_run(size: str, variant: str, seed: int, overrides: dict | None = None,
                out_root: str = "outputs/runs", params_dir: Path = PARAMS_DIR) -> RunConfig:
    """The full configuration of one run: preset, then overrides, then parameter matching."""
    preset = load_preset(size, params_dir)
    rule_class(variant)
    overrides = overrides or {}
    unknown = set(overrides) - {"model", "data", "train"}
    if unknown:
        raise ConfigError(f"unknown override section(s) {sorted(unknown)}; valid: data, model, train")
    model = _merge(dataclasses.replace(preset.model, variant=variant), overrides.get("model", {}), "model")
    data = _merge(preset.data, overrides.get("data", {}), "data")
    model.vocab_size = vocab_size(data.tokenizer)
    train = _with_warmup(_with_budget(_merge(preset.train, overrides.get("train", {}), "train"), model))
    validate(model, train, data)
    if preset.match_params and variant != REFERENCE_VARIANT:
        model = match_params(model)
    return RunConfig(size=size, variant=variant, seed=int(seed), model=model, data=data, train=train,
                     out_root=out_root)


def validate(model: ModelConfig, train: TrainConfig, data: DataConfig) -> None:
    """Numbers a user can get wrong, checked before anything is built or written."""
    positive = {"steps": train.steps, "batch_size": train.batch_size, "log_every": train.log_every,
                "eval_every": train.eval_every, "ckpt_every": train.ckpt_every, "d_model": model.d_model,
                "n_layers": model.n_layers, "n_heads": model.n_heads, "seq_len": model.seq_len,
                "n_loops": model.n_loops}
    for name, value in positive.items():
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive whole number, got {value!r}")
    if not train.lr > 0:
        raise ConfigError(f"lr must be positive, got {train.lr!r}")
    if train.precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {train.precision!r}; valid precisions: {', '.join(PRECISIONS)}")
    if train.keep_weights not in KEEP_WEIGHTS:
        raise ConfigError(f"unknown keep_weights {train.keep_weights!r}; valid choices: {', '.join(KEEP_WEIGHTS)}")
    sections = {"model": model, "train": train, "data": data}
    for (section, name), choices in SWITCH_CHOICES.items():
        value = getattr(sections[section], name)
        if value not in choices:
            raise ConfigError(f"unknown {section}.{name} {value!r}; valid choices: {', '.join(choices)}")
    if model.d_model % model.n_heads:
        raise ConfigError(f"d_model {model.d_model} is not divisible by n_heads {model.n_heads}")


__all__ = ["ConfigError", "ModelConfig", "DataConfig", "TrainConfig", "RunConfig", "Preset", "RULES", "RECIPES",
           "recipe_name", "available_sizes", "load_preset", "match_params", "count_params", "resolve_run", "vocab_size"]
