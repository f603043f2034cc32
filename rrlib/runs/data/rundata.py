"""A run's data: read with its paths resolved, and checked against the run's windows before anything is written.

Every size a run takes from its data is checked here, before its folder gets a file and before its first step:
the train stream must hold one window of ``seq_len + 1`` tokens, and so must the held-out stream, which both
evaluations draw from (the paper's random windows and the fixed set). A stream too short ends in one sentence
naming the settings that would lengthen it, where before it was found only by the first evaluation, after
training.
"""
from __future__ import annotations

from pathlib import Path

from ..config import RunConfig, project_path
from . import DataError
from .token_cache import TokenData, load_token_data


def load_run_data(run: RunConfig) -> TokenData:
    """The run's train and held-out token streams; its relative paths are the project's (rrlib.runs.config)."""
    dc = run.data
    path = lambda p: str(project_path(p)) if p else None
    return load_token_data(
        dataset=dc.dataset, data_path=path(dc.data_path), val_path=path(dc.val_path), tokenizer=dc.tokenizer,
        max_stories=dc.max_stories, heldout=dc.heldout, heldout_frac=dc.heldout_frac, cache_dir=path(dc.cache_dir),
        gpt2_dir=path(dc.gpt2_dir), eos_in_text=dc.eos_in_text, heldout_cut=dc.heldout_cut)


def checked_run_data(run: RunConfig) -> TokenData:
    """``load_run_data``, with every window the run will cut checked against the streams' lengths."""
    data, dc = load_run_data(run), run.data
    window = run.model.seq_len + 1
    name = Path(dc.data_path).name if dc.data_path else dc.dataset
    if len(data.train) < window:
        raise DataError(f"the train stream of {name} has {len(data.train):,} tokens, fewer than one window of "
                        f"model.seq_len + 1 = {window}; use more data (a longer file, a higher data.max_stories, now "
                        f"{dc.max_stories}) or a shorter model.seq_len")
    if len(data.heldout) < window:
        held, lengthen = (f"the last {dc.heldout_frac:g} of {name}'s stream",
                          f"data.max_stories (now {dc.max_stories}) or data.heldout_frac (now {dc.heldout_frac:g})") \
            if dc.heldout == "tail" else (data.heldout_name, "the validation file")
        raise DataError(f"the held-out stream ({held}) has {len(data.heldout):,} tokens, fewer than one evaluation "
                        f"window of model.seq_len + 1 = {window}; raise {lengthen}, or use a shorter model.seq_len")
    return data
