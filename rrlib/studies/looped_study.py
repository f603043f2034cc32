"""The looped learning-rate transfer study: its grid, and the estimator it is judged by, fixed before its runs.

The claim under test (arXiv 2606.18524): with each sublayer's update scaled by ε = λ/(N·√(L/12)), the best
learning rate of a looped model (L unique blocks applied N times) depends on L only, not on N. The study trains
`scaled` (that 1/N rule), `scaled_loops` (the 1/√N rule it is compared with) and `review` at N ∈ {1, 2, 4, 8}.

The grid. Learning rates lie on one lattice, 0.001·2^(k/2) (neighbours √2 apart). Each (rule, N) cell gets
seven consecutive lattice points (8× in all) centred on where the first study of this question (a 2× grid, three
seeds) put that cell's optimum, and five seeds. A cell is extended by two lattice points beyond an edge when at
least two seeds, or the seed mean, have their lowest loss on that edge point (`extension`); ``rrlib study run``
applies that rule until no cell asks for more, at the same commit, before anything is analysed.

The estimator, stated before the runs (the primary metric is the fixed held-out loss, `fixed_loss`):

1. Per seed and cell, the optimum is the grid point of lowest loss (`grid_lr`) and, primary, the vertex of the
   parabola in log2(lr) through that point and its two neighbours (`parabola_lr`). With its lowest point in the
   middle the parabola is convex and its vertex lies between the neighbours. A minimum on the grid's edge is not
   bracketed: that seed has no parabola optimum in that cell (and the grid is extended, above).
2. Per seed and rule, the least-squares slope of log2(optimum) on log2(N) over the four loop counts: 0 means the
   rate transfers, −1 that it halves each time N doubles.
3. Over seeds, the mean slope with its t-interval (n − 1 degrees of freedom). The rule *moves with N* if the
   95 % interval excludes 0; it *transfers* if a two-one-sided test (TOST, α = 0.05) puts the slope within
   ±1/6 per doubling, i.e. the optimum at N = 8 within a factor √2 (one grid step) of the one at N = 1;
   otherwise the test is *undecided*. No bootstrap: with five seeds it has 126 distinct resamples and its
   percentiles sit on single resamples (see `rrlib.stats.bootstrap_allowed`).
4. Stalled runs (final loss within 0.05 nats of the training tokens' unigram entropy: they learned byte
   frequencies only) are counted per cell. The verdict is computed with them and, beside it, with them
   excluded (a stalled run's learning rate is then missing for that seed).
5. Trainability (the same paper: 1/N trains better than 1/√N): per N, each rule's loss at its per-seed grid
   optimum, `scaled` against `scaled_loops` paired over seeds, Holm-corrected over the loop counts where the two
   rules differ (at N = 1 they are the same model).

The powered design (``POWER``, ``rrlib study run looped_power``, under outputs/looped_power). At 200 steps about
half of the N = 8 runs are still on the unigram plateau at step 100, so the first study's optimum marks when a run escapes
it as much as where the long-run optimum lies. The powered study trains 5× longer (1,000 steps, warmup 10 %,
about 1 pass over the sample at N = 1's 2.0 M tokens), only the two rules the contrast needs (`scaled`,
`scaled_loops`), five lattice points per cell centred on the first study's optimum of both (0.002 at every N;
k = 0 … 4, 0.001 to 0.004), with the same extension rule, seed-major, its pilot the first four seeds. Its
question is the contrast: per seed, the slope under 1/N minus the slope under 1/√N (the paper: 1/√N's optimum
falls with N, 1/N's stays), and, per N, the loss of 1/N against 1/√N at each seed's optimum.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..stats import holm, paired_comparison, verdict_word
from ..stats.verdict import seeds_needed

RULES = ("scaled", "scaled_loops", "review")
LOOPS = (1, 2, 4, 8)
SEEDS = (0, 1, 2, 3, 4)
OUT_ROOT = "outputs/looped_grid"  # one run-folder root per learning rate: OUT_ROOT/lr<lr>/looped<N>/<rule>/seed<k>
BASE_LR = 0.001  # lattice origin: lr = BASE_LR · 2^(k/2)
STALL_NATS = 0.05  # a run within this of the unigram entropy stalled
TRANSFER_MARGIN = 0.5 / math.log2(LOOPS[-1] / LOOPS[0])  # ±1/6 per doubling: √2 over N = 1 → 8

# Lattice index k of each cell's first grid point; the cell spans k … k + 6. From the first study's optima:
# scaled and scaled_loops near 0.002 at every N; review at 0.01, 0.017, 0.0075 and 0.0025 for N = 1, 2, 4, 8.
FIRST_K = {("scaled", n): -1 for n in LOOPS} | {("scaled_loops", n): -1 for n in LOOPS} | {
    ("review", 1): 4, ("review", 2): 5, ("review", 4): 3, ("review", 8): 0}
POINTS = 7


@dataclass(frozen=True)
class Design:
    """One grid of the study: its rules, each cell's first lattice index and width, seeds, runs root and steps
    (None: the preset's 200); ``extra`` settings go to every sweep."""
    name: str
    rules: tuple
    first_k: dict
    points: int
    seeds: tuple
    out_root: str
    steps: int | None = None
    extra: tuple = field(default_factory=tuple)
    # what the design sweeps: the counts, the preset whose sizes are <prefix><count>, and the model setting they
    # set (the loop count N by default; the L sweep sweeps the unique blocks at a fixed N). The tables call the
    # swept count "loops" whichever it is.
    counts: tuple = LOOPS
    size_prefix: str = "looped"
    count_setting: str = "n_loops"
    records: tuple = ()  # the claims its runs answer, by their ids in rrlib/claims/records.yaml, where a row reads it


GRID = Design("grid", RULES, FIRST_K, POINTS, SEEDS, OUT_ROOT)
POWER = Design("power", ("scaled", "scaled_loops"), {(r, n): 0 for r in ("scaled", "scaled_loops") for n in LOOPS},
               5, tuple(range(8)), "outputs/looped_power", steps=1000,
               extra=("--set", "train.warmup_steps=100", "--set", "train.eval_every=250"))
# The L sweep (rrlib.studies.looped_reach_study states its claim and sizes its 7 seeds): scaled at N = 2 over L = 1, 2, 4
# unique blocks, the powered design's recipe, five lattice rates per cell from k = 5 (0.0057 to 0.023).
UNIQUE_LAYERS = Design("unique_layers", ("scaled",), {("scaled", n): 5 for n in (1, 2, 4)}, 5, tuple(range(7)),
                       "outputs/looped_unique", steps=POWER.steps, extra=POWER.extra, counts=(1, 2, 4),
                       size_prefix="looped_l", count_setting="n_layers", records=("looped-depends-on-l",))
POWER_PILOT_SEEDS = (0, 1, 2, 3)
CONTRAST_TARGET = 0.25  # per doubling of N: the contrast the powered design is sized to detect (page 05 says why)
DESIGNS = {d.name: d for d in (GRID, POWER, UNIQUE_LAYERS)}
RUN_COLUMNS = ["variant", "loops", "lr", "seed", "fixed_loss"]  # study_runs' frame when no run has finished
OPTIMA_COLUMNS = ["variant", "loops", "seed", "points", "grid_lr", "parabola_lr", "best_loss", "at_edge"]
SLOPE_COLUMNS = ["variant", "seed", "grid", "parabola"]
VERDICT_COLUMNS = ["variant", "estimator", "seeds", "slope", "ci_low", "ci_high", "p", "p_equivalent", "fold_change",
                   "mde", "verdict"]


def lattice_lr(k: int) -> float:
    """The k-th learning rate of the lattice, rounded to six significant digits (the folder name is its %g)."""
    return float(f"{BASE_LR * 2 ** (k / 2):.6g}")


def lattice_index(lr: float) -> int:
    return round(2 * math.log2(lr / BASE_LR))


def base_grid(design: Design = GRID) -> dict[tuple[str, int], list[float]]:
    """(rule, N) -> its learning rates before any extension (seven in the first study's grid)."""
    return {cell: [lattice_lr(k) for k in range(k0, k0 + design.points)] for cell, k0 in design.first_k.items()}


def seed_optima(runs: pd.DataFrame, metric: str = "fixed_loss", exclude_stalled: bool = False) -> pd.DataFrame:
    """Per (variant, loops, seed): the grid optimum, the parabola optimum (step 1 above) and the loss there.

    ``runs`` has one row per run: variant, loops, lr, seed, ``metric`` and, for ``exclude_stalled``, a boolean
    ``stalled``. A diverged run (NaN loss) is missing, as is a stalled one when excluded.
    """
    rows = []
    if runs.empty:
        return pd.DataFrame(columns=OPTIMA_COLUMNS)
    for (variant, loops, seed), cell in runs.groupby(["variant", "loops", "seed"], sort=True):
        if exclude_stalled:
            cell = cell[~cell["stalled"].astype(bool)]
        cell = cell.dropna(subset=[metric]).sort_values("lr")
        lrs, y = cell["lr"].to_numpy(dtype=float), cell[metric].to_numpy(dtype=float)
        x = np.log2(lrs)
        row = {"variant": variant, "loops": loops, "seed": seed, "points": len(y), "grid_lr": np.nan,
               "parabola_lr": np.nan, "best_loss": np.nan, "at_edge": None}
        if len(y):
            i = int(np.argmin(y))
            row.update(grid_lr=float(lrs[i]), best_loss=float(y[i]),
                       at_edge="low" if i == 0 else "high" if i == len(y) - 1 else None)
            if row["at_edge"] is None:
                row["parabola_lr"] = float(2 ** parabola_vertex(x[i - 1:i + 2], y[i - 1:i + 2]))
        rows.append(row)
    return pd.DataFrame(rows, columns=OPTIMA_COLUMNS)


def parabola_vertex(x: np.ndarray, y: np.ndarray) -> float:
    """Vertex of the parabola through three points whose middle one is lowest (so it lies between the outer two).

    Equal losses on both sides of the middle give the middle; a flat triple (all equal) has no curvature and
    reads as the middle too.
    """
    a, b, _ = np.polyfit(x, y, 2)
    return float(x[1]) if a <= 0 else float(np.clip(-b / (2 * a), x[0], x[2]))


def seed_slopes(optima: pd.DataFrame) -> pd.DataFrame:
    """Per (variant, seed): the slope of log2(optimum) on log2(N), for the grid and the parabola optima.

    A seed whose optimum is missing at some N (edge, or every run missing) has no slope for that estimator.
    """
    rows = []
    if optima.empty:
        return pd.DataFrame(columns=SLOPE_COLUMNS)
    for (variant, seed), part in optima.groupby(["variant", "seed"], sort=False):
        x = np.log2(part["loops"].to_numpy(dtype=float))
        row = {"variant": variant, "seed": seed}
        for estimator in ("grid", "parabola"):
            y = np.log2(part[f"{estimator}_lr"].to_numpy(dtype=float))
            row[estimator] = float(np.polyfit(x, y, 1)[0]) if np.isfinite(y).all() and len(set(x)) > 1 else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=SLOPE_COLUMNS)


def transfer_verdicts(slopes: pd.DataFrame, alpha: float = 0.05, margin: float = TRANSFER_MARGIN,
                      span: float = math.log2(LOOPS[-1] / LOOPS[0])) -> pd.DataFrame:
    """Per variant and estimator: mean slope, its t-interval, p (slope 0), the TOST p (|slope| < margin), the
    detectable slope (``mde``: 80 % power, two-sided α, at the seeds' SD) and the verdict, the comparison's word
    (rrlib.stats.paired.verdict_word) said of a slope: "moves with N" for better or worse, "transfers" for
    equivalent, "undecided" for inconclusive.

    ``span`` is log2 of the N range, for ``fold_change``: the factor by which the optimum moves over it. ``mde`` at
    most ``margin`` is about the TOST's own 80 % power at a true slope of 0 (at 8 seeds that power needs a margin of
    about 3.3 standard errors, and ``mde`` is 3.3 of them), so it says whether the design could show "transfers".
    """
    rows = []
    for variant, part in slopes.groupby("variant", sort=False):
        for estimator in ("parabola", "grid"):
            s = part[estimator].dropna().to_numpy(dtype=float)
            row = {"variant": variant, "estimator": estimator, "seeds": len(s), "slope": np.nan, "ci_low": np.nan,
                   "ci_high": np.nan, "p": np.nan, "p_equivalent": np.nan, "fold_change": np.nan, "mde": np.nan,
                   "verdict": "too few seeds"}
            if len(s) >= 2:
                test = paired_comparison(s, alpha, margin)
                low, high, p, p_eq = test.ci_low, test.ci_high, test.p, test.p_equivalent
                if not test.tested:  # every seed gave the same slope: no spread, and no other slope fits it
                    low = high = test.gap
                    p, p_eq = (1.0 if test.gap == 0 else 0.0), (0.0 if abs(test.gap) < margin else 1.0)
                word = verdict_word(test.gap, p, p_eq, alpha)
                verdict = ("moves with N" if word in ("better", "worse") else
                           f"transfers (within ±{margin:.2g} per doubling)" if word == "equivalent" else "undecided")
                row.update(slope=test.gap, ci_low=low, ci_high=high, p=p, p_equivalent=p_eq,
                           fold_change=2 ** (test.gap * span), mde=test.detectable, verdict=verdict)
            rows.append(row)
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def trainability(optima: pd.DataFrame, reference: str = "scaled", baseline: str = "scaled_loops",
                 alpha: float = 0.05) -> pd.DataFrame:
    """Per N: baseline − reference of the loss at each seed's grid optimum (positive favours the reference),
    paired over seeds, with its t-interval, paired p and Holm's p over the N where the two rules differ."""
    rows = []
    for loops, part in optima.groupby("loops", sort=True):
        table = part.pivot(index="seed", columns="variant", values="best_loss")[[reference, baseline]].dropna()
        d = (table[baseline] - table[reference]).to_numpy(dtype=float)
        test = paired_comparison(d, alpha)
        row = {"loops": loops, "seeds": test.seeds, "gap": test.gap, "ci_low": test.ci_low, "ci_high": test.ci_high,
               "p": test.p, "note": ""}
        if not test.tested and len(d) >= 2 and np.any(d != 0):  # the same gap at every seed: no spread, shown
            row.update(ci_low=test.gap, ci_high=test.gap, p=0.0)
        elif not test.tested and len(d):
            row["note"] = "the same model at this N" if np.all(d == 0) else "too few seeds"
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.assign(p_holm=holm(out["p"]))  # an N with no test stays outside the family


def extension(optima: pd.DataFrame, grid: dict[tuple[str, int], list[float]],
              min_seeds: int = 2) -> dict[tuple[str, int], list[float]]:
    """The learning rates to add: two lattice points beyond each edge that holds the lowest loss of at least
    ``min_seeds`` seeds, or of the seed mean (computed by the caller into ``optima`` rows with seed "mean")."""
    add = {}
    for (variant, loops), lrs in grid.items():
        part = optima[(optima["variant"] == variant) & (optima["loops"] == loops)]
        ks = sorted(lattice_index(lr) for lr in lrs)
        new = []
        for edge, step, k_edge in (("low", -1, ks[0]), ("high", 1, ks[-1])):
            on_edge = part[part["at_edge"] == edge]
            if (on_edge["seed"] != "mean").sum() >= min_seeds or (on_edge["seed"] == "mean").any():
                new += [lattice_lr(k_edge + step), lattice_lr(k_edge + 2 * step)]
        if new:
            add[(variant, loops)] = sorted(new)
    return add


def study_runs(out_root: str = OUT_ROOT, count_setting: str = "n_loops") -> pd.DataFrame:
    """Every finished run of the study, with its learning rate and its swept count (``count_setting``, the loop
    count by default) as columns."""
    from ..runs.config import project_path
    from ..runs.sweep import results_table

    frames = []
    for folder in sorted(project_path(out_root).glob("lr*")):
        table = results_table(str(Path(out_root) / folder.name))
        if len(table):
            frames.append(table.assign(lr=float(folder.name[2:])))
    if not frames:
        return pd.DataFrame(columns=RUN_COLUMNS)
    runs = pd.concat(frames, ignore_index=True)
    return runs.assign(loops=runs[count_setting].astype(int))


def current_grid(runs: pd.DataFrame, design: Design = GRID) -> dict[tuple[str, int], list[float]]:
    """The base grid plus every lattice point a finished run of that cell already has (earlier extensions)."""
    grid = base_grid(design)
    for (variant, loops), part in runs.groupby(["variant", "loops"]):
        if (variant, loops) in grid:
            grid[(variant, loops)] = sorted(set(grid[(variant, loops)]) | set(part["lr"].astype(float)))
    return grid


def called_grid(runs: pd.DataFrame, design: Design = GRID) -> dict[tuple[str, int], list[float]]:
    """The grid the extension rule calls for from these runs, judged in rounds from the base grid: a round judges a
    cell on the seeds that have run every rate it holds so far, on those rates only (a seed part-way through a cell
    would show the last rate it reached as an edge), and adds two lattice points beyond an edge that holds the
    lowest loss of two seeds or of their mean (`extension`). The next round waits until every seed the last one
    judged has run what it added: judged on fewer, the seed mean is that of a subset, and a stop part-way through
    an extension would make the grid depend on when the study was stopped."""
    grid = base_grid(design)
    for cell in grid:
        part = runs[(runs["variant"] == cell[0]) & (runs["loops"] == cell[1])]
        judged: set = set()
        while True:
            on_grid = part[part["lr"].isin(grid[cell])]
            counts = on_grid.groupby("seed")["lr"].nunique()
            whole = set(counts.index[counts == len(grid[cell])])
            if not whole or not judged <= whole:
                break
            runs_of = on_grid[on_grid["seed"].isin(whole)]
            means = runs_of.groupby(["variant", "loops", "lr"], as_index=False)["fixed_loss"].mean().assign(seed="mean")
            optima = pd.concat([seed_optima(runs_of), seed_optima(means)], ignore_index=True)
            add = extension(optima, {cell: grid[cell]}).get(cell)
            if not add:
                break
            grid[cell] = sorted(set(grid[cell]) | set(add))
            judged = whole
    return grid


def design_grid(runs: pd.DataFrame, design: Design = GRID) -> dict[tuple[str, int], list[float]]:
    """The grid the design asks for now: what the extension rule calls for (`called_grid`) plus every lattice point
    a finished run of that cell already has (`current_grid`: an extension is never taken back). A study is done
    when this grid adds nothing the runs lack."""
    called, ran = called_grid(runs, design), current_grid(runs, design)
    return {cell: sorted(set(called[cell]) | set(ran[cell])) for cell in called}


def seeds_own_grid(runs: pd.DataFrame, seeds, design: Design = GRID
                   ) -> tuple[dict[tuple[str, int], list[float]], pd.DataFrame]:
    """The grid that ``seeds`` call for by themselves, and their runs on it: how the pilot stood when it fixed the
    design. An extension that later seeds call for adds rates to every seed's cell, the pilot's included, but the
    pilot's reading must not move with it (nor drop out while those rates run)."""
    own = runs[runs["seed"].isin(list(seeds))]
    grid = called_grid(own, design)
    # a Series, not a list: an empty list would select no columns rather than no rows
    on_grid = pd.Series([lr in grid.get((v, n), ()) for v, n, lr in zip(own["variant"], own["loops"], own["lr"])],
                        index=own.index, dtype=bool)
    return grid, own[on_grid].reset_index(drop=True)


def complete_seeds(runs: pd.DataFrame, grid: dict[tuple[str, int], list[float]], seeds) -> dict[str, list]:
    """Per rule of the grid: the seeds among ``seeds`` that have a finished run at every (N, rate) of its cells,
    the only ones that give a slope over N."""
    have = set(zip(runs["variant"], runs["loops"], runs["lr"], runs["seed"]))
    rules = sorted({rule for rule, _ in grid})
    return {rule: [seed for seed in seeds if all((rule, n, lr, seed) in have for (r, n), rates in grid.items()
                                                 if r == rule for lr in rates)] for rule in rules}


def grid_runs(grid: dict[tuple[str, int], list[float]], seeds) -> int:
    """How many runs the grid holds at these seeds."""
    return sum(len(rates) for rates in grid.values()) * len(list(seeds))


def slope_contrast(slopes: pd.DataFrame, estimator: str, reference: str = "scaled", baseline: str = "scaled_loops",
                   alpha: float = 0.05) -> dict:
    """The contrast of the powered design: per seed, ``reference``'s slope of log2(optimum) per doubling of N
    minus ``baseline``'s, on one estimator; over the seeds that have both, its mean, t-interval, paired p, the
    detectable contrast (80 % power), the paired SD and the seeds (a ``PairedComparison`` under the ledger tables'
    names, with ``sd`` added)."""
    wide = slopes.pivot(index="seed", columns="variant", values=estimator) if len(slopes) else pd.DataFrame()
    both = {reference, baseline} <= set(wide.columns)
    test = paired_comparison((wide[reference] - wide[baseline]).dropna() if both else [], alpha)
    return test.effect_row() | {"sd": test.sd}


def readings(runs: pd.DataFrame, metric: str = "fixed_loss", alpha: float = 0.05) -> dict[str, pd.DataFrame]:
    """The stated estimator on whole seeds' runs: per-seed ``optima``, the ``transfer`` verdicts with every run and
    (given a ``stalled`` column) with stalled runs left out, labelled in ``runs``, the ``trainability`` of 1/N
    against 1/√N per N and the slope ``contrast`` on each estimator (one row each)."""
    optima = seed_optima(runs, metric)
    labels = [("all runs", False)] + ([("stalled runs excluded", True)] if "stalled" in runs else [])
    transfer = pd.concat([transfer_verdicts(seed_slopes(seed_optima(runs, metric, exclude_stalled=exclude)),
                                            alpha).assign(runs=label) for label, exclude in labels],
                         ignore_index=True)
    slopes = seed_slopes(optima)
    contrast = pd.DataFrame([{"estimator": e, **slope_contrast(slopes, e, alpha=alpha)} for e in ("parabola", "grid")])
    both = {"scaled", "scaled_loops"} <= set(optima["variant"])
    return {"optima": optima, "transfer": transfer, "contrast": contrast,
            "trainability": trainability(optima, alpha=alpha) if both else pd.DataFrame()}


def pilot_design(contrast: pd.DataFrame, pilot_runs: pd.DataFrame, pilot_seeds: int, design: Design = POWER,
                 target: float = CONTRAST_TARGET, alpha: float = 0.05) -> pd.DataFrame:
    """The design the pilot fixes, one row per estimator of its ``contrast`` (``readings``): the paired SD it met,
    the seeds at which that SD detects ``target`` (80 % power, α), and the cost measured from the pilot's runs
    (the sum of their training minutes: one process on one thread each), per seed and for the design.

    The design trains the most seeds either estimator needs, and never fewer than the design fixed beforehand
    (``design.seeds``): the parabola optimum is the primary estimator, but a seed whose optimum sits on an edge has
    none, so the grid argmin must be powered too.
    """
    hours_per_seed = float(pilot_runs["minutes"].sum() / 60 / pilot_seeds)
    rows = contrast.assign(seeds_needed=[seeds_needed(sd, target, alpha) for sd in contrast["sd"]])
    most = rows["seeds_needed"].max()
    design_seeds = max(len(design.seeds), int(most) if pd.notna(most) else len(design.seeds))
    return rows.assign(target=target, pilot_cpu_hours=float(pilot_runs["minutes"].sum() / 60),
                       cpu_hours_per_seed=hours_per_seed, design_seeds=design_seeds,
                       design_cpu_hours=hours_per_seed * design_seeds)


def plan(runs: pd.DataFrame, seeds=None, design: Design = GRID) -> list[str]:
    """One `rrlib sweep` argument line per (seed, N, lr), seed-major, covering the grid and its extension.

    Seed-major, so a study stopped part-way leaves whole seeds: every cell at fewer seeds, not half the cells.
    Only finished runs are skipped by the sweeps themselves; listing a finished run costs a few seconds.
    """
    seeds = design.seeds if seeds is None else seeds
    grid = design_grid(runs, design)
    lines = []
    for seed in seeds:
        for n in design.counts:
            for lr in sorted({lr for (_, loops), lrs in grid.items() if loops == n for lr in lrs}):
                rules = [r for r in design.rules if lr in grid.get((r, n), [])]
                steps = f" --steps {design.steps}" if design.steps else ""
                size = f"{design.size_prefix}{n}"
                name = ("" if design == GRID else f"{design.name}-") + f"{size}-lr{lr:g}-seed{seed}"
                lines.append(f"{name} --size {size} --variants "
                             f"{','.join(rules)} --seeds {seed} --lr {lr:g}{steps} {' '.join(design.extra)} "
                             f"--out {design.out_root}/lr{lr:g}".replace("  ", " "))
    return lines
