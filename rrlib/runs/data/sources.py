"""Where rrlib's data comes from on any machine, and the SHA-256 each source is checked against.

The CPU presets train on two small cuts of TinyStories, named by file in ``data_path`` (a run's fingerprint
names its data file by name alone, rrlib.runs.folders.runfiles, so every committed run keeps its identity):

- ``TinyStories-train-sample.txt``: the first 2,316 stories of the train split;
- ``TinyStories-valid-sample.txt``: the first 1,000 stories of the validation split;

both in the dataset's raw-text format (each story followed by a line ``<|endoftext|>``). A ``data_path`` that is a file where it points is read as it is. One that is not, and that
names one of these samples, is found in this order:

1. ``$RRLIB_DATA``, a local copy of rrlib's data folder (``tinystories/<sample>``, ``gpt2/encoder.json`` and
   ``gpt2/vocab.bpe``): its bytes must hash to the SHA-256 recorded in ``SAMPLES``, else it is refused;
2. the cut fetched earlier, kept under ``<cache_dir>/data/`` with the hash it had when fetched;
3. the hub: the split's first stories through ``datasets`` (streamed, so only those are read), written in the
   raw-text format under ``<cache_dir>/data/``, as the sample was made: the train sample is a cut of the raw
   train file, whose stories are written as the hub gives them; the validation sample went through the
   ``datasets`` loader and was then normalised (no blank lines between paragraphs, no trailing spaces), and so
   is its cut.

What is known and what is not. Two hashes are recorded per sample: of the file's bytes (a local copy must match
it) and of its stories as rrlib reads them (each stripped, in order), which fix its tokens and so a run's
``data_hash``. The raw train file puts blank lines between some stories, which no cut of the hub's rows can
give back, so a train cut is judged by its stories. Whether the hub's first stories are the samples' stories
cannot be checked without a connection. A cut whose stories differ is used all the same, with a warning: a run
records where its data came from (``data_source``) and the hash of its tokens (``data_hash``), so runs on other
stories show it at once and are never taken for the committed ones (rrlib.runs.folders compares ``data_hash``).
A fetched cut's ``data_source`` follows its stories' hash, not the record beside it (which anyone can rewrite): the
hub's name for the sample's stories, and "unrecorded stories" with their hash for any other.

An earlier cut that cannot be used offline is named as what it is, with its file: not there, there but cut short
or changed (its size or hash is not the one recorded when it was fetched), or there without a record of it.

GPT-2's BPE comes from a folder (``gpt2_dir``, ``$RRLIB_GPT2_DIR`` or ``$RRLIB_DATA/gpt2``) whose two files must
hash to the SHA-256 that tiktoken itself checks, else through tiktoken's own download, which checks them too
(rrlib.runs.data.gpt2_folder).
A machine with none of these stops in one sentence that names both ways, before anything is written.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from . import BOTH_WAYS, DATA_VARIABLE, EOT, DataError, data_root, hub_unreachable, iter_stories, sha256_of
from ..folders.disk import write_bytes_atomic

HUB_DATASET = "roneneldan/TinyStories"
NOT_HERE = "rrlib's data is not on this machine"


@dataclass(frozen=True)
class Sample:
    folder: str  # where it lies in a data folder such as $RRLIB_DATA
    split: str  # the hub split it is the beginning of
    stories: int
    sha256: str  # of the file's bytes: the samples the committed runs trained on
    stories_sha256: str  # of its stories as rrlib reads them (``stories_hash``): what its tokens are made from
    normalised: bool  # its paragraphs were normalised to the raw format (``raw_text``)


SAMPLES = {
    "TinyStories-train-sample.txt": Sample(
        "tinystories", "train", 2316, "ba02237f5747a07d420cb7329f721fdc51b6f5c35a81788b9c4bb871e15ff30a",
        "7bf12df1c2fea8134b35ee986327116b179079deaa0b69664fc5f3f3c6f7233e", normalised=False),
    "TinyStories-valid-sample.txt": Sample(
        "tinystories", "validation", 1000, "ac8d5c5ecb5efa58032d68fa6aea68e30f9a226c6df1e65a5cd4964e4e368e47",
        "1e3bf99f0c2f1907ab49431f3502ea0e0ae1c807dd243c84c12f71f54b91a5d7", normalised=True),
}


def locate(path: str | os.PathLike, cache_dir) -> tuple[Path, str | None]:
    """The file a ``data_path``/``val_path`` reads, and where it came from, in words (None where it is the file
    as given). A path that is no file and names no sample is returned as it is, for the caller's own message."""
    path = Path(path)
    sample = SAMPLES.get(path.name)
    if path.exists() or sample is None:
        return path, None
    root = data_root()
    if root is not None:
        local = root / sample.folder / path.name
        if not local.is_file():
            raise DataError(f"{DATA_VARIABLE}={root} holds no {sample.folder}/{path.name}; point it at a copy of "
                            f"rrlib's data folder, or unset it to fetch the sample online")
        if (found := sha256_of(local)) != sample.sha256:
            raise DataError(f"{local} hashes to {found[:16]}…, not to the SHA-256 rrlib records for {path.name} "
                            f"({sample.sha256[:16]}…); restore the file, or unset {DATA_VARIABLE} to fetch it online")
        return local, f"${DATA_VARIABLE}"
    fetched = Path(cache_dir) / "data" / sample.folder / path.name
    if not _fetched_intact(fetched):
        _fetch_cut(path.name, sample, fetched)
    return fetched, content_label(sample, stories_hash(iter_stories(fetched)))


def content_label(sample: Sample, found: str) -> str:
    """Where a cut's stories come from, by their hash ``found``: the hub's sample where it is the one recorded,
    else stories rrlib has no record of (their hash named), whatever the cut's record says of its origin."""
    if found == sample.stories_sha256:
        return f"{HUB_DATASET} ({sample.split}, first {sample.stories:,} stories) through datasets"
    return (f"unrecorded stories (their SHA-256 {found[:16]}…; rrlib's {sample.split} sample's is "
            f"{sample.stories_sha256[:16]}…)")


def _record(fetched: Path) -> Path:
    return fetched.with_name(fetched.name + ".json")


def _recorded(fetched: Path) -> dict | None:
    """The record written beside a cut when it was fetched (its SHA-256, and its size in bytes where recorded);
    None where there is none that can be read."""
    try:
        record = json.loads(_record(fetched).read_text(encoding="utf-8"))
        return record if isinstance(record, dict) and isinstance(record.get("sha256"), str) else None
    except (OSError, ValueError):
        return None


def _damage(fetched: Path) -> str:
    """Why an earlier cut cannot be used, in words naming its file: not there, there but not a recorded cut, or
    there but cut short or changed since it was fetched."""
    try:
        there = fetched.is_file()
        size = fetched.stat().st_size if there else None
    except OSError:  # a loop of links, a folder that cannot be read
        there, size = False, None
    if not there:
        return f"{NOT_HERE} (no earlier cut at {fetched})"
    record = _recorded(fetched)
    if record is None:
        return (f"the earlier cut {fetched} is not a recorded cut (it has no readable record {_record(fetched).name} "
                f"of the hash it had when fetched)")
    recorded_size = record.get("bytes")
    if isinstance(recorded_size, int) and recorded_size != size:
        return (f"the earlier cut {fetched} is not the file that was fetched: it holds {size:,} bytes where "
                f"{recorded_size:,} were fetched (cut short or changed since)")
    return (f"the earlier cut {fetched} is not the file that was fetched: its SHA-256 is not the "
            f"{record['sha256'][:16]}… recorded when it was fetched (changed since)")


def _fetched_intact(fetched: Path) -> bool:
    """Whether an earlier cut is here with the bytes it had when fetched."""
    record = _recorded(fetched)
    try:
        return record is not None and fetched.is_file() and sha256_of(fetched) == record["sha256"]
    except OSError:
        return False


def raw_text(story: str, normalised: bool) -> str:
    """A story in the raw-text format, then a line ``<|endoftext|>``; ``normalised``: without blank lines between
    its paragraphs or trailing spaces."""
    if normalised:
        story = "\n".join(line.rstrip() for line in story.splitlines() if line.strip())
    return story.strip() + f"\n{EOT}\n"


def stories_hash(stories) -> str:
    """The SHA-256 of stories as rrlib reads them (rrlib.runs.data.iter_stories), each ended by a NUL."""
    digest = hashlib.sha256()
    for story in stories:
        digest.update(story.encode("utf-8") + b"\0")
    return digest.hexdigest()


def hub_cut(split: str, stories: int, normalised: bool, lead: str = NOT_HERE) -> bytes:
    """The first ``stories`` stories of the hub's split, streamed (only those are read), in the raw-text format;
    ``lead`` says why they are asked for, where the hub cannot answer."""
    if (reason := hub_unreachable()) is not None:
        raise DataError(f"{lead} and {HUB_DATASET} could not be reached ({reason}); {BOTH_WAYS}")
    try:
        import datasets

        rows = datasets.load_dataset(HUB_DATASET, split=split, streaming=True)
        texts = [row["text"] for row in islice(rows, stories)]
    except Exception as err:  # ConnectionError, the hub's offline errors, a missing package: all "no copy here"
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise DataError(f"{lead} and {HUB_DATASET} could not be reached ({reason}); {BOTH_WAYS}") from None
    if len(texts) < stories:
        raise DataError(f"{HUB_DATASET} ({split}) gave {len(texts):,} stories where {stories:,} were asked; "
                        f"{BOTH_WAYS}")
    return "".join(raw_text(text, normalised) for text in texts).encode("utf-8")


def _fetch_cut(name: str, sample: Sample, fetched: Path) -> None:
    """Cut the sample from the hub into ``fetched`` (atomically), with a record of its hash; a warning where its
    stories are not the recorded sample's."""
    # before anything is written; offline, an earlier cut that is there but damaged is named as such
    body = hub_cut(sample.split, sample.stories, sample.normalised, _damage(fetched))
    sha256 = hashlib.sha256(body).hexdigest()
    try:
        fetched.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(fetched, body)
        record = {"sha256": sha256, "bytes": len(body), "source": HUB_DATASET, "split": sample.split,
                  "stories": sample.stories}
        write_bytes_atomic(_record(fetched), (json.dumps(record, sort_keys=True) + "\n").encode())
    except OSError as err:
        raise DataError(f"cannot write {fetched} ({err.strerror or err}); set data.cache_dir to a folder you can "
                        f"write") from None
    found = stories_hash(iter_stories(fetched))
    print(f"[rrlib] cut {name} from {HUB_DATASET} ({sample.split}, first {sample.stories:,} stories) -> {fetched}: "
          + ("the same stories as the sample the committed runs trained on" if found == sample.stories_sha256 else
             f"other stories than the sample the committed runs trained on (their SHA-256 {found[:16]}…, recorded "
             f"{sample.stories_sha256[:16]}…), so runs on it are new runs: their data_hash differs"),
          file=sys.stderr, flush=True)
