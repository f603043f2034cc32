"""The paper's sweep (its 42 runs) in device-hours at the benchmark's measured speed: a measured (size, variant)
costs its runs' tokens ÷ tokens/s, another its training FLOPs ÷ (MFU × peak), with the MFU measured for that
variant at the nearest measured size.

    python -m rrlib.speed.pricing OUTDIR [--paper-csv CSV]

prices the sweep once from every benchmark file in OUTDIR (``scripts/gpu_bench.sh`` measures each size in its
own process), one price per (precision, compiled or eager) measured, into OUTDIR/sweep.json and sweep.md. The
paper trained eager in TF32: that price is the paper's configuration; a bf16 one is what a bf16 sweep would cost.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch

from ..model import GPT
from ..runs.folders.disk import write_bytes_atomic, write_json_atomic
from ..home import PROJECT_ROOT, REFERENCE_CSV
from ..runs.config import ConfigError
from ..runs.presets import resolve_run


# The paper's names for what rrlib calls presets and variants.
PAPER_SIZES = {"60M": "60m", "150M": "150m", "320M": "320m", "590M": "590m", "1B": "1b"}


SIZE_ORDER = list(PAPER_SIZES.values())


PAPER_VARIANTS = {"review_neutral": "review"}


# a copy of the paper's run table committed with the code (outputs/reference/README.md says where it is from), so
# that a working tree copied to a GPU host without its surroundings can still price the sweep
PAPER_CSV = REFERENCE_CSV


PAPER_COLUMNS = ("size", "variant", "steps", "minutes")  # what pricing reads of the paper's table


def read_paper_csv(csv_path: Path):
    """The paper's run table, every row checked; a file or row that is not one is one sentence naming it."""
    import math

    import pandas as pd

    from ..rules import RULES

    try:
        # blank lines kept as empty rows, then dropped with their index, which names each row's line (row_lines);
        # index_col=False: rows with one field more than the header are not read with their first column as index
        table = pd.read_csv(csv_path, skip_blank_lines=False, index_col=False)
        lines = row_lines(csv_path, len(table))
        table = table.dropna(how="all")
    except FileNotFoundError:
        raise ConfigError(f"--paper-csv {csv_path} does not exist; give the paper's run table (columns "
                          f"{', '.join(PAPER_COLUMNS)}), e.g. {PAPER_CSV.relative_to(PROJECT_ROOT)}") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:120]
        raise ConfigError(f"--paper-csv {csv_path} is not a readable CSV table ({reason}); give the paper's run "
                          f"table (columns {', '.join(PAPER_COLUMNS)})") from None
    missing = [c for c in PAPER_COLUMNS if c not in table.columns]
    if missing:
        raise ConfigError(f"--paper-csv {csv_path} has no column {', '.join(missing)}; the paper's run table has "
                          f"{', '.join(PAPER_COLUMNS)}")
    # read as numbers column by column: one word in a column makes pandas read the whole column as text, and the
    # first row would be named for the word of a later one
    numbers = {name: pd.to_numeric(table[name], errors="coerce") for name in ("steps", "minutes")}
    for row in table.itertuples():
        where = f"{csv_path} line {lines[row.Index]}"
        if row.size not in PAPER_SIZES:
            raise ConfigError(f"{where}: size {row.size!r} is not one of the paper's sizes ({', '.join(PAPER_SIZES)})")
        if PAPER_VARIANTS.get(row.variant, row.variant) not in RULES:
            raise ConfigError(f"{where}: unknown variant {row.variant!r}; valid: "
                              f"{', '.join(sorted({*RULES, *PAPER_VARIANTS}))}")
        for name in ("steps", "minutes"):
            value = float(numbers[name][row.Index])
            if not (math.isfinite(value) and value > 0) or (name == "steps" and value != int(value)):
                kind = "a positive whole number" if name == "steps" else "a positive number"
                shown = f"{value:g}" if math.isfinite(value) else repr(getattr(row, name))
                raise ConfigError(f"{where}: {name} must be {kind}, got {shown}")
    return table.assign(**numbers).reset_index(drop=True)


def row_lines(csv_path: Path, rows: int) -> list[int]:
    """The line of the file each row of the table starts on: a quoted field may hold line breaks, so a row's line
    is counted, not its index + 2; where the count does not come out as pandas' rows, index + 2."""
    import csv

    starts = []
    try:
        with open(csv_path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            next(reader, None)  # the header
            line = reader.line_num
            for _ in reader:
                starts.append(line + 1)
                line = reader.line_num
    except (csv.Error, UnicodeDecodeError):  # what pandas read, the csv module may not: count as pandas does
        starts = []
    return starts if len(starts) == rows else [k + 2 for k in range(rows)]


@functools.cache
def paper_runs(csv_path: Path) -> list[dict]:
    """The paper's runs as rrlib names, each with its tokens (steps × the preset's batch × context)."""
    cells = {}  # (size, variant) → (tokens per step, FLOPs per token): resolved once per cell
    runs = []
    for row in read_paper_csv(csv_path).itertuples():
        key = PAPER_SIZES[row.size], PAPER_VARIANTS.get(row.variant, row.variant)
        if key not in cells:
            run = resolve_run(*key, 0)
            with torch.device("meta"):  # counted from the model's structure, without memory or init
                cells[key] = run.train.batch_size * run.model.seq_len, GPT(run.model).flops_per_token()
        tokens_per_step, flops_per_token = cells[key]
        runs.append({"size": key[0], "size_rank": SIZE_ORDER.index(key[0]), "variant": key[1],
                     "tokens": row.steps * tokens_per_step, "flops_per_token": flops_per_token,
                     "minutes": row.minutes})
    return runs


def sweep_hours(runs: list[dict], measured: dict, peak_flops: float | None) -> dict:
    """Device-hours of ``runs`` at the measured speed.

    measured maps (size, variant) to {"size_rank", "tokens_per_s", "mfu"}. A run whose (size, variant) was
    measured costs tokens ÷ tokens/s. Another costs tokens × flops_per_token ÷ (MFU × peak), with the MFU of the
    same variant at the measured size nearest in rank (the larger on a tie); without one it stays unpriced.
    """
    measured_h = estimated_h = 0.0
    unpriced = []
    for run in runs:
        m = measured.get((run["size"], run["variant"]))
        near = sorted((abs(o["size_rank"] - run["size_rank"]), -o["size_rank"], o["mfu"])
                      for (_, variant), o in measured.items() if variant == run["variant"] and o["mfu"] is not None)
        if m is not None:
            measured_h += run["tokens"] / m["tokens_per_s"] / 3600
        elif near and peak_flops is not None:
            estimated_h += run["tokens"] * run["flops_per_token"] / (near[0][2] * peak_flops) / 3600
        else:
            unpriced.append(f"{run['size']}/{run['variant']}")
    return {"runs": len(runs), "measured_hours": measured_h, "flop_estimated_hours": estimated_h,
            "total_hours": None if unpriced else measured_h + estimated_h, "unpriced_runs": unpriced,
            "paper_reported_hours": sum(r["minutes"] for r in runs) / 60}


def price_sweep(csv_path: Path, rows: list[dict], peak_flops) -> dict | None:
    """The paper's sweep priced from the benchmark's rows, or None when no paper size was measured."""
    measured = {(r["size"], r["variant"]): {"size_rank": SIZE_ORDER.index(r["size"]),
                                            "tokens_per_s": r["tokens_per_s"], "mfu": r["mfu"]}
                for r in rows if r["size"] in SIZE_ORDER}
    return sweep_hours(paper_runs(csv_path), measured, peak_flops) if measured else None


def merged_sweep(bench_files: list[Path], csv_path: Path) -> dict:
    """The sweep priced once per (precision, compile) from the rows of all ``bench_files`` together.

    Each file is one process of the benchmark; a size measured in two files of one (precision, compile) keeps
    the later file's rows. The peak a price extrapolates with is the one its files' MFU divided by.
    """
    groups: dict[tuple, dict] = {}
    for path in sorted(bench_files, key=lambda p: p.stat().st_mtime):
        result = json.loads(path.read_text())
        for row in result.get("results", []):
            if row["size"] not in SIZE_ORDER or row.get("rule_options") or row.get("head") == "plain":
                continue
            key = row["precision"], bool(row["compile"])
            group = groups.setdefault(key, {"rows": {}, "files": [], "peak_flops": result.get("peak_flops")})
            group["rows"][row["size"], row["variant"]] = row
            if path.name not in group["files"]:
                group["files"].append(path.name)
    prices = []
    for (precision, compiled), group in sorted(groups.items()):
        price = price_sweep(csv_path, list(group["rows"].values()), group["peak_flops"])
        sizes = sorted({size for size, _ in group["rows"]}, key=SIZE_ORDER.index)
        paper = precision == "tf32" and not compiled
        prices.append({"label": f"{precision}, {'compiled' if compiled else 'eager'}"
                                + (" (the paper's configuration)" if paper else ""),
                       "precision": precision, "compile": compiled, "paper_configuration": paper,
                       "measured_sizes": sizes, "files": group["files"], "peak_flops": group["peak_flops"], **price})
    return {"paper_csv": csv_path.name, "prices": prices}


def render_sweep(sweep: dict) -> str:
    lines = [f"The paper's sweep priced from every benchmark file together ({sweep['paper_csv']}):", "",
             "| measured as | sizes measured | measured runs (h) | FLOP-estimated runs (h) | total (h) | "
             "paper reported (h) | not priced |", "|---|---|---|---|---|---|---|"]
    for p in sweep["prices"]:
        total = "–" if p["total_hours"] is None else f"{p['total_hours']:.1f}"
        lines.append(f"| {p['label']} | {', '.join(p['measured_sizes'])} | {p['measured_hours']:.1f} | "
                     f"{p['flop_estimated_hours']:.1f} | {total} | {p['paper_reported_hours']:.1f} | "
                     f"{', '.join(sorted(set(p['unpriced_runs']))) or '–'} |")
    if not sweep["prices"]:
        lines.append("| no paper size measured | | | | | | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m rrlib.speed.pricing", description=__doc__.splitlines()[0])
    p.add_argument("outdir", help="a folder of benchmark JSON files (scripts/gpu_bench.sh's OUTDIR)")
    p.add_argument("--paper-csv", default=str(PAPER_CSV), help="the paper's runs (default: the committed copy)")
    args = p.parse_args(argv)
    outdir, csv = Path(args.outdir), Path(args.paper_csv)
    if not csv.is_file():
        print(f"no paper CSV at {csv}; pass --paper-csv", file=sys.stderr)
        return 2
    files = [f for f in outdir.glob("*.json") if f.name != "sweep.json"]
    sweep = merged_sweep(files, csv)
    write_json_atomic(outdir / "sweep.json", sweep)
    report = render_sweep(sweep)
    write_bytes_atomic(outdir / "sweep.md", (report + "\n").encode())
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
