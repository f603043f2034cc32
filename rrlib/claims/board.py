"""Rows the leaderboard answers (page 08; rrlib.studies.leaderboard_study, registered before its runs): every rule
against standard at ``family_power`` over 47 seeds, Holm over the board's comparisons, as its compare call wrote
them (``board/verdict.csv``), and comparisons between two rules on the same runs and seeds (mHC against HC, Delta
against its AttnRes form), paired by seed through the compare engine. Each row is one registered design's reading
of its claim; ``rrlib.stats.ledger.decide`` picks, among the designs that answer a claim, the one that decides."""
from __future__ import annotations

import pandas as pd

from rrlib.results.leaderboard import BOARD_VERDICT
from rrlib.runs.config import project_path
from rrlib.stats import ledger
from rrlib.studies import leaderboard_study as board

from . import family
from .rows import link, row
from .sources import finished

EVIDENCE = link("08_leaderboard", "08_leaderboard")
WHERE = f"{board.SIZE}, the leaderboard"


def verdicts() -> pd.DataFrame | None:
    """The board's compare call (one row per rule against standard), or None before it has run."""
    path = project_path(board.OUT) / BOARD_VERDICT
    return pd.read_csv(path) if path.exists() else None


def runs() -> pd.DataFrame:
    """The finished runs at the board's size and seeds."""
    return finished(board.RUNS, board.SIZE, list(range(board.SEEDS)))


def gain_row(claim, variant: str, alpha: float = 0.05) -> dict:
    """standard − ``variant`` on the board: its gap, interval, Holm p over the board and detectable gap."""
    table = verdicts()
    if table is None or variant not in set(table["variant"]):
        return row(claim, WHERE, ledger.untested(f"the leaderboard has not judged {variant}"), "")
    r = table.set_index("variant").loc[variant]
    return row(claim, f"standard − {variant} at {WHERE}, fixed_loss, paired over {int(r['seeds'])} seeds: Holm p "
                      f"{r['p_holm']:.2g}",
               ledger.judge("directional", r["gap"], r["p_holm"], alpha=alpha), EVIDENCE, r["gap"], r["ci_low"],
               r["ci_high"], r["p_holm"], f"Holm over the leaderboard's {len(table)} comparisons with standard",
               detectable=r["detectable"])


def over_row(claim, variant: str, baseline: str, alpha: float = 0.05) -> dict:
    """``variant`` beats ``baseline`` on the board's runs, paired by seed: one comparison."""
    done = runs()
    if not (len(done) and {variant, baseline} <= set(done["variant"])):
        return row(claim, WHERE, ledger.untested(f"no leaderboard runs of {baseline} and {variant}"), "")
    t = family.paired(done, variant, [baseline], alpha).loc[baseline]
    return family.one_comparison(claim, t, f"{baseline} − {variant} at {WHERE}, fixed_loss, paired over "
                                           f"{int(t['seeds'])} seeds", EVIDENCE, alpha)


def beats_both_row(claim, variant: str, base: str, alpha: float = 0.05) -> dict:
    """``variant`` beats ``base`` and standard on the board's runs: the comparison with the larger p decides."""
    done = runs()
    if not (len(done) and {variant, base, "standard"} <= set(done["variant"])):
        return row(claim, WHERE, ledger.untested(f"no leaderboard runs of {variant}, {base} and standard"), "")
    return family.beats_all(claim, family.paired(done, variant, [base, "standard"], alpha), variant, WHERE, EVIDENCE,
                            alpha)


def keeps_gain_row(claim, alpha: float = 0.05) -> dict:
    """Block AttnRes keeps AttnRes's gain: a gain is kept only where there is one, so the verdict is AttnRes's own
    gain's on the board, Block's beside it."""
    table = verdicts()
    if table is None or not {"attnres", "attnres_block"} <= set(table["variant"]):
        return row(claim, WHERE, ledger.untested("the leaderboard has not judged attnres and attnres_block"), "")
    by = table.set_index("variant")
    full, block = by.loc["attnres"], by.loc["attnres_block"]
    return row(claim, f"AttnRes's own gain over standard at {WHERE} (Holm over the board): {full['gap']:+.4f}, Holm p "
                      f"{full['p_holm']:.2g}; Block's {block['gap']:+.4f}, Holm p {block['p_holm']:.2g}",
               ledger.judge("directional", full["gap"], full["p_holm"], alpha=alpha), EVIDENCE, full["gap"],
               full["ci_low"], full["ci_high"], full["p_holm"],
               f"Holm over the leaderboard's {len(table)} comparisons with standard", detectable=full["detectable"])
