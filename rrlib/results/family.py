"""The family in one harness (page 05): every residual rule of a size trained on the same data, tokens, seeds and
parameter budget, read from its run folders (outputs/runs/<size>/<variant>/seed<k>).

``family_summary`` is the family's result at one size, one row per rule in the order asked for:

    variant                    the rule
    loss, sd                   the primary metric's mean and SD over the rule's seeds (``metric``: fixed_loss)
    seeds                      how many runs the rule has
    params_M, flops_per_token  parameters (millions, after matching) and training FLOPs per token, from the runs
    tokens_per_s, peak_memory_MB  what the runs recorded (different days and loads: no comparison of speed)
    device                     where the first run trained
    gap                        standard − rule on the primary metric, paired by seed (positive: the rule is better)
    detectable                 the gap the paired design detects (80 % power, α 0.05) at the spread it met
    p                          the paired test's p (a one-seed rule: none)
    p_holm                     Holm's p over the family: every rule's comparison with standard
    p_secondary, p_holm_secondary  the same two on the ``secondary`` metric (the paper's val_loss)
    ci_low, ci_high            the gap's 95 % paired t-interval
    tokens_per_s_vs_standard, peak_memory_vs_standard  speed and memory relative to standard's from the benchmark
                               file (``rrlib.results.speed``; by default the family's), NaN without a row

Standard's own row has no test (NaN). Each comparison is ``rrlib.stats.compare`` of the rule against standard, and
Holm is ``rrlib.stats.holm``. ``methods`` is what the harness counts from each rule's model (no runs needed);
``family_runs`` the runs themselves, one row per run in the results table's schema.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .. import stats
from ..home import project_path
from ..runs.presets import load_preset, resolve_run
from ..runs.sweep import results_table
from . import result
from .speed import BENCH_FILE, RATIO_COLUMNS, bench_ratios, file_stamp

OUT_ROOT = "outputs/runs"
PRIMARY, SECONDARY = "fixed_loss", "val_loss"
SUMMARY_COLUMNS = ["variant", "loss", "sd", "seeds", "params_M", "flops_per_token", "tokens_per_s", "peak_memory_MB",
                   "device", "gap", "detectable", "p", "p_holm", "p_secondary", "p_holm_secondary", "ci_low",
                   "ci_high", *RATIO_COLUMNS]
METHOD_COLUMNS = ["variant", "description", "d_model", "params_M", "rule_params", "mflops_per_token"]


def _variants(size: str, variants) -> list[str]:
    return list(load_preset(size).variants if variants is None else variants)


@result(lambda size, variants=None, seeds=None, out_root=OUT_ROOT: [project_path(out_root) / size])
def family_runs(size: str, variants=None, seeds=None, out_root: str = OUT_ROOT) -> pd.DataFrame:
    """Every run of ``size`` under ``out_root`` of the ``variants`` (None: the preset's) and ``seeds`` (None: every
    seed that has one), one row per run in the results table's schema (rrlib.runs.sweep.results_table)."""
    runs = results_table(out_root, size)
    keep = runs["variant"].isin(_variants(size, variants))
    if seeds is not None:
        keep &= runs["seed"].isin(list(seeds))
    return runs[keep].reset_index(drop=True)


def family_summary(size: str, variants=None, seeds=None, out_root: str = OUT_ROOT, bench_file=BENCH_FILE,
                   metric: str = PRIMARY, secondary: str = SECONDARY) -> pd.DataFrame:
    """The family's summary at ``size`` (the module's docstring names its columns): per rule of ``variants`` (None:
    the preset's) that has runs, over ``seeds`` (None: all), its loss, paired gap against standard with interval,
    p and Holm's p over the family, detectable gap and costs, with speed and memory from ``bench_file`` (None: no
    benchmark; NaN where it has no row for the size)."""
    variants = _variants(size, variants)
    return _summary(size, variants, None if seeds is None else list(seeds), out_root, file_stamp(bench_file),
                    metric, secondary)


@result(lambda size, variants, seeds, out_root, *rest: [project_path(out_root) / size])
def _summary(size, variants, seeds, out_root, bench, metric, secondary) -> pd.DataFrame:
    runs = family_runs(size, variants, seeds, out_root)
    summary = runs.groupby("variant").agg(
        loss=(metric, "mean"), sd=(metric, "std"), seeds=("seed", "count"),
        params_M=("params_M", "first"), flops_per_token=("flops_per_token", "first"),
        tokens_per_s=("tokens_per_s", "mean"), peak_memory_MB=("peak_memory_MB", "mean"),
        device=("device", "first"),
    ).loc[[v for v in variants if v in set(runs["variant"])]]
    for column, tested in ((metric, ""), (secondary, "_secondary")):
        tests = {v: stats.compare(runs[runs["variant"].isin(["standard", v])], metric=column, reference=v, n_boot=0)
                 for v in summary.index if v != "standard"}
        if not tested:
            for name, source in (("gap", "gap"), ("detectable", "mde"), ("ci_low", "ci_low"), ("ci_high", "ci_high")):
                summary[name] = [tests[v][source].iloc[0] if v in tests else np.nan for v in summary.index]
        summary[f"p{tested}"] = [tests[v]["p"].iloc[0] if v in tests else np.nan for v in summary.index]
        summary[f"p_holm{tested}"] = np.nan  # standard's own row: no test
        summary.loc[list(tests), f"p_holm{tested}"] = stats.holm(
            np.array([summary.loc[v, f"p{tested}"] for v in tests], dtype=float))
    ratios = bench_ratios(bench[0] if bench else None, size)  # bench: the file's stamp, part of the memo's key
    for name in RATIO_COLUMNS:
        summary[name] = ratios[name].reindex(summary.index).to_numpy(dtype=float)
    return summary.reset_index()[SUMMARY_COLUMNS]


@result(lambda *args, **kwargs: ())
def methods(size: str, variants=None, seed: int | None = None, overrides: dict | None = None,
            out_root: str = OUT_ROOT) -> pd.DataFrame:
    """What the harness counts from each rule's model at ``size`` (parameter matching included): one row per rule of
    ``variants`` (None: the preset's), with the first line of its docstring (``description``), ``d_model``,
    ``params_M`` (all parameters, millions), ``rule_params`` (the rule's own) and ``mflops_per_token`` (training
    FLOPs per token, millions: 6 × matmul weights + attention). Built from the configuration, not from runs."""
    from ..model import GPT
    from ..rules import RULES

    preset = load_preset(size)
    rows = []
    for variant in _variants(size, variants):
        run = resolve_run(size, variant, preset.seeds[0] if seed is None else seed, overrides, out_root)
        model = GPT(run.model)
        first_line = RULES[variant].__doc__.strip().splitlines()[0]
        rows.append({"variant": variant, "description": re.sub(r"\*(\w[^*]*)\*", r"\1", first_line),  # RST emphasis
                     "d_model": run.model.d_model, "params_M": model.n_params() / 1e6,
                     "rule_params": sum(p.numel() for p in model.rule.parameters()),
                     "mflops_per_token": model.flops_per_token() / 1e6})
    return pd.DataFrame(rows, columns=METHOD_COLUMNS)
