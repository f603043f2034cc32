"""The claims ledger without a notebook: rrlib.claims.ledger.ledger() builds every record's row from the run folders and
the paper's run table, and gives the committed ledger (paper/tables/07_claims.csv) as page 07 stores it."""
from pathlib import Path

from rrlib.claims import ledger, records
from rrlib.views.tables import STORED_DIGITS, rounded

ROOT = Path(__file__).resolve().parents[1]


def test_the_ledger_from_run_folders_is_the_committed_one(data):
    table = ledger.ledger()
    assert list(table["id"]) == [cid for cid in table["id"] if cid in records.by_id()]  # one row per record, no other
    assert set(records.by_id()) == set(table["id"])
    assert rounded(table, STORED_DIGITS).to_csv(index=False) == (ROOT / "paper/tables/07_claims.csv").read_text()


def test_the_page_s_parameters_become_the_ledger_s_inputs():
    inputs = ledger.inputs_from({"seeds": [0, 1], "alpha": 0.01, "figures_dir": "x", "out_root": "elsewhere/runs"})
    assert inputs.seeds == (0, 1) and inputs.alpha == 0.01 and inputs.out_root == "elsewhere/runs"
    assert inputs.root("claims") == "elsewhere/claims" and inputs.root("convert_gated") == "elsewhere/convert_gated"
    assert ledger.Inputs(claims_root="mine").root("claims") == "mine"
