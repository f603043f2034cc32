"""Data a user points at, a cut of it on disk, and a study's shards: where the data lies that cannot be looked at
(a loop of links) is one sentence; a fetched cut's data_source follows its stories' hash; an earlier cut that
cannot be used is named as what it is (not there, cut short, unrecorded) with its file; a study's compare shard
is judged by the runs that shard trains; a study whose every run fails exits 1 naming each."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rrlib.runs.data import DataError, iter_stories
from rrlib.runs.data.sources import HUB_DATASET, SAMPLES, locate
from rrlib.runs.data.token_cache import load_token_data
from rrlib.studies import command, registry
from rrlib.studies.work import Job, Plan, Run, cells, state

from conftest import REPO
from test_sources import hub_stand_in, no_hub

TRAIN = "TinyStories-train-sample.txt"


def loop_of_links(tmp_path) -> Path:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def test_a_data_path_that_is_a_loop_of_links_is_one_sentence(tmp_path):
    loop = loop_of_links(tmp_path)
    with pytest.raises(DataError, match=f"data file {loop} cannot be looked at"):
        load_token_data(data_path=str(loop), tokenizer="bytes", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_train_with_a_data_path_that_is_a_loop_of_links_exits_2_before_writing(tmp_path):
    loop = loop_of_links(tmp_path)
    done = subprocess.run([sys.executable, "-m", "rrlib", "train", "--size", "tiny", "--variant", "standard",
                           "--steps", "1", "--out", str(tmp_path / "runs"), "--data-path", str(loop)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: data file {loop} cannot be looked at")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv", [["train", "--size", "tiny", "--variant", "standard", "--steps", "1"],
                                  ["sweep", "--size", "tiny", "--variants", "standard", "--seeds", "0", "--steps",
                                   "1"]])
def test_rrlib_data_that_is_a_loop_of_links_stops_a_command_in_one_sentence_before_writing(tmp_path, argv):
    loop = loop_of_links(tmp_path)
    done = subprocess.run([sys.executable, "-m", "rrlib", *argv, "--out", str(tmp_path / "runs")], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "RRLIB_DATA": str(loop)})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: RRLIB_DATA={loop} cannot be looked at")
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- a fetched cut's label follows its stories


def test_a_fetched_cut_of_other_stories_is_labelled_unrecorded_not_the_hubs(monkeypatch, data_copy, tmp_path):
    stories = list(iter_stories(data_copy / "tinystories" / TRAIN))
    stories[0] = stories[0].replace("Lily", "Lucy", 1)
    hub_stand_in(monkeypatch, {"train": stories}, [])
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    _, where = locate(TRAIN, tmp_path / "cache")
    assert where.startswith("unrecorded stories (their SHA-256 ") and HUB_DATASET not in where


def test_a_cut_replaced_by_other_stories_with_its_record_rewritten_is_labelled_by_its_hash(monkeypatch, data_copy,
                                                                                           tmp_path):
    """The record beside a cut can be rewritten to match other stories; the label is made from the stories."""
    sample = SAMPLES[TRAIN]
    hub_stand_in(monkeypatch, {"train": list(iter_stories(data_copy / "tinystories" / TRAIN))}, [])
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    fetched, where = locate(TRAIN, tmp_path / "cache")
    assert where == f"{HUB_DATASET} (train, first {sample.stories:,} stories) through datasets"
    fetched.write_text("Another story.\n<|endoftext|>\n" * 3000)
    record = fetched.with_name(fetched.name + ".json")
    kept = json.loads(record.read_text())
    record.write_text(json.dumps({**kept, "sha256": hashlib.sha256(fetched.read_bytes()).hexdigest(),
                                  "bytes": fetched.stat().st_size}))
    no_hub(monkeypatch)
    cut = load_token_data(data_path=str(tmp_path / TRAIN), tokenizer="bytes", cache_dir=tmp_path / "cache")
    assert cut.source.startswith(f"{TRAIN} from unrecorded stories (their SHA-256 ")
    assert HUB_DATASET not in cut.source and sample.stories_sha256[:16] in cut.source


# ---------------------------------------------------------------- an earlier cut that cannot be used, offline


def offline_sentence(monkeypatch, tmp_path) -> str:
    no_hub(monkeypatch)
    monkeypatch.setattr("rrlib.runs.data.sources.hub_unreachable", lambda: None)
    with pytest.raises(DataError) as caught:
        locate(TRAIN, tmp_path / "cache")
    return str(caught.value)


def test_no_earlier_cut_is_not_on_this_machine_naming_the_file(monkeypatch, tmp_path):
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    fetched = tmp_path / "cache" / "data" / "tinystories" / TRAIN
    said = offline_sentence(monkeypatch, tmp_path)
    assert said.startswith(f"rrlib's data is not on this machine (no earlier cut at {fetched})"), said
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("damage", ["cut short", "changed", "unrecorded"])
def test_an_earlier_cut_that_cannot_be_used_is_named_as_what_it_is(monkeypatch, data_copy, tmp_path, damage):
    hub_stand_in(monkeypatch, {"train": list(iter_stories(data_copy / "tinystories" / TRAIN))}, [])
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    fetched, _ = locate(TRAIN, tmp_path / "cache")
    size = fetched.stat().st_size
    if damage == "cut short":
        fetched.write_bytes(fetched.read_bytes()[:1000])
    elif damage == "changed":
        fetched.write_bytes(fetched.read_bytes().replace(b"Lily", b"Lucy", 1))  # the same size
    else:
        fetched.with_name(fetched.name + ".json").unlink()
    kept = fetched.read_bytes()
    said = offline_sentence(monkeypatch, tmp_path)
    assert said.startswith(f"the earlier cut {fetched} ") and "not on this machine" not in said, said
    expected = {"cut short": f"it holds 1,000 bytes where {size:,} were fetched (cut short or changed since)",
                "changed": "its SHA-256 is not the ", "unrecorded": "is not a recorded cut"}[damage]
    assert expected in said, said
    assert fetched.read_bytes() == kept  # nothing written over it


# ---------------------------------------------------------------- a study's shards


def test_a_compare_shard_of_a_study_holds_the_runs_that_compare_shard_trains(tmp_path):
    """A study judges each shard by the runs it says the shard trains (a run it holds that is left after the call
    is named failed): those must be the runs ``rrlib compare --shard k/n`` trains, else a shard is blamed for its
    sibling's runs and a rerun after a kill is judged by the wrong ones."""
    runs = str(tmp_path / "runs")
    argv = ("compare", "--size", "tiny", "--variants", "review", "--against", "standard", "--seeds", "2", "--runs",
            runs, "--out", str(tmp_path / "out"), "--steps", "2", "--no-timing", "--device", "cpu")
    job = Job("stand_in", argv, cells("tiny", ["review", "standard"], range(2), runs))
    shard = job.shard(0, 2)
    done = subprocess.run([sys.executable, "-m", "rrlib", *shard.argv], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    trained = {r for r in job.runs if state(r) == "done"}
    assert trained and trained == set(shard.runs)
    assert set(job.shard(0, 2).runs) | set(job.shard(1, 2).runs) == set(job.runs)


def test_a_study_whose_every_run_fails_exits_1_naming_each(tmp_path, monkeypatch, capsys):
    root = str(tmp_path / "runs")
    broken = [Run(root, "tiny", "standard", s) for s in (0, 1)]
    for run in broken:
        run.folder.mkdir(parents=True)
        (run.folder / "config.json").write_text("{ not json")  # the sweep cannot read it, and names it

    def plan(ready):
        return Plan([[Job("first", ("sweep", "--size", "tiny", "--variants", "standard", "--seeds", "0,1", "--out",
                                    root, "--steps", "2", "--device", "cpu"), tuple(broken))]])

    entry = registry.Entry("stand_in", "rrlib.runs.sweep", "a tiny stand-in", plan, logs=str(tmp_path / "logs"))
    monkeypatch.setattr(command, "STUDIES", {"stand_in": entry})
    monkeypatch.setattr(command, "POLL_SECONDS", 0.2)
    assert command.main(["run", "stand_in", "--jobs", "2"]) == 1
    err = capsys.readouterr().err
    assert "error: study stand_in: 2 runs failed: " in err and all(f"{run} (log " in err for run in broken), err


@pytest.mark.parametrize("argv, said", [
    *[(["run", "leaderboard", "--jobs", jobs], "error: --jobs takes a positive whole number up to 256, such as 2")
      for jobs in ("0", "two", "-1", "nan", "inf", "1.5", "")],
    (["list", "nosuch"], "error: rrlib study list lists every study and takes no name; for 'nosuch': rrlib study "
                         "plan|run|status NAME, with NAME one of sizes, "),
    (["run", "leaderboard", "--variants", "mine", "--out", "LOOP"], "error: --out LOOP cannot be looked at ("),
])
def test_bad_study_input_is_one_sentence_naming_the_choices_before_any_work(argv, said, monkeypatch, capsys,
                                                                           tmp_path):
    loop = str(loop_of_links(tmp_path))
    argv, said = [loop if word == "LOOP" else word for word in argv], said.replace("LOOP", loop)
    monkeypatch.setattr(command, "run_study", lambda *a: pytest.fail("a study started"))
    monkeypatch.setattr(command, "list_studies", lambda: pytest.fail("the studies were listed"))
    with pytest.raises(SystemExit) as caught:
        command.main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2 and err.startswith(said) and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------- the budget's paper table


def paper_table_with_a_bad_sixth_row(tmp_path, rewrite) -> Path:
    from rrlib.home import REFERENCE_CSV

    lines = REFERENCE_CSV.read_text().splitlines()[:6]
    lines[5] = lines[5].replace(",8000,", ",abc,")
    path = tmp_path / "paper.csv"
    path.write_text("\n".join(rewrite(lines)) + "\n")
    return path


@pytest.mark.parametrize("rewrite, line", [
    (lambda lines: lines, 6),
    # a quoted field holding a line break: the bad row begins on the file's line 7
    (lambda lines: [lines[0], lines[1].replace(",59.47,", ',"59.47\n",', 1), *lines[2:]], 7),
    # every row one field longer than the header (a trailing comma): pandas would make the first column the index
    (lambda lines: [lines[0], *[line + "," for line in lines[1:]]], 6),
])
def test_the_budget_names_the_line_a_bad_row_of_the_paper_table_is_on(tmp_path, capsys, rewrite, line):
    from rrlib.speed.budget import main

    path = paper_table_with_a_bad_sixth_row(tmp_path, rewrite)
    assert "abc" in path.read_text().splitlines()[line - 1]
    assert main(["60m", "--paper-csv", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: {path} line {line}: steps must be a positive whole number, got 'abc'", err


def test_a_users_board_of_another_design_is_refused_in_an_out_that_holds_one(tmp_path, monkeypatch, capsys):
    """Two boards in one --out would mix their runs and the second board would replace the first: the second design
    is one sentence and exit 2 before anything runs; the same design again goes on (a stopped board resumes)."""
    from rrlib.studies import user_board

    board = user_board.Board("tiny", "standard", 2, str(tmp_path / "published"), lambda: ["review"])
    entries = {name: registry.Entry(name, "rrlib.runs.sweep", "a stand-in board", lambda ready: Plan([]), board=board)
               for name in ("first_board", "second_board")}
    monkeypatch.setattr(command, "STUDIES", entries)
    started = []
    monkeypatch.setattr(command, "run_study", lambda entry, jobs: started.append(entry.name) or 0)
    monkeypatch.setattr(user_board, "render", lambda *a: "")
    out = tmp_path / "mine"
    assert command.main(["run", "first_board", "--variants", "highway", "--out", str(out)]) == 0
    kept = sorted(out.rglob("*"))
    for argv in (["run", "first_board", "--variants", "highway_convex"], ["run", "second_board", "--variants",
                                                                          "highway"]):
        capsys.readouterr()
        assert command.main([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --out {out} holds the board of highway on first_board; one --out keeps one "
                              f"board") and len(err.strip().splitlines()) == 1, err
        assert sorted(out.rglob("*")) == kept
    assert command.main(["run", "first_board", "--variants", "highway", "--out", str(out)]) == 0
    assert started == ["first_board_highway", "first_board_highway"]


def test_the_budget_names_the_devices_it_knows_for_one_it_does_not(capsys):
    from rrlib.speed.budget import main
    from rrlib.speed.peaks import PEAK_TFLOPS, table_peak

    assert main(["60m", "--device", "nosuch"]) == 2
    err = capsys.readouterr().err
    labels = [label for _, label, _, _ in PEAK_TFLOPS]
    assert err.strip().endswith(f"; valid devices: {', '.join(labels)}") and len(err.strip().splitlines()) == 1
    assert all(table_peak(label, "bf16") is not None for label in labels)  # each name given is one it takes
