"""Where rrlib's data comes from on any machine, and the SHA-256 each source is checked against.

The CPU presets train on two small cuts of TinyStories, named by file in ``data_path`` (a run's fingerprint
names its data file by name alone, rrlib.runs.runfiles, so every committed run keeps its identity):

- ``TinyStories-train-sample.txt``: the first 2,316 stories of the train split;
- ``TinyStories-valid-sample.txt``: the first 1,000 stories of the validation split;

both in the dataset's raw-text format (each story, its blank lines and trailing spaces dropped, then a line
``<|endoftext|>``). A ``data_path`` that is a file where it points is read as it is. One that is not, and that
names one of these samples, is found in this order:

1. ``$RRLIB_DATA``, a local copy of rrlib's data folder (``tinystories/<sample>``, ``gpt2/encoder.json`` and
   ``gpt2/vocab.bpe``): its bytes must hash to the SHA-256 recorded in ``SAMPLES``, else it is refused;
2. the cut fetched earlier, kept under ``<cache_dir>/data/`` with the hash it had when fetched;
3. the hub: the split's first stories through ``datasets`` (streamed, so only those are read), written in the
   raw-text format under ``<cache_dir>/data/``.

What is known and what is not. The recorded hashes are those of the samples the committed runs trained on. Their
train sample is a cut of the raw train file and their validation sample went through the ``datasets`` loader,
then normalised to the raw format; whether the hub's first stories, cut here, give the same bytes cannot be
checked without a connection. A cut whose bytes differ is used all the same, with a warning: a run records
where its data came from (``data_source``) and the hash of its tokens (``data_hash``), so runs on other bytes
show it at once and are never taken for the committed ones (rrlib.runs.folders compares ``data_hash``).

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

from .data import BOTH_WAYS, DATA_VARIABLE, EOT, DataError, data_root, sha256_of

HUB_DATASET = "roneneldan/TinyStories"


@dataclass(frozen=True)
class Sample:
    folder: str  # where it lies in a data folder such as $RRLIB_DATA
    split: str  # the hub split it is the beginning of
    stories: int
    sha256: str  # of the file's bytes: the samples the committed runs trained on


SAMPLES = {
    "TinyStories-train-sample.txt": Sample(
        "tinystories", "train", 2316, "ba02237f5747a07d420cb7329f721fdc51b6f5c35a81788b9c4bb871e15ff30a"),
    "TinyStories-valid-sample.txt": Sample(
        "tinystories", "validation", 1000, "ac8d5c5ecb5efa58032d68fa6aea68e30f9a226c6df1e65a5cd4964e4e368e47"),
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
    return fetched, f"{HUB_DATASET} ({sample.split}, first {sample.stories:,} stories) through datasets"


def _record(fetched: Path) -> Path:
    return fetched.with_name(fetched.name + ".json")


def _fetched_intact(fetched: Path) -> bool:
    """Whether an earlier cut is here with the bytes it had when fetched."""
    try:
        recorded = json.loads(_record(fetched).read_text(encoding="utf-8"))["sha256"]
        return fetched.is_file() and sha256_of(fetched) == recorded
    except (OSError, ValueError, KeyError, TypeError):
        return False


def raw_text(story: str) -> str:
    """A story as the raw-text format holds it: no blank lines, no trailing spaces, then a line ``<|endoftext|>``."""
    lines = [line.rstrip() for line in story.strip().splitlines() if line.strip()]
    return "\n".join(lines) + f"\n{EOT}\n"


def hub_cut(split: str, stories: int) -> bytes:
    """The first ``stories`` stories of the hub's split, streamed (only those are read), in the raw-text format."""
    try:
        import datasets

        rows = datasets.load_dataset(HUB_DATASET, split=split, streaming=True)
        texts = [row["text"] for row in islice(rows, stories)]
    except Exception as err:  # ConnectionError, the hub's offline errors, a missing package: all "no copy here"
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise DataError(f"rrlib's data is not on this machine and {HUB_DATASET} could not be reached ({reason}); "
                        f"{BOTH_WAYS}") from None
    if len(texts) < stories:
        raise DataError(f"{HUB_DATASET} ({split}) gave {len(texts):,} stories where {stories:,} were asked; "
                        f"{BOTH_WAYS}")
    return "".join(raw_text(text) for text in texts).encode("utf-8")


def _fetch_cut(name: str, sample: Sample, fetched: Path) -> None:
    """Cut the sample from the hub into ``fetched`` (atomically), with a record of its hash; a warning where its
    bytes are not the recorded sample's."""
    body = hub_cut(sample.split, sample.stories)  # before anything is written: no connection, no folder
    sha256 = hashlib.sha256(body).hexdigest()
    try:
        fetched.parent.mkdir(parents=True, exist_ok=True)
        tmp = fetched.with_name(f"{fetched.name}.{os.getpid()}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, fetched)
        _record(fetched).write_text(json.dumps({"sha256": sha256, "source": HUB_DATASET, "split": sample.split,
                                                "stories": sample.stories}, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as err:
        raise DataError(f"cannot write {fetched} ({err.strerror or err}); set data.cache_dir to a folder you can "
                        f"write") from None
    same = sha256 == sample.sha256
    print(f"[rrlib] cut {name} from {HUB_DATASET} ({sample.split}, first {sample.stories:,} stories) -> {fetched}: "
          + ("the same bytes as the sample the committed runs trained on" if same else
             f"other bytes than the sample the committed runs trained on (sha256 {sha256[:16]}…, recorded "
             f"{sample.sha256[:16]}…), so runs on it are new runs: their data_hash differs"),
          file=sys.stderr, flush=True)
