"""The runs and probes the claims ledger (notebook 07) adds to the report's own, fixed here before they run.

    outputs/claims/<size>/<variant>/seed<k>/    every method of the size's family, and Review's two gate halves
                                                (``review_state_only``, ``review_update_only``), retrained with
                                                their final weights kept (weights.pt, not committed) and probed:
                                                probes.json, what each sublayer reads at init and trained, and
                                                how sharply the depth-attention rules route
    outputs/convert/<size>/<variant>/seed<k>/   the trained ``standard`` of each seed, continued for half its
                                                steps as ``standard``, or converted into ``delta_attnres`` with
                                                its identity gate (zero at init, so the converted model starts
                                                at the trained one's function) and fine-tuned as long; the
                                                converted runs' conversion.json checks that start

The family's committed runs (outputs/runs/<size>) stay untouched: the runs here have the same settings and seeds,
so a retrained method reproduces its committed result on the same machine type, and the ledger reads the gate
halves against Review, Highway and standard trained beside them. Fine-tuning uses the size's own recipe (peak
learning rate, warmup 10 % of the run, cosine to 10 %) on half its steps; a run's batches are a function of
(seed, step), so both sides of the conversion see the first half of the batches pretraining saw, alike.

``python -m rrlib.report.claims_study --size family`` trains what is missing, one run at a time, in the order of
``study_plan`` (the gate halves and the conversion first), then writes every probe file that is missing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import torch

from ..model import GPT
from ..runs.checkpoints import WEIGHTS_FILE, init_source, load_weights, start_from
from ..runs.config import ConfigError, RunConfig, project_path, run_folder
from ..runs.presets import load_preset
from ..runs.runfiles import read_result
from . import probes
from .loading import heldout_batch, quiet_sweep

CLAIMS_ROOT = "outputs/claims"
CONVERT_ROOT = "outputs/convert"
SEEDS = [0, 1, 2]
GATE_HALVES = ["review_state_only", "review_update_only"]
ROUTED = ["attnres", "attnres_block", "delta_attnres", "delta_attnres_block"]
CONVERTED = "delta_attnres"  # the paper fine-tunes into its per-block form too; at 8 sublayers that routes 2 sources
CONVERTED_OPTIONS = {"identity_gate": True}
KEEP = {"train": {"keep_weights": "fp32"}}
PROBE_FILE, CONVERSION_FILE = "probes.json", "conversion.json"
PROBE_WINDOWS = 8  # held-out windows each probe reads (the first of the fixed set)


def convert_overrides(size: str, claims_root: str = CLAIMS_ROOT, converted: bool = False) -> dict:
    """The fine-tuning runs' settings: from each seed's trained ``standard``, half the steps. Both sides keep the
    width parameter matching gives them, which is the source's at the study's sizes (``start_from`` refuses a
    model of another width)."""
    steps = max(1, load_preset(size).train.steps // 2)
    train = {"init_from": f"{claims_root}/{size}/standard/seed{{seed}}", "steps": steps,
             "warmup_steps": max(1, steps // 10), "keep_weights": "fp32"}
    return {"train": train, **({"model": {"rule_options": dict(CONVERTED_OPTIONS)}} if converted else {})}


def study_plan(size: str, seeds=None, claims_root: str = CLAIMS_ROOT, convert_root: str = CONVERT_ROOT,
               variants=None) -> list[dict]:
    """Every sweep of the study, in the order it trains: what the conversion and the gate-halves test need
    first (the halves are compared with the family's committed Review, Highway and standard, which have the same
    settings and seeds), then the rules the growth and routing claims name, then the rest of the family
    (``variants``, default the preset's)."""
    seeds = list(seeds if seeds is not None else SEEDS)
    family = list(variants or load_preset(size).variants)
    named = [v for v in ("attnres", "delta_attnres", "mgr", "attnres_block", "delta_attnres_block") if v in family]
    sweep = lambda label, variants, overrides, root: dict(label=label, size=size, variants=variants, seeds=seeds,
                                                           overrides=overrides, out_root=root)
    return [sweep("conversion sources", ["standard"], KEEP, claims_root),
            sweep("gate halves", GATE_HALVES, KEEP, claims_root),
            sweep("conversion: continued", ["standard"], convert_overrides(size, claims_root), convert_root),
            sweep("conversion: converted", [CONVERTED], convert_overrides(size, claims_root, True), convert_root),
            sweep("the rules the growth and routing claims name", named, KEEP, claims_root),
            sweep("the rest of the family", [v for v in family if v not in ["standard"] + named], KEEP, claims_root)]


def run_study(size: str, seeds=None, claims_root: str = CLAIMS_ROOT, convert_root: str = CONVERT_ROOT,
              n_windows: int = PROBE_WINDOWS, variants=None) -> None:
    """Train what is missing (finished runs are skipped) and write every missing probe file, sweep by sweep."""
    for sweep in (s for s in study_plan(size, seeds, claims_root, convert_root, variants) if s["variants"]):
        print(f"[claims] {sweep['label']}: {', '.join(sweep['variants'])}", file=sys.stderr, flush=True)
        quiet_sweep(sweep["size"], sweep["variants"], sweep["seeds"], sweep["overrides"], sweep["out_root"])
        write_probes(sweep["out_root"], size, sweep["variants"], sweep["seeds"], n_windows)


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
        for name, options in (("max_abs_logit_diff", run.model.rule_options), ("max_abs_logit_diff_without_gate", {})):
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
    """The converted runs' conversion.json, one row per seed."""
    rows = []
    for seed in seeds:
        path = project_path(run_folder(root, size, CONVERTED, seed)) / CONVERSION_FILE
        if path.exists():
            rows.append({"seed": seed, **json.loads(path.read_text())})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rrlib.report.claims_study", description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="family", help="the family's preset (default: %(default)s)")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        run_study(args.size, [int(s) for s in args.seeds.split(",") if s])
    except (ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
