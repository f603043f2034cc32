"""Every setting of a run checked for its type and its range before anything is built, read or written.

A setting that is the wrong kind of value (``train.lr=abc``) or outside the range where it means something
(a negative clip turns training into gradient ascent, a negative micro-batch runs no step, ``lr inf``) ends in one
sentence naming the setting and what it takes; nothing reaches the optimiser or the disk. Sizes that can only be
checked against the data (a held-out stream shorter than one window) are rrlib.runs.data.rundata's.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import re
import sys

import torch

from ..rules import ConfigError, StreamShape, build_rule
from .config import KEEP_WEIGHTS, PRECISIONS, SWITCH_CHOICES, TOKENIZER_VOCAB
from .data import DATASETS, HELDOUT

KIND_WORDS = {"int": "a whole number", "float": "a number", "str": "a word", "bool": "true or false",
              "None": "null", "tuple": "a list", "dict": "a mapping"}
SEED_LIMIT = 2**64  # torch.manual_seed takes seeds below 2**64
DEVICE_NAMES = re.compile(r"auto|cpu|cuda(:\d+)?")
# settings whose value is one of a few words: a value of another type names them (YAML reads yes, no, on and off as
# true and false, so --set train.keep_weights=yes arrives as True)
NAMED_CHOICES = {"train.keep_weights": KEEP_WEIGHTS, "train.precision": PRECISIONS,
                 "data.tokenizer": tuple(TOKENIZER_VOCAB), "data.heldout": HELDOUT,
                 **{f"{section}.{name}": tuple(choices) for (section, name), choices in SWITCH_CHOICES.items()}}


def typed(name: str, value, annotation: str):
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
    if name in NAMED_CHOICES:
        raise ConfigError(f"{name} must be one of {', '.join(map(str, NAMED_CHOICES[name]))}, got {value!r}"
                          + (" (YAML reads yes, no, on and off as true or false)" if isinstance(value, bool) else ""))
    raise ConfigError(f"{name} must be {' or '.join(KIND_WORDS.get(k, k) for k in kinds)}, got {value!r}")


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < SEED_LIMIT:
        raise ConfigError(f"a seed must be a whole number from 0 to 2**64 - 1, got {seed!r}")
    return int(seed)


def _at_least(name: str, value, low: int) -> None:
    if value < low:
        raise ConfigError(f"{name} must be a positive whole number, got {value!r}" if low == 1 else
                          f"{name} must be a whole number of at least {low}, got {value!r}")


def _number(name: str, value, inside, what: str) -> None:
    """A finite number for which ``inside(value)`` holds: inf and NaN are never a setting's value."""
    if not (math.isfinite(value) and inside(value)):
        raise ConfigError(f"{name} must be {what}, got {value!r}")


def _choice(name: str, value, choices, kind: str = "choices") -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; valid {kind}: {', '.join(choices)}")


def validate(model, train, data) -> None:
    """The whole of a run's settings, each by its type and range; the first bad one is one ConfigError."""
    sections = {"model": model, "train": train, "data": data}
    for section, obj in sections.items():
        for f in dataclasses.fields(obj):
            typed(f"{section}.{f.name}", getattr(obj, f.name), f.type)
    for name in ("d_model", "n_layers", "n_heads", "seq_len", "n_loops"):
        _at_least(f"model.{name}", getattr(model, name), 1)
    if model.d_model % model.n_heads:
        raise ConfigError(f"model.d_model {model.d_model} is not divisible by model.n_heads {model.n_heads}; "
                          f"choose a width that is a multiple of the heads")
    with torch.device("meta"):  # the rule's options, checked by building it where no memory is spent
        build_rule(model.variant, StreamShape(model.d_model, model.n_layers, model.n_loops), **model.rule_options)
    for (section, name), choices in SWITCH_CHOICES.items():
        _choice(f"{section}.{name}", getattr(sections[section], name), choices)
    _choice("data.tokenizer", data.tokenizer, tuple(TOKENIZER_VOCAB), "tokenizers")
    if model.vocab_size != TOKENIZER_VOCAB[data.tokenizer]:
        raise ConfigError(f"model.vocab_size follows data.tokenizer ({data.tokenizer}: "
                          f"{TOKENIZER_VOCAB[data.tokenizer]}), got {model.vocab_size}")

    for name in ("steps", "batch_size", "log_every", "eval_every", "ckpt_every", "paper_eval_batches"):
        _at_least(f"train.{name}", getattr(train, name), 1)
    _at_least("train.warmup_steps", train.warmup_steps, 0)
    if train.micro_batch_size is not None:
        _at_least("train.micro_batch_size", train.micro_batch_size, 1)
        if train.batch_size % train.micro_batch_size:
            raise ConfigError(f"train.micro_batch_size {train.micro_batch_size} does not divide train.batch_size "
                              f"{train.batch_size}; valid choices are its divisors")
    _number("train.lr", train.lr, lambda v: v > 0, "a positive finite number")
    if len(train.betas) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1
                                        for b in train.betas):
        raise ConfigError(f"train.betas must be two numbers in [0, 1), e.g. [0.9, 0.95], got {list(train.betas)!r}")
    _number("train.weight_decay", train.weight_decay, lambda v: v >= 0, "a finite number of at least 0")
    _number("train.grad_clip", train.grad_clip, lambda v: v > 0,
            "a positive finite number (the largest gradient norm a step keeps)")
    _number("train.min_lr_frac", train.min_lr_frac, lambda v: 0 <= v <= 1, "a number in [0, 1]")
    _number("train.rule_lr_scale", train.rule_lr_scale, lambda v: 0 < v < math.inf, "a positive finite number")
    if train.fixed_eval_tokens < model.seq_len + 1:
        raise ConfigError(f"train.fixed_eval_tokens must hold at least one evaluation window of model.seq_len + 1 = "
                          f"{model.seq_len + 1} tokens, got {train.fixed_eval_tokens!r}")
    _choice("train.precision", train.precision, PRECISIONS, "precisions")
    _choice("train.keep_weights", train.keep_weights, KEEP_WEIGHTS)
    if train.init_from is not None:
        try:
            train.init_from.format(seed=0)
        except (KeyError, IndexError, ValueError):
            raise ConfigError(f"train.init_from {train.init_from!r} may name only {{seed}}, e.g. "
                              f"outputs/claims/family/standard/seed{{seed}}") from None
    if not DEVICE_NAMES.fullmatch(train.device):
        raise ConfigError(f"unknown train.device {train.device!r}; valid devices: auto, cpu, cuda, cuda:<index>")

    if data.data_path is None:
        _choice("data.dataset", data.dataset, tuple(DATASETS))
    if data.max_stories is not None:
        _at_least("data.max_stories", data.max_stories, 1)
        if data.max_stories > sys.maxsize:  # more stories than any file holds, and more than a count can take
            raise ConfigError(f"data.max_stories must be at most {sys.maxsize:,}, or null for every story, got "
                              f"{data.max_stories!r}")
    _choice("data.heldout", data.heldout, HELDOUT)
    _number("data.heldout_frac", data.heldout_frac, lambda v: 0 < v < 1, "a number in (0, 1)")
