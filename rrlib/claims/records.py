"""The claims as registered records: ``records.yaml`` beside this module, one entry per claim, read into ``Claim``.

An entry names

=============  ====================================================================================================
id             a short name, unique in the file, that page 07's rows are looked up by
paper          the paper's short name (the ledger's first column)
source         where the words stand: a file of the papers' texts (rrlib.claims.quotes) or ``arXiv:<id>``
where          the section of that source (``Abstract``, ``§5 Experiments, Result``, ``Table 1``)
quote          the claim word for word, as the source prints it (LaTeX kept); or, where no sentence holds it,
paraphrase     the claim in our words, saying so
label          the claim in one line, for the ledger's table
kind           direction, no difference, measurement or trend
metric, test   what is measured and how it is tested
correction     the correction family, or why there is none
margin         for a no-difference or measurement claim: ``value`` with the paper's ``sentence`` it comes from (or a
               ``note`` where the paper gives none); ``sides``: upper ("no gain") or both ("does not depend on")
paper_effect   the effect the paper states: ``value`` with its ``sentence``, or ``from`` where the row computes it
               from the paper's own runs (the Review paper's slope per decade)
scope          the paper's own runs, this harness at CPU scale, or GPU only
needs          for a GPU-only claim: the preset, variants and seeds its cheapest test needs (rrlib.claims.reach
               prices it in CPU-hours), or the ``hardware`` it needs
design         the study that answers it (registered with its design, before its runs), or ``pending`` where the
               claim was registered before its design was fixed
registered     the commit or date the metric, test and margin were fixed
status         registered, or exploratory: a later reading of a registered record (``follows`` names it), shown
               beside it; the registered record decides the verdict
reader         the ledger's reader that makes the record's row from the study's results (rrlib.claims.readers: its
               ``READERS``); every record of the package's file names one
control        the studies that say what setting the verdict holds in (a positive control, a bracket of learning
               rates, a longer horizon), the rule by which each bears on the verdict, and when they were registered
=============  ====================================================================================================

A bad entry stops the load with one sentence naming the file, the entry and what is wrong.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import yaml

from . import quotes

RECORDS = Path(__file__).with_name("records.yaml")
KINDS = ("direction", "no difference", "measurement", "trend")
SCOPES = ("the paper's own runs", "this harness at CPU scale", "GPU only")
STATUSES = ("registered", "exploratory")
SIDES = ("upper", "both")
REQUIRED = ("id", "paper", "source", "where", "label", "kind", "metric", "test", "correction", "scope", "design",
            "registered", "status")
OPTIONAL = ("quote", "paraphrase", "margin", "paper_effect", "needs", "follows", "control", "reader")


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    source: str
    where: str
    label: str
    kind: str
    metric: str
    test: str
    correction: str
    scope: str
    design: str
    registered: str
    status: str
    quote: str | None = None
    paraphrase: str | None = None
    margin: dict | None = None
    paper_effect: dict | None = None
    needs: dict | None = None
    follows: str | None = None
    control: str | None = None
    reader: str | None = None

    @property
    def pending(self) -> bool:
        """Registered before its design was fixed."""
        return self.design == "pending"

    @property
    def words(self) -> str:
        """The claim as the page shows it: the quote, or the paraphrase marked as one."""
        return self.quote if self.quote is not None else f"paraphrase: {self.paraphrase}"

    @property
    def margin_value(self) -> float:
        return float(self.margin["value"]) if self.margin else float("nan")

    @property
    def margin_sides(self) -> str:
        """Which side the margin bounds (``SIDES``: upper where the record says none); "" without a margin."""
        return self.margin.get("sides", SIDES[0]) if self.margin else ""

    @property
    def stated_effect(self) -> float:
        """The effect the paper states in a sentence; NaN where it states none or the row computes it."""
        return float(self.paper_effect["value"]) if self.paper_effect and "value" in self.paper_effect \
            else float("nan")


class RecordError(ValueError):
    """A record that cannot be read as a claim."""


def load(path: Path | str | None = None, texts_only: bool = False) -> list[Claim]:
    """Every record of ``path``, checked (``check``), in the file's order; its words checked too (``checked``),
    against the papers' texts at hand and, for the package's own records, the register (rrlib.claims.quotes), which
    must vouch for every word no text at hand does; ``texts_only`` (as the register is written) skips it."""
    path = Path(path or RECORDS)
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise RecordError(f"{path.name} is not valid YAML{where} ({what}); each record is a '- id: ...' entry of "
                          f"fields, as the file's other entries are") from None
    if not isinstance(entries, list):
        raise RecordError(f"{path.name}: expected a list of claim records, found {type(entries).__name__}")
    claims = [record(entry, path.name, k) for k, entry in enumerate(entries)]
    check(claims, path.name)
    checked(claims, path.name, quotes.register() if path == RECORDS and not texts_only else None)
    return claims


def checked(claims: list[Claim], file: str, registered: dict[str, list[str]] | None) -> None:
    """Each record's words are the paper's (rrlib.claims.quotes.unchecked), or one sentence names the record."""
    for c in claims:
        reason = quotes.unchecked(c, registered)
        if reason is not None:
            raise RecordError(f"{file}: {c.id}: {reason}; a record quotes its paper word for word, and a registered "
                              f"record is not changed (a later reading is a new record that follows it)")


def register_words(claims: list[Claim], path: Path = quotes.REGISTER) -> None:
    """Write the register of ``claims``' words (rrlib.claims.quotes): what their pages publish from now on."""
    words = {c.id: sorted({quotes.fingerprint(w) for _, w in quotes.sentences(c)}) for c in claims}
    lines = [f"  {json.dumps(key)}: {json.dumps(words[key])}" for key in sorted(words)]  # one line a record
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def by_id(claims: list[Claim] | None = None) -> dict[str, Claim]:
    return {c.id: c for c in (claims if claims is not None else load())}


def record(entry, file: str, position: int) -> Claim:
    """One entry as a Claim; ``file`` and ``position`` name it in an error."""
    name = f"{file}: entry {position + 1}" + (f" ({entry['id']})" if isinstance(entry, dict) and "id" in entry
                                              else "")
    if not isinstance(entry, dict):
        raise RecordError(f"{name}: a record is a mapping of fields, found {type(entry).__name__}")
    missing = [f for f in REQUIRED if f not in entry]
    unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise RecordError(f"{name}: " + "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown field {', '.join(unknown)} (the "
                                                                       f"fields are {', '.join(REQUIRED + OPTIONAL)})"]
                                                                      if unknown else [])))
    if ("quote" in entry) == ("paraphrase" in entry):
        raise RecordError(f"{name}: give exactly one of quote (word for word) or paraphrase (where no text holds it)")
    for field, allowed in (("kind", KINDS), ("scope", SCOPES), ("status", STATUSES)):
        if entry[field] not in allowed:
            raise RecordError(f"{name}: {field} {entry[field]!r} is none of {', '.join(allowed)}")
    margin, effect = entry.get("margin"), entry.get("paper_effect")
    if margin is not None:
        if not isinstance(margin, dict) or not isinstance(margin.get("value"), (int, float)):
            raise RecordError(f"{name}: margin needs a numeric value")
        if "sentence" not in margin and "note" not in margin:
            raise RecordError(f"{name}: margin needs the paper's sentence it comes from, or a note where it gives none")
        if margin.get("sides", SIDES[0]) not in SIDES:
            raise RecordError(f"{name}: margin sides {margin['sides']!r} is none of {', '.join(SIDES)}")
    if entry["kind"] == "no difference" and margin is None:
        raise RecordError(f"{name}: a no-difference claim needs a margin")
    if effect is not None and not (isinstance(effect.get("value"), (int, float)) or "from" in effect):
        raise RecordError(f"{name}: paper_effect needs a numeric value with its sentence, or from")
    if effect is not None and "value" in effect and "sentence" not in effect:
        raise RecordError(f"{name}: paper_effect's value needs the paper's sentence it comes from")
    if entry["scope"] == "GPU only" and not entry.get("needs"):
        raise RecordError(f"{name}: a GPU-only claim says what it needs (needs: preset, variants, seeds or hardware)")
    if entry["status"] == "exploratory" and not entry.get("follows"):
        raise RecordError(f"{name}: an exploratory record names the registered record it follows (follows)")
    return Claim(**{k: (str(v) if k in REQUIRED else v) for k, v in entry.items()})


def check(claims: list[Claim], file: str) -> None:
    """Across records: ids unique, and each exploratory record follows a registered one of the same paper."""
    seen = {}
    for c in claims:
        if c.id in seen:
            raise RecordError(f"{file}: id {c.id!r} appears twice")
        seen[c.id] = c
    for c in claims:
        if c.follows is None:
            continue
        first = seen.get(c.follows)
        if first is None or first.status != "registered" or first.paper != c.paper:
            raise RecordError(f"{file}: {c.id} follows {c.follows!r}, which is no registered record of {c.paper}")


if __name__ == "__main__":  # python -m rrlib.claims.records --register: the words as they stand, checked first
    if sys.argv[1:] != ["--register"]:
        sys.exit("usage: python -m rrlib.claims.records --register (writes rrlib/claims/registered_words.json)")
    register_words(load(texts_only=True))
