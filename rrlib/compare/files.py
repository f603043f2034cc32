"""A comparison's files: ``verdict.csv`` (one row per pair), ``verdict.json`` (the rows, the design and what they
rest on), ``verdict.html`` (the table, one figure of per-seed losses, the command that reproduces it) and the
figure's PNG; and the short table the command prints.

A verdict is whole or absent: the four files are made in memory first, written under temporary names beside
their places, and only then renamed over them one after another, so a failure before the renames leaves the
folder as it was (never a new CSV beside an old page). ``verdict.json`` is strict JSON: a number that is not finite
is ``null``."""
from __future__ import annotations

import base64
import html
import json
import math
import os
from pathlib import Path

import pandas as pd

from ..stats.verdict import sentence
from ..runs.folders.output_paths import FILE, checked_output
from ..runs.provenance import git_commit
from ..version import __version__

FILES = ("verdict.csv", "verdict.json", "verdict.html", "verdict_losses.png")
COLUMNS = ["variant", "baseline", "metric", "seeds", "gap", "ci_low", "ci_high", "p", "p_holm", "detectable",
           "margin", "p_equivalent", "p_equivalent_holm", "verdict", "params_variant", "params_baseline",
           "flops_per_token_variant", "flops_per_token_baseline", "step_per_flop_vs_standard_variant",
           "step_per_flop_vs_standard_baseline", "mean_variant", "mean_baseline", "sd", "seed_list", "diverged_variant",
           "diverged_baseline", "seeds_asked"]
STYLE = """body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.5; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; } th, td { padding: 0.25rem 0.6rem; text-align: right; }
th { border-bottom: 1px solid #999; } td { white-space: nowrap; } td:first-child, th:first-child, td:nth-child(2), th:nth-child(2) { text-align: left; }
tr:nth-child(even) { background: #f6f6f6; } img { max-width: 100%; } pre { white-space: pre-wrap; }
.sub { color: #666; } a { color: #1f5fa8; }"""


def check_out(folder: Path) -> None:
    """The verdict folder and each file compare writes in it, through the one check every output path passes
    (rrlib.runs.folders.output_paths), before anything is trained."""
    checked_output(folder, "--out")
    for name in FILES:
        checked_output(folder / name, "--out", kind=FILE)


def printed(rows: pd.DataFrame) -> str:
    """The short table the command prints: one line per pair, its numbers the page's (``shown_table``)."""
    lines = [f"{'variant':<18} {'baseline':<18} {'seeds':>5} {'gap [95% CI]':>28} {'Holm p':>8} "
             f"{'detects':>8}  verdict"]
    for r in shown_table(rows).to_dict("records"):
        lines.append(f"{r['variant']:<18} {r['baseline']:<18} {r['seeds']:>5} {r['gap (nats) [95 % CI]']:>28} "
                     f"{r['Holm p']:>8} {r['detectable']:>8}  {r['verdict']}")
    return "\n".join(lines)


def losses_figure(table: pd.DataFrame, rules: list[str], seeds, metric: str, size: str) -> bytes:
    """Each seed's loss per rule, a seed's runs joined by a line (the pairing the test uses)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..views.plots import color, figure_png, use_style

    use_style()
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(rules), 4))
    wide = table[table["seed"].isin(seeds)].pivot(index="seed", columns="variant", values=metric)[rules]
    for _, losses in wide.iterrows():
        ax.plot(range(len(rules)), losses.to_numpy(), color="#bbbbbb", lw=0.8, zorder=1)
    for k, rule in enumerate(rules):
        ax.scatter([k] * len(wide), wide[rule], color=color(rule), zorder=2, s=22)
    ax.set_xticks(range(len(rules)), rules, rotation=20)
    ax.set_ylabel(f"{metric} (nats)")
    ax.set_title(f"{size}: {metric} per seed ({len(wide)} seeds; lines join one seed's runs)")
    return figure_png(fig)


def strict(value):
    """``value`` with every float that is not finite as None, so that json.dumps(allow_nan=False) holds."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def write(folder: Path, request, rows: pd.DataFrame, table: pd.DataFrame, design: dict, provenance: dict,
          command: str) -> list[Path]:
    """Write the four files into ``folder`` (made if missing), together (the module docstring); their paths."""
    out = rows[COLUMNS]
    summary = strict({
        "question": f"is each of {', '.join(request.variants)} better than {', '.join(request.baselines)} at size "
                    f"{request.size}?",
        "size": request.size, "metric": request.metric, "alpha": request.alpha, "margin": request.margin,
        "test": "paired t over seeds (a seed fixes batches and evaluation windows for every rule); gap = baseline "
                "- variant, > 0 when the variant's loss is lower",
        "correction": f"Holm over the {len(out)} comparisons of this call (the TOST p-values likewise)",
        "design": design, "overrides": request.overrides, "command": command, "git_commit": git_commit(),
        "rrlib_version": __version__, "rows": json.loads(out.to_json(orient="records")), **provenance,
    })
    png = losses_figure(table, request.rules, design["seeds"], request.metric, request.size)
    contents = {"verdict.csv": out.to_csv(index=False).encode(),
                "verdict.json": (json.dumps(summary, indent=2, sort_keys=True, allow_nan=False) + "\n").encode(),
                "verdict_losses.png": png,
                "verdict.html": page(summary, out, png).encode()}
    folder.mkdir(parents=True, exist_ok=True)
    temporary = {name: folder / f".{name}.{os.getpid()}.tmp" for name in contents}
    try:
        for name, data in contents.items():
            temporary[name].unlink(missing_ok=True)  # left by a killed call, or a link: created afresh ("x")
            with open(temporary[name], "xb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        for name in contents:
            os.replace(temporary[name], folder / name)
    finally:
        for tmp in temporary.values():
            tmp.unlink(missing_ok=True)
    return [folder / name for name in FILES]


def shown_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The page's table: one row per pair, its numbers formatted (n/a where a test did not run); each side's
    parameters and step time per FLOP, variant / baseline."""
    fmt = lambda x, f: "n/a" if pd.isna(x) else format(x, f)
    both = lambda column, f: [f"{fmt(a, f)} / {fmt(b, f)}" for a, b in zip(rows[f"{column}_variant"],
                                                                           rows[f"{column}_baseline"])]
    return pd.DataFrame({
        "variant": rows["variant"], "baseline": rows["baseline"], "seeds": rows["seeds"],
        "gap (nats) [95 % CI]": [f"{fmt(g, '+.4f')} [{fmt(lo, '+.4f')}, {fmt(hi, '+.4f')}]"
                                 for g, lo, hi in zip(rows["gap"], rows["ci_low"], rows["ci_high"])],
        "Holm p": [fmt(x, ".3g") for x in rows["p_holm"]], "detectable": [fmt(x, ".4f") for x in rows["detectable"]],
        "TOST Holm p": [fmt(x, ".3g") for x in rows["p_equivalent_holm"]],
        "verdict": [shown_word(r) for r in rows.to_dict("records")],
        "params (variant / baseline)": both("params", ","),
        "step/FLOP vs standard (variant / baseline)": both("step_per_flop_vs_standard", ".3f"),
    })


def shown_word(row: dict) -> str:
    """The verdict's word; for a diverged pair, which rule diverged on how many of the seeds."""
    if row["verdict"] != "diverged":
        return row["verdict"]
    counts = [f"{row[side]} on {row[f'diverged_{side}']} of {row['seeds_asked']}" for side in ("variant", "baseline")
              if row[f"diverged_{side}"]]
    return f"diverged ({', '.join(counts)} seeds)"


def page(summary: dict, rows: pd.DataFrame, png: bytes) -> str:
    """verdict.html: the verdicts in words, the table, the figure, how strong the design was, the command."""
    table = shown_table(rows).to_html(index=False, border=0, escape=True)
    words = "\n".join(f"<li>{html.escape(sentence(r))}</li>" for r in rows.to_dict("records"))
    design = summary["design"]
    sized = (f"Seeds sized for a detectable gap of {design['target']:g} nats (80 % power at Holm's α "
             f"{design['alpha_sized']:.3g}, from the upper 80 % bound of the pilot's SD) from a pilot of "
             f"{design['pilot_seeds']}: {design['stopped']} at {len(design['seeds'])} seeds"
             + (f", with {design['power_reached']:.0%} power for the target at the SD met." if
                design.get("power_reached") is not None else ".")
             if design.get("sized") else f"{len(design['seeds'])} seeds, as asked.")
    figure = base64.b64encode(png).decode()
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(summary['question'])}</title>
<style>
{STYLE}
</style>
</head>
<body>
<h1>Verdict at size {html.escape(summary['size'])}</h1>
<p class="sub">{html.escape(summary['question'])}</p>
<ul>
{words}
</ul>
{table}
<p><img src="data:image/png;base64,{figure}" style="width: 38rem" alt="{html.escape(summary['metric'])} per seed and rule"></p>
<h2>How strong it is</h2>
<p>Test: {html.escape(summary['test'])}. Correction: {html.escape(summary['correction'])}. "equivalent" needs the
TOST p below {summary['alpha']:g} at a margin of ±{summary['margin']:g} nats; "inconclusive" means the design could
not tell, and <em>detectable</em> is the smallest true gap it would have found with 80 % power. {html.escape(sized)}
<em>step_per_flop_vs_standard</em> is the rule's training-step time over its FLOPs per token, divided by the
standard residual's, measured in one process in interleaved rounds.</p>
<h2>Reproduce</h2>
<pre>{html.escape(summary['command'])}</pre>
<p class="sub">rrlib {html.escape(summary['rrlib_version'])} at commit {html.escape(summary['git_commit'])};
{len(summary['runs'])} runs, {summary['training_minutes']:.1f} training minutes in all.</p>
</body>
</html>
"""
