"""The leaderboard study (rrlib.studies.leaderboard_study and scripts/leaderboard_study.py): which rules the board
holds and in what order, how a budget is spent, and the compare calls the script starts (a stub in place of each
call, so nothing trains)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def study():
    spec = importlib.util.spec_from_file_location("leaderboard_study", ROOT / "scripts" / "leaderboard_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_board_is_the_new_rules_and_review_first_then_every_other_family_rule():
    from rrlib.studies import leaderboard_study as study
    from rrlib.rules import RULES
    from rrlib.runs.presets import load_preset
    rules = study.board()
    assert rules[:6] == [*study.NEW_RULES, "review"]
    assert set(rules) == (set(load_preset("family").variants) | set(study.NEW_RULES)) - {"standard"}
    assert len(rules) == len(set(rules)) and set(rules) <= set(RULES)


def test_the_budget_gives_whole_designs_in_order_then_what_is_left(monkeypatch):
    from rrlib.studies import leaderboard_study as study

    minutes = {"a": 2.0, "b": 1.0, "c": 3.0, "d": 1.0}
    done = {"a": set(range(47)), "b": {0, 1}, "c": set(), "d": set()}
    monkeypatch.setattr(study, "finished_seeds", lambda rule: done[rule])
    budget = (45 * 1.0 + 20 * 3.0 + 1.0) / 60  # b's 45 missing runs, 20 of c's at 3 min, a minute left over
    rows = {r["rule"]: r for r in study.plan(budget, minutes)}
    assert (rows["a"]["seeds"], rows["a"]["to_train"]) == (47, 0)  # finished: costs nothing
    assert (rows["b"]["seeds"], rows["b"]["to_train"], rows["b"]["cpu_hours"]) == (47, 45, 45 / 60)
    assert (rows["c"]["seeds"], rows["c"]["to_train"]) == (20, 20)  # what the rest buys, seeds 0-19
    assert rows["c"]["all_seeds_cpu_hours"] == 47 * 3.0 / 60
    assert (rows["d"]["seeds"], rows["d"]["to_train"]) == (0, 0)  # a minute left buys fewer seeds than a pilot's
    assert sum(r["cpu_hours"] for r in rows.values()) <= budget


def test_run_starts_each_rules_shards_then_its_verdict_then_the_board(study, monkeypatch, tmp_path, capsys):
    from rrlib.studies import leaderboard_study

    minutes = {"a": 1.0, "b": 1.0, "c": 1.0}
    monkeypatch.setattr(study, "minutes_per_run", lambda step_ratios: minutes)
    monkeypatch.setattr(leaderboard_study, "finished_seeds", lambda rule: set())
    monkeypatch.setattr(study, "ROOT", tmp_path)
    monkeypatch.chdir(tmp_path)  # main works from ROOT; the test's folder is restored afterwards
    calls = []

    class Started:
        def __init__(self, rules, seeds, out, log, shard=None):
            calls.append((rules, seeds, out, shard))

        def wait(self):
            return 0

    monkeypatch.setattr(study, "compare", Started)
    assert study.main(["--run", "--budget", str(60 / 60), "--jobs", "2"]) == 0  # 60 runs: a at 47, b at 13
    assert "within the budget: 60 runs" in capsys.readouterr().out
    out = "outputs/power/leaderboard"
    assert calls == [(["a"], 47, f"{out}/a", "0/2"), (["a"], 47, f"{out}/a", "1/2"), (["a"], 47, f"{out}/a", None),
                     (["b"], 13, f"{out}/b", "0/2"), (["b"], 13, f"{out}/b", "1/2"), (["b"], 13, f"{out}/b", None),
                     (["a"], 47, f"{out}/board", None)]


@pytest.mark.parametrize("argv, env, said", [
    (["--budget", "nan"], {}, "--budget takes CPU-hours"),
    (["--budget", "inf"], {}, "--budget takes CPU-hours"),
    (["--help"], {"JOBS": "two"}, None),
    ([], {"JOBS": "two"}, "--jobs (or $JOBS) takes a positive whole number such as 2, got 'two'"),
])
def test_a_bad_budget_or_jobs_is_one_sentence_and_help_always_answers(argv, env, said):
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "leaderboard_study.py"), *argv],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    if said is None:
        assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr
    else:
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, \
            done.stderr
