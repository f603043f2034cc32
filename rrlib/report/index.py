"""The report's front page, ``index.html``: an abstract computed from the paper's runs and ours, the sections in
reading order, and the figures. The abstract reads the pages' results and the claims ledger through ``Results``,
as the README's and docs' generated blocks do (rrlib.report.readme)."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from ..claims import assemble as claims_ledger, reach_rows
from ..model import count_params
from ..results import depth, family, leaderboard, looped, looped_power, power, size_tokens, statistics
from ..runs.arguments import seed_list, variant_list
from ..runs.config import ConfigError
from ..runs.presets import load_preset
from ..studies import looped_reach_study
from ..stats import ledger
from .notebooks import NOTEBOOK_DIR, NOTEBOOKS, QUICK_SIZES, Notebook, parameter_values


class Results:
    """Each page's result as the page draws it: the result functions of rrlib.results called with the page's
    parameters (its notebook's parameters cell, under what a build gave it: ``pages``, the parameters per notebook
    name), and the claims ledger (``rrlib.claims.assemble``, from page 07's parameters), built once and kept. The
    index's abstract and the README's and docs' blocks read these, never a page's table. Columns are the results'
    documented names; a result that does not exist yet (a design whose runs have not all finished) is None.
    ``built``: the notebooks whose pages the report holds (None: every one), the only ones the abstract speaks of."""

    def __init__(self, pages: dict | None = None, claims: pd.DataFrame | None = None, built=None):
        self.pages, self._claims, self._parameters, self._ledger = pages or {}, claims, {}, None
        self.built = None if built is None else set(built)

    def shows(self, name: str) -> bool:
        """Whether the report holds notebook ``name``'s page."""
        return self.built is None or name in self.built

    def page(self, name: str) -> dict:
        """The parameters page ``name`` is executed with: its notebook's own, under those of the build's it declares."""
        if name not in self._parameters:
            import jupytext

            own = parameter_values(jupytext.read(NOTEBOOK_DIR / f"{name}.py"))  # its source: the build checks the pair
            given = self.pages.get(name, {})
            self._parameters[name] = {**own, **{k: v for k, v in given.items() if k in own}}
        return self._parameters[name]

    def ledger(self):
        """Page 07's ledger with what its rows were made from (rrlib.claims.assemble.Ledger; about a minute, once)."""
        if self._ledger is None:
            self._ledger = claims_ledger.build(claims_ledger.inputs_from(self.page("07_claims")))
        return self._ledger

    def claims(self) -> pd.DataFrame:
        """Page 07's ledger, one row per record."""
        if self._claims is None:
            self._claims = self.ledger().table
        return self._claims

    def controls(self) -> pd.DataFrame:
        """The reach verdicts' controls, one row each (rrlib.claims.controls)."""
        return self.ledger().controls

    def final_loss(self) -> pd.DataFrame:
        """Page 02: the mean fixed-set loss per depth (``sublayers``) and rule."""
        p = self.page("02_depth_stability")
        depths, seeds = depth.design(p["depths"], seed_list(p["seeds"]) if p["seeds"] is not None else None)
        return depth.mean_final_loss(depths, variant_list(p["variants"]), seeds, p["out_root"]).reset_index()

    def _statistics(self) -> tuple[dict, dict]:
        p = self.page("04_statistics")
        return ({"paper_csv": p["paper_csv"], "out_root": p["out_root"], "variants": variant_list(p["variants"]),
                 "exclude_sizes": p["exclude_sizes"]},
                {"alpha": p["alpha"], "n_boot": p["n_boot"], "secondary": p["secondary_metric"]})

    def tests(self, source: str) -> pd.DataFrame:
        """Page 04: the paper's runs or ours (``source``), Welch beside paired with Holm, per size and baseline."""
        where, tested = self._statistics()
        return statistics.tests(source, **tested, **where)

    def means(self, source: str) -> pd.DataFrame:
        """Page 04: the mean primary loss per size (the index) and rule."""
        return statistics.means(source, **self._statistics()[0])

    def recipe_gaps(self) -> pd.DataFrame | None:
        p = self.page("04_statistics")
        return statistics.recipe_gaps(p["recipe_root"], p["alpha"])

    def recipe_gap_difference(self) -> pd.DataFrame | None:
        p = self.page("04_statistics")
        return statistics.recipe_gap_difference(p["recipe_root"], p["equivalence_margin"], p["alpha"])

    def _power_root(self, page: str) -> str:
        p = self.page(page)
        return p["power_root"] or power.root_beside(p["out_root"])

    def pilots(self) -> list[pd.DataFrame]:
        """Every powered design's pilot that has finished (pages 04 and 05, in their order): its design."""
        p, root = self.page("04_statistics"), self._power_root("04_statistics")
        baselines = [v for v in variant_list(p["variants"]) if v != "review"]
        found = [power.pilot(root, size, "review", baselines, p["power_target"], p["alpha"])
                 for size in (p["power_size"], p["mini_power_size"])]
        p, root = self.page("05_related_methods"), self._power_root("05_related_methods")
        found += [power.pilot(root, p["power_size"], variant, against, p["power_target"])
                  for variant, against in claims_ledger.PAGE_05_DESIGN[1].items()]
        return [pilot.design for pilot in found if pilot.design is not None]

    def powered_designs(self, page: str | None = None) -> list[pd.DataFrame | None]:
        """The powered designs' tests as the ledger reads them, page 04's two then page 05's (``page``: one page's
        alone); None for one whose runs have not all finished."""
        found = []
        if page in (None, "04_statistics"):
            alpha, root = self.page("04_statistics")["alpha"], self._power_root("04_statistics")
            found += [power.design_tests(root, size, {rule: list(baselines)}, seeds, alpha)
                      for size, rule, baselines, seeds in claims_ledger.PAGE_04_DESIGNS.values()]
        if page in (None, "05_related_methods"):
            found.append(power.design_tests(self._power_root("05_related_methods"), *claims_ledger.PAGE_05_DESIGN))
        return found

    def family_summary(self, wide: bool = False) -> pd.DataFrame | None:
        """Page 05's family summary at its size, or at its wider size (``wide``); None without standard's runs."""
        p = self.page("05_related_methods")
        preset = load_preset(p["size"])
        size = p["wide_size"] if wide else p["size"]
        if size is None:
            return None
        seeds = None if wide else seed_list(p["seeds"], default=preset.seeds)
        summary = family.family_summary(size, variant_list(p["variants"], default=preset.variants), seeds,
                                        p["out_root"], p["bench_file"], p["primary_metric"], p["secondary_metric"])
        return summary if "standard" in set(summary["variant"]) else None

    def looped(self) -> looped.LoopedReading:
        """Page 05's 200-step looped study."""
        return looped.reading()

    def looped_power(self) -> looped.LoopedReading | None:
        """Page 05's powered looped design; None until every seed has finished."""
        return looped_power.reading()

    def looped_power_pilot(self) -> pd.DataFrame | None:
        return looped_power.pilot()

    def looped_ledger(self) -> looped.LoopedReading:
        """The looped reading the ledger's rows rest on: the powered design's once it has finished."""
        powered = self.looped_power()
        return self.looped() if powered is None else powered

    def paired_gaps(self) -> pd.DataFrame:
        """Page 06: Review's paired gap per (width, budget) cell and baseline."""
        p = self.page("06_size_vs_tokens")
        return size_tokens.paired_gaps(**self._grid(), metric=p["metric"], secondary_metric=p["secondary_metric"],
                                       alpha=p["alpha"])

    def gap_factors(self) -> pd.DataFrame:
        """Page 06: the gap regressed on log size and log tokens per parameter."""
        p = self.page("06_size_vs_tokens")
        return size_tokens.gap_factors(**self._grid(), metrics=(p["metric"], p["secondary_metric"]), alpha=p["alpha"])

    def _grid(self) -> dict:
        p = self.page("06_size_vs_tokens")
        return {"grid_sizes": p["grid_sizes"], "variants": variant_list(p["variants"]), "out_root": p["out_root"]}

    def reach_runs(self) -> pd.DataFrame:
        """Page 07: per reach study its ended runs, seeds, diverged runs, CPU-hours and commits."""
        return reach_rows.runs_table(looped_reach_study.REACH)

    def board(self) -> pd.DataFrame:
        """Page 08's board, one row per rule (a column ``rule``)."""
        p = self.page("08_leaderboard")
        return leaderboard.study_board(p["budget_cpu_hours"], p["bench_files"], p["bench_size"]).reset_index()


def abstract(results: Results) -> list[str]:
    """The index's abstract, in plain sentences of about 200 words: the question and the ledger's count, then each
    finding in one sentence with its strength, every number from the results the pages show (``results``) and every
    verdict from the claims ledger's, so that the abstract cannot say more than page 07; a finding without its result
    is left out. Every measured number is a value of a result, formatted as here (a test checks); the integers are
    counts, and ``LAG_NATS`` is the one threshold stated."""
    def shown(page, read):
        return read() if results.shows(page) else None

    claims = shown("07_claims", results.claims)
    counts = ""
    if claims is not None:
        later = claims["status"] == "exploratory" if "status" in claims else pd.Series(False, index=claims.index)
        counts = (f" This report tests {(~later).sum()} registered claims of it and "
                  f"{claims['paper'].nunique() - 1} related papers: "
                  + ", ".join(f"{n} {kind}" for kind, n in ledger.verdict_counts(claims.loc[~later, "verdict"]).items())
                  + ".")
    lines = ["The paper reports that Review residuals bring no gain at its smaller sizes, a significant gain at 590M "
             "and a larger one at 1B that it calls a strong trend rather than significant." + counts]
    board = leaderboard_finding(shown("08_leaderboard", results.board))
    # the family's three-seed screen speaks of the gains over standard only until the leaderboard, the design that
    # detects the smallest gap, has judged them (rrlib.stats.ledger.decide): one finding per question
    looped_reading = shown("07_claims", results.looped_ledger)
    for finding in (depth_finding(shown("02_depth_stability", results.final_loss)),
                    review_finding(shown("04_statistics", lambda: results.tests("paper"))),
                    powered_finding([design for page in ("04_statistics", "05_related_methods")
                                     for design in shown(page, lambda: results.powered_designs(page)) or []]),
                    None if board else family_finding(shown("05_related_methods", results.family_summary)),
                    looped_finding(claims, None if looped_reading is None else looped_reading.transfer), board):
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
    tested = summary.dropna(subset=["p_holm"])
    better = tested[(tested["p_holm"] < 0.05) & (tested["gap"] > 0)]
    worse = tested[(tested["p_holm"] < 0.05) & (tested["gap"] < 0)]
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
    ``transfer`` is the reading page 07 read: the powered design's once it has finished, the 200-step study's before."""
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
