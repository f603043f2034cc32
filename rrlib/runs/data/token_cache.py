"""The token cache: each split of a data source tokenised once into a uint16 file, and the train and held-out
streams cut from it.

Tokenising happens once per (source, tokenizer, limits); later loads are a memmap. Each cache file <name>.bin has
<name>.bin.json beside it: the SHA-256 of the source file's bytes it was made from (none for a hub split), its
token count and the SHA-256 of its tokens, computed once as they are written. The source's hash decides whether the
file must be made again: a source rewritten with other text of the same size and modification time is another
source, and the same bytes on a fresh clone, with new times, are the same. The tokens' hash is the data's identity
(``TokenData.content_hash``). A cache file that is cut short or damaged is made again, with a word; so is one whose
source changed. A file's hash is computed once per process for each version of it the file system reports (its
size, modification and change times). A data file that is not where it is given but names one of rrlib's samples
is found, or fetched, by rrlib.runs.data.sources, and a run's ``data_source`` says where it came from.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Iterable

import numpy as np

from . import (DATASETS, HELDOUT, HELDOUT_CUTS, DataError, Tokenizer, checked_file, get_tokenizer, hub_stories,
                   iter_stories)
from ..folders.disk import disk_full, full_disk, remove_stale_tmp, tmp_beside
from .sources import locate


def _tokenize_to_file(stories: Iterable[str], tokenizer: Tokenizer, path: Path, source: dict | None, origin: str,
                      chunk: int = 4096) -> None:
    """Tokenise in chunks through the batch API, EOS after each story, into a uint16 file written atomically,
    then its record (``source``: the SHA-256 of the source file's bytes)."""
    tmp = tmp_beside(path)  # per process: concurrent ranks never collide
    n_stories = n_tokens = n_bytes = 0
    digest = hashlib.sha256()
    tokenizer.encode("")  # loads GPT-2's BPE files first, so the throughput printed below is tokenising alone
    start = time.perf_counter()
    try:
        with open(tmp, "wb") as f:
            stories = iter(stories)
            while texts := list(islice(stories, chunk)):
                ids = tokenizer.encode_batch(texts)
                for seq in ids:
                    seq.append(tokenizer.eos_id)
                count = sum(map(len, ids))
                block = np.fromiter(chain.from_iterable(ids), dtype=np.uint16, count=count).tobytes()
                f.write(block)
                digest.update(block)
                n_stories, n_tokens = n_stories + len(texts), n_tokens + count
                n_bytes += sum(len(text.encode("utf-8")) for text in texts)
        if n_tokens == 0:
            raise DataError(f"no stories found in {origin}; check the data file and data.max_stories")
        os.replace(tmp, path)
        record = {"tokens": n_tokens, "sha256": digest.hexdigest(), "source": source}
        _record_path(path).write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as err:
        if disk_full(err):
            raise full_disk(path, err) from None
        if err.filename and Path(err.filename) not in (tmp, path, _record_path(path)):  # reading the stories
            raise DataError(f"cannot read {err.filename} ({err.strerror or err})") from None
        raise DataError(f"cannot write the token cache {path} ({err.strerror or err}); set data.cache_dir to a "
                        f"folder you can write") from None
    finally:
        tmp.unlink(missing_ok=True)  # a failed or interrupted run leaves no half-written cache behind
    seconds = time.perf_counter() - start
    print(f"tokenised {n_stories:,} stories -> {n_tokens:,} tokens ({tokenizer.name}) in {seconds:.1f}s "
          f"({n_bytes / 1e6 / seconds:.1f} MB/s of text) -> {path}")


def _record_path(cache: Path) -> Path:
    return cache.with_name(cache.name + ".json")


def _file_sha256(path) -> str:
    """The SHA-256 of a file's bytes; the change time is in the key because a rewrite may keep size and mtime."""
    stat = os.stat(path)
    return _sha256_of_version(str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of_version(path: str, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def _unusable(cache: Path, source: dict | None) -> str | None:
    """Why the cache file cannot be used as it is (None: it can): no record, a changed source, a wrong length
    or bytes that no longer match their hash (a copy cut short, a disk error)."""
    try:
        record = json.loads(_record_path(cache).read_text(encoding="utf-8"))
        tokens, sha256 = int(record["tokens"]), str(record["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return "has no record of what it holds"
    if record.get("source") != source:
        return "was made from another version of its source file (its bytes changed)"
    stat = cache.stat()
    if stat.st_size != 2 * tokens:
        return f"holds {stat.st_size / 2:,.0f} tokens where {tokens:,} were written"
    if _file_sha256(cache) != sha256:
        return "no longer matches the hash of the tokens written"
    return None


def _stream(dataset: str, path, split: str, max_stories: int | None, tokenizer: Tokenizer,
            cache_dir) -> tuple[np.memmap, str, str | None]:
    """One split as cached tokens, their SHA-256, and where a local file was found (rrlib.runs.data.sources.locate;
    None for a file read where it was given, or a hub split): a file keyed by its path, a hub split by its name.

    Stories are read (and the hub reached) only when there is no usable cache, so a cached run works offline.
    """
    key = {"tokenizer": tokenizer.name, "vocab_size": tokenizer.vocab_size, "max_stories": max_stories,
           "split": split}
    if tokenizer.eos_in_text != "text":  # caches made before the setting existed encoded it as text
        key["eos_in_text"] = tokenizer.eos_in_text
    where = None
    if path is None:
        key |= {"name": dataset, "source": DATASETS[dataset]}
        source = None
    else:
        path, where = locate(path, cache_dir)
        path = checked_file(path)
        key |= {"name": path.stem, "source": str(path)}
        source = {"sha256": _file_sha256(path)}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    cache = Path(cache_dir) / f"{key['name']}-{split}-{tokenizer.name}-{digest}.bin"
    remove_stale_tmp(cache)
    reason = _unusable(cache, source) if cache.is_file() else "missing"
    if reason is not None:
        if cache.is_file():
            print(f"[rrlib] the token cache {cache} {reason}; tokenising again", file=sys.stderr, flush=True)
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise DataError(f"cannot make the token cache folder {cache.parent} ({err.strerror or err}); set "
                            f"data.cache_dir to a folder you can write") from None
        stories = hub_stories(dataset, split, max_stories) if path is None else iter_stories(path, max_stories)
        _tokenize_to_file(stories, tokenizer, cache, source, f"{dataset} ({split})" if path is None else str(path))
    sha256 = json.loads(_record_path(cache).read_text(encoding="utf-8"))["sha256"]
    return np.memmap(cache, dtype=np.uint16, mode="r"), sha256, where


# ----------------------------------------------------------------------------- train / held-out

def _named(path, where: str | None) -> str:
    """A data file as a run's ``data_source`` names it: by name, and where it was found unless read as given."""
    return Path(path).name if where is None else f"{Path(path).name} from {where}"


@dataclass
class TokenData:
    """A train token stream and a held-out one (uint16 memmaps), with what a result file needs to name them."""

    train: np.ndarray
    heldout: np.ndarray
    tokenizer_name: str
    vocab_size: int
    eos_id: int
    source: str
    content_hash: str  # of the token stream(s) the two come from: the data's identity in a run's files
    heldout_name: str  # what the held-out stream is, in words


def load_token_data(dataset: str = "tinystories", data_path=None, val_path=None, tokenizer: str = "gpt2",
                    max_stories: int | None = 400_000, heldout: str = "tail", heldout_frac: float = 0.03,
                    cache_dir="outputs/cache", gpt2_dir=None, eos_in_text: str = "special",
                    heldout_cut: str = "floor") -> TokenData:
    """Train and held-out tokens: the hub's TinyStories by default, or the local `data_path`.

    heldout="tail" is the paper's split (the last `heldout_frac` of the train stream); "validation" holds out
    the official validation split instead (`val_path` for local data), which never overlaps a train story.
    ``heldout_cut`` places the tail's first token: "floor" at int((1 − frac)·n), the paper's
    ``int(len(data)*0.97)``; "round" at n − round(frac·n), rrlib's first rule (at most one token apart).
    """
    if heldout_cut not in HELDOUT_CUTS:
        raise DataError(f"unknown heldout_cut {heldout_cut!r}; valid choices: {', '.join(HELDOUT_CUTS)}")
    if heldout not in HELDOUT:
        raise DataError(f"unknown heldout {heldout!r}; valid choices: {', '.join(HELDOUT)}")
    if data_path is None and dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; valid names: {', '.join(DATASETS)} (or pass data_path=)")
    if heldout == "tail" and not 0 < heldout_frac < 1:
        raise DataError(f"heldout_frac must lie in (0, 1), got {heldout_frac}")
    if heldout == "tail" and val_path is not None:
        raise DataError("val_path is only read with heldout='validation'; drop it or set heldout='validation'")
    if heldout == "validation" and data_path is not None and val_path is None:
        raise DataError("heldout='validation' with a local data_path needs val_path= (the validation file)")
    tok = get_tokenizer(tokenizer, gpt2_dir, eos_in_text)
    train, content_hash, where = _stream(dataset, data_path, "train", max_stories, tok, cache_dir)
    origin = DATASETS[dataset] if data_path is None else _named(data_path, where)
    limit = "all" if max_stories is None else f"at most the first {max_stories:,}"
    if heldout == "tail":
        cut = HELDOUT_CUTS[heldout_cut](len(train), heldout_frac)
        train, held = train[:cut], train[cut:]
        held_name = f"last {heldout_frac:.0%} of the train stream"
    else:
        held, held_hash, where = _stream(dataset, val_path, "validation", None, tok, cache_dir)
        held_name = "validation split" if val_path is None else _named(val_path, where)
        content_hash = hashlib.sha256(f"{content_hash}+{held_hash}".encode()).hexdigest()
    return TokenData(train=train, heldout=held, tokenizer_name=tok.name, vocab_size=tok.vocab_size,
                     eos_id=tok.eos_id, source=f"{origin} ({limit} train stories; held out: {held_name})",
                     content_hash=content_hash[:16], heldout_name=held_name)
