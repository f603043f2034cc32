"""The leaderboard study (rrlib.studies.leaderboard_study, run by ``rrlib study run leaderboard``): which rules the
board holds and in what order, how a budget is spent, and the compare calls its plan makes (nothing trains)."""


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


def test_run_trains_each_rules_design_then_its_verdict_then_the_board(monkeypatch):
    """``rrlib study run leaderboard``'s steps: each rule's compare call at the seeds the budget gives it (shards side
    by side), then each rule's verdict call, then one call over every rule at all seeds for the board."""
    from rrlib.studies import leaderboard_study, registry

    monkeypatch.setattr(leaderboard_study, "minutes_per_run", lambda step_ratios: {"a": 1.0, "b": 1.0, "c": 1.0})
    monkeypatch.setattr(leaderboard_study, "finished_seeds", lambda rule: set())
    monkeypatch.setattr(leaderboard_study, "BUDGET_CPU_HOURS", 60 / 60)  # 60 runs: a at 47, b at 13
    designs, verdicts, board = registry.leaderboard_plan(False).steps
    out = "outputs/power/leaderboard"
    flag = lambda job, name: job.argv[job.argv.index(name) + 1]
    assert [(flag(j, "--variants"), flag(j, "--seeds"), flag(j, "--out"), j.shardable) for j in designs] == [
        ("a", "47", f"{out}/a", True), ("b", "13", f"{out}/b", True)]
    assert [(flag(j, "--variants"), j.product, j.shardable) for j in verdicts] == [
        ("a", f"{out}/a/verdict.json", False), ("b", f"{out}/b/verdict.json", False)]
    (whole,) = board
    assert (flag(whole, "--variants"), flag(whole, "--seeds"), whole.product) == ("a", "47",
                                                                                  f"{out}/board/verdict.json")
    assert all(flag(j, "--runs") == "outputs/power/runs" and flag(j, "--against") == "standard"
               for j in designs + verdicts + board)
