"""Tokenizers, TinyStories (or a local file) as stories, seeded batches and eval windows.

The paper's data recipe: the first 400k TinyStories train stories, GPT-2 tokens, EOS after each story, the
last 3% of the token stream held out (the cached token streams are rrlib.runs.data.token_cache's). Every batch and
eval window is a pure function of its seed (and step), so every variant sees the same data at the same seed (the
paired design) and a resumed run continues exactly.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from functools import cached_property
from itertools import chain, islice
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch


class DataError(ValueError):
    """A data problem the user can fix (bad name, missing file, no network): one sentence, no traceback."""


# ----------------------------------------------------------------------------- where the data lies

DATA_VARIABLE = "RRLIB_DATA"  # a local copy of rrlib's data folder (rrlib.runs.data.sources)
BOTH_WAYS = (f"set {DATA_VARIABLE} to a local copy of rrlib's data folder (tinystories/ with the samples, gpt2/ with "
             f"encoder.json and vocab.bpe), or run where the internet is reachable, so that rrlib fetches them "
             f"(TinyStories through datasets, GPT-2's BPE through tiktoken)")
# GPT-2's BPE files, with the SHA-256 tiktoken's own gpt2 encoding checks
GPT2_FILES = {"encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
              "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"}


def data_root() -> Path | None:
    """The local copy of rrlib's data folder that ``$RRLIB_DATA`` names (None: unset); one sentence if it is no folder."""
    text = os.environ.get(DATA_VARIABLE)
    if not text:
        return None
    try:
        root = Path(text).expanduser().resolve()
        folder = root.is_dir()
    except (OSError, RuntimeError) as err:  # a loop of links (RuntimeError before Python 3.13), a name too long
        raise DataError(f"{DATA_VARIABLE}={text} cannot be looked at ({getattr(err, 'strerror', None) or err}); point "
                        f"it at a local copy of rrlib's data folder (tinystories/, gpt2/), or unset it to fetch the "
                        f"data online") from None
    if not folder:
        raise DataError(f"{DATA_VARIABLE}={text} is not a folder; point it at a local copy of rrlib's data folder "
                        f"(tinystories/, gpt2/), or unset it to fetch the data online")
    return root


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


# ----------------------------------------------------------------------------- tokenizers

EOT = "<|endoftext|>"
# tiktoken's GPT-2 pattern (the original regex with possessive quantifiers), so the offline encoding is
# the same object tiktoken.get_encoding("gpt2") builds online.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


class GPT2Tokenizer:
    """Exactly GPT-2's BPE (50,257 tokens, EOS 50256) through tiktoken.

    ``eos_in_text`` says what a literal "<|endoftext|>" inside a story becomes (the loader also places an EOS
    after each story): "special" makes it the EOS token, as the paper's HF ``GPT2TokenizerFast`` does (the
    added token is split out before BPE, the text on either side encoded as usual, which is tiktoken's
    ``allowed_special``); "text" encodes it as ordinary text (``encode_ordinary``), so no story can smuggle an
    EOS into the stream.
    """

    name = "gpt2"
    vocab_size = 50257
    eos_id = 50256

    def __init__(self, gpt2_dir: str | os.PathLike | None = None, eos_in_text: str = "special"):
        self.gpt2_dir = gpt2_dir
        self.eos_in_text = _checked_eos_in_text(eos_in_text)

    @cached_property
    def _encoding(self):
        """Built on first use, so a cache hit needs neither the BPE files nor the 0.5 s it takes to load them."""
        return _gpt2_encoding(self.gpt2_dir)

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        # multithreaded in tiktoken's Rust core
        if self.eos_in_text == "special":
            return self._encoding.encode_batch(texts, allowed_special={EOT})
        return self._encoding.encode_ordinary_batch(texts)

    def decode(self, ids: Iterable[int]) -> str:
        return self._encoding.decode(list(ids))


class ByteTokenizer:
    """UTF-8 bytes plus one EOS (vocab 257): no files to fetch, and a 200x smaller embedding for CPU runs.

    ``eos_in_text`` as for GPT-2: "special" turns a literal "<|endoftext|>" in a story into the EOS id.
    """

    name = "bytes"
    vocab_size = 257
    eos_id = 256

    def __init__(self, eos_in_text: str = "special"):
        self.eos_in_text = _checked_eos_in_text(eos_in_text)

    def encode(self, text: str) -> list[int]:
        if self.eos_in_text == "text" or EOT not in text:
            return list(text.encode("utf-8"))
        pieces = [list(piece.encode("utf-8")) for piece in text.split(EOT)]
        return [*pieces[0], *chain.from_iterable([self.eos_id, *piece] for piece in pieces[1:])]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return b"".join(EOT.encode() if i == self.eos_id else bytes([i]) for i in ids).decode("utf-8", "replace")


Tokenizer = GPT2Tokenizer | ByteTokenizer
TOKENIZERS = ("gpt2", "bytes")
EOS_IN_TEXT = ("special", "text")


def _checked_eos_in_text(value: str) -> str:
    if value not in EOS_IN_TEXT:
        raise DataError(f"unknown eos_in_text {value!r}; valid choices: {', '.join(EOS_IN_TEXT)}")
    return value


def _gpt2_encoding(gpt2_dir: str | os.PathLike | None):
    """GPT-2 from local `encoder.json` + `vocab.bpe` (``gpt2_folder``), else tiktoken's download."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    folder = gpt2_folder(gpt2_dir)
    if folder is None:
        try:
            return tiktoken.get_encoding("gpt2")
        except (OSError, ValueError) as err:  # requests' errors are OSErrors; a bad download is a ValueError
            raise DataError(f"GPT-2's BPE files are not on this machine and tiktoken could not download them "
                            f"({type(err).__name__}); {BOTH_WAYS}, or pass gpt2_dir= (or set RRLIB_GPT2_DIR) to a "
                            f"folder holding encoder.json and vocab.bpe") from err
    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=str(folder / "vocab.bpe"),
                                            encoder_json_file=str(folder / "encoder.json"))
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={EOT: GPT2Tokenizer.eos_id}, explicit_n_vocab=GPT2Tokenizer.vocab_size)


def gpt2_folder(gpt2_dir: str | os.PathLike | None) -> Path | None:
    """The folder GPT-2's BPE files are read from (``gpt2_dir``, ``$RRLIB_GPT2_DIR``, else ``$RRLIB_DATA/gpt2``), each
    file checked against the SHA-256 tiktoken checks; None: tiktoken downloads them (and checks the same hashes)."""
    given = gpt2_dir or os.environ.get("RRLIB_GPT2_DIR")
    root = data_root()
    if given is None and root is None:
        return None
    folder, where = (Path(given), "gpt2_dir/RRLIB_GPT2_DIR") if given is not None else (root / "gpt2", DATA_VARIABLE)
    for name, expected in GPT2_FILES.items():
        if not (folder / name).is_file():
            raise DataError(f"{where} {folder} must hold encoder.json and vocab.bpe")
        if sha256_of(folder / name) != expected:
            raise DataError(f"{folder / name} is not GPT-2's {name} (its SHA-256 is not {expected[:16]}…, the one "
                            f"tiktoken checks); restore it from a copy of GPT-2's BPE files")
    return folder


def get_tokenizer(name: str, gpt2_dir: str | os.PathLike | None = None, eos_in_text: str = "special") -> Tokenizer:
    """The tokenizer called `name` ("gpt2" or "bytes"); gpt2_dir (or $RRLIB_GPT2_DIR) builds GPT-2 offline."""
    if name == "gpt2":
        return GPT2Tokenizer(gpt2_dir, eos_in_text)
    if name == "bytes":
        return ByteTokenizer(eos_in_text)
    raise DataError(f"unknown tokenizer {name!r}; valid names: {', '.join(TOKENIZERS)}")


# ----------------------------------------------------------------------------- stories

DATASETS = {"tinystories": "roneneldan/TinyStories"}
FILE_FORMATS = (".txt", ".jsonl", ".parquet")


def iter_stories(path: str | os.PathLike, max_stories: int | None = None) -> Iterator[str]:
    """Stories from a local file: raw text (each story followed by a line <|endoftext|>), .jsonl or .parquet.

    Raw text is read line by line, so taking the first 400k stories of the 1.9 GB train file reads only
    those. The newlines around each separator belong to the format, not the story, and are stripped.
    """
    return islice(_read_stories(checked_file(path)), max_stories)


def checked_file(path: str | os.PathLike) -> Path:
    try:
        path = Path(path).resolve()
    except (OSError, RuntimeError) as err:  # a loop of links (RuntimeError before Python 3.13), a name too long
        raise DataError(f"data file {path} cannot be looked at ({getattr(err, 'strerror', None) or err}); pass "
                        f"data_path/val_path to a local {', '.join(FILE_FORMATS)} file") from None
    if path.is_dir():
        raise DataError(f"data file {path} is a folder; pass data_path/val_path to one local "
                        f"{', '.join(FILE_FORMATS)} file in it")
    if not path.is_file():
        raise DataError(f"data file {path} not found; pass data_path/val_path to a local "
                        f"{', '.join(FILE_FORMATS)} file, or leave data_path unset to use the datasets hub")
    if path.suffix not in FILE_FORMATS:
        raise DataError(f"data file {path} must end in one of {', '.join(FILE_FORMATS)}")
    return path


def _utf8_lines(path: Path) -> Iterator[str]:
    """The file's lines; a file that is not UTF-8 text (a binary file renamed .txt) is named as such."""
    with open(path, encoding="utf-8") as f:
        try:
            yield from f
        except UnicodeDecodeError:
            raise DataError(f"{path} is not UTF-8 text; valid data files are UTF-8 text (.txt, stories separated "
                            f"by {EOT} lines), .jsonl with a 'text' field, or .parquet with a 'text' column") from None


def _read_stories(path: Path) -> Iterator[str]:
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.ParquetFile(path)
        except (pa.ArrowException, OSError):
            raise DataError(f"{path} is not a Parquet file; a .parquet data file is a table with a 'text' column "
                            f"(raw text belongs in a .txt file)") from None
        if "text" not in table.schema_arrow.names:
            raise DataError(f"{path} has no 'text' column (columns: {', '.join(table.schema_arrow.names)})")
        kind = table.schema_arrow.field("text").type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise DataError(f"{path}'s 'text' column holds {kind}, not text; a .parquet data file is a table with a "
                            f"'text' column of strings, one story each")
        row = 0
        for batch in table.iter_batches(columns=["text"]):
            for text in batch.column(0).to_pylist():
                row += 1
                if text is None:
                    raise DataError(f"{path} row {row}: the 'text' column is null; each row of a .parquet data file "
                                    f"is one story, so drop or fill the empty rows")
                yield text
        return
    with contextlib.closing(_utf8_lines(path)) as f:
        if path.suffix == ".jsonl":
            for number, line in enumerate(f, 1):
                if line.strip():
                    if number == 1 and line.startswith("\ufeff"):
                        raise DataError(f"{path} starts with a byte-order mark (BOM), which JSON does not allow; save "
                                        f"it as UTF-8 without a BOM")
                    try:
                        record = json.loads(line)
                    except ValueError:
                        record = None
                    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                        raise DataError(f"{path} line {number} is not a JSON object with a 'text' string; each line "
                                        f"of a .jsonl data file is one story, e.g. {{\"text\": \"Once upon a time\"}}")
                    yield record["text"]
            return
        lines: list[str] = []
        for line in f:
            if line.strip() == EOT:
                if story := "".join(lines).strip():
                    yield story
                lines = []
            else:
                lines.append(line)
        if story := "".join(lines).strip():  # a last story without its separator
            yield story


def hub_unreachable() -> str | None:
    """Why the Hugging Face hub cannot be asked, in words; None where it answers.

    Asked once, by one short request without retries, and not at all where the hub is set offline
    (``HF_HUB_OFFLINE``): without a network ``datasets`` retries each request with backoff, about 25 s and a
    warning a try, before the one sentence a user needs."""
    try:
        from huggingface_hub import constants
        from huggingface_hub.utils import get_session
    except ImportError as err:
        return f"{err.name} is not installed"
    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    try:
        get_session().head(constants.ENDPOINT, timeout=5)
    except Exception as err:  # no network, no name resolution, a refused connection, a timeout: no answer
        return (str(err).strip().splitlines() or [type(err).__name__])[0]
    return None


def hub_stories(dataset: str, split: str, max_stories: int | None) -> Iterator[str]:
    """Stories of a `datasets` hub split; network or hub failures become one DataError naming data_path."""
    hub_name = DATASETS[dataset]
    if (reason := hub_unreachable()) is not None:
        raise DataError(f"could not load {hub_name} ({split}) through datasets: the hub cannot be reached ({reason}); "
                        f"offline, pass data_path= (and val_path=) to a local .txt, .jsonl or .parquet copy")
    try:
        import datasets

        table = datasets.load_dataset(hub_name, split=split if max_stories is None else f"{split}[:{max_stories}]")
    except Exception as err:  # ConnectionError, hub/offline errors, a missing package: all mean "no copy here"
        raise DataError(f"could not load {hub_name} ({split}) through datasets ({type(err).__name__}); "
                        f"offline, pass data_path= (and val_path=) to a local .txt, .jsonl or .parquet copy") from err
    return (text for batch in table.iter(batch_size=4096) for text in batch["text"])


# ----------------------------------------------------------------------------- held-out splits

HELDOUT = ("tail", "validation")
# where the held-out tail of n tokens begins, for a held-out share `frac`
HELDOUT_CUTS = {"floor": lambda n, frac: int(n * (1 - frac)), "round": lambda n, frac: n - round(n * frac)}


def unigram_entropy(tokens: np.ndarray) -> float:
    """Entropy in nats of the tokens' unigram frequencies: the loss of a model that learned only how often each
    token occurs. A run whose held-out loss sits at this level has learned nothing from context."""
    counts = np.bincount(np.asarray(tokens, dtype=np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


# ----------------------------------------------------------------------------- batches and eval windows

# Paper eval windows draw from their own stream: training uses (seed, step) and steps never reach 2**31.
_EVAL_STREAM = 2**31


def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) int64 for windows beginning at `starts`; y is x shifted by one token."""
    rows = torch.from_numpy(tokens[starts[:, None] + np.arange(seq_len + 1)].astype(np.int64))
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def _check_length(tokens: np.ndarray, seq_len: int, what: str) -> None:
    if len(tokens) < seq_len + 1:
        raise DataError(f"the {what} stream has {len(tokens):,} tokens, fewer than one window of seq_len + 1 = "
                        f"{seq_len + 1}; load more stories or use a shorter seq_len")


def get_batch(tokens: np.ndarray, step: int, seed: int, batch_size: int, seq_len: int,
              rank: int = 0, world_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of the global batch at `step`: `batch_size` random windows drawn from (seed, step).

    A pure function of (seed, step), so every variant trains on the same batches at a seed and a resumed
    run continues exactly; the global batch is the same for any world_size, each rank taking a contiguous slice.
    """
    if batch_size % world_size:
        raise DataError(f"batch_size {batch_size} is not divisible by world_size {world_size}")
    _check_length(tokens, seq_len, "train")
    starts = np.random.default_rng([seed, step]).integers(0, len(tokens) - seq_len, size=batch_size)
    per_rank = batch_size // world_size
    return _windows(tokens, starts[rank * per_rank:(rank + 1) * per_rank], seq_len)


def paper_eval_windows(heldout: np.ndarray, seed: int, n_batches: int = 80, batch_size: int = 64,
                       seq_len: int = 256) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The paper's evaluation: `n_batches` random batches of windows, drawn anew for each seed."""
    _check_length(heldout, seq_len, "held-out")
    rng = np.random.default_rng([seed, _EVAL_STREAM])
    starts = rng.integers(0, len(heldout) - seq_len, size=(n_batches, batch_size))
    return (_windows(heldout, batch, seq_len) for batch in starts)


def fixed_eval_windows(heldout: np.ndarray, seq_len: int, max_tokens: int | None = None,
                       batch_size: int = 64) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Non-overlapping windows over the first `max_tokens` held-out tokens: the same set for every run.

    No seed enters, so a loss difference between two runs is never a difference in the windows scored.
    """
    tokens = heldout[:max_tokens]
    _check_length(tokens, seq_len, "held-out")
    starts = np.arange((len(tokens) - 1) // seq_len) * seq_len
    return (_windows(tokens, starts[i:i + batch_size], seq_len) for i in range(0, len(starts), batch_size))
