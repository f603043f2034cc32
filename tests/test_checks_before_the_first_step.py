"""Everything a run can be refused for is found before its first step and before it writes a file; result files are
read through a schema; the data is identified by its tokens; paths mean what the user typed."""
import dataclasses
import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import rrlib.runs.folders.disk as disk
import rrlib.runs.pace as pace
import rrlib.runs.train as train_module
from rrlib.__main__ import main
from rrlib.report.inputs import check_run_files
from rrlib.runs.config import PROJECT_ROOT, ConfigError, given_path, project_path
from rrlib.runs.data import DataError
from rrlib.runs.folders.disk import DiskFull
from rrlib.runs.folders import claimed
from rrlib.runs.presets import available_sizes, load_preset, resolve_run
from rrlib.runs.folders.runfiles import RunConflict, StateError, append_log
from rrlib.runs.sweep import SweepIncomplete, grid, results_table, run_sweep
from rrlib.runs.data.token_cache import load_token_data
from rrlib.runs.train import train_run

REPO = Path(__file__).resolve().parents[1]
FAST = {"steps": 12, "eval_every": 6, "ckpt_every": 6, "log_every": 3, "paper_eval_batches": 2,
        "fixed_eval_tokens": 2048}
FAST_FLAGS = [x for k, v in FAST.items() for x in ("--set", f"train.{k}={v}")]


def tiny(tmp_path, train=None, data=None, model=None, variant="review"):
    """A fast tiny run under tmp_path/runs, its token cache under tmp_path/cache."""
    overrides = {"train": {**FAST, **(train or {})}, "data": {"cache_dir": str(tmp_path / "cache"), **(data or {})},
                 "model": model or {}}
    return resolve_run("tiny", variant, 0, overrides, str(tmp_path / "runs"))


def cli(capsys, *argv) -> tuple[int, str]:
    """``python -m rrlib ...`` in this process: (exit status, stderr)."""
    try:
        code = main(list(argv))
    except SystemExit as done:  # argparse's own refusals
        code = done.code
    return code, capsys.readouterr().err


@pytest.fixture
def no_training(monkeypatch):
    """Any optimiser step fails the test: a refusal must come before the first one."""
    def step(*args, **kwargs):
        raise AssertionError("a step was trained before the refusal")
    monkeypatch.setattr(train_module, "optimizer_step", step)


@pytest.fixture
def stories(tmp_path, data) -> Path:
    """A private copy of the TinyStories sample (its name and bytes), which a test may change."""
    folder = tmp_path / "data"
    folder.mkdir()
    return Path(shutil.copy(data / "tinystories" / "TinyStories-train-sample.txt", folder))


def interrupt_at(monkeypatch, step: int, error: BaseException):
    """Make the optimiser step with index ``step`` raise ``error`` (the ones before it train as usual)."""
    real, count = train_module.optimizer_step, {"n": 0}

    def stepper(*args, **kwargs):
        if count["n"] == step:
            raise error
        count["n"] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(train_module, "optimizer_step", stepper)


# ---------------------------------------------------------------- sizes checked against the data before step 1

@pytest.mark.parametrize("data,train,message", [
    ({"max_stories": 1}, {"eval_every": 100_000},
     r"the held-out stream \(the last 0.03 of TinyStories-train-sample.txt's stream\) has 21 tokens, fewer than one "
     r"evaluation window of model.seq_len \+ 1 = 65; raise data.max_stories \(now 1\) or data.heldout_frac"),
    ({"heldout_frac": 1e-5}, {}, r"the held-out stream \(the last 1e-05 of .*\) has 21 tokens"),
])
def test_a_held_out_stream_too_short_is_refused_before_the_first_step(tmp_path, no_training, data, train, message):
    with pytest.raises(DataError, match=message):
        train_run(tiny(tmp_path, train, data), progress=False)
    assert not (tmp_path / "runs").exists()


def test_a_data_file_shorter_than_one_window_is_refused_before_the_first_step(tmp_path, no_training):
    short = tmp_path / "short.txt"
    short.write_text("hi there\n")
    with pytest.raises(DataError, match=r"the train stream of short.txt has 9 tokens, fewer than one window of "
                                        r"model.seq_len \+ 1 = 65"):
        train_run(tiny(tmp_path, data={"data_path": str(short)}), progress=False)
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- every setting by type and range

@pytest.mark.parametrize("overrides,message", [
    ({"train": {"grad_clip": -1.0}}, "train.grad_clip must be a positive finite number"),
    ({"train": {"micro_batch_size": -2}}, "train.micro_batch_size must be a positive whole number, got -2"),
    ({"train": {"micro_batch_size": 3}}, "train.micro_batch_size 3 does not divide train.batch_size 8"),
    ({"train": {"lr": float("inf")}}, "train.lr must be a positive finite number, got inf"),
    ({"train": {"weight_decay": -0.1}}, "train.weight_decay must be a finite number of at least 0, got -0.1"),
    ({"train": {"warmup_steps": -5}}, "train.warmup_steps must be a whole number of at least 0, got -5"),
    ({"train": {"min_lr_frac": 1.5}}, r"train.min_lr_frac must be a number in \[0, 1\], got 1.5"),
    ({"train": {"betas": [0.9, 1.5]}}, r"train.betas must be two numbers in \[0, 1\)"),
    ({"train": {"betas": [0.9]}}, r"train.betas must be two numbers in \[0, 1\)"),
    ({"train": {"fixed_eval_tokens": 0}}, "train.fixed_eval_tokens must hold at least one evaluation window of "
                                          r"model.seq_len \+ 1 = 65 tokens, got 0"),
    ({"train": {"paper_eval_batches": 0}}, "train.paper_eval_batches must be a positive whole number, got 0"),
    ({"train": {"device": "mps"}}, "unknown train.device 'mps'; valid devices: auto, cpu, cuda, cuda:<index>"),
    ({"train": {"device": "meta"}}, "unknown train.device 'meta'"),
    ({"data": {"max_stories": -1}}, "data.max_stories must be a positive whole number, got -1"),
    ({"data": {"heldout_frac": 0}}, r"data.heldout_frac must be a number in \(0, 1\), got 0"),
    ({"model": {"vocab_size": 1000}}, "model.vocab_size is not set directly: it follows data.tokenizer"),
    ({"model": {"rule_options": {"gain": 2}}}, "bad options"),
])
def test_every_setting_is_checked_by_type_and_range(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_run("tiny", "review", 0, overrides)


@pytest.mark.parametrize("seed", [-1, 2**64, 2.5, True])
def test_a_seed_outside_what_torch_takes_is_refused(seed):
    with pytest.raises(ConfigError, match=r"a seed must be a whole number from 0 to 2\*\*64 - 1"):
        resolve_run("tiny", "review", seed)
    assert resolve_run("tiny", "review", 2**64 - 1).seed == 2**64 - 1


@pytest.mark.parametrize("argv,message", [
    (["--micro-batch-size", "-2"], "train.micro_batch_size must be a positive whole number, got -2"),
    (["--lr", "inf"], "train.lr must be a positive finite number, got inf"),
    (["--device", "mps"], "unknown train.device 'mps'"),
    (["--max-stories", "-1"], "data.max_stories must be a positive whole number, got -1"),
    (["--set", "model.vocab_size=1000"], "model.vocab_size is not set directly"),
    (["--set", "train.paper_eval_batches=0"], "train.paper_eval_batches must be a positive whole number"),
    (["--seed", str(2**64)], "a seed must be a whole number from 0 to 2**64 - 1"),
    (["--seed", "-1,2"], "argument --seed: a seed must be a whole number from 0 to 2**64 - 1, got '-1,2'"),
    (["--max-stories", "1", "--eval-every", "100000"], "the held-out stream (the last 0.03 of"),
    (["--max-stories", str(10**30)], "data.max_stories must be at most 9,223,372,036,854,775,807, or null"),
    (["--set", "train.tokens_per_param=.inf"], "tokens_per_param must be a positive finite number, got inf"),
    (["--set", "model.rule_options={bogus: 1}"], "unknown option(s) bogus; valid options: "),
    (["--steps", "4", "--set", "train.steps=3"], "--set train.steps and --steps both set train.steps; give it "
                                                 "once, with --steps"),
    (["--set", "train.lr=0.1", "--set", "train.lr=0.2"], "--set train.lr is given twice; give it once"),
    (["--set", "model.variant=standard"], "model.variant 'standard' disagrees with the variant asked for "
                                          "('review'), which names the run's folder"),
    (["--data-path", ""], "argument --data-path: an empty path; give a path, or leave the option out"),
])
def test_bad_settings_on_the_command_line_are_one_sentence_exit_2_and_leave_nothing(tmp_path, capsys, argv,
                                                                                     message):
    code, err = cli(capsys, "train", "--size", "tiny", "--variant", "review", *argv, "--set",
                    f"data.cache_dir={tmp_path / 'cache'}", "--out", str(tmp_path / "o"))
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- result.json and config.json through a schema

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished tiny run, copied by the tests that damage it."""
    root = tmp_path_factory.mktemp("finished")
    result = train_run(tiny(root), progress=False)
    return root, result


def damaged(tmp_path, finished, name, change):
    shutil.copytree(finished[0] / "runs", tmp_path / "runs")
    path = tmp_path / "runs" / "tiny" / "review" / "seed0" / name
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize("name,change,reason", [
    ("result.json", lambda r: r.update(val_loss="oops"), "val_loss must be a number or null, got 'oops'"),
    ("result.json", lambda r: r.pop("size"), "it has no 'size'"),
    ("result.json", lambda r: r.update(status="done"), "status must be one of finished, diverged, got 'done'"),
    ("result.json", lambda r: r.update(fixed_loss=None), "a finished run's fixed_loss must be numbers, got null"),
    ("result.json", lambda r: r.update(val_loss=float("nan")), "val_loss must be a finite number, got nan"),
    ("result.json", lambda r: r.update(minutes=float("inf")), "minutes must be a finite number, got inf"),
    ("result.json", lambda r: r.update(ece=1.5), "ece must be from 0 to 1, got 1.5"),
    ("result.json", lambda r: r.update(steps=-3), "steps must be at least 0, got -3"),
    ("result.json", lambda r: r.update(seed=1), "it is the result of tiny/review/seed1, not of the folder "
                                                "tiny/review/seed0 it lies in"),
    ("config.json", lambda r: r["config"]["train"].update(lr="fast"), "config.train.lr must be a number, got 'fast'"),
    ("config.json", lambda r: r.update(config=[]), r"config must be a mapping, got \[\]"),
])
def test_a_result_or_config_that_breaks_the_schema_is_named_in_train_sweep_and_report(tmp_path, finished, capsys,
                                                                                     name, change, reason):
    path = damaged(tmp_path, finished, name, change)
    fix = "restore it from a copy, or pass --move-aside"
    with pytest.raises(StateError, match=rf"{re.escape(str(path))} cannot be read \({reason}\); {fix}"):
        train_run(tiny(tmp_path), progress=False)
    lines = []
    with pytest.raises(SweepIncomplete):
        run_sweep("tiny", ["review"], [0], {"train": FAST, "data": {"cache_dir": str(tmp_path / "cache")}},
                  str(tmp_path / "runs"), progress=False, log=lines.append)
    assert any(f"{path} cannot be read" in line for line in lines)
    with pytest.raises(StateError, match=rf"{re.escape(str(path))} cannot be read \({reason}\); restore it from a "
                                         r"copy, or move the folder .*seed0 out of"):
        check_run_files(tmp_path / "runs")
    code, err = cli(capsys, "report", "--runs", str(tmp_path / "runs"), "--only", "01_mechanism", "--out",
                    str(tmp_path / "paper"), "--build", str(tmp_path / "build"))
    assert code == 2 and err.count("\n") == 1 and f"{path} cannot be read" in err
    assert not (tmp_path / "paper").exists()


def test_the_results_table_leaves_a_bad_result_out_and_names_it(tmp_path, finished):
    path = damaged(tmp_path, finished, "result.json", lambda r: r.update(val_loss="oops"))
    said = []
    assert results_table(str(tmp_path / "runs"), log=said.append).empty
    assert said == [f"[results] left out: {path} cannot be read (val_loss must be a number or null, got 'oops'); "
                    f"restore it from a copy, or pass --move-aside to move the folder aside and start the run afresh "
                    f"(nothing is deleted)"]


def test_every_committed_result_and_config_reads_through_the_schema():
    assert check_run_files(REPO / "outputs" / "runs") > 600


def test_the_report_checks_the_roots_its_pages_read_and_no_other_folder_beside_runs(tmp_path, finished):
    """A damaged run in a folder beside --runs that no page reads is not the report's business; one in a root a
    page reads (outputs/claims here) is named."""
    source = finished[0] / "runs" / "tiny" / "review" / "seed0"
    shutil.copytree(finished[0] / "runs", tmp_path / "runs")
    elsewhere = tmp_path / "unrelated" / "tiny" / "review" / "seed0"
    shutil.copytree(source, elsewhere)
    (elsewhere / "result.json").write_text("{")
    assert check_run_files(tmp_path / "runs") == 1  # the one under --runs
    read = tmp_path / "claims" / "tiny" / "review" / "seed0"
    shutil.copytree(source, read)
    (read / "result.json").write_text("{")
    with pytest.raises(StateError, match=rf"{re.escape(str(read / 'result.json'))} cannot be read .* out of "
                                         rf"{re.escape(str(tmp_path / 'claims'))}"):
        check_run_files(tmp_path / "runs")


# ---------------------------------------------------------------- presets

def preset_dir(tmp_path, text: str) -> Path:
    folder = tmp_path / "params"
    folder.mkdir()
    shutil.copy(REPO / "params" / "tiny.yaml", folder)
    (folder / "bad.yaml").write_text(text)
    return folder


TINY = (REPO / "params" / "tiny.yaml").read_text()


@pytest.mark.parametrize("text,message", [
    (TINY + "train: {steps: 5}\n", r"bad.yaml line 9: 'train' is given twice \(first on line 5\); keep one of them"),
    (TINY.replace("steps: 30,", "steps: 30, steps: 40,"), r"bad.yaml line 5: 'steps' is given twice"),
    (TINY + "trian: {steps: 5}\n", r"bad.yaml line 9: unknown section 'trian'; valid sections: description, recipe, "
                                   r"model, data, train"),
    (TINY.replace("model: {d_model: 64, n_layers: 2, n_heads: 4, seq_len: 64}", "model: [64, 2]"),
     r"bad.yaml line 3: model must be a mapping of settings, got \[64, 2\]"),
    (TINY.replace("variants: [review, highway, standard]", "variants: review"),
     r"bad.yaml line 7: variants must be a list of variant names, e.g. \[review, standard\], got 'review'"),
    (TINY.replace("steps: 30", "steps: x"), r"preset .*bad.yaml: train.steps must be a whole number, got 'x'"),
    (TINY.replace("seeds: [0, 1]", "seeds: [0, -1]"), r"preset .*bad.yaml: a seed must be a whole number"),
    ("", r"preset .*bad.yaml is empty; give it its settings"),
    ("# nothing but a comment\n", r"preset .*bad.yaml is empty"),
    (TINY + "expand: {n_layers: 4}\n", r"preset .*bad.yaml line 9: expand must name one of .* with a list of "
                                       r"positive whole numbers"),
    (TINY + "expand: {width: [1, 2]}\n", r"preset .*bad.yaml line 9: expand must name one of"),
    ("base: &b {steps: 3}\ntrain: {<<: *b}\n", r"preset .*bad.yaml line 2: a YAML merge key \(<<\) is not read in "
                                               r"a preset; write its settings out"),
])
def test_a_preset_with_a_key_twice_or_an_unknown_section_is_refused_with_its_line(tmp_path, text, message):
    folder = preset_dir(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        load_preset("bad", folder)
    assert load_preset("tiny", folder).train.steps == 30  # one broken file costs no other size
    assert "tiny" in available_sizes(folder)  # and no listing of sizes (--help's) trips over it


def test_a_folder_named_like_a_preset_spoils_only_its_own_name(tmp_path):
    folder = preset_dir(tmp_path, TINY)
    (folder / "bad.yaml").unlink()
    (folder / "bad.yaml").mkdir()
    with pytest.raises(ConfigError, match=r"preset .*bad.yaml cannot be read \(Is a directory\); make it a readable "
                                          r"YAML file, or move it out of"):
        load_preset("bad", folder)
    assert available_sizes(folder) == ["tiny"] and load_preset("tiny", folder).train.steps == 30


# ---------------------------------------------------------------- the data is identified by its tokens

def test_another_file_of_the_same_name_is_a_conflict_finished_or_in_progress(tmp_path, stories, monkeypatch):
    run = tiny(tmp_path, data={"data_path": str(stories)})
    result = train_run(run, progress=False)
    assert result["data_hash"] and json.loads((run.run_dir / "config.json").read_text())["data_hash"] == \
        result["data_hash"]
    # the same bytes with a new modification time (a fresh clone): the cache is made again, the run is the same
    os.utime(stories, ns=(0, 10**18))
    assert train_run(run, progress=False) == result
    # another file under the same name: a conflict, which --move-aside resolves
    text = stories.read_text()
    stories.write_text(text[: len(text) // 2])
    with pytest.raises(RunConflict, match=r"holds a finished run trained on other data: the tokens of "
                                          r"TinyStories-train-sample.txt hash to \w{16} there and \w{16} here"):
        train_run(run, progress=False)
    moved = train_run(run, progress=False, move_aside=True)
    assert moved["data_hash"] != result["data_hash"] and moved["fingerprint"] == result["fingerprint"]
    # in progress: a checkpoint made on the half file, asked again on the whole one
    shutil.rmtree(run.run_dir)
    interrupt_at(monkeypatch, 7, KeyboardInterrupt("stopped"))
    with pytest.raises(KeyboardInterrupt):
        train_run(run, progress=False)
    monkeypatch.undo()
    stories.write_text(text)
    with pytest.raises(RunConflict, match="holds a run in progress trained on other data"):
        train_run(run, progress=False)


def test_a_run_recorded_without_a_data_hash_matches_by_the_data_name(tmp_path, stories):
    run = tiny(tmp_path, data={"data_path": str(stories)})
    result = train_run(run, progress=False)
    for name in ("config.json", "result.json"):  # as every committed result was written
        path = run.run_dir / name
        path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "data_hash"}))
    stories.write_text(stories.read_text()[:500_000])
    settled, done = claimed(run)
    assert done is not None and done["val_loss"] == result["val_loss"]


def test_a_checkpoint_of_another_run_beside_this_runs_config_is_moved_aside_when_asked(tmp_path, monkeypatch):
    other = tiny(tmp_path, {"lr": 0.01})
    interrupt_at(monkeypatch, 7, KeyboardInterrupt("stopped"))
    with pytest.raises(KeyboardInterrupt):
        train_run(other, progress=False)
    ckpt = (other.run_dir / "ckpt.pt").read_bytes()
    shutil.rmtree(other.run_dir)
    monkeypatch.undo()
    run = tiny(tmp_path)
    interrupt_at(monkeypatch, 7, KeyboardInterrupt("stopped"))
    with pytest.raises(KeyboardInterrupt):
        train_run(run, progress=False)
    monkeypatch.undo()
    (run.run_dir / "ckpt.pt").write_bytes(ckpt)  # this run's config.json, another run's checkpoint
    with pytest.raises(RunConflict, match=r"holds a config.json and a ckpt.pt of two different runs \(the "
                                          r"checkpoint's: train.lr 0.01 there, 0.003 asked\); .*pass --move-aside"):
        train_run(run, progress=False)
    assert train_run(run, progress=False, move_aside=True)["status"] == "finished"
    assert len(list(run.run_dir.parent.glob("moved-seed0-*"))) == 1


# ---------------------------------------------------------------- the token cache

def test_a_cache_cut_short_damaged_or_made_from_another_version_is_made_again_with_a_word(tmp_path, stories, capsys):
    def load():
        data = load_token_data(data_path=stories, tokenizer="bytes", cache_dir=tmp_path / "cache")
        return np.concatenate([data.train, data.heldout]), data.content_hash, capsys.readouterr().err

    tokens, content, _ = load()
    cache = next((tmp_path / "cache").glob("*.bin"))
    with open(cache, "r+b") as f:
        f.truncate(cache.stat().st_size // 2 // 2 * 2)  # an even length: a whole number of tokens, half of them
    again, same, said = load()
    assert "holds 1,031,090 tokens where 2,062,181 were written; tokenising again" in said and same == content
    np.testing.assert_array_equal(again, tokens)
    raw = bytearray(cache.read_bytes())
    raw[1000] ^= 1
    cache.write_bytes(bytes(raw))
    assert "no longer matches the hash of the tokens written; tokenising again" in load()[2]
    os.utime(stories, ns=(0, 10**18))  # the same bytes with new times (a fresh clone): the same source
    assert load()[1:] == (content, "")  # a usable cache says nothing
    # other text of the same size, given back the old times: another source, and other tokens
    times = stories.stat()
    text = stories.read_bytes()
    stories.write_bytes(text.replace(b"Once", b"ONCE", 1))
    os.utime(stories, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert stories.stat().st_size == times.st_size and stories.stat().st_mtime_ns == times.st_mtime_ns
    again, other, said = load()
    assert "was made from another version of its source file (its bytes changed)" in said and other != content


def test_temporary_files_of_a_killed_writer_are_removed_and_a_live_ones_kept(tmp_path, stories, capsys):
    load_token_data(data_path=stories, tokenizer="bytes", cache_dir=tmp_path / "cache")
    cache = next((tmp_path / "cache").glob("*.bin"))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale, live = (cache.with_name(f"{cache.name}.{int(dead.stdout)}.tmp"),
                   cache.with_name(f"{cache.name}.{os.getpid()}.tmp"))
    for tmp in (stale, live):
        tmp.write_bytes(b"\0" * 1000)
    capsys.readouterr()
    load_token_data(data_path=stories, tokenizer="bytes", cache_dir=tmp_path / "cache")
    assert not stale.exists() and live.exists()
    assert f"removed {stale} (0.0 MB), left by process {int(dead.stdout)} that stopped while writing it" in \
        capsys.readouterr().err


@pytest.mark.parametrize("name,content,message", [
    ("bad.jsonl", '{"text": "a story"}\nnot json\n', "bad.jsonl line 2 is not a JSON object with a 'text' string"),
    ("bad.jsonl", '{"text": ["a", "list"]}\n', "bad.jsonl line 1 is not a JSON object with a 'text' string"),
    ("text.parquet", "Once upon a time\n<|endoftext|>\n", r"text.parquet is not a Parquet file; a .parquet data "
                                                          r"file is a table with a 'text' column"),
])
def test_a_data_file_that_is_not_its_format_is_one_sentence(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(DataError, match=message):
        load_token_data(data_path=tmp_path / name, tokenizer="bytes", cache_dir=tmp_path / "cache")


# ---------------------------------------------------------------- folders, memory, disk

def test_an_out_that_is_a_file_or_under_one_is_refused_before_anything(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile, afile / "runs"):
        run = dataclasses.replace(tiny(tmp_path), out_root=str(out))
        with pytest.raises(ConfigError, match=rf"cannot write .*: {afile} is a file, not a folder; give --out a "
                                              r"folder"):
            train_run(run, progress=False)
    code, err = cli(capsys, "bench", "--size", "tiny", "--variants", "review", "--device", "cpu", "--steps", "1",
                    "--out", str(afile / "bench.json"))
    assert code == 2 and f"{afile} is a file, not a folder" in err and err.count("\n") == 1
    with pytest.raises(ConfigError, match=rf"cannot write {afile / 'cache'}: {afile} is a file, not a folder; give "
                                          r"data.cache_dir a folder"):
        train_run(tiny(tmp_path, data={"cache_dir": str(afile / "cache")}), progress=False)
    assert afile.read_text() == "" and not (tmp_path / "runs").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_out_this_user_cannot_write_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ConfigError, match=rf"{locked} is not writable here"):
        train_run(dataclasses.replace(tiny(tmp_path), out_root=str(locked / "runs")), progress=False)


def test_out_of_memory_names_the_micro_batch_that_goes_on(tmp_path, monkeypatch):
    run = tiny(tmp_path)
    interrupt_at(monkeypatch, 7, torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"))
    with pytest.raises(ConfigError, match=r"tiny/review/seed0 ran out of memory on cpu .* with 8 sequences per "
                                          r"forward pass; pass --micro-batch-size 4 \(or a smaller divisor of 8\) "
                                          r"and run the same command again"):
        train_run(run, progress=False)
    monkeypatch.undo()
    assert sorted(p.name for p in run.run_dir.iterdir()) == ["ckpt.pt", "config.json", "metrics.jsonl"]
    split = dataclasses.replace(run, train=dataclasses.replace(run.train, micro_batch_size=4))
    assert train_run(split, progress=False)["status"] == "finished"


def test_a_full_disk_is_one_sentence_and_leaves_no_half_file(tmp_path, monkeypatch):
    run, real = tiny(tmp_path), os.fsync

    def full_after_config(fd):  # config.json is written whole; the first checkpoint finds the disk full
        if (run.run_dir / "config.json").exists():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)
    monkeypatch.setattr(disk.os, "fsync", full_after_config)
    with pytest.raises(DiskFull, match=rf"the disk holding {re.escape(str(run.run_dir))} is full \(writing ckpt.pt: "
                                       r"no space left on device\); free space there or give another folder"):
        train_run(run, progress=False)
    assert sorted(p.name for p in run.run_dir.iterdir()) == ["config.json", "metrics.jsonl"]


def test_a_log_line_that_does_not_fit_on_the_disk_is_not_left_half_written(tmp_path):
    path = tmp_path / "metrics.jsonl"

    class Full:  # writes half of what it is given, then finds the disk full
        def __init__(self):
            self.fh = open(path, "ab", buffering=0)

        def tell(self):
            return self.fh.tell()

        def truncate(self, size):
            return self.fh.truncate(size)

        def write(self, data):
            if len(data) > 10:
                return self.fh.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    append_log(open(path, "ab", buffering=0), {"step": 1, "loss": 5.0})
    with pytest.raises(OSError):
        append_log(Full(), {"step": 2, "loss": 4.0})
    assert path.read_text() == '{"step": 1, "loss": 5.0}\n'


# ---------------------------------------------------------------- paths

def test_paths_typed_on_the_command_line_are_the_current_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert given_path("rel") == str(tmp_path / "rel")
    monkeypatch.chdir(PROJECT_ROOT)
    assert given_path("outputs/runs") == "outputs/runs"  # as the committed runs record it
    assert project_path("outputs/runs") == PROJECT_ROOT / "outputs" / "runs"
    assert project_path(str(tmp_path)) == tmp_path
    monkeypatch.chdir(tmp_path)
    assert project_path("outputs/runs") == PROJECT_ROOT / "outputs" / "runs"  # a library path: the project's


def test_a_relative_out_is_made_in_the_folder_the_command_was_typed_in(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = cli(capsys, "train", "--size", "tiny", "--variant", "review", *FAST_FLAGS, "--set",
                    f"data.cache_dir={tmp_path / 'cache'}", "--out", "rel")
    assert code == 0, err
    config = json.loads((tmp_path / "rel" / "tiny" / "review" / "seed0" / "config.json").read_text())
    assert config["config"]["out_root"] == str(tmp_path / "rel") and not (PROJECT_ROOT / "rel").exists()


def test_committed_runs_answer_done_already_from_any_folder(tmp_path, monkeypatch):
    for folder in (tmp_path, PROJECT_ROOT / "outputs"):
        monkeypatch.chdir(folder)
        for size in ("family", "depth8"):
            lines = []
            run_sweep(size, out_root="outputs/runs", progress=False, log=lines.append)
            assert lines and all("done already" in line for line in lines), size


# ---------------------------------------------------------------- the CPU guard

def test_the_guard_prices_a_run_by_its_timed_steps_and_answers_the_same_twice(tmp_path, monkeypatch):
    timings = iter([0.05, 0.0001])  # a second timing, were there one, would let the run through
    monkeypatch.setattr(pace, "time_step", lambda run: next(timings))
    run = tiny(tmp_path, {"steps": 5_000_000})
    answers = []
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"tiny/review/seed0 would take about 69 hours on this CPU \(5,000,000 "
                                              r"steps at 0.05 s a step, timed for its model on this machine and "
                                              r"kept in .*pace.json\); run on a GPU, or pass --allow-slow") as err:
            pace.check_cpu_reach([run], torch.device("cpu"))
        answers.append(str(err.value))
    assert answers[0] == answers[1]
    pace.check_cpu_reach([run], torch.device("cpu"), allow_slow=True)
    pace.check_cpu_reach([tiny(tmp_path, {"steps": 5_000})], torch.device("cpu"))  # minutes: no word


# ---------------------------------------------------------------- a sweep that would do nothing

@pytest.mark.parametrize("variants,seeds,shard,message", [
    (None, [], (0, 1), "the sweep names no seeds; give at least one"),
    ([], None, (0, 1), "the sweep names no variants; give at least one"),
    (None, None, (7, 8), r"shard 7/8 holds no run: the grid has 6 runs \(3 variants x 2 seeds\), so only shards "
                         r"0/8 to 5/8 have any"),
])
def test_a_sweep_that_would_do_nothing_says_so(variants, seeds, shard, message):
    with pytest.raises(ConfigError, match=message):
        grid("tiny", variants, seeds, shard)


def test_an_empty_seed_list_on_the_command_line_is_exit_2(tmp_path, capsys):
    code, err = cli(capsys, "sweep", "--size", "tiny", "--seeds", "", "--out", str(tmp_path / "o"))
    assert code == 2 and "the sweep names no seeds" in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("text, value", [("1e-05", 1e-05), ("1E-5", 1e-5), ("-2.5e3", -2500.0), ("3", 3),
                                         ("0.1", 0.1), ("1e5x", "1e5x"), ("e5", "e5"), ("[1e-6, 2]", [1e-6, 2])])
def test_a_number_in_exponent_form_is_a_number_as_json_and_yaml_1_2_write_it(text, value):
    """PyYAML alone reads 1e-05 as text: a rule option {"init": 1e-05} reached the rule as a string."""
    from rrlib.parsing import yaml_value

    assert yaml_value(text) == value and type(yaml_value(text)) is type(value)


def test_a_rule_option_in_exponent_form_reaches_the_run_as_a_float():
    from types import SimpleNamespace

    from rrlib.__main__ import OVERRIDE_FLAGS, overrides_from

    args = SimpleNamespace(**{flag: None for flag in OVERRIDE_FLAGS}, compile=False,
                           set=['model.rule_options={"init":1e-05}'])
    assert overrides_from(args)["model"]["rule_options"] == {"init": 1e-05}


def test_a_value_that_starts_with_a_dash_reaches_its_option_s_own_check():
    """argparse reads ``--seeds -1,2`` as an option without its value ("expected one argument"); the parser passes
    it to --seeds, whose check names what is wrong, and leaves a word that is one of its options an option."""
    from rrlib.parsing import OneLineParser

    parser = OneLineParser(prog="p")
    parser.add_argument("--seeds")
    parser.add_argument("--out")
    parser.add_argument("--flag", action="store_true")
    assert parser.values_joined(["--seeds", "-1,2", "--flag"]) == ["--seeds=-1,2", "--flag"]
    assert parser.parse_args(["--seeds", "-1,2"]).seeds == "-1,2"
    assert parser.values_joined(["--out", "--seeds", "1"]) == ["--out", "--seeds", "1"]  # a missing value stays so
    assert parser.values_joined(["--flag", "-x"]) == ["--flag", "-x"]  # a flag takes no value
