"""The report's front page, ``index.html``: an abstract computed from the paper's runs and ours, the sections in
reading order, and the figures."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from ..model import count_params
from ..runs.config import ConfigError
from ..runs.presets import load_preset
from ..studies import looped_study
from ..stats import ledger
from .notebooks import NOTEBOOKS, QUICK_SIZES, Notebook


def abstract(tables: Path) -> list[str]:
    """The index's abstract, in plain sentences of about 200 words: the question and the ledger's count, then each
    finding in one sentence with its strength, every number read from the pages' own tables (``tables``:
    paper/tables/*.csv) and every verdict from the claims ledger's (``07_claims.csv``), so that the abstract cannot
    say more than page 07; a finding whose page is not built is left out. Every measured number is a cell of a table,
    formatted as here (a test checks); the integers are counts, and ``LAG_NATS`` is the one threshold stated. The
    tables hold the rest."""
    def read(name):
        path = tables / f"{name}.csv"
        return pd.read_csv(path) if path.exists() else None

    claims = read("07_claims")
    counts = ""
    if claims is not None:
        later = claims["status"] == "exploratory" if "status" in claims else pd.Series(False, index=claims.index)
        kinds = claims.loc[~later, "verdict"].map(ledger.verdict_kind).value_counts()
        counts = (f" This report tests {(~later).sum()} registered claims of it and "
                  f"{claims['paper'].nunique() - 1} related papers: "
                  + ", ".join(f"{kinds.get(v, 0)} {v}" for v in ledger.VERDICTS) + ".")
    lines = ["The paper reports that Review residuals bring no gain at its smaller sizes, a significant gain at 590M "
             "and a larger one at 1B that it calls a strong trend rather than significant." + counts]
    board = leaderboard_finding(read("08_leaderboard"))
    # the family's three-seed screen speaks of the gains over standard only until the leaderboard, the design that
    # detects the smallest gap, has judged them (rrlib.stats.ledger.decide): one finding per question
    for finding in (depth_finding(read("02_final_loss")), review_finding(read("04_paper_tests")),
                    powered_finding([read(name) for name in POWERED_DESIGNS]),
                    None if board else family_finding(read("05_family_summary")),
                    looped_finding(claims, read(f"{looped_study.ledger_tables(tables)}_transfer")), board):
        lines += [finding] if finding else []
    return lines


def _p(p: float) -> str:
    return f"{p:.2g}"


COMPARISONS = "compare"  # the report's folder of verdict pages from `rrlib compare` (report --compare)
LAG_NATS = 0.1  # a convex form this far behind its additive twin has stopped learning: far beyond the seed spread
LOOPED_CLAIM = "the best learning rate depends on L only, not on N"  # the looped transfer claim, as page 07 names it


def depth_finding(final_loss) -> str | None:
    """The depth ablation: from which depth each convex form trails its additive twin by more than ``LAG_NATS``."""
    if final_loss is None:
        return None
    mean = final_loss.set_index("sublayers")
    onsets = {}
    for convex, additive in (("review_convex", "review"), ("highway_convex", "highway")):
        if {convex, additive} <= set(mean.columns):
            behind = mean.index[(mean[convex] - mean[additive]) > LAG_NATS]
            onsets[convex] = behind.min() // 2 if len(behind) else None
    if not onsets or "review_convex" not in onsets:
        return None
    found = {name: blocks for name, blocks in onsets.items() if blocks}
    when = ("at no depth tested" if not found else f"from {next(iter(found.values()))} blocks on"
            if len(set(found.values())) == 1 and len(found) == len(onsets)
            else "from " + ", ".join(f"{blocks} blocks ({name})" for name, blocks in found.items()))
    return (f"Depth: the convex forms fall more than {LAG_NATS:g} nats behind their additive twins {when}, while the "
            f"additive forms keep improving with depth.")


def review_finding(paper) -> str | None:
    """The paper's own runs: which gains clear Holm's correction when paired by seed, and the largest size's p by
    the paper's own test (Welch's t), which the paper calls a strong trend."""
    if paper is None:
        return None
    wins = paper[paper["significant"] & (paper["paired_gap"] > 0)]
    largest = paper[paper["size"] == paper["size"].iloc[-1]]
    return ("In the paper's runs, paired by seed with Holm, Review beats "
            + (", ".join(f"{r.baseline} at {r.size} (p {_p(r.p_holm)})" for r in wins.itertuples())
               if len(wins) else "neither baseline at any size")
            + f"; by the paper's own Welch test its {largest['size'].iloc[0]} gains have p "
            + " and ".join(_p(p) for p in largest["welch_p"]) + ".")


POWERED_DESIGNS = ("04_power_tests", "04_power_tests_mini", "05_power_tests")  # the pages' finished powered designs


def powered_finding(designs) -> str | None:
    """The powered CPU designs (pages 04 and 05; None for one not finished), each comparison in the compare
    engine's word: better or worse with its gap, equivalent with its margin, else inconclusive."""
    def said(r) -> str:
        if r.verdict in ("better", "worse"):
            return f"{r.variant} is {r.verdict} than {r.baseline} ({r.gap:+.4f} nats)"
        if r.verdict == "equivalent":
            return f"{r.variant} is equivalent to {r.baseline} within ±{r.margin:g} nats"
        return f"{r.variant} against {r.baseline} is {r.verdict}"

    parts = [f"at {rows['size'].iloc[0]} " + ", ".join(said(r) for r in rows.itertuples())
             for rows in designs if rows is not None]
    return ("Powered CPU designs: " + "; ".join(parts) + ".") if parts else None


def family_finding(summary) -> str | None:
    """Page 05: which methods differ from the standard residual after Holm's correction."""
    if summary is None:
        return None
    tested = summary.dropna(subset=["p (Holm)"])
    better = tested[(tested["p (Holm)"] < 0.05) & (tested["gap vs standard"] > 0)]
    worse = tested[(tested["p (Holm)"] < 0.05) & (tested["gap vs standard"] < 0)]
    return (f"In the family ({len(summary)} methods, {int(summary['seeds'].max())} seeds) "
            + (" and ".join(better["variant"]) + " beat standard after Holm" if len(better)
               else "none beats standard after Holm")
            + (f"; {' and '.join(worse['variant'])} {'is' if len(worse) == 1 else 'are'} worse" if len(worse) else "")
            + ".")


def leaderboard_finding(board) -> str | None:
    """Page 08 in one sentence of a fixed length however far the board has run: how many of its rules are judged,
    at how many seeds, how many the compare engine calls better and worse, and the rule with the largest gap."""
    if board is None:
        return None
    judged = board[board["stage"] == "judged"].sort_values("gap", ascending=False)
    if judged.empty:
        return None
    words = judged["verdict"].value_counts()
    better, worse = words.get("better", 0), words.get("worse", 0)
    top = judged.iloc[0]
    return (f"Leaderboard ({len(judged)} of {int((board['stage'] != 'baseline').sum())} rules judged, "
            f"{int(judged['seeds'].min())} seeds, Holm): {better} {'beats' if better == 1 else 'beat'} standard, "
            f"{worse} {'falls' if worse == 1 else 'fall'} behind; the largest gap is {top['rule']}'s "
            f"({top['gap']:+.4f} nats, {top['verdict']}).")


def looped_finding(claims, transfer) -> str | None:
    """The looped study's transfer claim, with the claims ledger's verdict and interval (page 07 weighs page 05's
    estimators and its supplementary runs; the abstract repeats its word), and the TOST p of the estimate it used.
    ``transfer`` is the table page 07 read: the powered design's once it has finished, the 200-step study's before."""
    row = None if claims is None else claims[claims["claim"] == LOOPED_CLAIM]
    if row is None or row.empty:
        return None
    r = row.iloc[0]
    if ledger.verdict_kind(r["verdict"]) in ("untested", "out of reach") or pd.isna(r["effect"]):
        return ("Looped models: the decisive test of whether the 1/N residual scaling makes the best learning rate "
                "independent of the loop count is still running; no verdict yet.")
    used = pd.DataFrame() if transfer is None else transfer[transfer["slope"] == r["effect"]]
    tost = (f", {int(used['seeds'].iloc[0])} seeds, TOST p {_p(used['p_equivalent'].iloc[0])}") if len(used) else ""
    return (f"Looped models: that 1/N scaling frees the best learning rate from the loop count is "
            f"\"{r['verdict']}\" (slope {r['effect']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]{tost}).")


def _size_key(page: str, notebook: str) -> int:
    """Parameters of the model a per-size page is about, so pages read from the smallest size up."""
    size = page.removeprefix(notebook + "_").removesuffix(".reader.html")
    try:
        return count_params(load_preset(size).model)
    except ConfigError:
        return 0


def rendered_pages(out: Path) -> list[tuple[Notebook, str, str]]:
    """(notebook, page stem, title) for every page of ``NOTEBOOKS`` found in ``out``, in reading order."""
    pages = []
    for nb in sorted(NOTEBOOKS, key=lambda nb: not nb.summary):  # a summary of the pages reads first
        found = (sorted(out.glob(f"{nb.name}_*.reader.html"), key=lambda p: _size_key(p.name, nb.name)) if nb.per_size
                 else [out / f"{nb.name}.reader.html"])
        for reader in found:
            if reader.exists():
                stem = reader.name.removesuffix(".reader.html")
                match = re.search(r"<title>(.*?)</title>", reader.read_text(encoding="utf-8"), re.S)
                title = html.unescape(match.group(1)) if match else stem
                if nb.per_size:
                    title += f" — {stem.removeprefix(nb.name + '_')}"
                pages.append((nb, stem, title))
    return pages


def _comparisons(out: Path) -> str:
    """The index's list of ``rrlib compare`` pages that ``report --compare`` added (each titled by its question)."""
    items = []
    for page in sorted((out / COMPARISONS).glob("*.html")):
        found = re.search(r"<title>(.*?)</title>", page.read_text(encoding="utf-8"), re.S)
        items.append(f'<li><a href="{COMPARISONS}/{page.name}">{page.stem}</a>: {found.group(1) if found else ""}</li>')
    if not items:
        return ""
    return ("<h2>Comparisons</h2>\n<p class=\"alt\">Rules judged with <code>rrlib compare</code> (each page: the "
            "verdicts, their strength and the command that reproduces them).</p>\n<ul>\n" + "\n".join(items) + "\n</ul>")


def _sections(out: Path) -> str:
    """The index's list of pages: each page's own title (which carries its number), its blurb and its two versions;
    a per-size notebook once, with one line per size below it, the size and its model's parameters in the text.

    The smoke-test size's page comes first among its notebook's sizes, built or not: every build makes it and the
    repository does not keep it (.gitignore), so the committed index links it and stays the same either way."""
    import itertools

    def versions(stem):
        return f'<span class="alt">(<a href="{stem}.html">with code</a>)</span>'

    lines = []
    for nb, pages in itertools.groupby(rendered_pages(out), key=lambda page: page[0]):  # a notebook's are consecutive
        pages = list(pages)
        if not nb.per_size:
            lines += [f'<li><a href="{stem}.reader.html">{html.escape(title)}</a>: {html.escape(nb.blurb)} '
                      f"{versions(stem)}</li>" for _, stem, title in pages]
            continue
        smoke = [f"{nb.name}_{q}" for q in QUICK_SIZES]
        stems = smoke + [stem for _, stem, _ in pages if stem not in smoke]
        note = ' <span class="alt">the smoke test: every build makes it, the repository does not keep it</span>'
        sizes = [f'<li><a href="{stem}.reader.html">{html.escape(stem.removeprefix(nb.name + "_"))}</a>: '
                 f"{_size_key(stem, nb.name) / 1e6:.2f} M parameters (Review) {versions(stem)}"
                 f"{note if stem in smoke else ''}</li>" for stem in stems]
        title = pages[0][2].rpartition(" — ")[0]  # rendered_pages appends the size
        lines.append(f"<li>{html.escape(title)}: {html.escape(nb.blurb)}\n<ul>\n" + "\n".join(sizes) + "\n</ul></li>")
    return "\n".join(lines)


def png_title(path: Path) -> str | None:
    """The title a figure of the report carries in its PNG (rrlib.views.plots.figure_png); None without one."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.text.get("Title")
    except (UnidentifiedImageError, OSError):
        return None


def _smoke_test_prefixes() -> tuple[str, ...]:
    """The stems that start a smoke-test size's page and figures (03_sweep_tiny, 03_tiny_loss_curves)."""
    return tuple(prefix for nb in NOTEBOOKS if nb.per_size for q in QUICK_SIZES
                 for prefix in (f"{nb.name}_{q}", f"{nb.name.split('_')[0]}_{q}_"))


def write_index(out: Path, paragraphs: list[str]) -> Path:
    """``index.html``: abstract, the sections (reader's and full versions), the figures. No scripts.

    The smoke-test size's page and figures are made by every build and not committed (.gitignore): the index links
    that page (``_sections``) and shows none of its figures, so the committed index is the same whether or not a
    build made them.
    """
    skipped = _smoke_test_prefixes()
    figures = [f for f in sorted((out / "figures").glob("*.png")) if not f.stem.startswith(skipped)]
    captions = {f: html.escape(png_title(f) or f.stem) for f in figures}
    gallery = "\n".join(f'<a href="figures/{f.name}"><figure><img src="figures/{f.name}" alt="{captions[f]}">'
                        f"<figcaption>{captions[f]}</figcaption></figure></a>" for f in figures)
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Review Residuals: a reproduction</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5;
       color: #222; }}
h1 {{ margin-bottom: 0.2rem; }} .sub {{ color: #666; margin-top: 0; }}
li {{ margin: 0.4rem 0; }} ul.sections {{ list-style: none; padding-left: 0; }} .alt {{ color: #666; font-size: 0.9em; }}
.gallery {{ display: flex; flex-wrap: wrap; gap: 1rem; }}
figure {{ margin: 0; width: 17rem; }} figure img {{ width: 100%; border: 1px solid #ddd; }}
figcaption {{ font-size: 0.8em; color: #555; }} a {{ color: #1f5fa8; }}
</style>
</head>
<body>
<h1>Review Residuals: a reproduction</h1>
<p class="sub">Update-conditioned residual gating for transformers (Kramer, 2026), reproduced and re-tested.</p>
<h2>Abstract</h2>
{body}
<h2>Sections</h2>
<ul class="sections">
{_sections(out)}
</ul>
<p class="alt">Each section links its reader's version; "with code" is the executed notebook.</p>
{_comparisons(out)}
<h2>Figures</h2>
<div class="gallery">
{gallery}
</div>
</body>
</html>
"""
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
