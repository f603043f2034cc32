"""Page 04's results: does Review's gain emerge with scale? The paper's 42 runs (its committed run table) and ours
(every finished run of a standalone size under the run folders) through the same functions of ``rrlib.stats``.

A source is ``"paper"`` or ``"ours"``; each has one primary metric (``PRIMARY``: the paper's runs have only its
``val_loss``, ours are scored on the fixed held-out set, ``fixed_loss``) and one calibration metric
(``CALIBRATION``). Every gap is ``baseline − review``: positive favours Review. Where the runs are read from is
given by keyword (``paper_csv``, ``out_root``, ``variants``, ``exclude_sizes``: the ``WHERE`` defaults), the same
for every function, so a page passes its parameters once.

Each function is a ``@result``: computed once per set of input runs. Ours are keyed on every run file under
``out_root``; the paper's table is committed, and keyed on its path.
"""
from __future__ import annotations

import pandas as pd

from .. import stats
from ..model import ModelConfig
from ..runs import loading
from ..runs.config import TrainConfig, project_path
from ..runs.sweep import results_table
from . import result

SOURCES = ("paper", "ours")
PRIMARY = {"paper": "val_loss", "ours": "fixed_loss"}  # the metric each source's tests read
CALIBRATION = {"paper": "ece", "ours": "fixed_ece"}  # ECE, 15 equal-width bins of top-1 confidence
SECONDARY = "val_loss"  # the paper's evaluation, tested beside our primary fixed_loss
# where the runs are: the paper's committed run table, our run folders, the paper's comparison, and the sizes that
# are not points on the scale axis (the smoke test, notebook 05's family)
WHERE = {"paper_csv": "outputs/reference/scaling_v8.csv", "out_root": "outputs/runs",
         "variants": ("review", "highway", "standard"), "exclude_sizes": ("tiny", "family", "family_mini")}
ALPHA = 0.05
N_BOOT = 10000  # bootstrap resamples per comparison, where the seeds allow one (rrlib.stats.bootstrap_allowed)
COMPUTE_OPTIMAL_TOKENS_PER_PARAM = 20  # Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models"
RECIPE_ROOT = "outputs/recipe"  # the recipe ablation's run folders (rrlib study run recipe_ablation)
RECIPES = {"rrlib": "mini", "paper": "mini_paper"}  # each recipe's size there: rrlib's recipe and the paper's
EQUIVALENCE_MARGIN = 0.02  # nats: the recipe's "no change" is tested as |difference| < this (TOST)


def _where(where: dict) -> dict:
    unknown = set(where) - set(WHERE)
    if unknown:
        raise TypeError(f"unknown keyword {sorted(unknown)}; the runs are named by {sorted(WHERE)}")
    return {**WHERE, **where}


def _run_folders(source=None, *_, out_root: str = WHERE["out_root"], **__):
    """@result's roots: our run folders, which every result but the paper's own reads."""
    return [] if source == "paper" else [project_path(out_root)]


def _checked_source(source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; choose one of {list(SOURCES)}")
    return source


@result(_run_folders)
def runs(source: str, **where) -> pd.DataFrame | None:
    """The source's finished runs, one row per run (``rrlib.stats.load_results``): ``size``, ``variant``, ``seed``,
    ``params_M``, ``steps``, the metrics, and for ours every field of a result file; the paper's ``review_neutral``
    is read as ``review``. Ours keep the standalone sizes (``rrlib.runs.loading.standalone_sizes``) not in
    ``exclude_sizes`` and the rules in ``variants``. None when there is no run (no paper table at ``paper_csv``)."""
    where = _where(where)
    if _checked_source(source) == "paper":
        path = project_path(where["paper_csv"])
        return stats.load_results(path) if path.exists() else None
    ours = results_table(where["out_root"])
    ours = ours[ours["size"].isin(loading.standalone_sizes(ours["size"].unique()))
                & ~ours["size"].isin(list(where["exclude_sizes"])) & ours["variant"].isin(list(where["variants"]))]
    return stats.load_results(ours) if len(ours) else None


def comparable(source: str, **where) -> bool:
    """Whether the source's runs hold Review and at least one baseline: what every comparison needs."""
    table = runs(source, **where)
    return table is not None and "review" in set(table["variant"]) and table["variant"].nunique() > 1


def sources(**where) -> list[str]:
    """The sources that can be compared (``comparable``), the paper's first."""
    return [source for source in SOURCES if comparable(source, **where)]


def _comparable_runs(source: str, where: dict) -> pd.DataFrame:
    if not comparable(source, **where):
        raise ValueError(f"no {source} runs with Review and a baseline: "
                         + ("give the paper's run table as paper_csv" if source == "paper" else
                            f"train some under {_where(where)['out_root']}"))
    return runs(source, **where)


@result(_run_folders)
def means(source: str, metric: str | None = None, **where) -> pd.DataFrame:
    """The mean of ``metric`` (default the source's ``PRIMARY``; ``CALIBRATION[source]`` for its ECE) over seeds:
    one row per size (the index, ``size``, smallest first), one column per variant named after it, Review
    first (``rrlib.stats.headline``)."""
    return stats.headline(_comparable_runs(source, where), metric or PRIMARY[source])


@result(_run_folders)
def tests(source: str, alpha: float = ALPHA, n_boot: int = N_BOOT, secondary: str = SECONDARY,
          **where) -> pd.DataFrame:
    """The paper's Welch test beside the paired test with Holm, one row per (size, baseline), on the source's
    primary metric (``rrlib.stats.compare``, whose docstring defines every column): ``size``, ``params_M``
    (Review's), ``baseline``, ``metric``; seed counts ``n_ref``, ``n_base``, ``paired_n``; ``mean_ref`` (Review's),
    ``mean_base``, ``sd_ref``, ``sd_base``; ``gap`` (difference of means) and ``paired_gap`` (mean per-seed
    difference); the Welch test (``welch_t``, ``welch_df``, ``welch_p``, ``welch_p_one``: one-sided, favouring
    Review) and the paired one (``paired_t``, ``paired_df``, ``paired_p``, ``paired_p_one``); effect sizes
    ``cohen_d`` and ``d_z``; ``test`` (which one is primary: paired where seeds pair) and its ``p``, its
    (1 − alpha) interval ``ci_low``, ``ci_high``, and ``mde`` (the gap it detects with 80 % power); the bootstrap
    interval ``boot_low``, ``boot_high`` (empty below seven seeds); ``note``; ``p_holm`` (Holm over every row) and
    ``significant`` (``p_holm < alpha``). Where the source also has the ``secondary`` metric
    (``rrlib.stats.compare_metrics``): its ``p_<secondary>``, ``p_holm_<secondary>``, ``significant_<secondary>``,
    and ``metrics_note``, saying where the two metrics disagree on significance."""
    table, metric = _comparable_runs(source, where), PRIMARY[source]
    if secondary in table.columns and metric != secondary:
        return stats.compare_metrics(table, metric, secondary, alpha=alpha, n_boot=n_boot)
    return stats.compare(table, metric, alpha=alpha, n_boot=n_boot)


@result(_run_folders)
def calibration_tests(source: str, alpha: float = ALPHA, **where) -> pd.DataFrame:
    """``tests``' columns (without the secondary metric's and the bootstrap's) on the source's calibration
    metric, ``CALIBRATION[source]``: ``gap`` and ``paired_gap`` are the baseline's ECE minus Review's, so a
    positive gap again favours Review."""
    return stats.compare(_comparable_runs(source, where), CALIBRATION[source], alpha=alpha, n_boot=0)


@result(_run_folders)
def trend(source: str, **where) -> pd.DataFrame:
    """The gap against log10 parameters on the source's primary metric, one row per baseline
    (``rrlib.stats.trend``: one point per size, the primary test's gap): ``baseline``, ``metric``,
    ``slope_per_decade`` (nats per decade of Review's parameters), its ``stderr``, ``p`` (of the slope), ``r`` (the
    correlation) and ``n_sizes`` (points fitted; the slope without a p at two, nothing at one)."""
    return stats.trend(_comparable_runs(source, where), PRIMARY[source])


@result(_run_folders)
def emergence(source: str, alpha: float = ALPHA, n_boot: int = N_BOOT, secondary: str = SECONDARY,
              **where) -> pd.DataFrame:
    """The emergence curve: Review's gap against its parameters, one row per (size, baseline) in ``tests``' order:
    ``size``, ``params_M``, ``baseline``, ``tested_gap`` (the gap the primary test is about: the mean paired
    difference where paired, else the difference of means), its interval ``ci_low``, ``ci_high``, how far that
    reaches ``below`` and ``above`` the gap (0 where nothing was tested: an error bar's lengths), and ``tests``'
    ``test``, ``welch_p``, ``paired_p``, ``p_holm`` and ``significant``."""
    table = tests(source, alpha, n_boot, secondary, **where)
    table["tested_gap"] = stats._tested_gap(table)
    table["below"] = (table["tested_gap"] - table["ci_low"]).fillna(0)
    table["above"] = (table["ci_high"] - table["tested_gap"]).fillna(0)
    return table[["size", "params_M", "baseline", "tested_gap", "ci_low", "ci_high", "below", "above", "test",
                  "welch_p", "paired_p", "p_holm", "significant"]]


@result(_run_folders)
def verdicts(source: str, alpha: float = ALPHA, n_boot: int = N_BOOT, secondary: str = SECONDARY,
             **where) -> pd.DataFrame:
    """Each size in words from its primary test and Holm p (``rrlib.stats.verdicts`` of ``tests``): ``size`` and
    ``verdict`` (one clause per baseline)."""
    return stats.verdicts(tests(source, alpha, n_boot, secondary, **where), alpha)


@result(_run_folders)
def tokens_per_parameter(**where) -> pd.DataFrame:
    """How much training each size got, one row per (source, size) of Review, smallest first: ``size``,
    ``params_M`` (Review's), ``steps``, ``source``, ``tokens`` (training tokens: ours from the result files, the
    paper's as steps × its batch of 64 sequences of 256 tokens) and ``tokens_per_param`` (tokens per Review
    parameter; ``COMPUTE_OPTIMAL_TOKENS_PER_PARAM`` is the compute-optimal ratio)."""
    tokens_per_step = TrainConfig().batch_size * ModelConfig().seq_len
    budget = []
    if comparable("paper", **where):
        paper = runs("paper", **where)
        p = paper[paper["variant"] == "review"].groupby("size")[["params_M", "steps"]].mean()
        budget.append(p.assign(source="paper", tokens=p["steps"] * tokens_per_step))
    if comparable("ours", **where):
        ours = runs("ours", **where)
        budget.append(ours[ours["variant"] == "review"].groupby("size")[["params_M", "steps", "tokens"]].mean()
                      .assign(source="ours"))
    if not budget:
        raise ValueError("no runs with Review and a baseline in either source")
    budget = pd.concat(budget).reset_index().sort_values("params_M")
    budget["tokens_per_param"] = budget["tokens"] / (budget["params_M"] * 1e6)
    return budget


@result(_run_folders)
def provenance(**where) -> pd.DataFrame | None:
    """What produced our runs, one row per size (the index, ``size``): ``git_commit``, ``device``, ``precision``,
    ``data_source``, ``torch_version`` (each the distinct values, comma-separated) and ``runs``
    (``rrlib.runs.loading.provenance``). None without runs."""
    ours = runs("ours", **where)
    return None if ours is None else loading.provenance(ours)


def _recipe_folders(recipe_root: str = RECIPE_ROOT, *_, **__):
    return [project_path(recipe_root)]


@result(_recipe_folders)
def _recipe_runs(recipe_root: str = RECIPE_ROOT) -> dict | None:
    """Each recipe's finished runs (``RECIPES``), or None while either has none."""
    found = {name: results_table(recipe_root, size) for name, size in RECIPES.items()}
    return None if any(t.empty for t in found.values()) else {n: stats.load_results(t) for n, t in found.items()}


@result(_recipe_folders)
def recipe_gaps(recipe_root: str = RECIPE_ROOT, alpha: float = ALPHA) -> pd.DataFrame | None:
    """Review's gaps on ``fixed_loss`` under each recipe (the paper's and rrlib's, at ``mini``): ``tests``' columns
    without the secondary metric's or a bootstrap, one row per (recipe, baseline), and ``recipe``. Holm is within
    each recipe. None while either recipe has no finished run under ``recipe_root``."""
    found = _recipe_runs(recipe_root)
    if found is None:
        return None
    return pd.concat([stats.compare(table, metric="fixed_loss", alpha=alpha, n_boot=0).assign(recipe=name)
                      for name, table in found.items()], ignore_index=True)


@result(_recipe_folders)
def recipe_gap_difference(recipe_root: str = RECIPE_ROOT, margin: float = EQUIVALENCE_MARGIN,
                          alpha: float = ALPHA) -> pd.DataFrame | None:
    """Whether the recipe moves Review's gap, one row per baseline: per seed, the paper-recipe gap minus the
    rrlib-recipe gap on ``fixed_loss`` (a seed fixes the batch order under both), tested paired by seed
    (``rrlib.stats.paired_comparison``): ``baseline``, ``seeds`` (with both gaps), ``gap_difference`` (the mean
    difference, nats), its (1 − alpha) interval ``ci_low``, ``ci_high``, ``p`` (two-sided), ``margin``,
    ``p_equivalent`` (TOST that the difference lies within ±margin) and ``detectable`` (the difference the design
    detects with 80 % power). None while either recipe has no finished run."""
    found = _recipe_runs(recipe_root)
    if found is None:
        return None
    gaps = {}
    for name, table in found.items():
        wide = table.pivot_table(index="seed", columns="variant", values="fixed_loss")
        gaps[name] = {b: wide[b] - wide["review"] for b in wide.columns if b != "review"}
    rows = []
    for baseline in gaps["rrlib"]:
        test = stats.paired_comparison((gaps["paper"][baseline] - gaps["rrlib"][baseline]).dropna(), alpha, margin)
        rows.append({"baseline": baseline, "seeds": test.seeds, "gap_difference": test.gap, "ci_low": test.ci_low,
                     "ci_high": test.ci_high, "p": test.p, "margin": margin, "p_equivalent": test.p_equivalent,
                     "detectable": test.detectable})
    return pd.DataFrame(rows)
