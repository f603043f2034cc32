"""The README's and docs/results.md's result tables, generated from the results the report's pages show, so the
two cannot disagree.

The README (the claims ledger at a glance) and docs/results.md (every study's table) mark each generated table
with a pair of comments, ``<!-- rrlib:NAME -->`` … ``<!-- /rrlib:NAME -->``; ``update`` rewrites what lies between
them from the pages' results and the claims ledger (``rrlib.report.index.Results``: each builder reads one or two of
them, by their documented names), and ``python -m rrlib report`` calls it after a build into the project's
``paper/``. A test regenerates every block from the committed runs and compares it with the documents. Numbers are
rounded here as on the pages: losses to four decimals (three for the depth ablation), p-values to two significant
digits.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ..stats import ledger
from .colab import badges
from ..views.tables import fmt_p as _p  # the pages' p-value format: two significant digits, – when missing

if TYPE_CHECKING:
    from .index import Results

BLOCK = re.compile(r"(<!-- rrlib:(?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)(<!-- /rrlib:(?P=name) -->)", re.S)


def _signed(x, digits: int = 4) -> str:
    return "–" if pd.isna(x) else f"{x:+.{digits}f}".replace("-", "−")


def _interval(low, high, digits: int = 4) -> str:
    return f"[{_signed(low, digits)}, {_signed(high, digits)}]"


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows]) + "\n"


def depth(results: Results) -> str:
    """Mean fixed-set loss per depth and rule (page 02's table)."""
    df = results.final_loss().sort_values("sublayers")
    rules = [c for c in ("review", "highway", "standard", "review_convex", "highway_convex") if c in df.columns]
    return _markdown(["blocks (sublayers)"] + rules,
                     [[f"{s // 2} ({s})"] + [f"{r[v]:.3f}" for v in rules] for s, (_, r) in
                      zip(df["sublayers"].astype(int), df.iterrows())])


def _gap_with_tests(r) -> str:
    return (f"{_signed(r['paired_gap'])} (p {_p(r['p'])}, Holm {_p(r['p_holm'])}; val_loss Holm "
            f"{_p(r.get('p_holm_val_loss'))})")


def cpu_scale(results: Results) -> str:
    """Page 04's study of our CPU sizes: mean fixed-set loss and Review's paired gap against each baseline."""
    tests, means = results.tests("ours"), results.means("ours")
    rows = []
    for size, part in tests.groupby("size", sort=False):
        by = part.set_index("baseline")
        rows.append([size, f"{part['params_M'].iloc[0]:.2f} M"] + [f"{means.loc[size, v]:.4f}" for v in
                                                                    ("review", "highway", "standard")]
                    + [_gap_with_tests(by.loc[b]) for b in ("highway", "standard")]
                    + [" / ".join(f"{by.loc[b, 'mde']:.4f}" for b in ("highway", "standard"))])
    return _markdown(["size", "params (Review)", "review", "highway", "standard", "gap vs highway",
                      "gap vs standard", "detectable gap (80 %), vs highway / standard"], rows)


def recipe(results: Results) -> str:
    """Page 04's recipe ablation: Review's gaps under each recipe, then how much the recipe moves them."""
    gaps = results.recipe_gaps()
    rows = []
    for name, part in gaps.groupby("recipe", sort=False):
        by = part.set_index("baseline")
        size = part["size"].iloc[0]
        rows.append([f"{name} (`{size}`)", f"{by['mean_ref'].iloc[0]:.4f}"]
                    + [f"{by.loc[b, 'mean_base']:.4f}" for b in ("highway", "standard")]
                    + [f"{_signed(by.loc[b, 'paired_gap'])} {_interval(by.loc[b, 'ci_low'], by.loc[b, 'ci_high'])}, "
                       f"p {_p(by.loc[b, 'paired_p'])}" for b in ("highway", "standard")])
    first = _markdown(["recipe", "review", "highway", "standard", "gap vs highway", "gap vs standard"], rows)
    diff = results.recipe_gap_difference()
    second = _markdown(
        ["baseline", "gap paper − gap rrlib [95 %]", "paired p", f"TOST p (±{diff['margin'].iloc[0]:g})",
         "detectable change (80 %)"],
        [[r["baseline"], f"{_signed(r['gap_difference'])} {_interval(r['ci_low'], r['ci_high'])}",
          _p(r["p"]), _p(r["p_equivalent"]), f"{r['detectable']:.4f}"] for _, r in diff.iterrows()])
    return first + "\n" + second


def _cell_name(size: str) -> str:
    width, _, steps = size.partition("_steps")
    return f"{width}, {int(steps):,} steps" if steps else size


def size_tokens(results: Results) -> str:
    """Page 06: Review's paired gap per (width, budget) cell, and the fit of the gap on size and tokens."""
    gaps = results.paired_gaps()
    order = gaps.groupby("size")["tokens_per_param"].first().sort_values()
    rows = []
    for size, tpp in order.items():
        by = gaps[gaps["size"] == size].set_index("baseline")
        rows.append([_cell_name(size), f"{tpp:.2f}"]
                    + [f"{_signed(by.loc[b, 'paired_gap'], 3)} {_interval(by.loc[b, 'ci_low'], by.loc[b, 'ci_high'], 3)}"
                       f" (Holm {_p(by.loc[b, 'p_holm'])}; val_loss Holm {_p(by.loc[b, 'p_holm_val_loss'])})"
                       for b in ("highway", "standard")])
    first = _markdown(["cell", "tokens / param", "vs highway", "vs standard"], rows)
    fit = results.gap_factors()
    rows = []
    for (metric, baseline), part in fit.groupby(["metric", "baseline"], sort=False):
        by = part.set_index("term")
        rows.append([metric, baseline] + [f"{_signed(by.loc[t, 'coef'], 3)} {_interval(by.loc[t, 'ci_low'], by.loc[t, 'ci_high'], 3)}"
                                          for t in ("log10_size", "log10_tokens_per_param")])
    return first + "\n" + _markdown(["metric", "baseline", "size (nats / decade, 95 %)",
                                     "tokens per parameter (nats / decade, 95 %)"], rows)


def paper_tests(results: Results) -> str:
    """Page 04's reading of the paper's own runs: its Welch test beside the paired test with Holm."""
    df = results.tests("paper")
    return _markdown(["size", "baseline", "gap (val_loss)", "Welch p", "paired p", "Holm p", "95 % CI",
                      "detectable gap (80 %)"],
                     [[r["size"], r["baseline"], _signed(r["paired_gap"]), _p(r["welch_p"]), _p(r["paired_p"]),
                       _p(r["p_holm"]), _interval(r["ci_low"], r["ci_high"]), f"{r['mde']:.4f}"]
                      for _, r in df.iterrows()])


def _family(summary: pd.DataFrame) -> str:
    rows = []
    for _, r in summary.iterrows():
        tested = not pd.isna(r["p"])
        rows.append([f"`{r['variant']}`", f"{r['params_M']:.2f}", f"{r['flops_per_token'] / 1e6:.2f}",
                     f"{r['loss']:.4f} ± {r['sd']:.4f}",
                     f"{_signed(r['gap'])} (p {_p(r['p'])}, Holm {_p(r['p_holm'])}; val_loss "
                     f"Holm {_p(r['p_holm_secondary'])})" if tested else "–",
                     f"{r['detectable']:.4f}" if tested else "–",
                     "–" if pd.isna(r["tokens_per_s_vs_standard"]) else f"{r['tokens_per_s_vs_standard']:.2f}",
                     "–" if pd.isna(r["peak_memory_vs_standard"]) else f"{r['peak_memory_vs_standard']:.2f}"])
    return _markdown(["method", "params (M)", "MFLOPs / token", "loss (mean ± SD)", "gap vs standard",
                      "detectable gap (80 %)", "tokens/s vs standard (bench)", "peak memory vs standard (bench)"],
                     rows)


def family(results: Results) -> str:
    """Page 05's family at its size (`family`)."""
    return _family(results.family_summary())


def family_mini(results: Results) -> str:
    """Page 05's family at its wider size (`family_mini`)."""
    return _family(results.family_summary(wide=True))


def _claim_effect(r) -> str:
    """A ledger row's effect with its interval where it has one (three decimals)."""
    if pd.isna(r["effect"]):
        return "–"
    return _signed(r["effect"], 3) + ("" if pd.isna(r["ci_low"]) else " " + _interval(r["ci_low"], r["ci_high"], 3))


def _claim_verdict(r, exploratory: bool) -> str:
    """A ledger row's verdict word, without its reason, marked where the row is an exploratory reading."""
    return f"**{r['verdict'].split(':')[0]}**" + (" (exploratory)" if exploratory else "")


def claims_counts(results: Results) -> str:
    """The README's line on page 07's ledger: the registered claims' verdicts counted by kind
    (rrlib.stats.ledger.verdict_counts, as page 07 counts them), and the exploratory readings beside them."""
    df = results.claims()
    later = df["status"] == "exploratory" if "status" in df else pd.Series(False, index=df.index)
    kinds = ledger.verdict_counts(df.loc[~later, "verdict"])
    return (f"{(~later).sum()} registered claims: " + ", ".join(f"**{n} {kind}**" for kind, n in kinds.items())
            + (f"; {later.sum()} exploratory readings beside the claims they follow" if later.any() else "")
            + ".\n")


def claims(results: Results) -> str:
    """Page 07's ledger (docs/results.md): the counts, then one line per claim, its verdict, and its effect with the
    interval where it has one."""
    df = results.claims()
    later = df["status"] == "exploratory" if "status" in df else pd.Series(False, index=df.index)
    return claims_counts(results) + "\n" + _markdown(["paper", "claim", "verdict", "effect [95 %]",
                               "could the CPU answer it? (detectable gap, 80 % power)"],
                              [[r["paper"], r["claim"], _claim_verdict(r, x), _claim_effect(r), ledger.could_see(r)]
                               for (_, r), x in zip(df.iterrows(), later)])


def _looped(reading) -> str:
    """A looped study's tables on page 05 (``reading``: rrlib.results.looped's): per rule the slope of its optimal
    learning rate on log₂ N (parabola and grid estimators, all runs and stalled runs excluded), then 1/N against
    1/√N at each seed's optimum, per N."""
    transfer = reading.transfer
    rows = []
    for _, r in transfer.iterrows():
        decided = not pd.isna(r["slope"])
        rows.append([r["runs"], f"`{r['variant']}`", r["estimator"], int(r["seeds"]),
                     f"{_signed(r['slope'], 2)} {_interval(r['ci_low'], r['ci_high'], 2)}" if decided else "–",
                     _p(r["p"]), _p(r["p_equivalent"]), f"{r['fold_change']:.2g}" if decided else "–",
                     f"**{r['verdict']}**"])
    table = _markdown(["runs", "rule", "optimum", "seeds", "slope per doubling of N [95 %]", "p (slope 0)",
                       "TOST p (±1/6)", "optimum N=8 / N=1", "verdict"], rows)
    trainable = reading.trainability
    trainable = trainable[trainable["loops"] > 1]
    rows = [[int(r["loops"]), int(r["seeds"]), _signed(r["gap"]) + ("" if pd.isna(r["ci_low"]) else
                                                                   " " + _interval(r["ci_low"], r["ci_high"])),
             _p(r["p"]), _p(r["p_holm"])] for _, r in trainable.iterrows()]
    return table + "\n" + _markdown(["N", "seeds", "`scaled_loops` − `scaled` at the optimum, nats [95 %]",
                                      "paired p", "Holm p"], rows)


def looped(results: Results) -> str:
    """Page 05's 200-step looped study."""
    return _looped(results.looped())


def looped_power(results: Results) -> str:
    """Page 05's powered looped design: its pilot (the contrast's paired SD, the seeds it needs, the design's seeds
    and CPU-hours), then, once every seed of the design has finished, the contrast of 1/N's slope against 1/√N's
    and the study's tables (``_looped``)."""
    pilot = results.looped_power_pilot()
    rows = [[r["estimator"], int(r["n"]), _signed(r["effect"], 3), f"{r['sd']:.3f}", int(r["seeds_needed"]),
             f"{r['pilot_cpu_hours']:.1f}", int(r["design_seeds"]), f"{r['design_cpu_hours']:.1f}"]
            for _, r in pilot.iterrows()]
    text = _markdown(["optimum", "pilot seeds used", "contrast (1/N − 1/√N, per doubling)", "paired SD",
                      f"seeds to detect {pilot['target'].iloc[0]:g}", "pilot CPU-h", "design's seeds",
                      "design CPU-h"], rows)
    powered = results.looped_power()
    if powered is None:
        return text
    rows = [[r["estimator"], int(r["n"]), f"{_signed(r['effect'], 3)} {_interval(r['ci_low'], r['ci_high'], 3)}",
             _p(r["p"]), f"{r['mde']:.3f}"] for _, r in powered.contrast.iterrows()]
    return (text + "\n" + _markdown(["optimum", "seeds", "1/N's − 1/√N's slope per doubling [95 %]", "paired p",
                                      "detectable (80 %)"], rows) + "\n" + _looped(powered))


def powered(results: Results) -> str:
    """The powered CPU designs (pages 04 and 05): every pilot's paired SD and the seeds and CPU-hours its target
    needs, then each finished design's tests by the compare engine."""
    rows = [[f"`{r['size']}`", f"{r['variant']} vs {r['baseline']}", f"{r['target']:g}", int(r["pilot_seeds"]),
             f"{r['sd']:.4f}", "–" if pd.isna(r["seeds_needed"]) else int(r["seeds_needed"]),
             f"{r['comparison_cpu_hours']:.1f}", int(r["design_seeds"]), f"{r['design_cpu_hours']:.1f}"]
            for pilot in results.pilots() for _, r in pilot.iterrows()]
    first = _markdown(["size", "comparison", "target (nats)", "pilot seeds", "paired SD", "seeds for the target",
                       "CPU-h, alone", "seeds, all rules", "CPU-h, all rules"], rows)
    rows = [[f"`{r['size']}`", f"{r['variant']} vs {r['baseline']}", int(r["seeds"]),
             f"{_signed(r['gap'])} {_interval(r['ci_low'], r['ci_high'])}", _p(r["p_holm"]),
             f"{r['detectable']:.4f}", f"{_p(r['p_equivalent_holm'])} (±{r['margin']:g})", f"**{r['verdict']}**"]
            for design in results.powered_designs() if design is not None for _, r in design.iterrows()]
    return first + "\n" + _markdown(["size", "comparison", "seeds", "baseline − variant, nats [95 %]", "Holm p",
                                      "detectable (80 %)", "TOST Holm p (margin)", "verdict"], rows)


def abstract(results: Results) -> str:
    """The index's abstract (rrlib.report.index.abstract), one paragraph each: the README's summary of the results
    then reads the ledger's verdicts as the index does."""
    from .index import abstract as index_abstract

    return "\n".join(paragraph + "\n" for paragraph in index_abstract(results))


def reach(results: Results) -> str:
    """Page 07's reach studies and the L sweep: per study the claims it answers, its ended runs, diverged runs,
    CPU-hours and commits; then each of those claims' verdict and effect (an exploratory reading marked so)."""
    from ..studies import looped_reach_study

    answers = looped_reach_study.claims_answered()
    runs = results.reach_runs().set_index("study")
    def ran(name):
        if name not in runs.index:
            return ["0", "–", "–", "–", "–"]
        r = runs.loc[name]
        return [r["runs"], r["seeds"], r["diverged"], f"{r['cpu_hours']:.2f}", r["commits"]]
    rows = [[f"`{name}`", ", ".join(records)] + ran(name) for name, records in answers.items()]
    claims = results.claims()
    answered = {cid for records in answers.values() for cid in records}
    mine = claims[claims["id"].isin(answered) | claims["follows"].isin(answered)]
    verdicts = [[r["id"], _claim_verdict(r, r["status"] == "exploratory"),
                 r["verdict"].partition(": ")[2] or _claim_effect(r)] for _, r in mine.iterrows()]
    return (_markdown(["study", "claims it answers", "runs ended", "seeds", "diverged", "CPU-hours", "commits"], rows)
            + "\n" + _markdown(["claim", "verdict", "effect [95 %], or what it waits for"], verdicts))


def leaderboard(results: Results) -> str:
    """Page 08's leaderboard: each rule against standard at its seeds, in the page's order (by the paired gap),
    with its verdict where it is judged and where it stands otherwise."""
    board = results.board()

    def judged(r, column):
        return "–" if r["stage"] != "judged" else column(r)
    rows = [[f"`{r['rule']}`", r["paper"], r["stands_at"],
             judged(r, lambda r: f"{_signed(r['gap'])} {_interval(r['ci_low'], r['ci_high'])}"),
             judged(r, lambda r: _p(r["p_holm"])), judged(r, lambda r: f"{r['detectable']:.4f}"),
             judged(r, lambda r: f"**{r['verdict']}**"), f"{r['step_per_flop_vs_standard']:.2f}"]
            for _, r in board.iterrows() if r["stage"] != "baseline"]
    return _markdown(["rule", "paper", "stands at", "gap vs standard [95 %] (nats)", "Holm p", "detectable (80 %)",
                      "verdict", "step time per FLOP vs standard"], rows)


def board_finding(results: Results) -> str:
    """The leaderboard in one sentence: every rule the board calls better than standard (Holm over the board), by
    its gap, and how many it calls worse (their gaps are in docs/results.md's table)."""
    board = results.board()
    judged = board[board["stage"] == "judged"].sort_values("gap", ascending=False)
    better = [r["paper"].split(",")[0] for _, r in judged.iterrows() if r["verdict"] == "better"]
    worse = int((judged["verdict"] == "worse").sum())
    seeds = int(judged["seeds"].min()) if len(judged) else 0
    return (f"On the leaderboard ({seeds} seeds, Holm over {len(judged)} rules) {len(better)} "
            f"{'rule beats' if len(better) == 1 else 'rules beat'} the standard residual: "
            f"{', '.join(better) or 'none'}; {worse} fall behind it.\n")


def reach_settings(results: Results) -> str:
    """Each controlled reach verdict in a few words: the paper, the verdict, the steps and depths it holds at, and
    its controls counted by state (rrlib.claims.controls; the whole setting is on page 07 and in docs/results.md)."""
    claims = results.claims().set_index("id")
    controls = results.controls()
    parts = []
    for record, part in controls.groupby("record", sort=False):
        r = claims.loc[record]
        steps, blocks = r["setting"].split(" (")[0], r["setting"].split("), ")[1].split(", ")[0]
        states = ", ".join(f"{n} {state}" for state, n in part["state"].value_counts(sort=False).items())
        parts.append(f"{r['paper']} **{r['verdict'].split(':')[0]}** ({steps}, {blocks}; controls: {states})")
    return "; ".join(parts) + ".\n"


# the documents that hold generated blocks, relative to the project root; each block lives in one of them, but the
# Colab badges (made from the repository's address, rrlib.report.colab), which the README and docs/notebooks.md hold
DOCUMENTS = ("README.md", "docs/results.md", "docs/notebooks.md")
BUILDERS = {"abstract": abstract, "depth": depth, "looped": looped, "looped_power": looped_power,
            "cpu_scale": cpu_scale, "recipe": recipe, "size_tokens": size_tokens, "family": family,
            "family_mini": family_mini, "paper_tests": paper_tests, "claims": claims, "claims_counts": claims_counts,
            "powered": powered,
            "reach": reach, "leaderboard": leaderboard, "board_finding": board_finding,
            "reach_settings": reach_settings, "colab": lambda results: badges()}


def render(text: str, results: Results) -> str:
    """``text`` with every generated block rebuilt from ``results`` (rrlib.report.index.Results); a block whose name
    has no builder is an error."""
    def rebuild(m):
        name = m.group("name")
        if name not in BUILDERS:
            raise ValueError(f"README block {name!r} has no builder; known blocks: {', '.join(BUILDERS)}")
        return m.group(1) + BUILDERS[name](results) + m.group(4)

    return BLOCK.sub(rebuild, text)


def update(readme: Path, results: Results) -> bool:
    """Rewrite the README's generated blocks from ``results``; True if anything changed."""
    old = readme.read_text()
    new = render(old, results)
    if new != old:
        readme.write_text(new)
    return new != old


def block_names(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]

