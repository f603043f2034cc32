"""Every committed verdict and the ledger rows built on the paired tests recompute from their inputs with today's
statistics code: ``rrlib compare``'s verdict files from the run folders they name, page 04's tests of the paper's
runs from its CSV, and the ledger rows of page 07 whose numbers come from a paired comparison, from the runs and
tables page 07 reads.

Precision. A verdict file's CSV holds every float to its last bit, and agrees to 1e-12 (relative): the libraries
recompute it in another order (scipy's one-sample t and its interval where the earlier code wrote the formula out;
statsmodels' TOST, whose standard error is the ddof-0 SD over √(n − 1)), which moves the last one or two bits.
``verdict.json`` rounds its floats to 10 decimals (pandas' ``to_json``) and the pages' tables to 10 significant
digits (rrlib.views.tables.STORED_DIGITS): they agree at those printed digits.
"""
import html
import json
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rrlib import stats
from rrlib.home import REFERENCE_CSV

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = sorted(p.relative_to(ROOT).as_posix() for p in [*ROOT.glob("outputs/**/verdict.csv"),
                                                           *ROOT.glob("examples/*/verdict.csv")])
RELATIVE = 1e-12
TIMED = ("step_per_flop_vs_standard_variant", "step_per_flop_vs_standard_baseline")  # measured, not computed
RECORDED = ("fingerprint", "git_commit", "minutes")  # what verdict.json keeps of each run it rests on


def printed(x, digits: int = 10):
    """``x`` as a page's table stores it: rounded to ``digits`` significant digits."""
    return x if not isinstance(x, float) or not np.isfinite(x) or x == 0 else float(f"{x:.{digits}g}")


def same_table(new: pd.DataFrame, old: pd.DataFrame, columns, digits: int | None = None):
    """Every cell of ``columns`` equal: numbers to ``RELATIVE`` (or, with ``digits``, at that many significant
    digits), NaN where NaN, whole numbers still whole, everything else as text."""
    for column in columns:
        a, b = old[column].reset_index(drop=True), new[column].reset_index(drop=True)
        if pd.api.types.is_integer_dtype(a):  # a CSV writes 2 and 2.0 apart
            assert pd.api.types.is_integer_dtype(b), f"{column} is {b.dtype}, stored as whole numbers"
        if pd.api.types.is_float_dtype(a) or pd.api.types.is_float_dtype(b):
            a, b = a.to_numpy(float), b.to_numpy(float)
            if digits:
                b = np.array([printed(x, digits) for x in b])
                np.testing.assert_array_equal(b, a, err_msg=column)
            else:
                np.testing.assert_allclose(b, a, rtol=RELATIVE, atol=0, err_msg=column)
        else:
            assert b.astype(str).tolist() == a.astype(str).tolist(), column


def recorded(value) -> bool:
    """Whether verdict.json recorded this value (an older result file has no fingerprint: null or NaN there)."""
    return value is not None and value == value


def verdict_inputs(meta: dict) -> pd.DataFrame:
    """The result files of the runs a verdict rests on, found where its command trained or reused them, each the
    very run it recorded (its fingerprint, commit and minutes)."""
    from rrlib.compare import engine

    args = shlex.split(meta["command"])
    given = {flag: args[args.index(flag) + 1] for flag in ("--runs", "--out") if flag in args}
    roots = [ROOT / (given.get("--runs") or Path(given["--out"]) / "runs"), ROOT / engine.STUDY_ROOT]
    results = []
    for run in meta["runs"]:
        found = [json.loads(path.read_text()) for root in roots
                 if (path := root / meta["size"] / run["variant"] / f"seed{run['seed']}" / "result.json").exists()]
        found = [r for r in found if all(r.get(k) == run[k] for k in RECORDED if recorded(run[k]))]
        assert len(found) == 1, f"no single result file for {run}"
        results.append(found[0])
    return pd.DataFrame(results)


@pytest.mark.parametrize("path", VERDICTS)
def test_a_committed_verdict_file_recomputes_from_the_runs_it_names(path):
    from rrlib.compare import engine, files
    from rrlib.stats.verdict import sentence

    csv = ROOT / path
    meta = json.loads(csv.with_suffix(".json").read_text())
    old = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    request = engine.Request(meta["size"], list(dict.fromkeys(old["variant"])), list(dict.fromkeys(old["baseline"])),
                             seeds=meta["design"]["seeds"], margin=meta["margin"], alpha=meta["alpha"],
                             metric=meta["metric"])
    new = engine.verdict_table(request, verdict_inputs(meta), meta["design"], None)[files.COLUMNS]
    kept = [c for c in old.columns if c not in TIMED]  # an older file lacks the later diverged_* columns
    assert set(old.columns) <= set(new.columns)
    same_table(new, old, kept)
    assert json.loads(new[kept].to_json(orient="records")) == [{k: row[k] for k in kept} for row in meta["rows"]]
    page = csv.with_suffix(".html").read_text()
    for row in new.to_dict("records"):  # the page's sentences: the same words and printed numbers
        assert html.escape(sentence(row)) in page


def test_page_04s_tests_of_the_papers_runs_recompute():
    """The paired and Welch tests of the paper's 42 runs (five ledger rows read them) at the table's digits."""
    old = pd.read_csv(ROOT / "paper/tables/04_paper_tests.csv", keep_default_na=False, na_values=[""])
    new = stats.compare(stats.load_results(REFERENCE_CSV), "val_loss", alpha=0.05, n_boot=10000)
    assert list(new.columns) == list(old.columns)
    same_table(new, old, old.columns, digits=10)


@pytest.fixture(scope="module")
def committed_ledger():
    return pd.read_csv(ROOT / "paper/tables/07_claims.csv").set_index("id")


LEDGER_NUMBERS = ("effect", "ci_low", "ci_high", "p", "detectable")


def same_rows(made: list[dict], ledger: pd.DataFrame, ids):
    """``made`` (ledger rows in ``ids``' order) against the committed ledger: numbers at its 10 digits, and the
    verdict and the test's words (which print the numbers the row cites) exactly."""
    assert len(made) == len(ids)
    for cid, row in zip(ids, made):
        old = ledger.loc[cid]
        assert row["verdict"] == old["verdict"] and row["test"] == old["test"], cid
        for column in LEDGER_NUMBERS:
            value = printed(float(row[column]))
            assert value == old[column] or np.isnan(value) and np.isnan(old[column]), (cid, column, value)


def test_the_ledger_rows_on_the_papers_runs_and_the_depth_series_recompute(committed_ledger):
    from rrlib.claims import records, review
    from rrlib.claims.rows import link

    claims, alpha = records.by_id(), 0.05
    from rrlib.results import depth as depth_results

    runs = depth_results.depth_runs(out_root=str(ROOT / "outputs/runs"))  # the depth ablation: one row per run
    depth = review.depth_rows(claims, runs, (link("02_depth_stability", "02_runs", "02_final_loss"),
                                             link("02_depth_stability", "02_final_loss")), alpha)
    same_rows(depth, committed_ledger, ["review-convex-stalls", "review-additive-trains"])
    paper = stats.load_results(REFERENCE_CSV)
    tests = stats.compare(paper, "val_loss", alpha=alpha, n_boot=0)
    made = review.paper_run_rows(claims, tests, paper, link("04_statistics", "04_paper_tests"), alpha)
    same_rows(made, committed_ledger, ["review-no-gain-paper", "review-standard-better-60m", "review-gain-590m",
                                       "review-gain-1b", "review-gain-grows-1b"])


def test_the_ledger_rows_of_the_reach_studies_recompute(committed_ledger, monkeypatch):
    """The rows page 07 reads from the studies' own run folders: paired and one-sample t-tests, Holm over depths,
    the TOST of the loop norms, and their detectable effects."""
    from rrlib.claims import reach_rows, records
    from rrlib.claims.rows import link
    from rrlib.studies import looped_reach_study

    monkeypatch.chdir(ROOT)
    claims, alpha, evidence = records.by_id(), 0.05, link("07_claims", "07_reach_runs")

    def reach(cid, name, read, *args, **kwargs):
        study = looped_reach_study.REACH[name]
        return read(claims[cid], study, *args, looped_reach_study.reach_design(name), evidence, alpha=alpha, **kwargs)

    def controlled(row, which):
        """The row with its registered controls (rrlib.claims.controls), as the ledger's reader applies them."""
        from rrlib.claims import controls, readers

        return controls.apply(row, *readers.CONTROLS[which](row, alpha))

    made = {"highway-hundreds-of-layers": controlled(reach("highway-hundreds-of-layers", "highway_depth",
                                                           reach_rows.trained_row), "highway"),
            "rezero-converges-faster-as-run": controlled(reach("rezero-converges-faster-as-run", "rezero_speed",
                                                               reach_rows.speed_row), "rezero"),
            "rezero-converges-faster-8e-3": reach("rezero-converges-faster-8e-3", "rezero_speed",
                                                  reach_rows.speed_row, rezero_lr=0.008),
            "rezero-120-layers": reach("rezero-120-layers", "rezero_depth", reach_rows.trained_row),
            "layerscale-deeper": controlled(reach("layerscale-deeper", "layerscale_depth", reach_rows.layerscale_row),
                                            "layerscale"),
            "attnres-growth-confirm": reach("attnres-growth-confirm", "mechanisms", reach_rows.mechanism_row,
                                            "attnres"),
            "mgr-activation-scales-confirm": reach("mgr-activation-scales-confirm", "mechanisms",
                                                   reach_rows.mechanism_row, "mgr"),
            "looped-stream-norm": reach("looped-stream-norm", "loop_norms", reach_rows.loop_norm_row),
            "looped-depends-on-l": reach_rows.unique_layers_row(claims["looped-depends-on-l"], evidence, alpha)}
    same_rows(list(made.values()), committed_ledger, list(made))


def test_the_ledger_rows_of_the_family_runs_recompute(committed_ledger, monkeypatch):
    """compare's paired tests on the committed runs, as page 07 reads them: the gate halves against Review on the
    family's runs, and mHC against HC on the leaderboard's, the design that decides it (the three-seed family's
    reading stands beside it)."""
    from rrlib.claims import board, family, gate, records
    from rrlib.stats import ledger
    from rrlib.claims.rows import link
    from rrlib.claims.sources import finished
    from rrlib.studies import claims_study

    monkeypatch.chdir(ROOT)
    claims, alpha, seeds = records.by_id(), 0.05, [0, 1, 2]
    committed = finished("outputs/runs", "family", seeds)
    halves = gate.halves_table(gate.halves_runs(finished("outputs/claims", "family", seeds), committed,
                                                claims_study.GATE_HALVES), alpha)
    made = [gate.halves_row(claims["review-update-conditioning"], halves, "family", link("07_claims", "07_gate_halves"),
                            alpha),
            ledger.decide([family.over(claims["mhc-over-hc"], "mhc", "hc", committed, "family", alpha),
                           board.over_row(claims["mhc-over-hc"], "mhc", "hc", alpha)])]
    same_rows(made, committed_ledger, ["review-update-conditioning", "mhc-over-hc"])


def test_the_ledgers_false_discovery_rates_recompute(committed_ledger):
    """q (Benjamini–Hochberg) over the registered tested rows' p, the family its column spans. Recomputed from the
    p-values as stored (10 digits), q agrees to 1e-9: the first p's rounding scales by m / k."""
    family = committed_ledger[committed_ledger["q_bh"].notna()]
    assert len(family) > 20
    np.testing.assert_allclose(stats.benjamini_hochberg(family["p"]), family["q_bh"], rtol=1e-9, atol=0)
