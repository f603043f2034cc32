"""The Review paper's rows about its gate: it starts neutral and learns to treat tokens differently (a fresh model
and page 01's trained one), which half of its input matters (the gate halves of page 07's own runs against the
family's committed Review, Highway and standard), and what it costs in parameters (counted by the model code at
the paper's five configurations). Each builder returns a ledger row; the tables they read come with their view
(the columns, formats and reader's names ``rrlib.views.tables.reader_table`` shows)."""
from __future__ import annotations

import dataclasses

import pandas as pd
import torch

from rrlib.model import GPT, count_params
from rrlib.runs import loading
from rrlib.runs.presets import resolve_run
from rrlib.stats import ledger
from rrlib.studies import gates

from .family import paired
from .rows import row

SPREAD = 0.05  # a tenth of the distance from neutral (0.5) to either end: a gate that treats tokens differently
PAPER_SIZES = ["60m", "150m", "320m", "590m", "1b"]  # the paper's five Review configurations, as presets
STATED_SHARE, SHARE_TOLERANCE = 0.07, 0.01  # "about 7 %", read as 6–8 %
HALVES_BASELINES = ["review", "highway", "standard"]  # the family's committed runs the halves are read against


def init_deviation(size: str, seed: int, windows: int) -> float:
    """The largest |r − 0.5| of a fresh ``review`` model at ``size`` (seeded by ``seed``) on the first ``windows``
    held-out windows: 0 where the gate starts exactly neutral."""
    run = resolve_run(size, "review", seed)
    torch.manual_seed(run.seed)
    fresh = GPT(run.model).eval()
    idx, _ = loading.heldout_batch(run, windows)
    return max((r - 0.5).abs().max().item() for r in gates.gate_activity(fresh, idx))


def neutral_row(claim, deviation: float, per_sublayer: pd.DataFrame, size: str, evidence: str) -> dict:
    """Supported when r is exactly 0.5 at init and the trained gate's SD over tokens and channels is at least
    ``SPREAD`` in every sublayer (``per_sublayer``: rrlib.results.mechanism.gates_per_sublayer, one seed); the
    effect is the smallest SD."""
    spread = per_sublayer["r_sd"].min()
    return row(claim,
               f"at init max |r − 0.5| = {deviation:.1g} ({size}); trained (page 01, one seed): the smallest "
               f"per-sublayer SD of r over tokens and channels, against {SPREAD:g}",
               ledger.judge("measured", holds=deviation == 0 and spread >= SPREAD), evidence, spread,
               correction="none: a measurement")


def halves_runs(own: pd.DataFrame, committed: pd.DataFrame, halves) -> pd.DataFrame:
    """The gate halves' runs (``own``: page 07's) beside the committed Review, Highway and standard."""
    return pd.concat([own[own["variant"].isin(halves)] if len(own) else own,
                      committed[committed["variant"].isin(HALVES_BASELINES)] if len(committed) else committed],
                     ignore_index=True)


def halves_seeds(runs: pd.DataFrame) -> int:
    """The seeds finished by both Review and its state-only half (0 while either is missing)."""
    if not {"review", "review_state_only"} <= set(runs["variant"]):
        return 0
    return min(runs[runs["variant"] == v]["seed"].nunique() for v in ("review", "review_state_only"))


def halves_table(runs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """variant − review for every other variant of ``runs``, paired by seed, Holm over them, indexed by variant."""
    return paired(runs, "review", sorted(set(runs["variant"]) - {"review"}), alpha)


HALVES_VIEW = {"columns": ["mean_baseline", "gap", "ci_low", "ci_high", "p", "p_holm", "detectable", "seeds"],
               "formats": {c: "{:+.4f}" for c in ("gap", "ci_low", "ci_high")}
               | {"mean_baseline": "{:.4f}", "detectable": "{:.4f}", "p": "{:.2g}", "p_holm": "{:.2g}"},
               "rename": {"mean_baseline": "loss", "gap": "variant − review", "ci_low": "95 % low",
                          "ci_high": "95 % high", "p": "paired p", "p_holm": "Holm p",
                          "detectable": "detectable (80 %)"}}


def halves_row(claim, halves: pd.DataFrame, size: str, evidence: str, alpha: float = 0.05) -> dict:
    """The update's half matters: review_state_only − review decides (Holm over the table's comparisons), the
    others beside it."""
    state_only = halves.loc["review_state_only"]
    others = "; ".join(f"{b} − review {r.gap:+.4f}, Holm p {r.p_holm:.2g}"
                       for b, r in halves.drop("review_state_only").iterrows())
    return row(claim,
               f"review_state_only − review, fixed_loss, {size}, {int(state_only['seeds'])} seeds paired, Holm "
               f"over {len(halves)} (beside it: {others})",
               ledger.judge("directional", state_only["gap"], state_only["p_holm"], alpha=alpha), evidence,
               state_only["gap"], state_only["ci_low"], state_only["ci_high"], state_only["p_holm"],
               f"Holm over the {len(halves)} comparisons with review", detectable=state_only["detectable"])


def share_table(sizes=PAPER_SIZES) -> pd.DataFrame:
    """Per preset: Review's parameters, the gate's (Review's minus the same model's with the standard residual) and
    their share, counted by the model code, with the configuration beside them."""
    counted = []
    for size in sizes:
        model = resolve_run(size, "review", 0).model
        total, without = count_params(model), count_params(dataclasses.replace(model, variant="standard"))
        counted.append({"size": size, "d_model": model.d_model, "blocks": model.n_layers, "heads": model.n_heads,
                        "vocab": model.vocab_size, "context": model.seq_len, "review_params": total,
                        "gate_params": total - without, "gate_share": (total - without) / total})
    return pd.DataFrame(counted)


SHARE_VIEW = {"formats": {"gate_share": "{:.1%}"},
              "rename": {"review_params": "Review's parameters", "gate_params": "the gate's",
                         "gate_share": "the gate's share"}}


def params_row(claim, shares: pd.DataFrame, evidence: str) -> dict:
    """Supported when the gate's share is within ``SHARE_TOLERANCE`` of ``STATED_SHARE`` at every size
    (``shares``: ``share_table``); the effect is the smallest share."""
    share = shares.set_index("size")["gate_share"]
    return row(claim,
               "the gate's share of Review's parameters, counted by the model code at the paper's five "
               "configurations: " + ", ".join(f"{size} {value:.1%}" for size, value in share.items())
               + f"; against {STATED_SHARE:.0%} ± {SHARE_TOLERANCE:.0%}",
               ledger.judge("measured", holds=bool(((share - STATED_SHARE).abs() <= SHARE_TOLERANCE).all())),
               evidence, share.min(), correction="none: a count", paper_effect=STATED_SHARE,
               margin=SHARE_TOLERANCE)
