"""The mechanism claims' numbers from the depth probes (page 07's depth part): how training grows a rule's scales
over depth against standard's (Attention Residuals' growth, MGR's activation scales), and how sharply the
depth-attention rules route (the Delta paper's routing contrast). Each returns per-seed values or a paired test;
page 07 turns them into rows.

The growth of a metric over depth has two readings. The *endpoint* reading, registered first, is log2 of the last
sublayer's value over the first's. The *fit* (``rrlib.report.probes.depth_growth``: the least-squares slope of log2
over every sublayer, a level for each kind of sublayer, times the blocks spanned) was chosen after the probes had
been read, because the endpoint divides an MLP's scale by an attention's; its records are exploratory.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rrlib.report import ledger, probes

READINGS = ("endpoint", "fit")


def endpoint_growth(scales: pd.DataFrame, metric: str) -> float:
    """The endpoint reading of one probe: log2 of the last sublayer's ``metric`` over the first's."""
    part = scales[scales["sublayer"] != "head"].sort_values("index")
    return float(np.log2(part[metric].iloc[-1] / part[metric].iloc[0]))


def learned_growth(scales: pd.DataFrame, variant: str, metric: str, reading: str = "fit") -> pd.Series:
    """Per seed: the growth over depth of ``metric`` trained, minus the same at init, by ``reading``."""
    if reading not in READINGS:
        raise ValueError(f"reading {reading!r} is none of {', '.join(READINGS)}")
    growth = endpoint_growth if reading == "endpoint" else probes.depth_growth
    part = scales[scales["variant"] == variant]
    if part.empty:
        return pd.Series(dtype=float)
    per_probe = pd.Series({key: growth(g, metric) for key, g in part.groupby(["seed", "state"])}).unstack()
    return (per_probe.get("trained") - per_probe.get("init")).dropna() if {"init", "trained"} <= set(per_probe) \
        else pd.Series(dtype=float)


def growth_by_depth(depth_scales: pd.DataFrame, mechanisms: dict, depths, alpha: float = 0.05) -> pd.DataFrame:
    """One row per (rule, depth): standard's learned growth − the rule's, paired by seed, by the fit (``effect``,
    ``ci_low`` ...) and by the endpoint reading (``endpoint_effect`` ...). ``mechanisms`` maps each rule to the
    metric its paper speaks of; ``depth_scales`` has a ``depth`` column naming each depth's size."""
    rows = []
    for rule, metric in mechanisms.items():
        for depth in depths:
            here = depth_scales[depth_scales["depth"] == depth]
            std, own = learned_growth(here, "standard", metric), learned_growth(here, rule, metric)
            shared = std.index.intersection(own.index)
            ends = (learned_growth(here, "standard", metric, "endpoint")
                    - learned_growth(here, rule, metric, "endpoint"))[shared]
            first = ledger.paired(ends, alpha) if len(shared) >= 2 else {}
            rows.append({"rule": rule, "depth": depth, "metric": metric, "standard's learned": std[shared].mean(),
                         "rule's learned": own[shared].mean(), **ledger.paired((std - own)[shared], alpha),
                         **{f"endpoint_{k}": first.get(k, np.nan)
                            for k in ("effect", "ci_low", "ci_high", "p", "mde")}})
    return pd.DataFrame(rows)


def deep_excess(routing_probes: pd.DataFrame, variant: str) -> pd.Series:
    """Per seed: the largest routing weight's excess over the uniform weight, averaged over the deeper half of the
    sublayers' reads, trained minus init."""
    part = routing_probes[(routing_probes["variant"] == variant) & (routing_probes["sublayer"] != "head")]
    part = part[part["index"] >= (part["index"].max() + 1) // 2]
    if part.empty:
        return pd.Series(dtype=float)
    excess = (part["max_weight"] - part["uniform"]).groupby([part["state"], part["seed"]]).mean().unstack("state")
    return (excess["trained"] - excess["init"]).dropna() if {"init", "trained"} <= set(excess) else \
        pd.Series(dtype=float)


def routing_contrast(routing_probes: pd.DataFrame, base: str, delta: str, alpha: float = 0.05) -> dict:
    """``delta``'s deep excess − ``base``'s, paired by seed, with each rule's mean excess and the reads' mean uniform
    weight."""
    learned = {v: deep_excess(routing_probes, v) for v in (base, delta)}
    shared = learned[base].index.intersection(learned[delta].index)
    return {**ledger.paired((learned[delta] - learned[base])[shared], alpha),
            base: learned[base][shared].mean(), delta: learned[delta][shared].mean(),
            "uniform": routing_probes.loc[routing_probes["variant"] == base, "uniform"].mean()}
