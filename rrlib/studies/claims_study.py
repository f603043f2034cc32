"""The runs and probes the claims ledger (notebook 07) adds to the report's own, fixed here before they run.

Three parts, each one study of ``rrlib study`` (``claims_family``, ``claims_depth``, ``claims_conversion``):

- ``family``: every method of the size's family, and Review's two gate halves (``review_state_only``,
  ``review_update_only``), retrained with their final weights kept (weights.pt, not committed) under
  outputs/claims/<size>/<variant>/seed<k>/ and probed: probes.json, what each sublayer reads at init and trained,
  and how sharply the depth-attention rules route. The family's committed runs (outputs/runs/<size>) stay
  untouched: the runs here have the same settings and seeds, so the ledger reads the gate halves against Review,
  Highway and standard trained beside them.
- ``depth``: the four rules whose papers make claims about depth (standard, attnres, delta_attnres, mgr) at 8, 16
  and 24 blocks of the ``depth`` series' width (``depth8``, ``depth16``, ``depth24``), 3 seeds, weights kept and
  probed the same way under outputs/claims/depth<L>/: the mechanism rows' trained-minus-initial tests.
- ``conversion``: the Delta AttnRes paper's fine-tuning (Table 5; its ``train_finetune.py``), as close as a CPU
  runs it. CONVERSION says what it takes from the paper's documented command and what differs: each seed's
  ``standard`` is pretrained at CONVERT_SIZE with its weights kept (outputs/claims), then continued as
  ``standard`` (outputs/convert) and converted into Block Delta AttnRes twice from the same weights: with the
  code's default gate, none (outputs/convert), and with its ``learnable_alpha`` gate, zero at init, so the
  converted model starts at the trained one's function (outputs/convert_gated, whose conversion.json checks
  that start and how far the gates opened).

A run's batches are a function of (seed, step), so every fine-tuning run of a seed sees the same batches. Each
part trains what is missing, one run at a time, then writes every probe file that is missing.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import torch

from ..model import GPT
from ..runs.folders.checkpoints import WEIGHTS_FILE, init_source, load_weights, start_from
from ..runs.config import RunConfig, project_path, run_folder
from ..runs.loading import heldout_batch, quiet_sweep
from ..runs.presets import load_preset
from ..runs.folders.runfiles import read_result
from . import probes

CLAIMS_ROOT = "outputs/claims"
CONVERT_ROOT = "outputs/convert"
CONVERT_GATED_ROOT = "outputs/convert_gated"
SEEDS = [0, 1, 2]
GATE_HALVES = ["review_state_only", "review_update_only"]
ROUTED = ["attnres", "attnres_block", "delta_attnres", "delta_attnres_block"]
KEEP = {"train": {"keep_weights": "fp32"}}
PROBE_FILE, CONVERSION_FILE = "probes.json", "conversion.json"
PROBE_WINDOWS = 8  # held-out windows each probe reads (the first of the fixed set)

DEPTH_SIZES = ["depth8", "depth16", "depth24"]  # blocks; 2 sublayers each
DEPTH_VARIANTS = ["standard", "attnres", "delta_attnres", "mgr"]
DEPTH_SEEDS = [0, 1, 2]

# The conversion. The paper's documented command (README of wdlctc/delta-attention-residuals-code at fc11c3e):
# --mode delta_block --lr 5e-5 --lr_attnres 5e-3 --steps 20000, with the script's defaults --num_blocks 4,
# --warmup 500, --lr_min 3e-5, --gate_type bias (no gate) and no null source; AdamW (0.9, 0.95), decay 0.1, one
# cosine per group from its peak to the shared lr_min. Here, from the source's own recipe:
# - the variant: Block Delta AttnRes with the code's timing (``after_block_start``); its 4 blocks of a 4-layer
#   model are 1 layer each, block_size 2 sublayers;
# - the base rate: the paper fine-tunes at 5e-5 after pretraining at 6e-4 (its train_scratch.py default), 1/12 of
#   the pretraining peak; the routing parameters at 100x that (5e-3 / 5e-5); both decay to the floor 3e-5, 0.6 of
#   the base peak; warmup 500 of 20,000 steps, 2.5 %;
# - the length: the paper fine-tunes 20,000 steps, a small share of a pretrained model's training; a CPU can
#   afford as many fine-tuning steps as pretraining ones (1,200 each, 2.4 passes over the sample in all), so the
#   source here is far less trained than Qwen3-0.6B, and the fine-tuning is a larger share of its training;
# - the source: ``standard`` at CONVERT_SIZE (4 blocks, the family's width), not a pretrained Qwen3.
CONVERT_SIZE = "family_power"
CONVERT_SEEDS = [0, 1, 2, 3, 4]
# the non-inferiority design's fresh seeds (registered before their runs; rrlib/claims/records.yaml,
# delta-conversion-noninferior, gives its sizing from seeds 0-4)
FRESH_CONVERT_SEEDS = [5, 6, 7, 8, 9]
CONVERTED = "delta_attnres_block"
FINE_TUNE = {"lr_share": 5e-5 / 6e-4, "rule_lr_scale": 5e-3 / 5e-5, "min_lr_share": 3e-5 / 5e-5,
             "warmup_share": 500 / 20_000}
CONVERTED_OPTIONS = {"block_size": 2, "delta_timing": "after_block_start"}
GATED_OPTIONS = {**CONVERTED_OPTIONS, "identity_gate": True}


def convert_overrides(size: str = CONVERT_SIZE, claims_root: str = CLAIMS_ROOT, options: dict | None = None) -> dict:
    """A fine-tuning run's settings: from each seed's trained ``standard`` at ``size``, as many steps as it was
    trained, at the rates FINE_TUNE derives from the paper's command; ``options`` (a converted run's rule
    options) add the routing parameters' own rate. Both sides keep the width parameter matching gives them, which
    is the source's here (``start_from`` refuses a model of another width)."""
    source = load_preset(size).train
    steps = source.steps
    train = {"init_from": f"{claims_root}/{size}/standard/seed{{seed}}", "steps": steps,
             "lr": source.lr * FINE_TUNE["lr_share"], "min_lr_frac": FINE_TUNE["min_lr_share"],
             "warmup_frac": None, "warmup_steps": max(1, round(steps * FINE_TUNE["warmup_share"])),
             "keep_weights": "fp32"}
    if options is None:
        return {"train": train}
    return {"train": {**train, "rule_lr_scale": FINE_TUNE["rule_lr_scale"]}, "model": {"rule_options": dict(options)}}


def overrides_of(root: str, size: str, variant: str) -> dict:
    """The overrides a run of this study under ``root`` (a root's folder name) was trained with: what resolves a
    committed run again."""
    name = Path(root).name
    if name == Path(CONVERT_ROOT).name:
        return convert_overrides(size, options=CONVERTED_OPTIONS if variant == CONVERTED else None)
    if name == Path(CONVERT_GATED_ROOT).name:
        return convert_overrides(size, options=GATED_OPTIONS)
    return {}


def _sweep(label, size, variants, seeds, overrides, root) -> dict:
    return dict(label=label, size=size, variants=list(variants), seeds=list(seeds), overrides=overrides,
                out_root=root)


def study_plan(size: str, seeds=None, claims_root: str = CLAIMS_ROOT, variants=None) -> list[dict]:
    """The family part's sweeps, in the order they train: the gate halves (compared with the family's committed
    Review, Highway and standard, which have the same settings and seeds) and standard, then the rules the
    routing and growth claims name, then the rest of the family (``variants``, default the preset's)."""
    seeds = list(seeds if seeds is not None else SEEDS)
    family = list(variants or load_preset(size).variants)
    named = [v for v in ("attnres", "delta_attnres", "mgr", "attnres_block", "delta_attnres_block") if v in family]
    return [_sweep("gate halves and standard", size, GATE_HALVES + ["standard"], seeds, KEEP, claims_root),
            _sweep("the rules the growth and routing claims name", size, named, seeds, KEEP, claims_root),
            _sweep("the rest of the family", size, [v for v in family if v not in ["standard"] + named], seeds, KEEP,
                   claims_root)]


def depth_plan(claims_root: str = CLAIMS_ROOT, seeds=None, sizes=None) -> list[dict]:
    """The depth part: DEPTH_VARIANTS at each of ``sizes`` (default DEPTH_SIZES), in the order given."""
    return [_sweep(f"mechanisms at {size}", size, DEPTH_VARIANTS, seeds if seeds is not None else DEPTH_SEEDS,
                   KEEP, claims_root) for size in (sizes or DEPTH_SIZES)]


def conversion_plan(claims_root: str = CLAIMS_ROOT, convert_root: str = CONVERT_ROOT,
                    gated_root: str = CONVERT_GATED_ROOT, seeds=None, size: str = CONVERT_SIZE) -> list[dict]:
    """The conversion part: the sources, then the three fine-tuning arms."""
    seeds = list(seeds if seeds is not None else CONVERT_SEEDS)
    return [_sweep("conversion sources", size, ["standard"], seeds, KEEP, claims_root),
            _sweep("conversion: continued", size, ["standard"], seeds, convert_overrides(size, claims_root),
                   convert_root),
            _sweep("conversion: converted, the code's default gate (none)", size, [CONVERTED], seeds,
                   convert_overrides(size, claims_root, CONVERTED_OPTIONS), convert_root),
            _sweep("conversion: converted, identity gate", size, [CONVERTED], seeds,
                   convert_overrides(size, claims_root, GATED_OPTIONS), gated_root)]


def run_plan(plan: list[dict], n_windows: int = PROBE_WINDOWS) -> None:
    """Train what is missing (finished runs are skipped) and write every missing probe file, sweep by sweep."""
    for sweep in (s for s in plan if s["variants"]):
        print(f"[claims] {sweep['label']}: {', '.join(sweep['variants'])}", file=sys.stderr, flush=True)
        quiet_sweep(sweep["size"], sweep["variants"], sweep["seeds"], sweep["overrides"], sweep["out_root"])
        write_probes(sweep["out_root"], sweep["size"], sweep["variants"], sweep["seeds"], n_windows)


def run_study(size: str, seeds=None, claims_root: str = CLAIMS_ROOT, n_windows: int = PROBE_WINDOWS,
              variants=None) -> None:
    """The family part at ``size``."""
    run_plan(study_plan(size, seeds, claims_root, variants), n_windows)


# ---------------------------------------------------------------- probe files


def _finished(folder: Path) -> tuple[dict | None, RunConfig | None]:
    result = read_result(folder)
    if result is None or result.get("status") != "finished":
        return None, None
    return result, RunConfig.from_dict(json.loads((folder / "config.json").read_text())["config"])


def _initial_model(run: RunConfig) -> GPT:
    torch.manual_seed(run.seed)  # as the run's own start: the same init
    return GPT(run.model).eval()


def _trained_model(run: RunConfig, folder: Path) -> GPT:
    model = GPT(run.model)
    load_weights(folder, model)
    return model.eval()


def _stale(path: Path, result: dict) -> bool:
    return not path.exists() or json.loads(path.read_text()).get("fingerprint") != result["fingerprint"]


def write_probes(root: str, size: str, variants, seeds, n_windows: int = PROBE_WINDOWS) -> list[Path]:
    """probes.json (and, for a converted run, conversion.json) for every finished run that kept its weights and
    lacks a file for its fingerprint; returns the files written."""
    written = []
    for variant in variants:
        for seed in seeds:
            folder = project_path(run_folder(root, size, variant, seed))
            result, run = _finished(folder)
            if result is None or not (folder / WEIGHTS_FILE).exists():
                continue
            idx, _ = heldout_batch(run, n_windows)
            if _stale(folder / PROBE_FILE, result):
                record = {"fingerprint": result["fingerprint"], "windows": n_windows}
                for state, model in (("init", _initial_model(run)), ("trained", _trained_model(run, folder))):
                    record[state] = {"scales": probes.read_scales(model, idx).to_dict("records")}
                    if hasattr(model.rule, "n_sources"):
                        record[state]["routing"] = probes.routing_contrast(model, idx).to_dict("records")
                (folder / PROBE_FILE).write_text(json.dumps(record, indent=1) + "\n")
                written.append(folder / PROBE_FILE)
            if run.train.init_from is not None and run.model.rule_options and _stale(folder / CONVERSION_FILE, result):
                (folder / CONVERSION_FILE).write_text(json.dumps(
                    {"fingerprint": result["fingerprint"], **conversion_check(run, folder, idx)}, indent=1) + "\n")
                written.append(folder / CONVERSION_FILE)
    return written


def conversion_check(run: RunConfig, folder: Path, idx: torch.Tensor) -> dict:
    """Does the converted model start at the trained model's function? The largest logit difference on held-out
    windows at conversion, with the run's rule options and without them (the reference code's default, no
    identity gate: the routed mean of the sources is added from the first step), and how far the identity
    gates opened in fine-tuning (mean |g| over sublayers)."""
    source_dir = init_source(run)
    _, source = _finished(source_dir)
    reference = _trained_model(source, source_dir)
    with torch.no_grad():
        want = reference(idx)[0]
        gaps = {}
        ungated = {k: v for k, v in run.model.rule_options.items() if k != "identity_gate"}
        for name, options in (("max_abs_logit_diff", run.model.rule_options), ("max_abs_logit_diff_without_gate", ungated)):
            converted = _initial_model(RunConfig.from_dict({**run.to_dict(), "model": {**run.to_dict()["model"],
                                                                                      "rule_options": options}}))
            start_from(source_dir, converted)
            gaps[name] = (converted(idx)[0] - want).abs().max().item()
    trained = _trained_model(run, folder)
    gates = getattr(trained.rule, "gates", None)
    return {**gaps, "source": str(run.train.init_from).format(seed=run.seed),
            "gate_abs_mean_trained": gates.abs().mean().item() if isinstance(gates, torch.nn.Parameter) else None}


def read_probes(root: str, size: str, variants, seeds, kind: str = "scales") -> pd.DataFrame:
    """One table of every probe file found: variant, seed, state (init / trained) and the probe's rows."""
    frames = []
    for variant in variants:
        for seed in seeds:
            path = project_path(run_folder(root, size, variant, seed)) / PROBE_FILE
            if not path.exists():
                continue
            record = json.loads(path.read_text())
            for state in ("init", "trained"):
                if kind in record[state]:
                    frames.append(pd.DataFrame(record[state][kind]).assign(variant=variant, seed=seed, state=state))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["variant", "seed", "state", "sublayer", "index"])


def read_conversions(root: str, size: str, seeds) -> pd.DataFrame:
    """The converted runs' conversion.json under ``root``, one row per seed."""
    rows = []
    for seed in seeds:
        path = project_path(run_folder(root, size, CONVERTED, seed)) / CONVERSION_FILE
        if path.exists():
            rows.append({"seed": seed, **json.loads(path.read_text())})
    return pd.DataFrame(rows)


PARTS = ("family", "depth", "conversion")
