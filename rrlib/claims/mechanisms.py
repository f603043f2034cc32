"""The mechanism claims' numbers from the depth probes (page 07's depth part): how training grows a rule's scales
over depth against standard's (Attention Residuals' growth, MGR's activation scales), and how sharply the
depth-attention rules route (the Delta paper's routing contrast). Each returns per-seed values or a paired test, and
the rows built from them (``growth_row``, ``routing_row``) with the tables' views.

The growth of a metric over depth has two readings. The *endpoint* reading, registered first, is log2 of the last
sublayer's value over the first's. The *fit* (``rrlib.studies.probes.depth_growth``: the least-squares slope of log2
over every sublayer, a level for each kind of sublayer, times the blocks spanned) was chosen after the probes had
been read, because the endpoint divides an MLP's scale by an attention's; its records are exploratory.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rrlib.studies import probes
from rrlib.stats import ledger, paired_comparison

from .rows import row, unfinished

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
            first = paired_comparison(ends, alpha).effect_row() if len(shared) >= 2 else {}
            rows.append({"rule": rule, "depth": depth, "metric": metric, "standard's learned": std[shared].mean(),
                         "rule's learned": own[shared].mean(),
                         **paired_comparison((std - own)[shared], alpha).effect_row(),
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
    return {**paired_comparison((learned[delta] - learned[base])[shared], alpha).effect_row(),
            base: learned[base][shared].mean(), delta: learned[delta][shared].mean(),
            "uniform": routing_probes.loc[routing_probes["variant"] == base, "uniform"].mean()}


def activation_table(scales: pd.DataFrame) -> pd.DataFrame:
    """What each sublayer reads (its RMS), per variant, state and sublayer, one column per seed."""
    return scales[scales["sublayer"] != "head"].pivot_table(
        index=["variant", "state", "sublayer", "index"], columns="seed", values="read_rms").reset_index()


def routing_table(routing: pd.DataFrame) -> pd.DataFrame:
    """The largest routing weight of each read beside its uniform weight, one column per seed."""
    return routing.pivot_table(index=["variant", "state", "sublayer", "index", "n_sources", "uniform"],
                               columns="seed", values="max_weight").reset_index()


GROWTH_VIEW = {"columns": ["rule", "depth", "metric", "standard's learned", "rule's learned", "effect", "ci_low",
                           "ci_high", "p", "mde", "n", "endpoint_effect", "endpoint_p"],
               "formats": {c: "{:+.3f}" for c in ("standard's learned", "rule's learned", "effect", "ci_low",
                                                  "ci_high", "endpoint_effect")}
               | {"p": "{:.2g}", "mde": "{:.3f}", "endpoint_p": "{:.2g}"},
               "rename": {"effect": "standard's − the rule's (log₂)", "ci_low": "95 % low", "ci_high": "95 % high",
                          "p": "paired p", "mde": "detectable (80 %)", "n": "seeds",
                          "endpoint_effect": "first reading: last/first sublayer", "endpoint_p": "its p"}}


def growth_row(claim, growth: pd.DataFrame, variant: str, reading: str, planned: int, evidence: str,
               alpha: float = 0.05) -> dict:
    """The growth claim of ``variant`` by one reading of the depth probes (``growth``: ``growth_by_depth``):
    ``endpoint`` (the registered metric) or ``fit`` (chosen after the probes had been read: exploratory). The claim
    holds only if it holds at every depth (the largest p); untested while fewer than ``planned`` seeds are in."""
    if reading not in READINGS:
        raise ValueError(f"reading {reading!r} is none of {', '.join(READINGS)}")
    parts = growth[growth["rule"] == variant]
    done = int(parts["n"].min()) if len(parts) else 0
    if done < planned:
        return unfinished(claim, f"the {variant} and standard depth-probe", done, planned)
    prefix = "endpoint_" if reading == "endpoint" else ""
    effect, low, high, p = ledger.intersection(*(parts[prefix + c].to_numpy()
                                                 for c in ("effect", "ci_low", "ci_high", "p")))
    binding = parts.iloc[ledger.binding(parts[prefix + "p"], parts[prefix + "effect"])]
    how = ("log₂ of the last sublayer's over the first's" if reading == "endpoint"
           else "first to last block, fitted over every sublayer")
    return row(claim, f"learned growth over depth of {binding['metric']} (log₂, {how}; trained − init), "
               f"standard's − {variant}'s, {done} seeds paired at each depth: " + "; ".join(
                   f"{r.depth} {getattr(r, prefix + 'effect'):+.3f} (p {getattr(r, prefix + 'p'):.2g})"
                   for r in parts.itertuples()) + "; the depth with the largest p",
               ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p,
               ledger.NO_CORRECTION, detectable=binding[prefix + "mde"])


def routing_by_depth(depth_routing: pd.DataFrame, depths, alpha: float = 0.05) -> pd.DataFrame:
    """delta_attnres's deep excess − attnres's at each depth (``routing_contrast``); one row with n 0 without
    probes."""
    if not len(depth_routing):
        return pd.DataFrame({"n": [0]})
    return pd.DataFrame([{"depth": size, **routing_contrast(depth_routing[depth_routing["depth"] == size], "attnres",
                                                            "delta_attnres", alpha)} for size in depths])


def block_contrast(routing: pd.DataFrame, alpha: float = 0.05) -> dict:
    """The per-block forms' contrast at the family's size (``routing_contrast``); n 0 while either has no probe."""
    if not {"attnres_block", "delta_attnres_block"} <= (set(routing["variant"]) if len(routing) else set()):
        return {"n": 0}
    return routing_contrast(routing, "attnres_block", "delta_attnres_block", alpha)


ROUTING_DEPTH_VIEW = {"columns": ["depth", "attnres", "delta_attnres", "uniform", "effect", "ci_low", "ci_high", "p",
                                  "mde", "n"],
                      "formats": {c: "{:+.3f}" for c in ("attnres", "delta_attnres", "effect", "ci_low", "ci_high")}
                      | {"uniform": "{:.3f}", "p": "{:.2g}", "mde": "{:.3f}"},
                      "rename": {"attnres": "attnres's learned excess", "delta_attnres": "delta's learned excess",
                                 "uniform": "mean uniform weight of the reads", "effect": "delta − attnres",
                                 "ci_low": "95 % low", "ci_high": "95 % high", "p": "paired p",
                                 "mde": "detectable (80 %)", "n": "seeds"}}


def routing_row(claim, by_depth: pd.DataFrame, block: dict, size: str, blocks: int, planned: int, evidence: str,
                alpha: float = 0.05) -> dict:
    """Delta AttnRes routes more sharply than AttnRes in deep models: it must hold at every depth (``by_depth``:
    ``routing_by_depth``; the largest p); the per-block forms at ``size`` (``blocks`` blocks) beside it.
    Untested while fewer than ``planned`` seeds are in."""
    done = int(by_depth["n"].min())
    if done < planned:
        return unfinished(claim, "the attnres and delta_attnres depth-probe", done, planned)
    effect, low, high, p = ledger.intersection(by_depth["effect"].to_numpy(), by_depth["ci_low"].to_numpy(),
                                               by_depth["ci_high"].to_numpy(), by_depth["p"].to_numpy())
    binding = by_depth.iloc[ledger.binding(by_depth["p"], by_depth["effect"])]
    beside = (f"; per block at {size} ({blocks} blocks): delta_attnres_block {block['delta_attnres_block']:+.3f}, "
              f"attnres_block {block['attnres_block']:+.3f}, {block['effect']:+.3f} "
              f"[{block['ci_low']:+.3f}, {block['ci_high']:+.3f}], p {block['p']:.2g}" if block["n"] >= 2 else "")
    return row(claim,
               "largest routing weight over the uniform one, deeper half of the reads, trained − init, delta_attnres "
               f"− attnres, {done} seeds paired at each depth: " + "; ".join(
                   f"{r.depth} delta {r.delta_attnres:+.3f}, attnres {r.attnres:+.3f} (uniform {r.uniform:.3f}), "
                   f"{r.effect:+.3f} (p {r.p:.2g})" for r in by_depth.itertuples())
               + "; the depth with the larger p" + beside,
               ledger.judge("directional", effect, p, alpha=alpha), evidence, effect, low, high, p,
               ledger.NO_CORRECTION, claim.stated_effect, binding["mde"])
