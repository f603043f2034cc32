"""The claims ledger without a notebook: rrlib.claims.ledger() builds every record's row from the run folders and the
paper's run table, each by the reader its record names, and gives the committed ledger (paper/tables/07_claims.csv)
as page 07 stores it."""
from dataclasses import replace
from pathlib import Path

import pytest

from rrlib import claims
from rrlib.claims import assemble, readers, records
from rrlib.views.tables import STORED_DIGITS, rounded

ROOT = Path(__file__).resolve().parents[1]


def test_the_ledger_from_run_folders_is_the_committed_one(data):
    table = claims.ledger()
    assert list(table["id"]) == list(records.by_id())  # one row per record, in the records' order, no other
    assert rounded(table, STORED_DIGITS).to_csv(index=False) == (ROOT / "paper/tables/07_claims.csv").read_text()


def test_every_record_names_a_reader_and_its_arguments_fit_it():
    """Each record of the package's file names a reader the ledger has, with arguments that reader takes (a
    reach study, a reading and a rule each exist)."""
    import inspect

    from rrlib.runs.presets import load_preset
    from rrlib.studies import looped_reach_study

    rules = set(load_preset("family").variants)
    for claim in records.load():
        name, arguments = readers.named(claim)
        signature = inspect.signature(readers.READERS[name])
        signature.bind(claim, None, *arguments)  # raises where the arguments do not fit
        if name == "reach":
            assert arguments[0] in looped_reach_study.REACH and arguments[1] in readers.REACH_READS, claim.id
        if name in ("gain", "over", "beats_both", "growth"):
            assert set(arguments[:2 if name != "growth" else 1]) - {"endpoint", "fit"} <= rules, claim.id


def test_a_record_naming_no_known_reader_is_one_sentence_naming_it_and_the_readers():
    claim = replace(records.by_id()["hc-gain"], reader="nosuch")
    with pytest.raises(ValueError, match=r"^record hc-gain names the reader 'nosuch'; a record's reader is one of "
                                         r"beats_both, .*unique_layers, alone or as a one-key mapping"):
        readers.read(claim, None)
    with pytest.raises(ValueError, match="names the reader None"):
        readers.read(replace(claim, reader=None), None)


def test_a_reader_is_dispatched_with_its_records_arguments_and_a_group_is_made_once(monkeypatch):
    calls = []
    monkeypatch.setitem(readers.READERS, "probe", lambda claim, context, *args: calls.append(args) or {"x": args})
    claim = replace(records.by_id()["hc-gain"], reader={"probe": ["hc", 0.5]})
    assert readers.read(claim, None) == {"x": ("hc", 0.5)} and calls == [("hc", 0.5)]
    assert readers.read(replace(claim, reader="probe"), None) == {"x": ()}
    context, made = readers.Context(assemble.Inputs(), {}), []
    rows = [{"claim": "a", "v": 1}, {"claim": "b", "v": 2}]
    for label in ("a", "b"):
        assert context.group("pair", lambda: made.append(1) or rows)[label]["claim"] == label
    assert made == [1]


def test_the_page_s_parameters_become_the_ledger_s_inputs():
    inputs = assemble.inputs_from({"seeds": [0, 1], "alpha": 0.01, "figures_dir": "x", "out_root": "elsewhere/runs"})
    assert inputs.seeds == (0, 1) and inputs.alpha == 0.01 and inputs.out_root == "elsewhere/runs"
    assert inputs.root("claims") == "elsewhere/claims" and inputs.root("convert_gated") == "elsewhere/convert_gated"
    assert assemble.Inputs(claims_root="mine").root("claims") == "mine"
