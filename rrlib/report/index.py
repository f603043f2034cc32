"""The report's front page, ``index.html``: an abstract computed from the paper's runs and ours, the sections in
reading order, and the figures."""
from __future__ import annotations

import html
import re
from pathlib import Path

from ..model import count_params
from ..runs.config import ConfigError
from ..runs.presets import load_preset
from .notebooks import NOTEBOOKS, QUICK_SIZES, Notebook


def abstract(runs: Path, sizes: list[str], paper_csv: Path) -> list[str]:
    """The index's abstract: what the report asks, then numbers computed from the paper's runs and ours."""
    from . import stats
    from ..runs.sweep import results_table

    lines = ["The paper reports that Review residuals, a gate that sees both the residual state and a sublayer's "
             "proposed update, bring no gain at its smaller sizes and a significant gain at its two largest. "
             "This report explains the mechanism, tests the depth argument for its additive form, reruns the "
             "comparison, and re-reads the paper's own runs with a paired test, Holm's correction, intervals, "
             "and the training budget each size got."]
    if paper_csv.exists():
        table = stats.compare(stats.load_results(paper_csv), "val_loss", n_boot=0)
        welch = sorted(set(table.loc[table["welch_p"] < 0.05, "size"]), key=list(table["size"]).index)
        paired = sorted(set(table.loc[table["significant"], "size"]), key=list(table["size"]).index)
        lines.append(f"Of the paper's {len(table)} (size, baseline) comparisons, its Welch test reaches p < 0.05 at "
                     f"{', '.join(welch) or 'no size'}; the paired test with Holm's correction finds Review "
                     f"significantly better at {', '.join(paired) or 'no size'}.")
    everything = results_table(runs)
    if "status" in everything:
        everything = everything[everything["status"] == "finished"]
    lines += depth_finding(everything)
    studied = [s for s in sizes if s not in QUICK_SIZES] or sizes  # the smoke-test size is no evidence
    ours = everything[everything["size"].isin(studied) & everything["variant"].isin(["review", "highway", "standard"])]
    if "review" in set(ours["variant"]) and ours["variant"].nunique() > 1:
        verdicts = stats.verdicts(stats.compare(ours, "fixed_loss", n_boot=0))
        lines.append(f"Our {len(ours)} runs at {', '.join(studied)}, on the fixed held-out set: "
                     + " ".join(f"At {r.size}, {r.verdict}." for r in verdicts.itertuples()))
    return lines


def depth_finding(results) -> list[str]:
    """One sentence on the depth ablation: from which depth each convex form trails its additive twin."""
    depth = results[results["size"].str.startswith("depth")]
    if depth.empty:
        return []
    mean = depth.groupby(["n_layers", "variant"])["fixed_loss"].mean().unstack()
    parts = []
    for convex, additive in (("review_convex", "review"), ("highway_convex", "highway")):
        if {convex, additive} <= set(mean.columns):
            behind = mean.index[(mean[convex] - mean[additive]) > 0.1]  # 0.1 nats: far beyond seed spread here
            parts.append(f"{convex} trails {additive} by more than 0.1 in loss from {behind.min()} blocks on "
                         f"(at {mean.index.max()} blocks: {mean.loc[mean.index.max(), convex]:.3f} against "
                         f"{mean.loc[mean.index.max(), additive]:.3f})" if len(behind) else
                         f"{convex} stays within 0.1 of {additive} at every depth up to {mean.index.max()} blocks")
    return [f"Depth ablation ({len(depth)} runs): " + "; ".join(parts) + "."] if parts else []


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
    for nb in NOTEBOOKS:
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


def _smoke_test_prefixes() -> tuple[str, ...]:
    """The stems that start a smoke-test size's page and figures (03_sweep_tiny, 03_tiny_loss_curves)."""
    return tuple(prefix for nb in NOTEBOOKS if nb.per_size for q in QUICK_SIZES
                 for prefix in (f"{nb.name}_{q}", f"{nb.name.split('_')[0]}_{q}_"))


def write_index(out: Path, paragraphs: list[str]) -> Path:
    """``index.html``: abstract, the sections (reader's and full versions), the figures. No scripts.

    The smoke-test size's page and figures are made by every build and not committed (.gitignore), so the index
    names that page without linking it and shows none of its figures: the committed index is then the same
    whether or not a build made them, and a fresh clone's has no broken link or image.
    """
    skipped = _smoke_test_prefixes()
    sections = [f'<li><a href="{stem}.reader.html">{html.escape(title)}</a>: {html.escape(nb.blurb)} '
                f'<span class="alt">(<a href="{stem}.html">with code</a>)</span></li>'
                for nb, stem, title in rendered_pages(out) if not stem.startswith(skipped)]
    smoke = ", ".join(f"<code>{nb.name}_{q}.reader.html</code>" for nb in NOTEBOOKS if nb.per_size
                      for q in QUICK_SIZES)
    figures = [f for f in sorted((out / "figures").glob("*.png")) if not f.stem.startswith(skipped)]
    gallery = "\n".join(f'<a href="figures/{f.name}"><figure><img src="figures/{f.name}" alt="{f.stem}">'
                        f"<figcaption>{f.stem}</figcaption></figure></a>" for f in figures)
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
li {{ margin: 0.4rem 0; }} .alt {{ color: #666; font-size: 0.9em; }}
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
<ol>
{chr(10).join(sections)}
</ol>
<p class="alt">Each section links its reader's version; "with code" is the executed notebook. The smoke-test
size's page ({smoke}) is made by every build beside this one and not kept in the repository.</p>
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
