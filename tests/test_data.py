"""Data: exact tokenizers, story parsing, the token cache, held-out splits, seeded batches and eval windows."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from rrlib.runs import data
from rrlib.runs.data import DataError, fixed_eval_windows, get_batch, get_tokenizer, iter_stories
from rrlib.runs.data import paper_eval_windows
from rrlib.runs.data.token_cache import load_token_data


@pytest.fixture
def gpt2_dir(data):
    return data / "gpt2"


@pytest.fixture
def train_txt(data):
    return data / "tinystories" / "TinyStories-train-sample.txt"


@pytest.fixture
def valid_txt(data):
    return data / "tinystories" / "TinyStories-valid-sample.txt"


@pytest.fixture
def counting_stream():
    """Token i is i, so every window's position in the stream can be read off its values."""
    return np.arange(20_000, dtype=np.uint16)


# ----------------------------------------------------------------------------- tokenizers

def test_gpt2_offline_matches_reference_ids(gpt2_dir, monkeypatch):
    from tiktoken_ext.openai_public import r50k_pat_str

    tok = get_tokenizer("gpt2", gpt2_dir)
    assert tok.encode("Once upon a time") == [7454, 2402, 257, 640]
    assert (tok.vocab_size, tok.eos_id) == (50257, 50256)
    assert tok._encoding.n_vocab == 50257 and tok._encoding.eot_token == 50256
    assert data.GPT2_PATTERN == r50k_pat_str  # the offline encoding is the one tiktoken builds online
    texts = ["Once upon a time", " there was a dog.\nIt's 3 o'clock!"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.decode(tok.encode(texts[1]) + [tok.eos_id]) == texts[1] + "<|endoftext|>"
    monkeypatch.setenv("RRLIB_GPT2_DIR", str(gpt2_dir))
    assert get_tokenizer("gpt2").encode("Once upon a time") == [7454, 2402, 257, 640]


def test_gpt2_without_files_or_network_names_the_offline_options(monkeypatch):
    import tiktoken

    def no_network(name):
        raise ConnectionError("no route to host")  # requests' ConnectionError is an OSError too

    monkeypatch.delenv("RRLIB_GPT2_DIR", raising=False)
    monkeypatch.delenv("RRLIB_DATA", raising=False)
    monkeypatch.setattr(tiktoken, "get_encoding", no_network)
    with pytest.raises(DataError, match="set RRLIB_DATA.*internet.*gpt2_dir.*RRLIB_GPT2_DIR"):
        get_tokenizer("gpt2").encode("hello")


def test_gpt2_dir_without_bpe_files_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="encoder.json and vocab.bpe"):
        get_tokenizer("gpt2", tmp_path).encode("hello")


def test_bytes_round_trip():
    tok = get_tokenizer("bytes")
    text = "Lily saw a café — 猫!"
    ids = tok.encode(text)
    assert (tok.vocab_size, tok.eos_id) == (257, 256)
    assert len(ids) == len(text.encode("utf-8")) and max(ids) < 256
    assert tok.decode(ids) == text
    assert tok.decode(ids + [tok.eos_id] + ids) == text + "<|endoftext|>" + text
    assert tok.encode_batch([text, "a"]) == [ids, [97]]


def test_unknown_tokenizer_lists_valid_names():
    with pytest.raises(DataError, match="unknown tokenizer 'gpt3'.*gpt2, bytes"):
        get_tokenizer("gpt3")


# ----------------------------------------------------------------------------- stories and the cache

def test_raw_text_story_counts(train_txt, valid_txt):
    train = list(iter_stories(train_txt))
    assert len(train) == 2316
    assert len(list(iter_stories(valid_txt))) == 1000
    assert train[0].startswith("One day, a little girl named Lily") and train[0].endswith("worked together.")
    assert not any("<|endoftext|>" in story or story != story.strip() for story in train)
    assert list(iter_stories(train_txt, max_stories=5)) == train[:5]


def test_eos_after_every_story(train_txt, valid_txt, tmp_path, gpt2_dir):
    tokens = load_token_data(data_path=train_txt, val_path=valid_txt, heldout="validation",
                             cache_dir=tmp_path, gpt2_dir=gpt2_dir)
    assert (tokens.tokenizer_name, tokens.vocab_size, tokens.eos_id) == ("gpt2", 50257, 50256)
    assert np.count_nonzero(tokens.train == 50256) == 2316
    assert np.count_nonzero(tokens.heldout == 50256) == 1000
    assert tokens.train[-1] == tokens.heldout[-1] == 50256
    first_story = next(iter(iter_stories(train_txt)))
    n_first = len(get_tokenizer("gpt2", gpt2_dir).encode(first_story))
    assert tokens.train[n_first] == 50256 and 50256 not in tokens.train[:n_first]
    assert "TinyStories-valid-sample.txt" in tokens.source


def test_cache_hit_is_a_memmap_and_does_not_tokenise(train_txt, tmp_path, monkeypatch, capsys):
    first = load_token_data(data_path=train_txt, tokenizer="bytes", cache_dir=tmp_path)
    assert "tokenised 2,316 stories -> 2,062,181 tokens (bytes) in " in capsys.readouterr().out

    def must_not_run(self, texts):
        raise AssertionError("a cache hit must not tokenise")

    monkeypatch.setattr(data.ByteTokenizer, "encode_batch", must_not_run)
    second = load_token_data(data_path=train_txt, tokenizer="bytes", cache_dir=tmp_path)
    assert capsys.readouterr().out == ""
    assert isinstance(second.train, np.memmap) and second.train.dtype == np.uint16
    np.testing.assert_array_equal(first.train, second.train)
    np.testing.assert_array_equal(first.heldout, second.heldout)
    # the temporary file was renamed, not left; beside the tokens, their record (source, length, hash)
    assert sorted(p.suffixes[-2:] for p in tmp_path.iterdir()) == [[".bin"], [".bin", ".json"]]


def test_cache_key_changes_with_max_stories_and_tokenizer(train_txt, tmp_path, gpt2_dir):
    def stream(**kw):
        tokens = load_token_data(data_path=train_txt, cache_dir=tmp_path, gpt2_dir=gpt2_dir, **kw)
        return np.concatenate([tokens.train, tokens.heldout])

    short, long = stream(tokenizer="bytes", max_stories=100), stream(tokenizer="bytes", max_stories=200)
    assert len(list(tmp_path.glob("*.bin"))) == 2
    assert np.count_nonzero(short == 256) == 100 and np.count_nonzero(long == 256) == 200
    np.testing.assert_array_equal(long[:len(short)], short)
    gpt2 = stream(tokenizer="gpt2", max_stories=100)
    assert len(list(tmp_path.glob("*.bin"))) == 3
    assert np.count_nonzero(gpt2 == 50256) == 100 and len(gpt2) < len(short)


def test_jsonl_and_parquet_load_the_same_tokens_as_raw_text(train_txt, tmp_path):
    stories = list(iter_stories(train_txt, max_stories=150))
    jsonl = tmp_path / "stories.jsonl"
    jsonl.write_text("".join(json.dumps({"text": s, "id": i}) + "\n" for i, s in enumerate(stories)))
    parquet = tmp_path / "stories.parquet"
    pq.write_table(pa.table({"text": stories}), parquet, row_group_size=64)

    def train_tokens(path):
        return load_token_data(data_path=path, tokenizer="bytes", max_stories=150, cache_dir=tmp_path / "cache").train

    reference = train_tokens(train_txt)
    np.testing.assert_array_equal(train_tokens(jsonl), reference)
    np.testing.assert_array_equal(train_tokens(parquet), reference)


def test_tail_heldout_is_the_last_share_of_the_stream(train_txt, tmp_path):
    three = load_token_data(data_path=train_txt, tokenizer="bytes", cache_dir=tmp_path)
    ten = load_token_data(data_path=train_txt, tokenizer="bytes", heldout_frac=0.1, cache_dir=tmp_path)
    total = len(three.train) + len(three.heldout)
    # the default cut is the paper's int(0.97 n) (tests/test_recipe.py compares it with rrlib's rounded cut)
    assert total == 2_062_181 and len(three.train) == int(0.97 * total)
    assert len(ten.train) == int(0.9 * total)
    np.testing.assert_array_equal(np.concatenate([three.train, three.heldout]),
                                  np.concatenate([ten.train, ten.heldout]))
    assert "last 3%" in three.source


# ----------------------------------------------------------------------------- user errors

def test_bad_heldout_names_the_choices(train_txt, tmp_path):
    with pytest.raises(DataError, match="tail, validation"):
        load_token_data(data_path=train_txt, heldout="test", cache_dir=tmp_path)


def test_missing_data_file_names_it(tmp_path):
    with pytest.raises(DataError, match="nowhere.txt not found.*data_path"):
        load_token_data(data_path=tmp_path / "nowhere.txt", tokenizer="bytes", cache_dir=tmp_path)


def test_local_validation_needs_val_path(train_txt, tmp_path):
    with pytest.raises(DataError, match="val_path"):
        load_token_data(data_path=train_txt, heldout="validation", tokenizer="bytes", cache_dir=tmp_path)


def test_hub_unavailable_offline_names_data_path(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'roneneldan/TinyStories' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match="roneneldan/TinyStories.*data_path=") as err:
        load_token_data(tokenizer="bytes", cache_dir=tmp_path)
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- batches and eval windows

def test_batches_are_a_function_of_seed_and_step(counting_stream):
    x, y = get_batch(counting_stream, step=7, seed=3, batch_size=8, seq_len=32)
    assert x.dtype == y.dtype == torch.int64 and x.shape == y.shape == (8, 32)
    assert torch.equal(y, x + 1)  # y is x shifted by one, and each row is one contiguous window
    assert torch.equal(x[:, 1:] - x[:, :-1], torch.ones(8, 31, dtype=torch.int64))
    again, _ = get_batch(counting_stream, step=7, seed=3, batch_size=8, seq_len=32)
    assert torch.equal(x, again)
    assert not torch.equal(x, get_batch(counting_stream, step=8, seed=3, batch_size=8, seq_len=32)[0])
    assert not torch.equal(x, get_batch(counting_stream, step=7, seed=4, batch_size=8, seq_len=32)[0])


def test_rank_slices_concatenate_to_the_global_batch(counting_stream):
    whole_x, whole_y = get_batch(counting_stream, step=5, seed=1, batch_size=8, seq_len=16)
    parts = [get_batch(counting_stream, step=5, seed=1, batch_size=8, seq_len=16, rank=r, world_size=2)
             for r in range(2)]
    assert parts[0][0].shape == (4, 16)
    assert torch.equal(torch.cat([p[0] for p in parts]), whole_x)
    assert torch.equal(torch.cat([p[1] for p in parts]), whole_y)
    with pytest.raises(DataError, match="not divisible by world_size 2"):
        get_batch(counting_stream, step=5, seed=1, batch_size=7, seq_len=16, world_size=2)


def test_stream_shorter_than_one_window_says_so():
    with pytest.raises(DataError, match="10 tokens, fewer than one window"):
        get_batch(np.arange(10, dtype=np.uint16), step=0, seed=0, batch_size=2, seq_len=16)


def test_fixed_eval_windows_are_seed_free_and_non_overlapping(counting_stream):
    def windows():
        return list(fixed_eval_windows(counting_stream, seq_len=100, max_tokens=5_050, batch_size=16))

    first = windows()
    torch.manual_seed(123)
    np.random.seed(123)
    second = windows()
    assert [b[0].shape[0] for b in first] == [16, 16, 16, 2]  # (5050 - 1) // 100 = 50 windows
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, second))
    xs = torch.cat([x for x, _ in first])
    assert torch.equal(xs.flatten(), torch.arange(5_000))  # back to back: no overlap, no gap
    assert all(torch.equal(y, x + 1) for x, y in first)


def test_paper_eval_windows_depend_on_seed(counting_stream):
    def windows(seed):
        return torch.cat([x for x, _ in paper_eval_windows(counting_stream, seed, n_batches=3, batch_size=4,
                                                           seq_len=16)])

    assert windows(0).shape == (12, 16)
    assert torch.equal(windows(0), windows(0))
    assert not torch.equal(windows(0), windows(1))
    train_x, _ = get_batch(counting_stream, step=0, seed=0, batch_size=4, seq_len=16)
    assert not torch.equal(windows(0)[:4], train_x)  # eval draws from its own stream, not the training one


def test_unigram_entropy_of_known_distributions():
    assert data.unigram_entropy(np.array([3, 3, 3])) == 0.0
    assert data.unigram_entropy(np.arange(4, dtype=np.uint16).repeat(5)) == pytest.approx(np.log(4))
    # p = (1/2, 1/4, 1/4): H = 1.5 bits
    assert data.unigram_entropy(np.array([0, 0, 1, 7])) == pytest.approx(1.5 * np.log(2))
