"""The claims as registered records: the file reads, a bad entry or bad YAML is named, every quote is the paper's
own words where a copy of the paper is at hand and the words registered where none is, and the out-of-reach rows' CPU-hours are counted by the model code."""
import json
import math
from pathlib import Path

import pytest

from rrlib.claims import quotes, reach, records

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = records.load()


def test_every_record_reads_with_a_unique_id_and_the_cpu_reach_rows_are_registered_with_their_designs():
    """The rows the CPU's reach answers were registered with the designs committed before their runs: each names its
    study module, and its registration names that commit."""
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    reach = {"highway-hundreds-of-layers", "rezero-120-layers", "rezero-converges-faster-as-run", "layerscale-deeper",
             "looped-depends-on-l", "looped-stream-norm", "attnres-growth-confirm", "mgr-activation-scales-confirm"}
    assert not {c.id for c in CLAIMS if c.pending}  # every registered claim names its design
    for claim in (c for c in CLAIMS if c.id in reach):
        assert claim.status == "registered" and claim.registered.startswith("839720f, before its runs"), claim.id
        assert claim.design.startswith(("rrlib.studies.depth_reach_study", "rrlib.studies.looped_reach_study",
                                        "rrlib.studies.looped_study")), claim.id


def test_an_exploratory_record_follows_a_registered_one_which_keeps_the_verdict():
    by = records.by_id(CLAIMS)
    later = [c for c in CLAIMS if c.status == "exploratory"]
    assert {c.follows for c in later} == {"attnres-growth", "mgr-activation-scales", "rezero-converges-faster-as-run",
                                         "delta-conversion-noninferior"}
    assert all(by[c.follows].status == "registered" and by[c.follows].paper == c.paper for c in later)


def test_the_1b_claim_is_the_paper_s_strong_trend_not_a_significant_gain():
    claim = records.by_id(CLAIMS)["review-gain-1b"]
    assert "strong trend ($t{\\approx}2.3$, $p{\\approx}0.07$)" in claim.quote
    assert "significant" not in claim.label.replace("not significant", "")
    assert "the paper's Welch test (p ≈ 0.07)" in claim.label and "paired test" in claim.label  # both tests named


def test_every_no_difference_claim_has_a_margin_with_its_source():
    for c in CLAIMS:
        if c.kind == "no difference":
            assert c.margin_value > 0 and ("sentence" in c.margin or "note" in c.margin), c.id


@pytest.mark.parametrize("claim, source, words", [(c.id, s, w) for c in CLAIMS for s, w in quotes.sentences(c)],
                         ids=lambda x: x if isinstance(x, str) and len(x) < 40 else "")
def test_the_quote_is_the_paper_s_own_words(claim, source, words):
    path = quotes.source_path(source)
    if path is None:
        pytest.skip(f"no copy of {source} at hand (set RRLIB_PAPERS or RRLIB_REVIEW_TEX to check {claim})")
    assert quotes.occurs(words, path.read_text(encoding="utf-8")), f"{claim}: {words!r} is not in {source}"


def test_a_quote_matches_across_line_breaks_but_not_with_a_changed_sign():
    text = "at 590M they \\emph{significantly}\noutperform both ($+0.009$, $t{=}3.3$)"
    assert quotes.occurs("they \\emph{significantly} outperform both", text)
    assert not quotes.occurs("($-0.009$, $t{=}3.3$)", text)


def write(tmp_path, text):
    path = tmp_path / "records.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """- id: x
  paper: P
  source: arXiv:1
  where: Abstract
  quote: it works
  label: it works
  kind: direction
  metric: m
  test: t
  correction: none
  scope: this harness at CPU scale
  design: d
  registered: 2026-12-06
  status: registered
"""


@pytest.mark.parametrize("change, message", [
    (("kind: direction", "kind: better"), "entry 1 (x): kind 'better' is none of direction, no difference"),
    (("  quote: it works\n", ""), "entry 1 (x): give exactly one of quote"),
    (("  design: d\n", ""), "entry 1 (x): missing design"),
    (("kind: direction", "kind: no difference"), "entry 1 (x): a no-difference claim needs a margin"),
    (("status: registered", "status: exploratory"), "entry 1 (x): an exploratory record names"),
    (("scope: this harness at CPU scale", "scope: GPU only"), "entry 1 (x): a GPU-only claim says what it needs"),
])
def test_a_bad_record_is_named_by_file_and_entry(tmp_path, change, message):
    records.load(write(tmp_path, GOOD))  # the unchanged record reads
    with pytest.raises(records.RecordError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        records.load(write(tmp_path, GOOD.replace(*change)))
    assert str(err.value).startswith("records.yaml: ")


def test_malformed_yaml_is_one_sentence_naming_its_line(tmp_path):
    with pytest.raises(records.RecordError) as err:
        records.load(write(tmp_path, GOOD.replace("  paper: P\n", "  paper: [P\n")))
    said = str(err.value)
    assert said.startswith("records.yaml is not valid YAML at line ") and "\n" not in said, said
    assert "<unicode string>" not in said and "^" not in said


def test_a_changed_quote_is_refused_where_the_paper_s_text_is_at_hand(tmp_path):
    text = records.RECORDS.read_text(encoding="utf-8")
    quote = "higher-contrast attention distributions (max weight ${\\approx}$0.6)"
    assert quote in text and quotes.source_path("family-abstracts.txt") is not None
    with pytest.raises(records.RecordError, match="is not in family-abstracts.txt"):
        records.load(write(tmp_path, text.replace(quote, quote.replace("0.6", "0.9"))))


def test_a_changed_quote_is_refused_where_no_copy_of_the_paper_is_at_hand(tmp_path, monkeypatch):
    """The words as registered are the check where the texts are not (a user's clone has none)."""
    monkeypatch.delenv("RRLIB_PAPERS", raising=False)
    monkeypatch.delenv("RRLIB_REVIEW_TEX", raising=False)
    text = records.RECORDS.read_text(encoding="utf-8")
    quote = "it converges 56% faster on enwiki8."
    copy = write(tmp_path, text.replace(quote, "it converges 86% faster on enwiki8."))
    monkeypatch.setattr(records, "RECORDS", copy)  # the package's own records, edited
    with pytest.raises(records.RecordError, match="rezero-converges-faster.*is not what was registered"):
        records.load(copy)
    records.load(write(tmp_path, text))  # as committed, they read


def test_a_bad_record_stops_the_report_before_any_page_runs(tmp_path, monkeypatch, capsys):
    from rrlib.__main__ import main

    text = records.RECORDS.read_text(encoding="utf-8")
    monkeypatch.setattr(records, "RECORDS", write(tmp_path, text.replace("56% faster", "86% faster")))
    out = tmp_path / "paper"
    status = main(["report", "--only", "07_claims", "--force", "--out", str(out), "--build", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: records.yaml: rezero-converges-faster") and not out.exists(), err
    assert len(err.strip().splitlines()) == 1


def test_the_register_holds_every_record_s_words_as_they_stand():
    """A record added or reworded is registered with its words (python -m rrlib.claims.records --register, which
    checks them against the texts at hand first): the register is what a clone without the texts checks against."""
    assert quotes.register() == {c.id: sorted({quotes.fingerprint(w) for _, w in quotes.sentences(c)})
                                 for c in CLAIMS}


def test_a_repeated_id_is_refused(tmp_path):
    with pytest.raises(records.RecordError, match="id 'x' appears twice"):
        records.load(write(tmp_path, GOOD + GOOD))


def test_a_preset_s_training_flops_are_the_model_s_count_times_its_tokens():
    result = json.loads((ROOT / "outputs/runs/family/review/seed0/result.json").read_text())
    assert reach.preset_train_flops("family") == pytest.approx(result["train_flops"], rel=1e-12)


def test_cpu_hours_grow_with_the_runs_and_a_hardware_need_has_none():
    one = reach.cpu_hours({"preset": "family", "variants": 1, "seeds": 1}, 1e10)
    assert reach.cpu_hours({"preset": "family", "variants": 3, "seeds": 2}, 1e10) == pytest.approx(6 * one)
    assert one == pytest.approx(reach.preset_train_flops("family") / 1e10 / 3600)
    assert math.isnan(reach.cpu_hours({"hardware": "several devices"}, 1e10))
    assert "above the 50-hour budget" in reach.reason({"preset": "590m", "variants": 3, "seeds": 3}, 1e10)


def test_the_page_joins_each_row_to_its_record_and_puts_bh_q_on_the_registered_tested_rows():
    import numpy as np

    from rrlib.claims import page
    from rrlib import stats
    from rrlib.stats import ledger

    by = records.by_id(CLAIMS)
    rows = ledger.ledger([
        ledger.row(by["review-gain-590m"].paper, by["review-gain-590m"].label, "t", "supported", "a.html", 0.01,
                   0.005, 0.015, 0.01),
        ledger.row(by["mgr-gain"].paper, by["mgr-gain"].label, "t", "inconclusive", "", 0.004, -0.002, 0.01, 0.2),
        ledger.row(by["mgr-activation-scales-fit"].paper, by["mgr-activation-scales-fit"].label, "t", "supported", "",
                   0.3, 0.07, 0.5, 0.03),
        ledger.row(by["review-gate-params"].paper, by["review-gate-params"].label, "t", "contradicted", "", 0.14)])
    joined = page.attach(rows, CLAIMS)
    assert list(joined["id"]) == ["review-gain-590m", "mgr-gain", "mgr-activation-scales-fit", "review-gate-params"]
    np.testing.assert_allclose(joined["q_bh"][:2], stats.benjamini_hochberg([0.01, 0.2]))
    assert joined["q_bh"][2:].isna().all()  # an exploratory reading and a measurement are outside the family
    shown = page.ledger_html(joined)
    assert shown.count("<details>") == 4 and "(exploratory)" in shown
    assert "“at 590M they \\emph{significantly} outperform" in shown
    assert page.counts(joined).startswith("3 registered claims of 2 papers: 1 supported, 1 contradicted")
    with pytest.raises(ValueError, match="ledger rows with no record: a claim no record holds"):
        page.attach(ledger.ledger([ledger.row("P", "a claim no record holds", "", "supported", "")]), CLAIMS)


def test_the_conversion_is_judged_as_non_inferiority_on_fresh_seeds_registered_before_their_runs():
    """Delta's conversion claim is that a checkpoint converts, not that it ends better: the registered record is a
    non-inferiority test at a stated margin on seeds 5-9 (seeds 0-4 were read), the superiority reading is shown
    beside it, and no record judges the premise no quote states (that conversion starts at the pretrained
    function)."""
    from rrlib.studies import claims_study, registry

    by = records.by_id(CLAIMS)
    fresh = by["delta-conversion-noninferior"]
    assert fresh.kind == "no difference" and fresh.margin_sides == "upper" and fresh.margin_value == 0.02
    assert "note" in fresh.margin and fresh.registered.startswith("2026-12-07, before its runs")
    assert by["delta-conversion"].status == "exploratory" and by["delta-conversion"].follows == fresh.id
    assert "delta-conversion-start" not in by
    assert set(claims_study.FRESH_CONVERT_SEEDS).isdisjoint(claims_study.CONVERT_SEEDS)
    jobs = [job for step in registry.STUDIES["conversion_fresh"].plan(False).steps for job in step]
    assert {run.seed for job in jobs for run in job.runs} == set(claims_study.FRESH_CONVERT_SEEDS)
