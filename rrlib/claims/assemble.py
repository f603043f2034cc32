"""The claims ledger from run folders alone: ``ledger()`` (also ``rrlib.claims.ledger()``) returns one row per
registered record (rrlib/claims/records.yaml), each judged by the one verdict rule (``rrlib.stats.ledger.judge``);
``build()`` returns it with the tables and probe readings the rows were made from, which page 07 shows beside it.

Each record names its reader (rrlib.claims.readers), which makes its row from the results the other pages show
(``rrlib.results``), never from a page's table; the rows come in the records' order, which is page 07's. What the
defaults read: the committed runs under ``outputs/`` and the paper's run table; ``Inputs`` names other folders (a
quick build's, a user's).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rrlib.runs.presets import load_preset
from rrlib.stats import ledger as verdicts
from rrlib.studies import claims_study

from . import page as claim_page
from . import readers, records
# what the pages and the index read beside the ledger, where they read it
from .context import MECHANISMS, PAGE_04_DESIGNS, PAGE_05_DESIGN, gap_factors, looped_reading  # noqa: F401


@dataclass(frozen=True)
class Inputs:
    """Where the ledger reads, and its design's settings (page 07's parameters, the committed study's by default)."""
    out_root: str = "outputs/runs"  # the committed run folders (the depth ablation's and the family's results)
    paper_csv: str = "outputs/reference/scaling_v8.csv"  # the paper's 42 runs
    family_size: str = "family"  # the family page's size, whose summary and runs the ledger reads
    wide_size: str = "family_mini"  # the family at mini's width, read where its table exists
    claims_size: str = "family"  # the size of page 07's own runs
    claims_variants: tuple | None = None  # the methods probed; None: the family's (the preset of claims_size)
    claims_root: str | None = None  # the family retrained with its weights; None: <out_root>/../claims
    convert_root: str | None = None  # the conversion, continued and ungated; None: <out_root>/../convert
    convert_gated_root: str | None = None  # the conversion with the identity gate; None: <out_root>/../convert_gated
    convert_size: str = claims_study.CONVERT_SIZE
    convert_seeds: tuple = (0, 1, 2, 3, 4)
    depth_sizes: tuple = tuple(claims_study.DEPTH_SIZES)
    depth_seeds: tuple = (0, 1, 2)
    seeds: tuple = (0, 1, 2)
    alpha: float = 0.05
    margin: float = 0.02  # nats: the conversion's TOST margin, the recipe ablation's (page 04)
    exclude_sizes: tuple | None = None  # the sizes page 04 leaves off its scale axis; None: its default
    loop_root: str = "outputs/looped_grid"  # page 05's looped study
    power_loop_root: str | None = "outputs/looped_power"  # its powered design; None: the grid alone
    gate_size: str = "mini"  # page 01's trained Review run, whose gate the neutral-start claim reads
    gate_windows: int = 16  # held-out windows page 01 reads the gate on
    local_out_root: str = "build/runs"  # where page 01's run is trained again when its folder keeps no weights

    def root(self, name: str) -> str:
        given = getattr(self, f"{name}_root")
        return given or str(Path(self.out_root).parent / {"claims": "claims", "convert": "convert",
                                                          "convert_gated": "convert_gated"}[name])


@dataclass
class Ledger:
    """The ledger (``table``: one row per record, the records' fields attached) and what its rows were made from."""
    table: pd.DataFrame
    notes: list = field(default_factory=list)  # what page 07's own study holds, in a line or two
    halves: pd.DataFrame | None = None  # Review's gate halves against the full gate
    shares: pd.DataFrame | None = None  # the gate's share of the parameters at the paper's sizes
    scales: pd.DataFrame | None = None  # what each sublayer reads, at init and trained (the family's probes)
    routing: pd.DataFrame | None = None  # depth attention's routing contrast (the family's probes)
    depth_scales: pd.DataFrame | None = None  # the depth part's scales
    growth_by_depth: pd.DataFrame | None = None
    contrast_by_depth: pd.DataFrame | None = None
    probe_notes: list = field(default_factory=list)  # how many runs have probe files, of how many planned
    conversions: pd.DataFrame | None = None  # the conversion's start, per seed
    arm_tests: dict | None = None  # the conversion's arms against the continued model
    fresh_arm_tests: dict | None = None  # the same on the non-inferiority design's fresh seeds
    controls: pd.DataFrame | None = None  # the reach verdicts' controls (rrlib.claims.controls), one row each


def ledger(**settings) -> pd.DataFrame:
    """The whole ledger from run folders: one row per record, judged by the one rule (``Inputs`` names the
    settings)."""
    return build(Inputs(**settings)).table


def build(inputs: Inputs = Inputs()) -> Ledger:
    """Every record's row, by the reader it names, in the records' order; and what the rows were made from."""
    claims = records.by_id()
    context = readers.Context(inputs, claims)
    table = claim_page.attach(verdicts.ledger([readers.read(c, context) for c in claims.values()]), claims.values())
    c = context
    return Ledger(table=table, notes=c.notes, halves=c.halves, shares=c.shares, scales=c.scales, routing=c.routing,
                  depth_scales=c.depth_scales, growth_by_depth=c.growth_by_depth,
                  contrast_by_depth=c.contrast_by_depth, probe_notes=c.probe_notes, conversions=c.conversions,
                  arm_tests=c.arm_tests, fresh_arm_tests=c.fresh_arm_tests, controls=c.controls)


def train(inputs: Inputs) -> None:
    """Train what page 07's own study lacks (its family, depth and conversion parts), skipping what is done: the
    quick build's seconds-long runs; the full study runs through ``rrlib study run``."""
    p, claims_root = inputs, inputs.root("claims")
    claims_study.run_study(p.claims_size, list(p.seeds), claims_root,
                           variants=list(p.claims_variants or load_preset(p.claims_size).variants))
    claims_study.run_plan(claims_study.depth_plan(claims_root, list(p.depth_seeds), list(p.depth_sizes)))
    claims_study.run_plan(claims_study.conversion_plan(claims_root, p.root("convert"), p.root("convert_gated"),
                                                       list(p.convert_seeds), p.convert_size))


def inputs_from(parameters: dict) -> Inputs:
    """``Inputs`` from a page's parameters: the names ``Inputs`` has, lists as tuples."""
    names = {f.name for f in dataclasses.fields(Inputs)}
    return Inputs(**{k: tuple(v) if isinstance(v, list) else v for k, v in parameters.items() if k in names})
