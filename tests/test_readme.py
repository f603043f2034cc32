"""The README's and docs' result tables are generated from the report's committed tables (rrlib.report.readme): they agree."""
from pathlib import Path

import pandas as pd
import pytest

from rrlib.report import readme

ROOT = Path(__file__).resolve().parents[1]


def test_every_generated_block_of_the_readme_and_docs_matches_the_committed_tables():
    texts = {name: (ROOT / name).read_text() for name in readme.DOCUMENTS}
    names = [block for text in texts.values() for block in readme.block_names(text)]
    assert sorted(names) == sorted(readme.BUILDERS), "every builder has one block in the documents, none unknown"
    assert "claims" in readme.block_names(texts["README.md"])  # the finding at a glance
    for name, text in texts.items():
        assert readme.render(text, ROOT / "paper" / "tables") == text, (
            f"{name}'s result tables differ from paper/tables/*.csv: `python -m rrlib report` regenerates them")


def test_a_changed_table_changes_the_readme_and_an_unknown_block_is_refused(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    pd.DataFrame({"sublayers": [4, 8], "review": [2.5, 2.4], "highway": [2.6, 2.5], "standard": [2.55, 2.45]}
                 ).to_csv(tables / "02_final_loss.csv", index=False)
    doc = tmp_path / "README.md"
    doc.write_text("intro\n<!-- rrlib:depth -->\nstale\n<!-- /rrlib:depth -->\nafter\n")
    assert readme.update(doc, tables)
    assert doc.read_text() == ("intro\n<!-- rrlib:depth -->\n| blocks (sublayers) | review | highway | standard |\n"
                               "|---|---|---|---|\n| 2 (4) | 2.500 | 2.600 | 2.550 |\n| 4 (8) | 2.400 | 2.500 | 2.450 |\n"
                               "<!-- /rrlib:depth -->\nafter\n")
    assert not readme.update(doc, tables)  # a second run changes nothing
    doc.write_text("<!-- rrlib:nonsense -->\n<!-- /rrlib:nonsense -->\n")
    with pytest.raises(ValueError, match="no builder; known blocks: .*depth"):
        readme.update(doc, tables)


def test_the_powered_block_lists_every_pilot_then_only_the_finished_designs(tmp_path):
    pilot = {"variant": "review", "target": 0.01, "pilot_seeds": 4, "sd": 0.0207, "design_seeds": 36,
             "design_cpu_hours": 67.3}
    pd.DataFrame([pilot | {"size": "mini", "baseline": "standard", "seeds_needed": 36, "comparison_cpu_hours": 44.8},
                  pilot | {"size": "mini", "baseline": "highway", "seeds_needed": 10, "comparison_cpu_hours": 12.5}]
                 ).to_csv(tmp_path / "04_pilot_mini.csv", index=False)
    block = readme.powered(tmp_path)
    assert "| `mini` | review vs standard | 0.01 | 4 | 0.0207 | 36 | 44.8 | 36 | 67.3 |" in block
    assert "| `mini` | review vs highway | 0.01 | 4 | 0.0207 | 10 | 12.5 | 36 | 67.3 |" in block
    assert block.count("\n| `") == 2  # no design has finished: its table has a header and no rows
    pd.DataFrame({"size": ["mini"], "variant": "review", "baseline": "highway", "seeds": 10, "gap": 0.012,
                  "ci_low": 0.004, "ci_high": 0.02, "p_holm": 0.006, "detectable": 0.0098, "p_equivalent_holm": 0.9,
                  "margin": 0.01, "verdict": "better"}).to_csv(tmp_path / "04_power_tests_mini.csv", index=False)
    assert ("| `mini` | review vs highway | 10 | +0.0120 [+0.0040, +0.0200] | 0.006 | 0.0098 | 0.9 (±0.01) | "
            "**better** |") in readme.powered(tmp_path)


def test_the_claims_block_sets_a_no_difference_claims_detectable_gap_against_its_margin(tmp_path):
    row = {"paper": "Looped", "claim": "the optimum does not move", "test": "TOST", "correction": "", "effect": 0.004,
           "ci_low": -0.27, "ci_high": 0.28, "p": 0.97, "paper_effect": float("nan"), "detectable": 0.48,
           "margin": 1 / 6, "verdict": "inconclusive", "evidence": ""}
    pd.DataFrame([row, row | {"claim": "a tighter design", "detectable": 0.15}]).to_csv(
        tmp_path / "07_claims.csv", index=False)
    block = readme.claims(tmp_path)
    interval = "+0.004 [−0.270, +0.280]"
    assert f"| the optimum does not move | **inconclusive** | {interval} | no: detects 0.48 vs the margin ±0.167 |" in block
    assert f"| a tighter design | **inconclusive** | {interval} | yes: detects 0.15 vs the margin ±0.167 |" in block
