"""Where the records' words can be checked: the papers' texts, when a copy is at hand.

The project runs without them. A copy is looked for in ``$RRLIB_PAPERS`` (a folder of the texts; the tests point
it at the local copy beside the offline data, as they do ``$RRLIB_DATA``); the Review paper's LaTeX (``paper/review_residuals.tex`` in its
repository) in ``$RRLIB_REVIEW_TEX`` (the file), else as ``review_residuals.tex`` in that folder. An arXiv abstract
is not kept here, so a quote from one is checked only where ``$RRLIB_PAPERS`` holds ``arXiv_<id>.txt``.

A quote matches when it occurs in the text after runs of whitespace are made one space (the LaTeX source breaks
lines anywhere); nothing else is forgiven, so a changed word, sign or symbol fails.

Where no copy is at hand the words are checked against the register, ``registered_words.json`` beside this module:
the SHA-256 of each record's words as they were registered (``fingerprint``), so an edited quote is refused
everywhere, not only where the papers' texts are (rrlib.claims.records reads both; ``python -m
rrlib.claims.records --register`` writes the register, checking every text at hand first).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

REVIEW_TEX = "review_residuals.tex"
REGISTER = Path(__file__).with_name("registered_words.json")


def papers_dir() -> Path | None:
    """The folder of the papers' texts, or None where there is none."""
    folder = os.environ.get("RRLIB_PAPERS")
    return Path(folder) if folder and Path(folder).is_dir() else None


def source_path(source: str) -> Path | None:
    """The file a record's ``source`` names, where a copy is at hand; else None."""
    if source == REVIEW_TEX and os.environ.get("RRLIB_REVIEW_TEX"):
        path = Path(os.environ["RRLIB_REVIEW_TEX"])
        return path if path.is_file() else None
    folder = papers_dir()
    if folder is None:
        return None
    name = f"arXiv_{source.split(':', 1)[1]}.txt" if source.startswith("arXiv:") else source
    path = folder / name
    return path if path.is_file() else None


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def occurs(words: str, text: str) -> bool:
    """``words`` in ``text``, whitespace aside."""
    return flat(words) in flat(text)


def sentences(claim) -> list[tuple[str, str]]:
    """(source, words) of every piece of a record that says it is the paper's: its quote, and the sentences its
    margin and stated effect come from."""
    found = [(claim.source, claim.quote)] if claim.quote is not None else []
    for part in (claim.margin, claim.paper_effect):
        if part and "sentence" in part:
            found.append((part.get("source", claim.source), part["sentence"]))
    return found


def fingerprint(words: str) -> str:
    """The hash the register keeps of a record's words (whitespace aside, as ``occurs`` reads them)."""
    return hashlib.sha256(flat(words).encode("utf-8")).hexdigest()[:16]


def register(path: Path = REGISTER) -> dict[str, list[str]]:
    """{record id: the fingerprints of its words} as registered; empty where there is no register."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def unchecked(claim, registered: dict[str, list[str]] | None) -> str | None:
    """Why ``claim``'s words are not the paper's, or None: each piece is in its source where a copy is at hand, else
    among the words registered for the record. With no register (``None``: a file of records other than the
    package's) the texts at hand are the only check; with one, words that neither a text nor the register vouches
    for are refused, a record the register does not name among them (a new or renamed record is registered where
    the texts are at hand, ``python -m rrlib.claims.records --register``)."""
    for source, words in sentences(claim):
        path = source_path(source)
        shown = words if len(words) <= 60 else words[:57] + "..."
        if path is not None:
            if not occurs(words, path.read_text(encoding="utf-8")):
                return f"{shown!r} is not in {source}"
        elif registered is not None and claim.id not in registered:
            return (f"{shown!r} was never registered and no copy of {source} is at hand to check it (register the "
                    f"record where the texts are: python -m rrlib.claims.records --register)")
        elif registered is not None and fingerprint(words) not in registered[claim.id]:
            return f"{shown!r} is not what was registered from {source} (no copy of it is at hand to check)"
    return None
