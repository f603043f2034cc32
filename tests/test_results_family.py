"""Page 05's results (rrlib.results.family, speed, looped, looped_power) recomputed from the committed run files by
hand (scipy, statsmodels, numpy, each run's result.json read with json), checked against the page's committed tables
under the labels the page gives them, with their documented columns and their memo."""
import json
import math
import re
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.power import TTestPower

from rrlib import load_preset
from rrlib.results import family, looped, looped_power, speed

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "paper" / "tables"
BENCH = "outputs/bench/cpu-family.json"
# the page's labels for the summary's documented columns: what 05_<size>_summary.csv calls them
LABELS = {"gap": "gap vs standard", "detectable": "detectable gap", "p": "p (paired)", "p_holm": "p (Holm)",
          "p_secondary": "p (paired, val_loss)", "p_holm_secondary": "p (Holm, val_loss)",
          "tokens_per_s_vs_standard": "tokens/s vs standard", "peak_memory_vs_standard": "memory vs standard"}
LOOPED = {"variants": ["scaled", "scaled_loops", "review"], "loops": [1, 2, 4, 8], "seeds": [0, 1, 2, 3, 4]}


def results(pattern: str) -> pd.DataFrame:
    """Every result.json under ROOT matching ``pattern``, read with json, with its folder's parts."""
    rows = []
    for path in sorted(ROOT.glob(pattern)):
        rows.append(json.loads(path.read_text()) | {"folder": path.parent.relative_to(ROOT).as_posix()})
    return pd.DataFrame(rows)


def holm(p) -> np.ndarray:
    """Holm's step-down adjustment written out: the k-th smallest p times (m - k + 1), running maximum, capped at 1."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate([min(1.0, (len(p) - k) * p[i]) for k, i in enumerate(order)])
    out = np.empty_like(p)
    out[order] = adjusted
    return out


def printed(x):
    """``x`` as a page's CSV stores it (10 significant digits)."""
    return x if not isinstance(x, float) or not np.isfinite(x) or x == 0 else float(f"{x:.10g}")


def same_as_committed(table: pd.DataFrame, name: str):
    """``table`` equals the committed paper/tables/<name>.csv cell by cell at its stored digits."""
    committed = pd.read_csv(TABLES / f"{name}.csv", keep_default_na=False, na_values=[""])
    assert list(table.columns) == list(committed.columns)
    assert len(table) == len(committed)
    for column in committed.columns:
        for new, old in zip(table[column], committed[column]):
            new = np.nan if new == "" or new is None else new  # a CSV writes an empty text as it writes NaN
            if isinstance(old, str) or isinstance(new, str):
                assert str(new) == str(old), (name, column, new, old)
            elif pd.isna(old):
                assert pd.isna(new), (name, column, new)
            else:
                assert printed(float(new)) == pytest.approx(float(old), rel=1e-12, abs=0), (name, column, new, old)


def test_the_family_summary_is_a_paired_test_against_standard_with_holm_over_the_family():
    runs = results("outputs/runs/family/*/seed[012]/result.json")
    by = runs.pivot(index="seed", columns="variant", values="fixed_loss")
    summary = family.family_summary("family", seeds=[0, 1, 2], bench_file=BENCH).set_index("variant")
    others = [v for v in summary.index if v != "standard"]
    ps = []
    for v in others:
        d = (by["standard"] - by[v]).to_numpy()
        test = scipy_stats.ttest_1samp(d, 0.0)
        half = scipy_stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
        detectable = TTestPower().solve_power(nobs=len(d), alpha=0.05, power=0.8) * d.std(ddof=1)
        row = summary.loc[v]
        assert row["gap"] == pytest.approx(d.mean(), rel=1e-12)
        assert row["p"] == pytest.approx(test.pvalue, rel=1e-9)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-9)
        assert row["detectable"] == pytest.approx(detectable, rel=1e-4)
        assert row["loss"] == pytest.approx(by[v].mean(), rel=1e-12)
        assert row["sd"] == pytest.approx(by[v].std(ddof=1), rel=1e-12)
        ps.append(test.pvalue)
    assert summary.loc[others, "p_holm"].to_numpy() == pytest.approx(holm(ps), rel=1e-9)
    assert summary.loc["standard", ["gap", "p", "p_holm", "detectable"]].isna().all()  # no test against itself
    assert list(summary.index) == list(load_preset("family").variants)  # the preset's order


@pytest.mark.parametrize("size, seeds", [("family", [0, 1, 2]), ("family_mini", None)])
def test_the_family_summary_is_the_pages_table_under_its_labels(size, seeds):
    summary = family.family_summary(size, seeds=seeds)  # the family's benchmark file by default
    assert list(summary.columns) == family.SUMMARY_COLUMNS
    same_as_committed(summary.drop(columns=["ci_low", "ci_high"]).rename(columns=LABELS), f"05_{size}_summary")


@pytest.mark.parametrize("module, columns", [
    (family, family.SUMMARY_COLUMNS), (family, family.METHOD_COLUMNS), (speed, speed.RATIO_COLUMNS),
    (looped, looped.CELL_COLUMNS), (looped, looped.TRAINABILITY_COLUMNS),
    (looped_power, ["estimator", "effect", "seeds_needed", "target", "design_seeds", "design_cpu_hours"])])
def test_every_column_a_result_returns_is_documented_where_it_is_made(module, columns):
    docs = module.__doc__ + "".join(f.__doc__ or "" for f in vars(module).values() if callable(f))
    assert [c for c in columns if not re.search(rf"\b{c}\b", docs)] == []
    assert not [c for c in columns if re.search(r"[ ()/]", c)]  # names a program reads, never display labels


def test_methods_count_what_each_run_recorded():
    methods = family.methods("family").set_index("variant")
    recorded = results("outputs/runs/family/*/seed0/result.json").set_index("variant")
    assert list(methods.index) == list(load_preset("family").variants)
    assert (methods["params_M"].round(2) == recorded.loc[methods.index, "params_M"]).all()
    assert (methods["mflops_per_token"] * 1e6).round().astype(int).tolist() == \
        recorded.loc[methods.index, "flops_per_token"].astype(int).tolist()
    assert (methods["d_model"] == recorded.loc[methods.index, "d_model"]).all()
    assert methods.loc["standard", "rule_params"] == 0 and methods.loc["review", "rule_params"] > 0
    assert not methods["description"].str.contains(r"\*").any()  # the docstrings' emphasis taken out


def test_bench_ratios_read_the_eager_default_rows_and_follow_the_file(tmp_path):
    bench = json.loads((ROOT / BENCH).read_text())["results"]
    eager = {r["variant"]: r for r in bench if r["size"] == "family" and not r["compile"] and not r["rule_options"]}
    ratios = speed.bench_ratios(BENCH, "family")
    assert ratios.loc["standard"].tolist() == [1.0, 1.0]
    for variant, r in eager.items():
        assert ratios.loc[variant, "peak_memory_vs_standard"] == pytest.approx(
            r["peak_memory_bytes"] / eager["standard"]["peak_memory_bytes"], rel=1e-12)
        assert ratios.loc[variant, "tokens_per_s_vs_standard"] == r["tokens_per_s_vs_standard"]
    path = tmp_path / "bench.json"
    row = {"size": "s", "compile": False, "rule_options": {}, "tokens_per_s_vs_standard": 1.0}
    path.write_text(json.dumps({"results": [row | {"variant": "standard", "peak_memory_bytes": 100},
                                            row | {"variant": "review", "peak_memory_bytes": 150}]}))
    assert speed.bench_ratios(path, "s").loc["review", "peak_memory_vs_standard"] == 1.5
    path.write_text(json.dumps({"results": [row | {"variant": "standard", "peak_memory_bytes": 100},
                                            row | {"variant": "review", "peak_memory_bytes": 200}]}))
    assert speed.bench_ratios(path, "s").loc["review", "peak_memory_vs_standard"] == 2.0  # the file changed
    assert speed.bench_ratios(path, "other").empty and speed.bench_ratios(tmp_path / "none.json", "s").empty


def copy_runs(pattern: str, to: Path) -> list[Path]:
    """The result.json files matching ``pattern`` copied under ``to``, keeping their path below outputs/<root>/."""
    copied = []
    for path in sorted(ROOT.glob(pattern)):
        target = to / Path(*path.relative_to(ROOT).parts[2:])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
        copied.append(target)
    return copied


def test_a_result_is_computed_once_per_set_of_runs_and_each_caller_gets_a_copy(tmp_path, monkeypatch):
    copied = [p for rule in ("review", "standard") for p in copy_runs(f"outputs/runs/family/{rule}/seed[012]/result.json",
                                                                        tmp_path)]
    calls = []
    compare = family.stats.compare
    monkeypatch.setattr(family.stats, "compare", lambda *a, **k: calls.append(1) or compare(*a, **k))
    first = family.family_summary("family", ["standard", "review"], None, str(tmp_path))
    assert len(calls) == 2 and first["seeds"].tolist() == [3, 3]  # fixed_loss and val_loss
    first.loc[1, "gap"] = 99.0
    again = family.family_summary("family", ["standard", "review"], None, str(tmp_path))
    assert len(calls) == 2 and again.loc[1, "gap"] != 99.0
    result = json.loads(copied[0].read_text()) | {"fixed_loss": 9.0}  # review's seed 0 rewritten: read again
    copied[0].write_text(json.dumps(result))
    os.utime(copied[0], ns=(1, 1))
    third = family.family_summary("family", ["standard", "review"], None, str(tmp_path))
    assert len(calls) == 4 and third.loc[1, "loss"] > again.loc[1, "loss"]


def test_the_looped_cells_and_the_grid_estimator_recompute_from_the_result_files(data):
    runs = results("outputs/looped_grid/lr*/looped*/*/seed*/result.json")
    runs["lr"] = [float(f.split("/")[2][2:]) for f in runs["folder"]]
    means = runs.groupby(["variant", "n_loops", "lr"])["fixed_loss"].agg(["mean", "count"])
    cells = looped.cells(**LOOPED).set_index(["variant", "loops", "lr"])
    assert cells["loss"].to_numpy() == pytest.approx(means.loc[cells.index, "mean"].to_numpy(), rel=1e-12)
    assert cells["seeds"].tolist() == means.loc[cells.index, "count"].tolist()
    transfer = looped.reading(**LOOPED).transfer.set_index(["runs", "variant", "estimator"])
    for rule in LOOPED["variants"]:  # every seed has finished every cell: the grid argmin's slope over all of them
        part = runs[runs["variant"] == rule]
        best = part.loc[part.groupby(["seed", "n_loops"])["fixed_loss"].idxmin()]
        slopes = [np.polyfit(np.log2(s["n_loops"]), np.log2(s["lr"]), 1)[0] for _, s in best.groupby("seed")]
        row = transfer.loc[("all runs", rule, "grid")]
        assert row["seeds"] == 5 and row["slope"] == pytest.approx(np.mean(slopes), rel=1e-9, abs=1e-12)
        assert row["p"] == pytest.approx(scipy_stats.ttest_1samp(slopes, 0.0).pvalue, rel=1e-9)


def test_trainability_is_1_over_n_against_1_over_root_n_at_each_seeds_optimum(data):
    runs = results("outputs/looped_grid/lr*/looped*/scaled*/seed*/result.json")
    best = runs.groupby(["n_loops", "seed", "variant"])["fixed_loss"].min().unstack("variant")
    trainable = looped.reading(**LOOPED).trainability.set_index("loops")
    ps = []
    for n in (2, 4, 8):
        d = (best.loc[n, "scaled_loops"] - best.loc[n, "scaled"]).to_numpy()
        assert trainable.loc[n, "gap"] == pytest.approx(d.mean(), rel=1e-12)
        ps.append(scipy_stats.ttest_1samp(d, 0.0).pvalue)
        assert trainable.loc[n, "p"] == pytest.approx(ps[-1], rel=1e-9)
    assert trainable.loc[[2, 4, 8], "p_holm"].to_numpy() == pytest.approx(holm(ps), rel=1e-9)
    assert np.isnan(trainable.loc[1, "p"])  # the same model under both rules at N = 1


def test_the_looped_tables_are_the_pages_committed_ones(data):
    grid = looped.reading(**LOOPED)
    same_as_committed(looped.cells(**LOOPED), "05_looped_cells")
    for name in ("optima", "transfer", "trainability"):
        same_as_committed(getattr(grid, name), f"05_looped_{name}")
    same_as_committed(looped_power.pilot(), "05_looped_power_pilot")
    powered = looped_power.reading()
    for name in ("optima", "transfer", "contrast", "trainability"):
        same_as_committed(getattr(powered, name), f"05_looped_power_{name}")
    regime, runs = looped_power.regime(), results("outputs/looped_power/lr*/looped*/*/seed*/result.json")
    assert regime.runs == len(runs) and regime.cpu_hours == pytest.approx(runs["minutes"].sum() / 60, rel=1e-12)
    assert regime.falling == regime.measured == regime.runs and regime.stalled == 0


def test_the_powered_design_is_read_only_once_its_seeds_have_finished(tmp_path, data, monkeypatch):
    copy_runs("outputs/looped_power/lr*/looped*/*/seed[01]/result.json", tmp_path)
    state = looped_power.progress(str(tmp_path))
    assert state.whole_seeds == [0, 1] and not state.done and not state.pilot_done
    assert looped_power.pilot(str(tmp_path)) is None and looped_power.reading(str(tmp_path)) is None
    assert looped_power.regime(str(tmp_path)) is None


def test_a_looped_reading_is_made_once_per_set_of_runs(tmp_path, data, monkeypatch):
    copied = copy_runs("outputs/looped_grid/lr*/looped*/scaled/seed[01]/result.json", tmp_path)
    calls = []
    seed_optima = looped.looped_study.seed_optima
    monkeypatch.setattr(looped.looped_study, "seed_optima", lambda *a, **k: calls.append(1) or seed_optima(*a, **k))
    first = looped.reading(str(tmp_path), None, ["scaled"], [1, 2, 4, 8], [0, 1])
    made = len(calls)
    assert made and first.transfer["seeds"].max() == 2  # both seeds finished every cell of the base grid
    assert looped.reading(str(tmp_path), None, ["scaled"], [1, 2, 4, 8], [0, 1]).transfer.equals(first.transfer)
    assert len(calls) == made  # the second reading came from the memo
    copied[0].unlink()  # a run gone: seed 0 no longer finished its grid, and the reading is made again
    assert looped.reading(str(tmp_path), None, ["scaled"], [1, 2, 4, 8], [0, 1]).transfer["seeds"].max() < 2
    assert len(calls) > made
