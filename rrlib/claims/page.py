"""Page 07's ledger from its rows and the records: each row joined to its claim's record, Benjamini–Hochberg q beside
its p, the rows of its forest plot, and the ledger as one line per claim with the paper's words, the test and the
evidence folded under it."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from rrlib import stats
from rrlib.stats import ledger

TESTED = ("supported", "contradicted", "inconclusive")
# the pages' tables right-align their cells; a ledger line reads from the left
LEFT = "text-align:left;vertical-align:top;"


def attach(rows: pd.DataFrame, claims) -> pd.DataFrame:
    """The ledger's rows with their records' fields (looked up by the claim's label, unique in the records) and
    ``q_bh``: Benjamini–Hochberg over the registered rows that a test decided (a measurement has no p)."""
    by_label = {c.label: c for c in claims}
    unknown = sorted(set(rows["claim"]) - set(by_label))
    if unknown:
        raise ValueError(f"ledger rows with no record: {', '.join(unknown)}")
    found = [by_label[label] for label in rows["claim"]]
    out = rows.assign(id=[c.id for c in found], status=[c.status for c in found], kind=[c.kind for c in found],
                      scope=[c.scope for c in found], words=[c.words for c in found],
                      where=[f"{c.source}, {c.where}" for c in found], registered=[c.registered for c in found],
                      follows=[c.follows for c in found],
                      margin_sides=[c.margin_sides for c in found],
                      effect_scale=[(c.paper_effect or {}).get("scale", "") for c in found])
    family = (out["status"] == "registered") & out["verdict"].isin(TESTED) & np.isfinite(out["p"].astype(float))
    out["q_bh"] = np.nan
    out.loc[family, "q_bh"] = stats.benjamini_hochberg(out.loc[family, "p"].astype(float))
    return out


def forest_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows the forest plot shows: every tested row with an interval, labelled by its id (and exploratory where
    it is a later reading)."""
    tested = df[df["verdict"].isin(TESTED) & df["ci_low"].notna()]
    return tested.assign(label=tested["id"] + tested["status"].map({"exploratory": " (exploratory)"}).fillna(""))


def counts(df: pd.DataFrame) -> str:
    """The registered claims counted by verdict; the exploratory readings beside them."""
    registered = df[df["status"] == "registered"]
    later = (df["status"] == "exploratory").sum()
    return (f"{len(registered)} registered claims of {registered['paper'].nunique()} papers: "
            + ", ".join(f"{n} {kind}" for kind, n in ledger.verdict_counts(registered["verdict"]).items())
            + f"; {later} exploratory readings shown beside the claims they follow.")


def _effect(r) -> str:
    if pd.isna(r["effect"]):
        return "–"
    interval = "" if pd.isna(r["ci_low"]) else f" [{r['ci_low']:+.3g}, {r['ci_high']:+.3g}]"
    return f"{r['effect']:+.3g}{interval}"


def _links(evidence: str) -> str:
    return "; ".join(f'<a href="{html.escape(e)}">{html.escape(e)}</a>' for e in str(evidence).split("; ") if e)


def ledger_html(df: pd.DataFrame) -> str:
    """One line per claim (the claim, its verdict, its effect with its interval, whether the design could see the
    paper's effect), the rest under a ``<details>``; a fixed layout that wraps text, so no column runs off the page."""
    lines = []
    for _, r in df.iterrows():
        word = ledger.verdict_kind(r["verdict"]) + (" (exploratory)" if r["status"] == "exploratory" else "")
        ps = []
        if pd.notna(r["p"]):
            ps.append(f"p {r['p']:.2g} ({html.escape(str(r['correction']))})")
        if pd.notna(r["q_bh"]):
            ps.append(f"Benjamini–Hochberg q over the ledger {r['q_bh']:.2g}")
        details = "".join(f"<p><b>{k}</b> {v}</p>" for k, v in (
            ("The paper:", f"“{html.escape(r['words'])}” ({html.escape(r['where'])})"),
            ("Test:", html.escape(str(r["test"]) or "–")),
            ("Statistics:", "; ".join(ps) or "–"),
            ("Kind, scope:", html.escape(f"{r['kind']}; {r['scope']}")),
            *((("Holds in, and its controls:", html.escape(str(r["setting"]))),) if pd.notna(r.get("setting"))
              else ()),
            ("Registered:", html.escape(f"{r['registered']} ({r['status']})")),
            ("Evidence:", _links(r["evidence"]) or "–")))
        cells = (f"<b>{html.escape(r['paper'])}</b>: {html.escape(r['claim'])}<details><summary>the paper's words, "
                 f"the test, the evidence</summary>{details}</details>", f"<b>{html.escape(word)}</b>", _effect(r),
                 html.escape(ledger.could_see(r)))  # an untested or out-of-reach row's reason is in the last cell
        lines.append("<tr>" + "".join(f"<td style='{LEFT}'>{c}</td>" for c in cells) + "</tr>")
    head = "<tr>" + "".join(f"<th style='{LEFT}width:{w}'>{name}</th>" for name, w in (
        ("claim", "46%"), ("verdict", "12%"), ("effect [95 %]", "16%"),
        ("could the design see the paper's effect? (80 % power)", "26%"))) + "</tr>"
    return ("<table class='rrlib-ledger' style='table-layout:fixed;width:100%;max-width:1200px;"
            "overflow-wrap:anywhere;text-align:left'>" + head + "".join(lines) + "</table>")
