"""The settings of a run: small dataclasses, the paper/rrlib recipe switches, and what a relative path means.

A run is named by ``size`` (a preset in params/) × ``variant`` (a residual rule) × ``seed``, as in the
paper's CSV. The dataclass defaults are the paper's recipe (DESIGN.md, "Fidelity to the paper"); a preset
overrides only what differs, and a caller's overrides (``{"train": {"steps": 5}}``) come last
(rrlib.runs.presets). The model's own settings are ``rrlib.model.ModelConfig``; the checks every setting passes are
rrlib.runs.validate's.

Relative paths. A path the library is given (a preset's ``data_path``, ``cache_dir``, an
``out_root`` passed to ``resolve_run`` or ``run_sweep``, the ``out_root`` a result file records) is read against
the project root (``project_path``; rrlib.home: the checkout, or for an installed package $RRLIB_HOME or the
current folder), so it means the same file from any folder and on every clone. A path typed on
the command line (``--out``, ``--data-path``, ``--set data.cache_dir=...``) is read against the folder the
command was typed in, as a shell user means it; ``given_path`` turns it into the library's form (relative to the
project root where it lies inside the project, so a command typed there records what the committed runs record).
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..home import PARAMS_DIR, PROJECT_ROOT, given_path, project_path  # noqa: F401  (rrlib.runs reads them here)
from ..model import ModelConfig
from ..rules import HIGHWAY_GATE_INITS, ConfigError
from .data import EOS_IN_TEXT, HELDOUT_CUTS

PRECISIONS = ("auto", "fp32", "tf32", "bf16")
WEIGHT_DECAY_ON = ("all", "matrices")  # every tensor (the paper's AdamW(model.parameters())), or dim >= 2 only
KEEP_WEIGHTS = ("none", "bf16", "fp32")  # what a finished run keeps of its model (rrlib.runs.folders.checkpoints)
# Vocabulary sizes of the tokenizers in rrlib.runs.data (a test checks they agree), so that a model can be
# sized and parameter-matched without loading any data.
TOKENIZER_VOCAB = {"gpt2": 50257, "bytes": 257}


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
    # the residual rule's own parameters (depth-attention queries, gates) train at this multiple of lr, decaying to
    # the same floor min_lr_frac · lr as the rest: the Delta AttnRes code's --lr_attnres beside --lr (runs.optim)
    rule_lr_scale: float = 1.0
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU), fp32, tf32, bf16
    # under precision bf16 (as set, not auto) parameter matching widens d_model in multiples of this too, so every
    # row of a matched model's matrices is 16-byte aligned; 1 keeps the paper's steps of n_heads
    bf16_width_multiple: int = 8
    compile: bool = False
    device: str = "auto"
    eval_every: int = 1000
    ckpt_every: int = 500
    log_every: int = 10
    paper_eval_batches: int = 80
    fixed_eval_tokens: int = 262_144  # held-out tokens in the fixed evaluation (1024 windows of 256)
    keep_weights: str = "none"  # a finished run keeps its final weights: "none", "bf16" or "fp32" (runs.folders.checkpoints)
    init_from: str | None = None  # a finished run folder whose kept weights start this run ({seed}: this run's seed)


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


def vocab_size(tokenizer: str) -> int:
    if tokenizer not in TOKENIZER_VOCAB:
        raise ConfigError(f"unknown tokenizer {tokenizer!r}; valid tokenizers: {', '.join(TOKENIZER_VOCAB)}")
    return TOKENIZER_VOCAB[tokenizer]
