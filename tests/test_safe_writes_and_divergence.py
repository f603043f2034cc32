"""No command writes over anything but a regular file or a folder; a diverged run reads back as diverged; every
bad input of every subcommand and notebook parameter is one sentence and exit 2."""
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import rrlib.runs.train as train_module
from rrlib.__main__ import main
from rrlib.report.inputs import check_run_files
from rrlib.runs.arguments import listed, seed_list, variant_list
from rrlib.runs.config import ConfigError
from rrlib.runs.folders import claimed
from rrlib.runs.folders.output_paths import FILE, checked_output
from rrlib.runs.presets import resolve_run
from rrlib.runs.folders.runfiles import StateError, read_result
from rrlib.runs.sweep import run_sweep
from rrlib.runs.train import diverged_loss, train_run
from rrlib.speed import budget

FAST = {"steps": 12, "eval_every": 6, "ckpt_every": 6, "log_every": 3, "paper_eval_batches": 2,
        "fixed_eval_tokens": 2048}
BLOW_UP = {"lr": 1e9, "grad_clip": 1e9, "warmup_steps": 1}  # a NaN loss within a few steps


def overrides(tmp_path, **train):
    return {"train": {**FAST, **train}, "data": {"cache_dir": str(tmp_path / "cache")}}


def tiny(tmp_path, variant="review", **train):
    return resolve_run("tiny", variant, 0, overrides(tmp_path, **train), str(tmp_path / "runs"))


def cli(capsys, *argv, entry=main) -> tuple[int, str]:
    """A command in this process: (exit status, stderr)."""
    try:
        code = entry(list(argv))
    except SystemExit as done:  # argparse's own refusals
        code = done.code
    return code, capsys.readouterr().err


# ---------------------------------------------------------------- every output path, one check

def odd_paths(tmp_path) -> dict[str, Path]:
    """Paths that are neither a regular file nor a folder, or that cannot be looked at."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    return {"a pipe": fifo, "a link to nothing": dangling, "a loop of links": loop / "x",
            "a name too long": tmp_path / ("n" * 300)}


@pytest.mark.parametrize("what,said", [
    ("a pipe", "fifo is not a regular file or folder"), ("a link to nothing", "dangling is not a regular file"),
    ("a loop of links", "Too many levels of symbolic links"), ("a name too long", "File name too long"),
])
def test_no_command_writes_over_what_is_not_a_regular_file_or_folder(tmp_path, capsys, what, said):
    path = odd_paths(tmp_path)[what]
    commands = [
        ("train", "--size", "tiny", "--variant", "review", "--out", str(path)),
        ("sweep", "--size", "tiny", "--variants", "review", "--seeds", "0", "--out", str(path)),
        ("bench", "--size", "tiny", "--variants", "review", "--device", "cpu", "--steps", "1", "--out", str(path)),
        ("report", "--only", "01_mechanism", "--runs", str(tmp_path / "runs"), "--out", str(path)),
        ("report", "--only", "01_mechanism", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "paper"),
         "--build", str(path)),
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    for argv in commands:
        code, err = cli(capsys, *argv, "--set" if argv[0] in ("train", "sweep") else "--threads",
                        f"data.cache_dir={tmp_path / 'cache'}" if argv[0] in ("train", "sweep") else "1")
        assert code == 2 and err.count("\n") == 1 and said in err and "cannot write" in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing beside it (no .md), no cache
    assert (tmp_path / "fifo").is_fifo()


def test_a_file_output_checks_the_files_beside_it_and_a_folder_is_not_a_file(tmp_path):
    os.mkfifo(tmp_path / "bench.md")
    with pytest.raises(ConfigError, match=r"cannot write .*bench.md: .*bench.md is not a regular file or folder"):
        checked_output(tmp_path / "bench.json", "--out", FILE, beside=(".md",))
    with pytest.raises(ConfigError, match="it is a folder; give --out the path of a file"):
        checked_output(tmp_path, "--out", FILE)
    with pytest.raises(ConfigError, match="--out is empty"):
        checked_output("", "--out")
    (tmp_path / "old.json").write_text("{}")  # a regular file is written over; a folder is written into
    assert checked_output(tmp_path / "old.json", "--out", FILE) == tmp_path / "old.json"
    assert checked_output(tmp_path / "new" / "deeper", "--out") == tmp_path / "new" / "deeper"


# ---------------------------------------------------------------- a diverged run is a result

def test_the_divergence_threshold_is_half_again_a_uniform_guess():
    # 1.5 ln 50257 = 16.2374 (GPT-2's vocabulary), 1.5 ln 257 = 8.3237 (bytes)
    assert not diverged_loss(16.237, 50257) and diverged_loss(16.238, 50257)
    assert not diverged_loss(8.32, 257) and diverged_loss(8.33, 257)
    assert diverged_loss(float("nan"), 257) and diverged_loss(float("inf"), 257) and not diverged_loss(None, 257)


def test_a_diverged_run_reads_back_as_diverged_in_a_sweep_a_rerun_its_table_and_the_report(tmp_path):
    said = []
    sweep = lambda: run_sweep("tiny", ["standard", "review"], [0], overrides(tmp_path, **BLOW_UP),
                              str(tmp_path / "runs"), progress=False, log=said.append)
    table = sweep()
    assert list(zip(table["variant"], table["status"])) == [("review", "diverged"), ("standard", "diverged")]
    assert "[sweep] 2 of 2 tiny runs diverged (status diverged in the table)" in said
    folder = tmp_path / "runs" / "tiny" / "standard" / "seed0"
    result = read_result(folder)  # through rrlib's own schema
    assert result["status"] == "diverged" and result["val_loss"] is None and result["fixed_eval_tokens"] is None
    assert result["diverged_because"] == f"a non-finite training loss at step {result['diverged_step']}"
    said.clear()
    sweep()
    assert said == ["[sweep 1/2] tiny/standard/seed0: done already (diverged)",
                    "[sweep 2/2] tiny/review/seed0: done already (diverged)",
                    "[sweep] 2 of 2 tiny runs diverged (status diverged in the table)"]
    assert not any("move-aside" in line for line in said)
    assert check_run_files(tmp_path / "runs") == 2  # the report reads them
    assert train_run(resolve_run("tiny", "standard", 0, overrides(tmp_path, **BLOW_UP), str(tmp_path / "runs")),
                     progress=False) == result


def test_train_answers_a_diverged_run_done_already_diverged(tmp_path, capsys):
    from rrlib.__main__ import main

    args = ["train", "--size", "tiny", "--variant", "standard", "--out", str(tmp_path / "runs"),
            *[f"--set=train.{k}={v}" for k, v in {**FAST, **BLOW_UP}.items()], f"--set=data.cache_dir={tmp_path / 'c'}"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr()
    assert "tiny/standard/seed0: done already (diverged)" in out.err and "'status': 'diverged'" in out.out


def test_a_finite_final_loss_far_above_a_uniform_guess_is_diverged(tmp_path, monkeypatch):
    monkeypatch.setattr(train_module, "evaluate", lambda *a, **k: {"loss": 20.0, "ece": 0.5, "tokens": 4096})
    result = train_run(tiny(tmp_path), progress=False)
    assert result["status"] == "diverged" and result["diverged_step"] == 12 and result["fixed_loss"] == 20.0
    assert result["diverged_because"].endswith("val_loss 20, fixed_loss 20 above 1.5 ln(vocab) = 8.32")
    assert read_result(tmp_path / "runs" / "tiny" / "review" / "seed0")["status"] == "diverged"


# ---------------------------------------------------------------- what a finished or stopped run leaves

def stopped_run(tmp_path, monkeypatch):
    """A run stopped at step 6 with its checkpoint (a KeyboardInterrupt from the second checkpoint's save)."""
    real = train_module.save_checkpoint

    def save(run_dir, model, optimizer, step, *args, **kwargs):
        real(run_dir, model, optimizer, step, *args, **kwargs)
        raise KeyboardInterrupt("stopped")

    monkeypatch.setattr(train_module, "save_checkpoint", save)
    with pytest.raises(KeyboardInterrupt):
        train_run(tiny(tmp_path), progress=False)
    monkeypatch.setattr(train_module, "save_checkpoint", real)
    return tmp_path / "runs" / "tiny" / "review" / "seed0"


def test_a_checkpoint_left_beside_a_result_is_removed_on_the_next_visit(tmp_path, monkeypatch):
    folder = stopped_run(tmp_path, monkeypatch)
    kept = (folder / "ckpt.pt").read_bytes()
    result = train_run(tiny(tmp_path), progress=False)
    (folder / "ckpt.pt").write_bytes(kept)  # as a kill between the result and the checkpoint's removal leaves it
    assert claimed(tiny(tmp_path))[1] == result and not (folder / "ckpt.pt").exists()


@pytest.mark.parametrize("damage,said", [
    (lambda log: log.unlink(), "metrics.jsonl is missing beside a checkpoint at step 6"),
    (lambda log: (log.unlink(), log.mkdir()), "metrics.jsonl is not a file beside a checkpoint at step 6"),
])
def test_a_checkpoint_without_its_log_is_named_before_it_resumes(tmp_path, monkeypatch, damage, said):
    folder = stopped_run(tmp_path, monkeypatch)
    damage(folder / "metrics.jsonl")
    with pytest.raises(StateError, match=rf"{said}, so the run's log of steps 1 to 6 is lost; restore it, delete "
                                         r"ckpt.pt to train the run again from step 0, or pass --move-aside"):
        train_run(tiny(tmp_path), progress=False)
    assert (folder / "ckpt.pt").exists()


def test_a_log_line_with_a_step_that_is_not_a_number_ends_the_log_there(tmp_path, monkeypatch, capsys):
    folder = stopped_run(tmp_path, monkeypatch)
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "step": "six"})
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert train_run(tiny(tmp_path), progress=False)["status"] == "finished"
    assert "line 2 is not a whole record" in capsys.readouterr().err


# ---------------------------------------------------------------- bad input, from every subcommand

def test_lists_are_read_as_lists_wherever_they_come_from():
    assert listed("review", "v") == ["review"] and listed("review, standard", "v") == ["review", "standard"]
    assert listed(0, "s") == [0] and listed("[0, 1]", "s") == [0, 1] and listed((2, 3), "s") == [2, 3]
    assert seed_list("0,1") == [0, 1] and seed_list(0) == [0] and seed_list(None, default=[4]) == [4]
    assert variant_list("review") == ["review"]
    with pytest.raises(ConfigError, match="unknown variant 'r'; valid variants: "):
        variant_list("r")
    with pytest.raises(ConfigError, match="a seed must be a whole number"):
        seed_list("0,x")
    with pytest.raises(ConfigError, match="variants names no rule"):
        variant_list("")


def paper_csv(tmp_path, text: str) -> str:
    path = tmp_path / "paper.csv"
    path.write_text(text)
    return str(path)


HEADER = "size,variant,seed,params_M,steps,val_loss,ece,minutes\n"


@pytest.mark.parametrize("argv,message", [
    (["bench", "--bogus"], "error: unrecognized arguments: --bogus; see python -m rrlib bench --help"),
    (["bench", "--size", "tiny", "--variants", ""], "--variants names no rule; give at least one"),
    (["bench", "--size", "tiny", "--variants", "review,r"], "unknown variant 'r'; valid variants: "),
    (["bench", "--size", "tiny", "--out", ""], "argument --out: an empty path"),
    (["report", "--bogus"], "error: unrecognized arguments: --bogus; see python -m rrlib report --help"),
    (["report", "--out", ""], "argument --out: an empty path"),
    (["report", "-p", "steps=[1"], "bad parameter value in 'steps=[1'; write a number"),
    (["report", "-p", "size=mini"], "-p size is not a parameter of the build; give the sweep notebook's sizes"),
    (["report", "-p", "variants=r"], "unknown variant 'r'; valid variants: "),
    (["report", "-p", "seeds=-1"], "a seed must be a whole number from 0 to 2**64 - 1, got -1"),
    (["report", "--paper-csv", "missing.csv"], "missing.csv is not a file; give the paper's run table"),
    (["sweep", "--size", "tiny", "--shard", "-1/2"], "bad shard '-1/2'; write k/n with 0 <= k < n, e.g. 0/2"),
])
def test_every_subcommand_answers_bad_input_in_one_sentence(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    extra = ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "paper")] if argv[0] == "report" and \
        "--out" not in argv else []
    code, err = cli(capsys, *argv, *extra)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv,message", [
    (["tiny", "--bogus"], "error: unrecognized arguments: --bogus; see python -m rrlib.budget --help"),
    (["tiny", "--paper-csv", "missing.csv"], "missing.csv does not exist; give the paper's run table"),
    (["tiny", "--paper-csv", "{dir}"], "is not a readable CSV table"),
    (["tiny", "--paper-csv", "{csv:size,variant\n60M,review\n}"], "has no column steps, minutes"),
    (["tiny", "--paper-csv", "{csv:" + HEADER + "60M,review_neutral,0,59,8000,1.7,0.01,6.9\n2B,review,0,1,1,1,0,1\n}"],
     "paper.csv line 3: size '2B' is not one of the paper's sizes (60M, 150M, 320M, 590M, 1B)"),
    (["tiny", "--paper-csv", "{csv:" + HEADER + "60M,reviews,0,59,8000,1.7,0.01,6.9\n}"],
     "paper.csv line 2: unknown variant 'reviews'"),
    (["tiny", "--paper-csv", "{csv:" + HEADER + "60M,review,0,59,8000,1.7,0.01,soon\n}"],
     "paper.csv line 2: minutes must be a positive number, got 'soon'"),
    (["tiny", "--paper-csv", "{csv:" + HEADER + "60M,review,0,59,-5,1.7,0.01,6\n}"],
     "paper.csv line 2: steps must be a positive whole number, got -5"),
    (["tiny", "--mfu", "2"], "--mfu must be a fraction in (0, 1]"),
])
def test_the_budget_answers_bad_input_in_one_sentence(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    argv = [str(tmp_path) if a == "{dir}" else paper_csv(tmp_path, a[5:-1]) if a.startswith("{csv:") else a
            for a in argv]
    code, err = cli(capsys, *argv, entry=budget.main)
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_an_mfu_written_with_an_exponent_is_a_number():
    assert budget.parse_mfu("1e-3") == (0.001, 0.001) and budget.parse_mfu("1e-2-0.3") == (0.01, 0.3)


@pytest.mark.parametrize("name,write,message", [
    ("stories.jsonl", lambda p: p.write_bytes(b'\xef\xbb\xbf{"text": "Once"}\n'), "starts with a byte-order mark"),
    ("stories.parquet", lambda p: pd.DataFrame({"text": [1, 2]}).to_parquet(p),
     "'text' column holds int64, not text"),
    ("stories.parquet", lambda p: pd.DataFrame({"text": ["Once", None]}).to_parquet(p),
     "row 2: the 'text' column is null"),
    ("folder.txt", lambda p: p.mkdir(), "is a folder; pass data_path/val_path to one local"),
    ("empty.jsonl", lambda p: p.write_text("\n"), "no stories found in {path}; check the data file"),
])
def test_data_that_is_not_stories_is_one_sentence_naming_the_users_file(tmp_path, capsys, name, write, message):
    path = tmp_path / name
    write(path)
    code, err = cli(capsys, "train", "--size", "tiny", "--variant", "review", "--data-path", str(path), "--set",
                    f"data.cache_dir={tmp_path / 'cache'}", "--out", str(tmp_path / "o"))
    assert code == 2 and message.format(path=path) in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_the_benchmark_names_a_bad_paper_table_before_it_measures(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("rrlib.speed.bench.bench_size", lambda *a, **k: pytest.fail("measured before the refusal"))
    csv = paper_csv(tmp_path, HEADER + "60M,review,0,59,8000,1.7,0.01,soon\n")
    code, err = cli(capsys, "bench", "--size", "tiny", "--variants", "review", "--device", "cpu", "--paper-csv", csv,
                    "--out", str(tmp_path / "b.json"))
    assert code == 2 and "paper.csv line 2: minutes must be a positive number, got 'soon'" in err
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("where", ["tables/04_paper_tests.csv", "figures", "01_mechanism.html", "dangling.html"])
def test_the_report_refuses_a_link_among_the_files_it_replaces(tmp_path, capsys, where):
    """A page replaces its HTML, figures and tables: a link there (to something or to nothing) is refused before any
    notebook runs, and what it points to is untouched."""
    out, outside = tmp_path / "paper", tmp_path / "outside"
    (out / "tables").mkdir(parents=True)
    outside.mkdir()
    (outside / "kept.csv").write_text("kept")
    link = out / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside if where == "figures" else outside / ("nothing" if where == "dangling.html" else "kept.csv"))
    code, err = cli(capsys, "report", "--only", "01_mechanism", "--runs", str(tmp_path / "runs"), "--out", str(out),
                    "--threads", "1")
    assert code == 2 and err.count("\n") == 1, err
    assert f"cannot write {link}: {link} is a symbolic link, and nothing is written through a link" in err
    assert (outside / "kept.csv").read_text() == "kept" and sorted(p.name for p in outside.iterdir()) == ["kept.csv"]
    assert not (tmp_path / "runs").exists()  # nothing trained, nothing built
