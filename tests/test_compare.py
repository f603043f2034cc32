"""``rrlib compare`` (rrlib.compare) and its statistics (rrlib.stats.verdict): end to end at tiny with a rule file,
the verdict file against rrlib.stats, the verdict words, the design sized for a detectable gap, bad flags."""
import json

import numpy as np
import pandas as pd
import pytest

from rrlib import stats
from rrlib.stats import verdict



def test_compare_end_to_end_at_tiny_agrees_with_the_statistics_module(tmp_path, data, monkeypatch, capsys,
                                                                       registry_as_it_was, user_rule):
    from rrlib.__main__ import main

    (tmp_path / "rules").mkdir()
    user_rule(tmp_path / "rules")
    monkeypatch.chdir(tmp_path)
    args = ["compare", "--rules", "rules/my_rules.py", "--variants", "sigmoid_scalar", "--against", "standard,review",
            "--size", "tiny", "--seeds", "2", "--steps", "4", "--set", "train.eval_every=4", "--set",
            "train.fixed_eval_tokens=2048", "--set", "train.paper_eval_batches=1", "--runs", "runs", "--out", "verdict"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "6 to train" in out and "sigmoid_scalar     standard" in out
    rows = pd.read_csv(tmp_path / "verdict" / "verdict.csv").set_index("baseline")
    summary = json.loads((tmp_path / "verdict" / "verdict.json").read_text())
    assert "Holm over the 2 comparisons" in summary["correction"]
    assert summary["rules"] == {"sigmoid_scalar": {"origin": "file my_rules.py", "given": "rules/my_rules.py",
                                                   "sha256": summary["rules"]["sigmoid_scalar"]["sha256"]}}
    page = (tmp_path / "verdict" / "verdict.html").read_text()
    assert page.count("<tr") == 3  # header + 2 pairs
    assert summary["command"].endswith(" ".join(args)) and "--rules rules/my_rules.py" in page  # the path as given
    # the same numbers from the runs' own result files, by the report's statistics module
    results = pd.DataFrame([json.loads(p.read_text()) for p in (tmp_path / "runs" / "tiny").glob("*/seed*/result.json")])
    table = stats.compare(results, "fixed_loss", reference="sigmoid_scalar", n_boot=0).set_index("baseline")
    for baseline in ("standard", "review"):
        ours, theirs = rows.loc[baseline], table.loc[baseline]
        assert ours["seeds"] == theirs["paired_n"] == 2
        np.testing.assert_allclose([ours["gap"], ours["ci_low"], ours["ci_high"], ours["p"], ours["detectable"]],
                                   [theirs["paired_gap"], theirs["ci_low"], theirs["ci_high"], theirs["paired_p"],
                                    theirs["mde"]], rtol=1e-6)
    np.testing.assert_allclose(rows.loc[["standard", "review"], "p_holm"], table.loc[["standard", "review"], "p_holm"],
                               rtol=1e-6)
    assert rows.loc["standard", "step_per_flop_vs_standard_baseline"] == pytest.approx(1.0)
    assert rows.loc["standard", "step_per_flop_vs_standard_variant"] > 0
    assert rows.loc["review", "params_variant"] >= rows.loc["review", "params_baseline"]  # matched to Review's
    # each side's own parameter count on the page, not the variant's twice
    assert f"{rows.loc['review', 'params_variant']:,} / {rows.loc['review', 'params_baseline']:,}" in page
    assert rows.loc["review", "params_baseline"] != rows.loc["standard", "params_baseline"]
    # asked again: nothing to train, the same verdict
    assert main(args + ["--no-timing"]) == 0
    assert "6 runs finished already (reused), 0 to train" in capsys.readouterr().out
    again = pd.read_csv(tmp_path / "verdict" / "verdict.csv").set_index("baseline")
    np.testing.assert_array_equal(again["gap"], rows["gap"])


def test_the_margin_the_help_names_is_the_default():
    from rrlib.compare.engine import Request

    assert verdict.DEFAULT_MARGIN == 0.01 == Request("tiny", ["a"], ["b"]).margin


def test_verdict_words_follow_the_rule():
    assert verdict.verdict_word(+0.02, 0.01, 0.5) == "better"
    assert verdict.verdict_word(-0.02, 0.01, 0.001) == "worse"  # a significant difference outranks equivalence
    assert verdict.verdict_word(0.001, 0.6, 0.01) == "equivalent"
    assert verdict.verdict_word(0.001, 0.6, 0.2) == "inconclusive"
    assert verdict.verdict_word(0.001, np.nan, np.nan) == "inconclusive"


def test_compare_pairs_on_constructed_pairs():
    rng = np.random.default_rng(0)
    seeds = range(8)
    base = 2.0 + rng.normal(0, 0.01, 8)
    table = pd.DataFrame([{"variant": v, "seed": s, "fixed_loss": loss} for s in seeds for v, loss in
                          (("standard", base[s]), ("better_rule", base[s] - 0.05 + rng.normal(0, 0.002)),
                           ("same_rule", base[s] + rng.normal(0, 0.001)))])
    rows = verdict.compare_pairs(table, ["better_rule", "same_rule"], ["standard"], margin=0.01).set_index("variant")
    assert rows.loc["better_rule", "verdict"] == "better" and rows.loc["better_rule", "gap"] > 0.04
    assert rows.loc["same_rule", "verdict"] == "equivalent"
    # Holm over the two rows: the smaller p is doubled, the larger kept (or raised to it)
    p = rows["p"].sort_values()
    assert rows.loc[p.index[0], "p_holm"] == pytest.approx(min(1, 2 * p.iloc[0]))
    sentence = verdict.sentence(rows.reset_index().iloc[0])
    assert sentence.startswith("better_rule is better than standard") and "review" not in sentence.lower()


def test_seeds_needed_is_the_first_design_that_reaches_the_target():
    n = verdict.seeds_needed(0.01, 0.012)
    assert stats.detectable_gap(0.01, n) <= 0.012 < stats.detectable_gap(0.01, n - 1)
    assert verdict.seeds_needed(1.0, 0.001, most=20) is None


def test_detect_adds_seeds_until_the_target_or_the_cap(monkeypatch):
    """The sizing loop without training: the 'runs' are drawn with a known SD of the paired differences."""
    from rrlib.compare import engine

    rng = np.random.default_rng(1)
    diffs = rng.normal(0.0, 0.01, 64)
    asked = []

    def fake_train(req, seeds, log):
        asked.append(len(seeds))
        return [(None, {"variant": v, "seed": s, "fixed_loss": 2.0 + (diffs[s] if v == "mine" else 0.0)})
                for s in seeds for v in ("mine", "standard")]

    monkeypatch.setattr(engine, "train", fake_train)
    monkeypatch.setattr(engine, "results_frame", lambda done: pd.DataFrame([r for _, r in done]))
    req = engine.Request(size="tiny", variants=["mine"], baselines=["standard"], detect=0.012, pilot_seeds=4,
                         max_seeds=40)
    table, design = engine.sized_design(req, log=lambda text: None)
    assert asked[0] == 4 and len(asked) >= 2 and design["stopped"] == "target reached"
    final = verdict.compare_pairs(table, ["mine"], ["standard"])
    assert final["detectable"].iloc[0] <= 0.012
    capped = engine.Request(size="tiny", variants=["mine"], baselines=["standard"], detect=0.001, max_seeds=6)
    asked.clear()
    _, design = engine.sized_design(capped, log=lambda text: None)
    assert asked[-1] == 6 and design["stopped"] == "--max-seeds 6 reached before the target"


@pytest.mark.parametrize("flags, words", [
    (["--seeds", "3", "--detect", "0.01"], "give either --seeds"),
    ([], "give either --seeds"),
    (["--seeds", "1"], "at least 2 seeds"),
    (["--detect", "-1"], "--detect must be a positive number"),
    (["--seeds", "3", "--margin", "0"], "--margin must be a positive number"),
])
def test_bad_compare_flags_are_one_sentence_before_any_work(tmp_path, monkeypatch, capsys, flags, words):
    from rrlib.__main__ import main

    monkeypatch.chdir(tmp_path)
    status = main(["compare", "--variants", "review", "--against", "standard", "--size", "tiny", "--runs", "runs",
                   "--out", "verdict", *flags])
    err = capsys.readouterr().err
    assert status == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "verdict").exists()


def test_a_bad_seed_count_is_the_parser_s_one_line(tmp_path, monkeypatch, capsys):
    from rrlib.__main__ import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["compare", "--variants", "review", "--against", "standard", "--size", "tiny", "--seeds", "x",
              "--out", "verdict"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--seeds takes a count or a comma-separated list" in err
    assert len(err.strip().splitlines()) == 1


def test_compare_refuses_an_out_that_is_not_a_folder(tmp_path, monkeypatch, capsys):
    from rrlib.__main__ import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("a file of the user's")
    status = main(["compare", "--variants", "review", "--against", "standard", "--size", "tiny", "--seeds", "2",
                   "--runs", "runs", "--out", "taken"])
    assert status == 2 and "is a file, not a folder" in capsys.readouterr().err
    assert (tmp_path / "taken").read_text() == "a file of the user's" and not (tmp_path / "runs").exists()


def test_report_compare_adds_the_verdict_page_to_the_index(tmp_path, monkeypatch):
    from rrlib.report import build, index
    from rrlib.runs.config import ConfigError

    folder = tmp_path / "token gate!"
    folder.mkdir()
    with pytest.raises(ConfigError, match="holds no verdict.html and verdict.json"):
        build.comparison_page(folder)
    (folder / "verdict.json").write_text('{"question": "is token_gate better than standard?", "rows": []}')
    (folder / "verdict.html").write_text("<html><head><title>is token_gate better than standard?</title></head></html>")
    name, page = build.comparison_page(folder)
    assert name == "token_gate" and page == folder / "verdict.html"
    out = tmp_path / "paper"
    (out / index.COMPARISONS).mkdir(parents=True)
    (out / index.COMPARISONS / f"{name}.html").write_bytes(page.read_bytes())
    text = index.write_index(out, ["An abstract."]).read_text()
    assert '<a href="compare/token_gate.html">token_gate</a>: is token_gate better than standard?' in text


@pytest.mark.parametrize("n", [2, 3])
def test_shards_split_the_missing_runs_not_the_grid(monkeypatch, n):
    """Where one rule's runs are all finished, each shard still gets its share of the missing ones (a split of the
    whole seed-major grid would give shard 0 of 2 every missing run of a two-rule comparison)."""
    from types import SimpleNamespace

    from rrlib.compare import engine

    seeds = list(range(7))
    finished = [(SimpleNamespace(variant="standard", seed=s), {"status": "finished"}) for s in seeds]
    missing = [SimpleNamespace(variant="mgr", seed=s) for s in seeds]
    monkeypatch.setattr(engine, "resolved", lambda req, seeds: None)  # no model is built: plan below answers
    monkeypatch.setattr(engine, "plan", lambda runs, move_aside=False, reuse_root=None: (finished, missing))
    monkeypatch.setattr(engine, "describe", lambda done, todo, log: None)
    trained = []
    monkeypatch.setattr(engine, "run_sweep", lambda size, **kw: trained.append(kw["cells"]))
    lines = []
    for k in range(n):
        request = engine.Request("tiny", ["mgr"], ["standard"], seeds=seeds, shard=(k, n))
        assert engine.train(request, seeds, lines.append) is None  # the other shards' runs are still missing
    assert len(trained) == n
    assert sorted(cell for share in trained for cell in share) == [("mgr", s) for s in seeds]  # each run once
    assert max(map(len, trained)) - min(map(len, trained)) <= 1
    assert f"[compare] shard 0/{n} trains {len(trained[0])} of the 7 missing runs" in lines


def test_a_killed_shard_run_again_trains_every_run_it_had_left(monkeypatch):
    """Shard 0 of 2 killed with two of its runs left, the other shard done meanwhile: run again, it trains both
    (its share is its own for good), and finding none missing after, it goes on to the verdict."""
    from types import SimpleNamespace

    from rrlib.compare import engine

    seeds = list(range(4))
    grid = [SimpleNamespace(variant=v, seed=s) for s in seeds for v in ("mgr", "standard")]
    missing = {"before": grid, "after": []}
    monkeypatch.setattr(engine, "resolved", lambda req, seeds: None)
    monkeypatch.setattr(engine, "describe", lambda done, todo, log: None)
    shares = []
    monkeypatch.setattr(engine, "run_sweep", lambda size, **kw: shares.append(kw["cells"]))
    request = engine.Request("tiny", ["mgr"], ["standard"], seeds=seeds, shard=(0, 2))
    monkeypatch.setattr(engine, "plan", lambda runs, move_aside=False, reuse_root=None: ([], missing["before"]))
    engine.train(request, seeds, lambda line: None)
    first = shares.pop()
    left = [SimpleNamespace(variant=v, seed=s) for v, s in first[-2:]]  # killed before its last two
    calls = iter([left, []])
    monkeypatch.setattr(engine, "plan", lambda runs, move_aside=False, reuse_root=None: ([], next(calls)))
    assert engine.train(request, seeds, lambda line: None) == []  # nothing missing after: the verdict follows
    assert shares == [first[-2:]]


def test_shards_of_another_design_are_refused_in_a_shared_out(tmp_path):
    from rrlib.compare import engine

    ours = engine.Request("tiny", ["mgr"], ["standard"], seeds=[0, 1], shard=(0, 2))
    theirs = engine.Request("tiny", ["hc"], ["standard"], seeds=[0, 1], shard=(1, 2))
    sibling = engine.Request("tiny", ["mgr"], ["standard"], seeds=[0, 1], shard=(1, 2))
    with engine.out_lock(tmp_path / "out", shared=True, design=ours.design):
        with engine.out_lock(tmp_path / "out", shared=True, design=sibling.design):  # one design: side by side
            pass
        with pytest.raises(engine.ConfigError, match="shards of another comparison have trained into --out"):
            with engine.out_lock(tmp_path / "out", shared=True, design=theirs.design):
                pass
    assert [p.name for p in (tmp_path / "out").iterdir()] == [".design.json"]  # no live lock; the design's record


def test_a_design_whose_shards_stopped_keeps_its_out_from_another_design_until_its_verdict(tmp_path):
    """Shard 0/2 of one design has run and left (finished or killed); shard 1/2 of another design, or a plain call of
    it, is refused in one sentence though no shard runs now, while the first design's sibling and a plain call of the
    first design go on; once its verdict is written the folder takes another design."""
    from rrlib.compare import engine, out_folder

    out = tmp_path / "out"
    ours = engine.Request("tiny", ["review"], ["standard"], seeds=[0, 1], shard=(0, 2))
    sibling = engine.Request("tiny", ["review"], ["standard"], seeds=[0, 1], shard=(1, 2))
    theirs = engine.Request("tiny", ["highway"], ["standard"], seeds=[0, 1], shard=(1, 2))
    whole_theirs = engine.Request("tiny", ["highway"], ["standard"], seeds=[0, 1])
    with engine.out_lock(out, shared=True, design=ours.design):
        pass
    for other, shared in ((theirs, True), (whole_theirs, False)):
        with pytest.raises(engine.ConfigError, match=r"^shards of another comparison have trained into --out .* and "
                                                     r"its verdict is not written yet"):
            with engine.out_lock(out, shared=shared, design=other.design):
                pass
    with engine.out_lock(out, shared=True, design=sibling.design):
        pass
    with engine.out_lock(out, design=engine.Request("tiny", ["review"], ["standard"], seeds=[0, 1]).design):
        out_folder.design_done(out)  # a plain call of the design writes its verdict
    with engine.out_lock(out, shared=True, design=theirs.design):
        pass
