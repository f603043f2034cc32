"""The README's and docs' result tables are generated from the pages' results and the claims ledger
(rrlib.report.readme): the committed documents hold what the code makes from the committed runs, and each builder's
text is checked on constructed results."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rrlib.report import index, readme

ROOT = Path(__file__).resolve().parents[1]


class Given:
    """Results made of what a test gives (a frame, or a function of the accessor's arguments); None for the rest."""

    def __init__(self, **given):
        self.given = given

    def __getattr__(self, name):
        value = self.given.get(name)
        return lambda *args, **kwargs: value(*args, **kwargs) if callable(value) else value


def test_every_generated_block_of_the_readme_and_docs_matches_the_committed_results():
    texts = {name: (ROOT / name).read_text() for name in readme.DOCUMENTS}
    names = [block for text in texts.values() for block in readme.block_names(text)]
    # every builder has one block in the documents, none unknown, but the Colab badges, in the README and the docs
    assert sorted(names) == sorted([*readme.BUILDERS, "colab"])
    assert "colab" in readme.block_names(texts["docs/notebooks.md"])
    assert "claims_counts" in readme.block_names(texts["README.md"])  # the finding at a glance
    assert "claims" in readme.block_names(texts["docs/results.md"])  # the whole ledger
    results = index.Results()  # the committed runs, read with each page's own parameters; one ledger for all
    for name, text in texts.items():
        assert readme.render(text, results) == text, (
            f"{name}'s result tables differ from the committed runs' results: `python -m rrlib report` regenerates them")


def test_a_changed_result_changes_the_readme_and_an_unknown_block_is_refused(tmp_path):
    results = Given(final_loss=pd.DataFrame({"sublayers": [4, 8], "review": [2.5, 2.4], "highway": [2.6, 2.5],
                                             "standard": [2.55, 2.45]}))
    doc = tmp_path / "README.md"
    doc.write_text("intro\n<!-- rrlib:depth -->\nstale\n<!-- /rrlib:depth -->\nafter\n")
    assert readme.update(doc, results)
    assert doc.read_text() == ("intro\n<!-- rrlib:depth -->\n| blocks (sublayers) | review | highway | standard |\n"
                               "|---|---|---|---|\n| 2 (4) | 2.500 | 2.600 | 2.550 |\n| 4 (8) | 2.400 | 2.500 | 2.450 |\n"
                               "<!-- /rrlib:depth -->\nafter\n")
    assert not readme.update(doc, results)  # a second run changes nothing
    doc.write_text("<!-- rrlib:nonsense -->\n<!-- /rrlib:nonsense -->\n")
    with pytest.raises(ValueError, match="no builder; known blocks: .*depth"):
        readme.update(doc, results)


def test_the_family_block_reads_the_summarys_documented_names():
    summary = pd.DataFrame({"variant": ["standard", "mgr"], "params_M": [1.234, 1.25], "flops_per_token": [7.5e6, 8e6],
                            "loss": [2.2, 2.19], "sd": [0.01, 0.012], "gap": [float("nan"), 0.0123],
                            "p": [float("nan"), 0.0042], "p_holm": [float("nan"), 0.021],
                            "p_holm_secondary": [float("nan"), 0.3], "detectable": [float("nan"), 0.0301],
                            "tokens_per_s_vs_standard": [1.0, 0.874], "peak_memory_vs_standard": [1.0, float("nan")]})
    block = readme.family(Given(family_summary=lambda wide=False: None if wide else summary))
    assert "| `standard` | 1.23 | 7.50 | 2.2000 ± 0.0100 | – | – | 1.00 | 1.00 |" in block
    assert ("| `mgr` | 1.25 | 8.00 | 2.1900 ± 0.0120 | +0.0123 (p 0.0042, Holm 0.021; val_loss Holm 0.3) | 0.0301 | "
            "0.87 | – |") in block


def test_the_recipe_block_names_the_tost_margin_of_the_result():
    gaps = pd.DataFrame({"recipe": "rrlib", "size": "mini", "baseline": ["highway", "standard"], "mean_ref": 2.0,
                         "mean_base": [2.01, 2.02], "paired_gap": [0.01, 0.02], "ci_low": [0.0, 0.01],
                         "ci_high": [0.02, 0.03], "paired_p": [0.05, 0.001]})
    moved = pd.DataFrame({"baseline": ["highway"], "gap_difference": [-0.004], "ci_low": [-0.01], "ci_high": [0.002],
                          "p": [0.2], "p_equivalent": [0.0031], "detectable": [0.0123], "margin": [0.02]})
    block = readme.recipe(Given(recipe_gaps=gaps, recipe_gap_difference=moved))
    assert "| rrlib (`mini`) | 2.0000 | 2.0100 | 2.0200 | +0.0100 [+0.0000, +0.0200], p 0.05 |" in block
    assert "| paired p | TOST p (±0.02) | detectable change (80 %) |" in block
    assert "| highway | −0.0040 [−0.0100, +0.0020] | 0.2 | 0.0031 | 0.0123 |" in block


def test_the_powered_block_lists_every_pilot_then_only_the_finished_designs():
    pilot = {"variant": "review", "target": 0.01, "pilot_seeds": 4, "sd": 0.0207, "design_seeds": 36,
             "design_cpu_hours": 67.3}
    pilots = [pd.DataFrame([pilot | {"size": "mini", "baseline": "standard", "seeds_needed": 36,
                                     "comparison_cpu_hours": 44.8},
                            pilot | {"size": "mini", "baseline": "highway", "seeds_needed": 10,
                                     "comparison_cpu_hours": 12.5}])]
    block = readme.powered(Given(pilots=pilots, powered_designs=[None, None, None]))
    assert "| `mini` | review vs standard | 0.01 | 4 | 0.0207 | 36 | 44.8 | 36 | 67.3 |" in block
    assert "| `mini` | review vs highway | 0.01 | 4 | 0.0207 | 10 | 12.5 | 36 | 67.3 |" in block
    assert block.count("\n| `") == 2  # no design has finished: its table has a header and no rows
    design = pd.DataFrame({"size": ["mini"], "variant": "review", "baseline": "highway", "seeds": 10, "gap": 0.012,
                           "ci_low": 0.004, "ci_high": 0.02, "p_holm": 0.006, "detectable": 0.0098,
                           "p_equivalent_holm": 0.9, "margin": 0.01, "verdict": "better"})
    assert ("| `mini` | review vs highway | 10 | +0.0120 [+0.0040, +0.0200] | 0.006 | 0.0098 | 0.9 (±0.01) | "
            "**better** |") in readme.powered(Given(pilots=pilots, powered_designs=[None, design, None]))


def test_the_claims_block_sets_a_no_difference_claims_detectable_gap_against_its_margin():
    row = {"paper": "Looped", "claim": "the optimum does not move", "test": "TOST", "correction": "", "effect": 0.004,
           "ci_low": -0.27, "ci_high": 0.28, "p": 0.97, "paper_effect": float("nan"), "detectable": 0.48,
           "margin": 1 / 6, "verdict": "inconclusive", "evidence": ""}
    block = readme.claims(Given(claims=pd.DataFrame([row, row | {"claim": "a tighter design", "detectable": 0.15}])))
    interval = "+0.004 [−0.270, +0.280]"
    assert f"| the optimum does not move | **inconclusive** | {interval} | no: detects 0.48 vs the margin ±0.167 |" in block
    assert f"| a tighter design | **inconclusive** | {interval} | yes: detects 0.15 vs the margin ±0.167 |" in block


def test_the_powered_looped_block_shows_the_pilot_then_the_design_once_it_has_finished():
    pilot = {"n": 4, "sd": 0.126, "seeds_needed": 5, "target": 0.25, "pilot_cpu_hours": 10.14,
             "design_seeds": 8, "design_cpu_hours": 20.28}
    pilot = pd.DataFrame([pilot | {"estimator": "parabola", "n": 3, "effect": 0.127},
                          pilot | {"estimator": "grid", "effect": -0.175}])
    block = readme.looped_power(Given(looped_power_pilot=pilot, looped_power=None))
    assert "| seeds to detect 0.25 |" in block
    assert "| grid | 4 | −0.175 | 0.126 | 5 | 10.1 | 8 | 20.3 |" in block
    assert block.count("\n|---") == 1  # the pilot alone while the design runs
    powered = SimpleNamespace(
        contrast=pd.DataFrame({"estimator": ["parabola"], "n": 7, "effect": 0.2, "ci_low": 0.05, "ci_high": 0.35,
                               "p": 0.013, "mde": 0.18}),
        transfer=pd.DataFrame({"runs": ["all runs"], "variant": "scaled", "estimator": "parabola", "seeds": 7,
                               "slope": -0.05, "ci_low": -0.15, "ci_high": 0.05, "p": 0.3, "p_equivalent": 0.02,
                               "fold_change": 0.9, "verdict": "transfers (within ±0.17 per doubling)"}),
        trainability=pd.DataFrame({"loops": [1, 2], "seeds": 8, "gap": [0.0, 0.03], "ci_low": [None, 0.01],
                                   "ci_high": [None, 0.05], "p": [float("nan"), 0.01],
                                   "p_holm": [float("nan"), 0.01], "note": ["same model", ""]}))
    block = readme.looped_power(Given(looped_power_pilot=pilot, looped_power=powered))
    assert "| parabola | 7 | +0.200 [+0.050, +0.350] | 0.013 | 0.180 |" in block
    assert "| all runs | `scaled` | parabola | 7 | −0.05 [−0.15, +0.05] |" in block
    assert "| 2 | 8 | +0.0300 [+0.0100, +0.0500] | 0.01 | 0.01 |" in block
    assert "\n| 1 |" not in block  # N = 1 is the same model under both rules


def test_the_reach_block_lists_every_study_and_waits_with_its_words():
    """Every reach study is a line, with no runs where it has none; each claim it answers, and an exploratory reading
    that follows one, is a line with its effect, or with what it waits for."""
    from rrlib.studies import looped_reach_study

    runs = pd.DataFrame([{"study": "rezero_speed", "runs": 32, "seeds": 4, "diverged": 1, "cpu_hours": 0.376,
                          "commits": "839720f"}])
    base = {"effect": -2.27, "ci_low": -2.52, "ci_high": -2.03, "status": "registered", "follows": None}
    claims = pd.DataFrame([base | {"id": "rezero-converges-faster-as-run", "verdict": "contradicted"},
                           base | {"id": "rezero-converges-faster-8e-3", "verdict": "contradicted",
                                   "status": "exploratory", "follows": "rezero-converges-faster-as-run"},
                           base | {"id": "rezero-120-layers",
                                   "verdict": "untested: rezero_depth runs not finished (3 of 4 seeds)", "effect": None},
                           base | {"id": "review-gain-1b", "verdict": "supported"}])
    block = readme.reach(Given(reach_runs=runs, claims=claims))
    for name in looped_reach_study.REACH:
        assert f"| `{name}` |" in block
    assert "| `unique_layers` | looped-depends-on-l | 0 | – | – | – | – |" in block  # the L sweep, last
    assert "| `rezero_speed` | rezero-converges-faster-as-run | 32 | 4 | 1 | 0.38 | 839720f |" in block
    assert "| `highway_depth` | highway-hundreds-of-layers | 0 | – | – | – | – |" in block
    assert "| rezero-converges-faster-8e-3 | **contradicted** (exploratory) | −2.270 [−2.520, −2.030] |" in block
    assert "| rezero-120-layers | **untested** | rezero_depth runs not finished (3 of 4 seeds) |" in block
    assert "review-gain-1b" not in block


def test_the_leaderboard_block_judges_only_judged_rules_and_says_where_the_rest_stand():
    common = {"paper": "p", "ci_low": 0.001, "ci_high": 0.003, "p_holm": 0.012, "detectable": 0.004,
              "step_per_flop_vs_standard": 1.08}
    board = pd.DataFrame([common | {"rule": "standard", "stage": "baseline", "gap": 0.0, "verdict": "baseline",
                                    "stands_at": "47 seeds"},
                          common | {"rule": "good", "stage": "judged", "gap": 0.002, "verdict": "better",
                                    "stands_at": "47 seeds, Holm over 2"},
                          common | {"rule": "later", "stage": "in progress", "gap": None, "verdict": None,
                                    "stands_at": "10 of 47 seeds; 37 runs, 1.6 CPU-h to go"}])
    block = readme.leaderboard(Given(board=board))
    assert "`standard`" not in block
    assert "| `good` | p | 47 seeds, Holm over 2 | +0.0020 [+0.0010, +0.0030] | 0.012 | 0.0040 | **better** | 1.08 |" in block
    assert "| `later` | p | 10 of 47 seeds; 37 runs, 1.6 CPU-h to go | – | – | – | – | 1.08 |" in block


def test_the_results_read_the_runs_and_parameters_a_build_gave_its_pages(monkeypatch):
    """A quick build's abstract describes the quick build's runs: each result is called with the page's parameters,
    the notebook's own under the build's."""
    results = index.Results({"02_depth_stability": {"out_root": "build/quick/runs", "depths": [2, 4], "seeds": [0]},
                             "05_related_methods": {"out_root": "build/quick/runs", "size": "tiny", "seeds": [0],
                                                    "wide_size": None}})
    assert results.page("02_depth_stability")["grad_windows"] == 8  # the notebook's own, where the build gave none
    called = {}

    def recorded(name, answer):
        def result(*args):
            called[name] = args
            return answer
        return result

    monkeypatch.setattr(index.depth, "mean_final_loss",
                        recorded("depth", pd.DataFrame({"sublayers": [4]}).set_index("sublayers")))
    monkeypatch.setattr(index.family, "family_summary", recorded("family", pd.DataFrame({"variant": ["standard"]})))
    results.final_loss()
    assert called["depth"][0] == [2, 4] and called["depth"][2] == [0] and called["depth"][3] == "build/quick/runs"
    assert results.family_summary()["variant"].tolist() == ["standard"]
    assert called["family"][0] == "tiny" and called["family"][2] == [0] and called["family"][3] == "build/quick/runs"
    assert results.family_summary(wide=True) is None  # the build gave no wider size


class _Stub:
    """A stand-in for rrlib.report.index.Results with the three results the summary blocks read."""

    def __init__(self, board=None, claims=None, controls=None):
        self._board, self._claims, self._controls = board, claims, controls

    def board(self):
        return self._board

    def claims(self):
        return self._claims

    def controls(self):
        return self._controls


def test_the_board_sentence_names_every_rule_the_board_calls_better_and_worse():
    board = pd.DataFrame({"paper": ["A, arXiv:1", "B, arXiv:2", "C", "pre-norm residual", "D"],
                          "stage": ["judged", "judged", "judged", "baseline", "in progress"],
                          "gap": [0.0412, -0.02, 0.001, 0.0, np.nan], "seeds": [47, 47, 47, np.nan, 3],
                          "verdict": ["better", "worse", "inconclusive", "", ""]})
    assert readme.board_finding(_Stub(board=board)) == (
        "On the leaderboard (47 seeds, Holm over 3 rules) 1 rule beats the standard residual: A; 1 fall behind it.\n")


def test_each_controlled_verdict_names_its_setting_and_its_controls_state():
    claims = pd.DataFrame({"id": ["x"], "paper": ["ReZero"], "claim": ["converges faster"],
                           "verdict": ["contradicted"],
                           "setting": ["300 steps (0.15 passes over the sample), 12 blocks, lr 0.004, against s; "
                                       "controls: a (b) c: d"]})
    controls = pd.DataFrame({"record": ["x", "x"], "study": ["s1", "s2"], "role": ["positive control", "horizon"],
                             "state": ["passes", "pending"], "finding": ["", ""], "unsettles": ["", ""]})
    assert readme.reach_settings(_Stub(claims=claims, controls=controls)) == (
        "ReZero **contradicted** (300 steps, 12 blocks; controls: 1 passes, 1 pending).\n")
