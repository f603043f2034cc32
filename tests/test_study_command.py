"""``rrlib study``: list, plan and status read the committed runs exactly; run trains a tiny stand-in study end to
end (its steps in order, shards side by side), skips what is done on a second call, and exits 1 naming a run that
failed; bad input is one sentence and exit 2 before any work."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rrlib.studies import command, registry
from rrlib.studies.work import Job, Plan, Run, state, sweep_job

ROOT = Path(__file__).resolve().parents[1]


def study(argv, env=None):
    return subprocess.run([sys.executable, "-m", "rrlib", "study", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("argv, said", [
    (["run", "nosuch"], "error: rrlib study run names an unknown study 'nosuch'; valid choices: sizes, depth, "),
    (["status"], "error: rrlib study status names no study; valid choices: sizes, "),
    (["run", "sizes", "--jobs", "0"], "error: --jobs takes a positive whole number up to 256, such as 2"),
    (["run", "sizes", "--jobs", "two"], "error: --jobs takes a positive whole number up to 256, such as 2"),
    (["run", "sizes", "--jobs", "100000"], "error: --jobs takes a positive whole number up to 256, such as 2"),
    (["launch", "sizes"], "error: unknown action 'launch'; valid choices: list, plan, run, status"),
])
def test_bad_input_is_one_sentence_naming_the_choices_before_any_work(argv, said):
    done = study(argv)
    assert done.returncode == 2 and done.stderr.startswith(said) and len(done.stderr.strip().splitlines()) == 1, \
        done.stderr
    if "valid choices: sizes" in said:
        assert done.stderr.strip().endswith(", ".join(registry.STUDIES)[-40:])


def test_every_study_of_the_report_is_registered():
    studies = {"sizes", "depth", "size_tokens", "recipe_ablation", "family", "family_mini", "looped_grid",
               "looped_power", "power_pilot", "claims_family", "claims_depth", "claims_conversion", "conversion_fresh",
               "unique_layers",
               "leaderboard", *registry.POWER_DESIGNS}
    from rrlib.studies.looped_reach_study import REACH

    assert studies | set(REACH) == set(registry.STUDIES)


def finished_results(root: str, sizes, variants, seeds) -> int:
    return sum((ROOT / root / size / v / f"seed{s}" / "result.json").exists()
               for size in sizes for v in variants for s in seeds)


def test_list_plan_and_status_count_the_committed_runs(monkeypatch, capsys):
    from rrlib.runs.presets import load_preset
    from rrlib.studies import reach_control_study as control

    variants = load_preset("mini").variants
    recipe = finished_results("outputs/recipe", ("mini", "mini_paper"), variants, range(5))
    rates = control.HIGHWAY_RATES
    rates_done = sum((ROOT / rates.arm_root(a) / "reach100" / a.variant / f"seed{s}" / "result.json").exists()
                     for a in rates.arms for s in control.FIXED_SEEDS[rates.name])
    monkeypatch.setattr(command, "STUDIES", {n: registry.STUDIES[n] for n in ("recipe_ablation", "highway_rates")})
    assert command.main(["list"]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:] if line[:1].strip()}
    assert rows["recipe_ablation"] == f"{recipe}/{2 * len(variants) * 5}"
    assert rows["highway_rates"] == f"{rates_done}/{len(rates.arms) * 2}"

    assert command.main(["plan", "highway_rates"]) == 0
    out = capsys.readouterr().out
    assert f"step 1: {len(rates.arms)} calls, side by side" in out and "timed at reach100" in out
    assert out.count("rrlib sweep --size reach100 --variants highway_convex") == len(rates.arms)
    assert f"{rates_done}/{len(rates.arms) * 2} runs done" in out

    assert command.main(["status", "recipe_ablation"]) == 0
    assert capsys.readouterr().out.startswith(f"recipe_ablation: {recipe}/{2 * len(variants) * 5} runs done")


def test_the_powered_plan_gives_its_pilots_arithmetic(capsys):
    assert command.main(["plan", "review_power_mini"]) == 0
    out = capsys.readouterr().out
    assert "pilot: review_power_mini: the pilot's paired SD is" in out and "10 seeds detect 0.01 nats" in out
    assert "rrlib compare --allow-slow --size review_power_mini --variants review --against highway --seeds 10" in out


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """A two-step study at the tiny size, 4 steps a run: standard at seeds 0 and 1, then review at seed 0."""
    root = str(tmp_path / "runs")

    def plan(ready):
        steps = [[sweep_job("first", "tiny", ["standard"], [0, 1], root, "--steps", "4", "--device", "cpu")],
                 [sweep_job("then", "tiny", ["review"], [0], root, "--steps", "4", "--device", "cpu")]]
        return Plan(steps, ["  a stand-in"])

    entry = registry.Entry("stand_in", "rrlib.runs.sweep", "a tiny stand-in", plan, logs=str(tmp_path / "logs"))
    monkeypatch.setattr(command, "STUDIES", {"stand_in": entry})
    monkeypatch.setattr(command, "POLL_SECONDS", 0.2)
    return entry, root


def test_a_stand_in_study_runs_its_steps_then_resumes_with_nothing_to_do(stand_in, capsys, monkeypatch):
    entry, root = stand_in
    assert command.main(["run", "stand_in", "--jobs", "2"]) == 0
    err = capsys.readouterr().err
    runs = [Run(root, "tiny", "standard", 0), Run(root, "tiny", "standard", 1), Run(root, "tiny", "review", 0)]
    assert [state(r) for r in runs] == ["done"] * 3
    assert "--shard 0/2" in err and "--shard 1/2" in err  # one call, fewer than --jobs: split into shards
    assert "3/3 done" in err and err.index("tiny/standard/seed") < err.index("tiny/review/seed0")  # steps in order

    def no_process(*args, **kwargs):
        raise AssertionError("a finished study starts nothing")

    monkeypatch.setattr(command.subprocess, "Popen", no_process)
    assert command.main(["run", "stand_in"]) == 0
    assert "every run of its plan is done (3 runs)" in capsys.readouterr().err
    assert command.main(["status", "stand_in"]) == 0
    assert capsys.readouterr().out.startswith("stand_in: 3/3 runs done")


def test_a_failed_run_makes_run_exit_1_naming_it_and_status_names_it(stand_in, capsys):
    entry, root = stand_in
    broken = Run(root, "tiny", "standard", 1)
    broken.folder.mkdir(parents=True)
    (broken.folder / "config.json").write_text("{ not json")  # the sweep cannot read it, and names it
    assert command.main(["run", "stand_in"]) == 1
    err = capsys.readouterr().err
    assert f"error: study stand_in: 1 run failed: {broken} (log " in err
    assert state(Run(root, "tiny", "standard", 0)) == "done"
    assert state(Run(root, "tiny", "review", 0)) == "left"  # a failed step stops the steps after it
    assert json.loads((Path(entry.logs) / "study-stand_in.json").read_text())["failed"].keys() == {str(broken)}
    assert command.main(["status", "stand_in"]) == 0
    out = capsys.readouterr().out
    assert "1/3 runs done" in out and "1 failed" in out and f"failed: {broken} (log " in out


def test_status_tells_running_stopped_and_left_runs(stand_in, capsys):
    from rrlib.runs.folders import run_lock

    entry, root = stand_in
    stopped = Run(root, "tiny", "standard", 1)
    stopped.folder.mkdir(parents=True)
    (stopped.folder / "metrics.jsonl").write_text('{"step": 2, "loss": 5.0}\n')
    held = Run(root, "tiny", "standard", 0)
    with run_lock(held.folder):
        assert state(held) == "running"
        assert command.main(["status", "stand_in"]) == 0
    out = capsys.readouterr().out
    assert "0/3 runs done" in out and "1 running" in out and "1 stopped part-way" in out and "1 left" in out
    assert f"running (held by another process): {held}" in out and f"stopped part-way: {stopped}" in out
    assert state(held) == "left"


def test_shards_split_a_step_with_fewer_calls_than_jobs():
    one = Job("a", ("sweep",), tuple(Run("r", "tiny", "standard", s) for s in range(3)))
    parts = command.shards([one], 4)
    assert [p.argv[-1] for p in parts] == ["0/3", "1/3", "2/3"]  # never more shards than runs
    assert sorted(r.seed for p in parts for r in p.runs) == [0, 1, 2]
    assert command.shards([one, one], 2) == [one, one]


# ---------------------------------------------------------------- the registered designs land where the pages read


def notebook_parameters(name: str) -> dict:
    """The literal assignments of a notebook's parameters cell."""
    import ast

    text = (ROOT / "notebooks" / f"{name}.py").read_text()
    cell = text.split('# %% tags=["parameters"]\n', 1)[1].split("\n# %%", 1)[0]
    values = {}
    for node in ast.parse(cell).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return values


def jobs_of(name: str) -> list[Job]:
    return [job for step in registry.STUDIES[name].plan(False).steps for job in step]


def test_the_family_studies_are_the_sizes_page_05_reads_in_one_call_that_shards():
    params = notebook_parameters("05_related_methods")
    for name, size in (("family", params["size"]), ("family_mini", params["wide_size"])):
        (job,) = jobs_of(name)
        assert job.argv[:3] == ("sweep", "--size", size) and job.shardable
        assert [p.argv[-1] for p in command.shards([job], 2)] == ["0/2", "1/2"]


def test_the_size_studies_sweep_every_size_pages_03_04_and_06_read_and_every_size_exists():
    from rrlib.runs.presets import available_sizes

    sizes = {name: [job.argv[2] for job in jobs_of(name)] for name in ("sizes", "depth", "size_tokens")}
    assert sorted(sizes["size_tokens"]) == sorted(notebook_parameters("06_size_vs_tokens")["grid_sizes"])
    assert {s.split("_steps")[0] for s in sizes["size_tokens"]} == {"micro", "mini"}
    assert set(sizes["depth"]) == {f"depth{n}" for n in (2, 4, 8, 12, 16, 20, 24)}
    assert set(sizes["sizes"]) == {"micro", "mini", "midi"}
    assert {s for each in sizes.values() for s in each} <= set(available_sizes())
    assert all(job.argv[job.argv.index("--out") + 1] == "outputs/runs" for n in sizes for job in jobs_of(n))


def test_the_recipe_ablation_runs_both_recipes_seed_major_where_page_04_reads_them():
    jobs = jobs_of("recipe_ablation")
    assert [(job.argv[2], job.argv[job.argv.index("--seeds") + 1]) for job in jobs] == [
        (size, str(seed)) for seed in range(5) for size in ("mini_paper", "mini")]
    assert {job.argv[job.argv.index("--out") + 1] for job in jobs} == {
        notebook_parameters("04_statistics")["recipe_root"]}


def test_the_claims_parts_are_the_claims_studys_and_the_conversion_trains_its_sources_first():
    from rrlib.studies.claims_study import CONVERT_ROOT, CONVERT_GATED_ROOT, PARTS

    assert {n for n in registry.STUDIES if n.startswith("claims_")} == {f"claims_{p}" for p in PARTS}
    first, then = registry.STUDIES["claims_conversion"].plan(False).steps
    assert {r.root for job in first for r in job.runs} == {"outputs/claims"}
    assert {r.root for job in then for r in job.runs} == {CONVERT_ROOT, CONVERT_GATED_ROOT}
    assert all("train.init_from=\"outputs/claims/family_power/standard/seed{seed}\"" in job.argv for job in then)


def test_a_setting_goes_to_the_sweep_as_the_library_reads_it_back():
    import yaml

    from rrlib.studies.work import override_args, setting

    for value in (5e-05, 1 / 60_000, 2.0, 3, None, True, "outputs/x/seed{seed}", {"block_size": 2, "gate": True}):
        assert yaml.safe_load(setting(value)) == value
    assert override_args({"train": {"lr": 5e-05}}) == ["--set", "train.lr=5.0e-05"]


# ---------------------------------------------------------------- a user's rule joins a study that compares rules


def tree(folder: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def test_a_users_rule_joins_the_board_trained_apart_and_ranked_among_the_published(tmp_path, monkeypatch, capsys,
                                                                                   user_rule, registry_as_it_was):
    """A tiny stand-in board (review against standard, two seeds, 4 steps): only the user's rule trains, into its
    --out; the published runs are read-only and stay as they were; the board ranks the user's rule with the
    published one, Holm over both."""
    from rrlib import __main__ as cli
    from rrlib.runs.sweep import results_table
    from rrlib.stats.verdict import compare_pairs
    from rrlib.studies.user_board import Board

    published = tmp_path / "published"
    done = subprocess.run([sys.executable, "-m", "rrlib", "sweep", "--size", "tiny", "--variants", "standard,review",
                           "--seeds", "0,1", "--steps", "4", "--out", str(published)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    before = tree(published)
    board = Board("tiny", "standard", 2, str(published), lambda: ["review"], extra=("--steps", "4"))
    entry = registry.Entry("stand_board", "rrlib.runs.sweep", "a tiny stand-in board", lambda ready: Plan([]),
                           board=board)
    monkeypatch.setattr(command, "STUDIES", {"stand_board": entry})
    monkeypatch.setattr(command, "POLL_SECONDS", 0.2)
    rules, out = user_rule(tmp_path), tmp_path / "mine"
    for path in [published, *before]:
        path.chmod(path.stat().st_mode & ~0o222)  # read-only: a write there would fail the run
    try:
        status = cli.main(["study", "run", "stand_board", "--rules", str(rules), "--variants", "sigmoid_scalar",
                           "--out", str(out), "--jobs", "2"])
    finally:
        for path in [published, *before]:
            path.chmod(path.stat().st_mode | 0o200)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert tree(published) == before
    assert sorted(results_table(str(out / "runs"))["variant"]) == ["sigmoid_scalar"] * 2  # only the user's runs
    rows = __import__("pandas").read_csv(out / "board.csv")
    assert set(rows["variant"]) == {"review", "sigmoid_scalar"} and list(rows["rank"]) == [1, 2]
    assert rows["gap"].is_monotonic_decreasing and (rows["seeds"] == 2).all()
    assert rows.set_index("variant")["yours"].to_dict() == {"review": False, "sigmoid_scalar": True}
    assert rows["step_time_per_flop_vs_baseline"].notna().all() and (out / "board.html").exists()
    alone = compare_pairs(results_table(str(published), "tiny"), ["review"], ["standard"])
    assert rows.set_index("variant").loc["review", "p_holm"] >= alone["p_holm"].iloc[0]  # Holm over two now
    assert "sigmoid_scalar" in captured.out


def test_only_a_study_that_compares_rules_takes_variants_and_never_into_the_projects_outputs():
    for argv in (["run", "sizes", "--variants", "mine"], ["plan", "leaderboard", "--variants", "mine"]):
        done = study(argv)
        assert done.returncode == 2 and done.stderr.strip() == ("error: --variants and --out join your rules to a "
                                                                "study that compares rules, with rrlib study run; "
                                                                "valid choices: family, family_mini, "
                                                                "review_power_micro, family_power_delta, "
                                                                "family_power_mgr, review_power_mini, leaderboard")
    done = study(["run", "leaderboard", "--variants", "mine", "--out", "outputs/power/mine"])
    assert done.returncode == 2 and "lies in the project's outputs/" in done.stderr
    assert not (ROOT / "outputs" / "power" / "mine").exists()


@pytest.mark.parametrize("name", [n for n, e in registry.STUDIES.items() if e.board is not None])
def test_a_users_rule_joins_every_study_that_compares_rules_at_its_committed_runs(name):
    """Each board names a baseline and rules whose committed runs lie where it reads them, at every seed it counts
    (so a user's rule is ranked against the study's own runs), and a user's plan trains only the user's rule at the
    board's size and seeds, into the user's folder."""
    from rrlib.runs.sweep import results_table
    from rrlib.studies.user_board import user_plan

    board = registry.STUDIES[name].board
    table = results_table(str(ROOT / board.runs), board.size)
    done = {(v, s) for v, s in zip(table["variant"], table["seed"])}
    for rule in [board.baseline, *board.rules()]:
        assert {(rule, s) for s in range(board.seeds)} <= done, (name, rule)
    [[job]] = user_plan(board, ["mine"], "build/mine").steps
    assert set(job.runs) == {Run("build/mine/runs", board.size, "mine", s) for s in range(board.seeds)}


@pytest.mark.parametrize("name", ["recipe_ablation", "claims_conversion", "looped_power", "highway_depth"])
def test_a_registered_call_asks_for_the_committed_runs_it_plans(name):
    """The call a plan makes resolves, through the command line's own parser, to runs whose settings are those the
    committed runs recorded (their fingerprints): a rerun skips them instead of refusing them as other runs."""
    from rrlib import __main__ as cli
    from rrlib.runs.folders import claimed
    from rrlib.runs.presets import resolve_run

    job = [job for step in registry.STUDIES[name].plan(False).steps for job in step][-1]
    args = cli.build_parser().parse_args(list(job.argv))
    run = resolve_run(args.size, args.variants[0], args.seeds[0], cli.overrides_from(args), cli.out_root(args.out))
    assert claimed(run)[1] is not None, f"{name}: {' '.join(job.argv)} finds no finished run of its settings"


def test_a_run_stopped_part_way_resumes_from_its_checkpoint(stand_in, capsys, monkeypatch):
    """A run of the study stopped by a signal at step 2 of 4 (its checkpoint saved): status says so, and run goes on
    from that step, not from the start."""
    import os
    import signal

    from rrlib.runs import train as train_module
    from rrlib.runs.presets import resolve_run

    entry, root = stand_in
    real = train_module.get_batch

    def batch(data, step, *args, **kw):
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(data, step, *args, **kw)

    monkeypatch.setattr(train_module, "get_batch", batch)
    with pytest.raises(KeyboardInterrupt, match="checkpoint saved"):
        train_module.train_run(resolve_run("tiny", "standard", 0, {"train": {"steps": 4, "device": "cpu"}}, root),
                               progress=False)
    monkeypatch.setattr(train_module, "get_batch", real)
    stopped = Run(root, "tiny", "standard", 0)
    assert state(stopped) == "stopped" and (stopped.folder / "ckpt.pt").exists()
    assert command.main(["status", "stand_in"]) == 0
    assert f"stopped part-way: {stopped}" in capsys.readouterr().out
    assert command.main(["run", "stand_in"]) == 0
    assert state(stopped) == "done" and result_steps(stopped) == 4
    said = (Path(entry.logs) / "first.log").read_text()
    start = next(line for line in said.splitlines() if "tiny/standard/seed0: device" in line)
    assert "start step 3" in start, start


def result_steps(run: Run) -> int:
    return json.loads((run.folder / "result.json").read_text())["steps"]
