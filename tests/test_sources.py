"""Where the data comes from (rrlib.runs.data.sources): $RRLIB_DATA checked against the recorded SHA-256, the hub cut
(here through a stand-in for `datasets.load_dataset` built from the local samples, as this machine has no
internet), and one sentence that names both ways where there is neither; and a run from a clone with no folder
beside it."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rrlib.runs.data import DataError, iter_stories
from rrlib.runs.data.sources import HUB_DATASET, SAMPLES, locate, raw_text, stories_hash
from rrlib.runs.data.token_cache import load_token_data

from conftest import REPO

TRAIN = "TinyStories-train-sample.txt"


def hub_stand_in(monkeypatch, stories_by_split: dict, calls: list):
    """`datasets.load_dataset` answering from lists of stories, recording how it was called and how many rows
    were read (a streamed split is read only as far as the cut); the hub answers when asked whether it is there."""
    import datasets

    from rrlib.runs.data import sources

    monkeypatch.setattr(sources, "hub_unreachable", lambda: None)

    def load_dataset(name, split, streaming=False):
        calls.append((name, split, streaming))

        def rows():
            for text in stories_by_split[split]:
                calls.append("row")
                yield {"text": text}
        return rows()

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)


def no_hub(monkeypatch):
    import datasets

    def load_dataset(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'roneneldan/TinyStories' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)


def test_rrlib_data_copy_is_found_and_checked(monkeypatch, data_copy, tmp_path):
    monkeypatch.setenv("RRLIB_DATA", str(data_copy))
    path, where = locate(tmp_path / "nowhere" / TRAIN, tmp_path / "cache")
    assert path == data_copy / "tinystories" / TRAIN and where == "$RRLIB_DATA"
    assert not (tmp_path / "cache").exists()
    # a copy with other bytes is refused, naming the recorded hash
    bad = tmp_path / "bad"
    (bad / "tinystories").mkdir(parents=True)
    (bad / "tinystories" / TRAIN).write_text("Once upon a time.\n<|endoftext|>\n")
    monkeypatch.setenv("RRLIB_DATA", str(bad))
    with pytest.raises(DataError, match=rf"not to the SHA-256 rrlib records for {TRAIN} \(ba02237f5747a07d"):
        locate(TRAIN, tmp_path / "cache")
    (bad / "tinystories" / TRAIN).unlink()
    with pytest.raises(DataError, match=f"holds no tinystories/{TRAIN}"):
        locate(TRAIN, tmp_path / "cache")
    monkeypatch.setenv("RRLIB_DATA", str(tmp_path / "missing"))
    with pytest.raises(DataError, match="is not a folder"):
        locate(TRAIN, tmp_path / "cache")


def test_a_file_where_data_path_points_is_read_as_given(monkeypatch, tmp_path):
    own = tmp_path / TRAIN
    own.write_text("My own stories.\n<|endoftext|>\n")
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    assert locate(own, tmp_path / "cache") == (own, None)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_hub_cut_of_the_samples_stories_gives_the_samples_stories(monkeypatch, data_copy, tmp_path, capsys, name):
    """The cut reads only the sample's number of stories, streamed, and writes them in the raw-text format: fed
    the sample's own stories (the validation split's with the blank lines and trailing spaces its sample's
    normalisation removed, and more stories after them), it gives the sample's stories, whose hash is the one
    recorded, and so the sample's tokens; the validation cut gives the sample's very bytes."""
    sample = SAMPLES[name]
    stories = list(iter_stories(data_copy / "tinystories" / name))
    assert len(stories) == sample.stories and stories_hash(stories) == sample.stories_sha256
    loose = [story.replace("\n", "  \n\n") if sample.normalised else story for story in stories]
    loose += ["A story past the cut."] * 5
    calls = []
    hub_stand_in(monkeypatch, {sample.split: loose}, calls)
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    path, where = locate(name, tmp_path / "cache")
    assert calls[0] == (HUB_DATASET, sample.split, True) and calls.count("row") == sample.stories
    assert path == tmp_path / "cache" / "data" / "tinystories" / name
    assert stories_hash(iter_stories(path)) == sample.stories_sha256
    assert (hashlib.sha256(path.read_bytes()).hexdigest() == sample.sha256) == sample.normalised
    assert where == f"{HUB_DATASET} ({sample.split}, first {sample.stories:,} stories) through datasets"
    assert "the same stories as the sample the committed runs trained on" in capsys.readouterr().err
    local = load_token_data(data_path=str(data_copy / "tinystories" / name), tokenizer="bytes",
                            cache_dir=tmp_path / "cache")
    cut = load_token_data(data_path=str(path), tokenizer="bytes", cache_dir=tmp_path / "cache")
    assert cut.content_hash == local.content_hash  # the committed runs' data_hash
    # a second look finds the cut without the hub
    no_hub(monkeypatch)
    assert locate(name, tmp_path / "cache") == (path, where)


def test_hub_cut_with_other_bytes_is_used_said_and_shows_in_data_hash(monkeypatch, data_copy, tmp_path, capsys):
    sample = SAMPLES[TRAIN]
    stories = list(iter_stories(data_copy / "tinystories" / TRAIN))
    stories[0] = stories[0].replace("Lily", "Lucy", 1)
    hub_stand_in(monkeypatch, {"train": stories}, [])
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    cut = load_token_data(data_path=str(tmp_path / TRAIN), tokenizer="bytes", cache_dir=tmp_path / "cache")
    assert "other stories than the sample the committed runs trained on" in capsys.readouterr().err
    assert cut.source.startswith(f"{TRAIN} from unrecorded stories (their SHA-256 ")
    monkeypatch.setenv("RRLIB_DATA", str(data_copy))
    local = load_token_data(data_path=str(tmp_path / TRAIN), tokenizer="bytes", cache_dir=tmp_path / "cache")
    assert local.source.startswith(f"{TRAIN} from $RRLIB_DATA")
    assert cut.content_hash != local.content_hash and len(cut.train) == len(local.train)
    # an earlier cut damaged on disk is cut again
    fetched = tmp_path / "cache" / "data" / "tinystories" / TRAIN
    fetched.write_bytes(fetched.read_bytes()[:-10])
    monkeypatch.delenv("RRLIB_DATA")
    hub_stand_in(monkeypatch, {"train": list(iter_stories(data_copy / "tinystories" / TRAIN))}, [])
    locate(TRAIN, tmp_path / "cache")
    assert stories_hash(iter_stories(fetched)) == sample.stories_sha256


def test_a_fetched_cut_replaced_by_other_stories_says_so_in_its_label(monkeypatch, data_copy, tmp_path):
    """A run's data_source names the hub only for the sample's stories: a cut whose stories are others (replaced,
    its record made to match) says so, beside the data_hash that differs."""
    hub_stand_in(monkeypatch, {"train": list(iter_stories(data_copy / "tinystories" / TRAIN))}, [])
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    fetched, where = locate(TRAIN, tmp_path / "cache")
    assert "other stories" not in where
    fetched.write_text("Another story.\n<|endoftext|>\n" * 3000)
    record = fetched.with_name(fetched.name + ".json")
    record.write_text(record.read_text().replace(json_hash(record), hashlib.sha256(fetched.read_bytes()).hexdigest()))
    cut = load_token_data(data_path=str(tmp_path / TRAIN), tokenizer="bytes", cache_dir=tmp_path / "cache")
    assert cut.source.startswith(f"{TRAIN} from unrecorded stories (their SHA-256 ") and HUB_DATASET not in cut.source


def json_hash(record: Path) -> str:
    import json

    return json.loads(record.read_text())["sha256"]


@pytest.mark.parametrize("damage", ["cut short", "no record"])
def test_a_damaged_cut_offline_is_named_not_called_missing(monkeypatch, data_copy, tmp_path, damage):
    hub_stand_in(monkeypatch, {"train": list(iter_stories(data_copy / "tinystories" / TRAIN))}, [])
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    fetched, _ = locate(TRAIN, tmp_path / "cache")
    if damage == "cut short":
        fetched.write_bytes(fetched.read_bytes()[: len(fetched.read_bytes()) // 2])
    else:
        fetched.with_name(fetched.name + ".json").unlink()
    kept = fetched.read_bytes()
    no_hub(monkeypatch)
    monkeypatch.setattr("rrlib.runs.data.sources.hub_unreachable", lambda: None)
    with pytest.raises(DataError) as caught:
        locate(TRAIN, tmp_path / "cache")
    said = str(caught.value)
    assert said.startswith(f"the earlier cut {fetched} ") and "not on this machine" not in said, said
    assert ("is not the file that was fetched" if damage == "cut short" else "no readable record") in said
    assert fetched.read_bytes() == kept  # nothing written over it


def test_rrlib_data_that_is_a_loop_of_links_is_one_sentence(monkeypatch, tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    monkeypatch.setenv("RRLIB_DATA", str(tmp_path / "a"))
    with pytest.raises(DataError, match="RRLIB_DATA=.* cannot be looked at"):
        locate(TRAIN, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_neither_copy_nor_hub_stops_in_one_sentence_naming_both_ways(monkeypatch, tmp_path):
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    no_hub(monkeypatch)
    with pytest.raises(DataError) as caught:
        load_token_data(data_path=str(tmp_path / TRAIN), tokenizer="bytes", cache_dir=tmp_path / "cache")
    message = str(caught.value)
    assert "\n" not in message and message.count(". ") == 0
    assert "set RRLIB_DATA to a local copy of rrlib's data folder" in message
    assert "run where the internet is reachable" in message and "datasets" in message
    assert not (tmp_path / "cache").exists()  # nothing written


def test_raw_text_normalises_only_where_the_sample_was():
    assert raw_text("  One day.  \n\nThe end. \n", normalised=True) == "One day.\nThe end.\n<|endoftext|>\n"
    assert raw_text("\nOne day. \n\nThe end.\n", normalised=False) == "One day. \n\nThe end.\n<|endoftext|>\n"


def test_gpt2_files_from_rrlib_data_are_checked(monkeypatch, data_copy, tmp_path):
    from rrlib.runs.data import get_tokenizer

    monkeypatch.delenv("RRLIB_GPT2_DIR", raising=False)
    monkeypatch.setenv("RRLIB_DATA", str(data_copy))
    assert get_tokenizer("gpt2").encode("Once upon a time") == [7454, 2402, 257, 640]
    copy = tmp_path / "data"
    shutil.copytree(data_copy / "gpt2", copy / "gpt2")
    with open(copy / "gpt2" / "vocab.bpe", "a") as f:
        f.write("x y\n")
    monkeypatch.setenv("RRLIB_DATA", str(copy))
    with pytest.raises(DataError, match=r"is not GPT-2's vocab.bpe \(its SHA-256 is not 1ce1664773c50f3e"):
        get_tokenizer("gpt2").encode("hello")


# ---------------------------------------------------------------- a clone with no folder beside it

def clone_with_nothing_beside(tmp_path) -> Path:
    """The files a checkout runs `rrlib train` from, in a folder with nothing beside it."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("rrlib", "params"):
        shutil.copytree(REPO / name, clone / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", clone)
    assert not (tmp_path / "shared").exists()
    return clone


def train_tiny(clone: Path, env: dict) -> subprocess.CompletedProcess:
    """The tiny training path of the main job's first page (the sweep at size tiny), one run of it."""
    keep = {k: v for k, v in os.environ.items() if k not in ("RRLIB_DATA", "RRLIB_GPT2_DIR")}
    return subprocess.run([sys.executable, "-m", "rrlib", "train", "--size", "tiny", "--variant", "review",
                           "--seed", "0", "--set", "train.steps=4"], cwd=clone, capture_output=True, text=True,
                          timeout=300, env={**keep, "OMP_NUM_THREADS": "1", **env})


def test_a_clone_trains_with_rrlib_data_set(tmp_path, data_copy):
    clone = clone_with_nothing_beside(tmp_path)
    done = train_tiny(clone, {"RRLIB_DATA": str(data_copy)})
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    result = json.loads((clone / "outputs/runs/tiny/review/seed0/result.json").read_text())
    assert result["data_source"].startswith(f"{TRAIN} from $RRLIB_DATA")
    expected = load_token_data(data_path=str(data_copy / "tinystories" / TRAIN), tokenizer="bytes",
                               cache_dir=tmp_path / "cache").content_hash
    assert result["data_hash"] == expected


def closed_port() -> str:
    """An address where nothing listens: a connection is refused at once, as on a machine with no network."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("hub", ["offline", "no network"])
def test_a_clone_with_neither_stops_in_one_sentence_within_seconds_before_writing_a_run(tmp_path, hub):
    """Set offline, the hub is not asked; with no network, it is asked once, quietly (datasets' own requests
    would retry with backoff for about 25 s, printing a warning a try)."""
    import time

    clone = clone_with_nothing_beside(tmp_path)
    env = {"HF_HUB_OFFLINE": "1"} if hub == "offline" else {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": closed_port()}
    start = time.perf_counter()
    done = train_tiny(clone, env)
    took = time.perf_counter() - start
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: rrlib's data is not on this machine"), done.stderr
    assert "RRLIB_DATA" in lines[0] and "internet" in lines[0] and done.stdout == ""
    assert took < 15, f"the sentence took {took:.0f} s"  # datasets alone backs off for 23 s before its error
    assert not (clone / "outputs" / "runs").exists()


def test_the_main_job_stops_before_its_first_page_without_data(monkeypatch, tmp_path):
    """`rrlib report` trains the tiny sweep unasked: without the data it stops before any page runs or any file of
    the report is written (the command line prints the sentence and exits 2)."""
    from rrlib.report import build

    monkeypatch.delenv("RRLIB_DATA", raising=False)
    no_hub(monkeypatch)
    monkeypatch.setattr(build, "execute", lambda *a, **k: pytest.fail("a page was executed"))
    with pytest.raises(DataError, match="set RRLIB_DATA to a local copy"):
        build.main(["--only", "03_sweep", "--sizes", "tiny", "--out", str(tmp_path / "paper"), "--runs",
                    str(tmp_path / "runs"), "--build", str(tmp_path / "build")])
    assert sorted(p.name for p in tmp_path.iterdir()) == []
