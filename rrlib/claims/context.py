"""What the ledger's readers share (rrlib.claims.readers): the ``Context``, which computes each result a reader
reads once, on first use, from the ledger's ``Inputs`` (rrlib.claims.assemble), so that the ledger costs what its
records read; and the designs and readings the pages read beside the ledger (page 04's and page 05's powered
designs, page 05's looped reading, page 06's gap factors, the metric each growth claim's paper uses).
"""
from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Callable

import pandas as pd

from rrlib.runs.config import project_path
from rrlib.runs.presets import load_preset
from rrlib.results import family as family_results, looped as looped_results, looped_power, power
from rrlib.results import size_tokens, statistics
from rrlib.studies import claims_study, looped_reach_study, power_study
from rrlib.studies.registry import POWER_DESIGNS

from . import conversion, gate, mechanisms, sources
from .rows import link

# the rule whose scales each growth claim speaks of, and the metric its paper uses
MECHANISMS = {"attnres": "update_rms", "mgr": "read_rms"}
# page 04's powered designs, by the table the page shows each in: (size, rule, its baselines in the page's order,
# seeds), as the study registry fixed them before their runs
PAGE_04_DESIGNS = {table: (size, rule, sorted(baselines, key=("highway", "standard").index), seeds)
                   for table, (size, rule, baselines, seeds, _) in
                   (("04_power_tests", POWER_DESIGNS["review_power_micro"]),
                    ("04_power_tests_mini", POWER_DESIGNS["review_power_mini"]))}
# page 05's powered design: both of its questions in one table, each with its own Holm (the registry's two designs)
PAGE_05_DESIGN = ("family_power", {POWER_DESIGNS[name][1]: list(POWER_DESIGNS[name][2])
                                   for name in ("family_power_delta", "family_power_mgr")},
                  POWER_DESIGNS["family_power_delta"][3])

def gap_factors(out_root: str):
    """Page 06's fit of the gap on size and tokens per parameter, or None where its grid has no runs."""
    try:
        return size_tokens.gap_factors(out_root=out_root)
    except RuntimeError:  # no run of the grid under out_root (a quick build's folder)
        return None


def looped_reading(loop_root: str = "outputs/looped_grid", power_loop_root: str | None = "outputs/looped_power"):
    """Page 05's looped reading the ledger judges: the powered design's once all its runs have finished (its reading
    is None before), else the 200-step study's; with the prefix of the tables the page shows it in, and whether it
    is the powered one."""
    powered = looped_power.reading(power_loop_root) if power_loop_root else None
    if powered is not None:
        return powered, "05_looped_power", True
    return looped_results.reading(loop_root), "05_looped", False


class Context:
    """What the readers share, each computed once on first use: ``inputs`` are the ledger's (rrlib.claims.assemble
    .Inputs), ``claims`` the records by id (a reader of several records judges them together)."""

    def __init__(self, inputs, claims: dict):
        self.p, self.claims, self.alpha = inputs, claims, inputs.alpha
        self._groups: dict[str, dict] = {}
        self.control_readings: dict[str, list] = {}  # each controlled record's controls, as its reader read them

    def group(self, name: str, make: Callable[[], list]) -> dict:
        """The rows one function makes for several records together, by label, made once."""
        if name not in self._groups:
            self._groups[name] = {r["claim"]: r for r in make()}
        return self._groups[name]

    # ------------------------------------------------------------ the settings every part reads
    @cached_property
    def family(self) -> list:
        return list(self.p.claims_variants or load_preset(self.p.claims_size).variants)

    @property
    def seeds(self) -> list:
        return list(self.p.seeds)

    @property
    def depth_seeds(self) -> list:
        return list(self.p.depth_seeds)

    @property
    def depth_sizes(self) -> list:
        return list(self.p.depth_sizes)

    @property
    def convert_seeds(self) -> list:
        return list(self.p.convert_seeds)

    @cached_property
    def rate(self) -> float:
        return sources.cpu_rate(self.p.out_root, self.p.family_size)  # the FLOP rate of the committed CPU runs

    @cached_property
    def reach_designs(self) -> dict:
        return {name: looped_reach_study.reach_design(name) for name in looped_reach_study.REACH}

    # ------------------------------------------------------------ page 04's runs and its powered designs
    @property
    def where(self) -> dict:
        """Page 04's runs: the paper's table and ours (without the sizes page 04 leaves off its scale axis)."""
        p = self.p
        return {"paper_csv": p.paper_csv, "out_root": p.out_root,
                **({"exclude_sizes": list(p.exclude_sizes)} if p.exclude_sizes is not None else {})}

    def tests(self, source: str):
        return statistics.tests(source, **self.where) if statistics.comparable(source, **self.where) else None

    @cached_property
    def paper_tests(self):
        return self.tests("paper")

    @cached_property
    def ours_tests(self):
        return self.tests("ours")

    @cached_property
    def power_root(self) -> str:
        return power.root_beside(self.p.out_root)

    @cached_property
    def power_designs(self) -> dict:
        """Page 04's powered designs at two widths, each once all its runs have finished."""
        return {table: power.design_tests(self.power_root, size, {rule: list(baselines)}, seeds, self.alpha)
                for table, (size, rule, baselines, seeds) in PAGE_04_DESIGNS.items()}

    @cached_property
    def power_tests(self):
        """One family for the claim they share: Holm over all their comparisons."""
        return power_study.pooled(self.power_designs.values())

    @cached_property
    def trend(self):
        return statistics.trend("paper", **self.where)

    # ------------------------------------------------------------ page 05's family and its powered design
    @cached_property
    def family_runs(self) -> pd.DataFrame:
        return sources.finished(self.p.out_root, self.p.family_size, self.seeds)

    @cached_property
    def summary(self) -> pd.DataFrame:
        """Page 05's family at its own seeds (the preset's)."""
        p = self.p
        return family_results.family_summary(p.family_size, variants=p.claims_variants,
                                             seeds=load_preset(p.family_size).seeds, out_root=p.out_root).reset_index()

    @cached_property
    def wide(self):
        p = self.p
        return family_results.family_summary(p.wide_size, out_root=p.out_root).reset_index() \
            if p.wide_size and (project_path(p.out_root) / p.wide_size).is_dir() else None

    @cached_property
    def family_power_tests(self):
        """Page 05's powered design, once all its runs have finished."""
        return power.design_tests(self.power_root, *PAGE_05_DESIGN, alpha=self.alpha)

    @property
    def family_link(self) -> str:
        return link("05_related_methods", f"05_{self.p.family_size}_summary")

    # ------------------------------------------------------------ page 07's own study: gate halves and probes
    @cached_property
    def claims_runs(self) -> pd.DataFrame:
        return sources.finished(self.p.root("claims"), self.p.claims_size, self.seeds)

    @cached_property
    def committed(self) -> pd.DataFrame:
        return sources.finished(self.p.out_root, self.p.claims_size, self.seeds)

    @cached_property
    def notes(self) -> list:
        """What page 07's own study holds, in a line or two."""
        p = self.p
        plan = claims_study.study_plan(p.claims_size, self.seeds, p.root("claims"), self.family)
        return sources.study_note(plan, p.claims_size, p.root("claims"), self.claims_runs, self.committed,
                                  p.out_root, p.wide_size, self.seeds)

    @cached_property
    def halves_runs(self) -> pd.DataFrame:
        return gate.halves_runs(self.claims_runs, self.committed, claims_study.GATE_HALVES)

    @cached_property
    def halves(self):
        """Review's gate halves against the full gate, once every seed has them (None before)."""
        done = gate.halves_seeds(self.halves_runs) == len(self.seeds)
        return gate.halves_table(self.halves_runs, self.alpha) if done else None

    @cached_property
    def shares(self) -> pd.DataFrame:
        return gate.share_table()

    @property
    def probed(self) -> list:
        return self.family + claims_study.GATE_HALVES

    @cached_property
    def scales(self) -> pd.DataFrame:
        return claims_study.read_probes(self.p.root("claims"), self.p.claims_size, self.probed, self.seeds, "scales")

    @cached_property
    def routing(self) -> pd.DataFrame:
        return claims_study.read_probes(self.p.root("claims"), self.p.claims_size, claims_study.ROUTED, self.seeds,
                                        "routing")

    @cached_property
    def depth_scales(self) -> pd.DataFrame:
        return sources.depth_probes(self.p.root("claims"), self.depth_sizes, claims_study.DEPTH_VARIANTS,
                                    self.depth_seeds, "scales")

    @cached_property
    def growth_by_depth(self) -> pd.DataFrame:
        return mechanisms.growth_by_depth(self.depth_scales, MECHANISMS, self.depth_sizes, self.alpha)

    @cached_property
    def contrast_by_depth(self) -> pd.DataFrame:
        routing = sources.depth_probes(self.p.root("claims"), self.depth_sizes, ["attnres", "delta_attnres"],
                                       self.depth_seeds, "routing")
        return mechanisms.routing_by_depth(routing, self.depth_sizes, self.alpha)

    @cached_property
    def probe_notes(self) -> list:
        """How many runs have probe files, of how many planned."""
        scales, routing, deep = self.scales, self.routing, self.depth_scales
        return [
            f"probe files: {scales.groupby(['variant', 'seed']).ngroups if len(scales) else 0} runs with read "
            f"scales, {routing.groupby(['variant', 'seed']).ngroups if len(routing) else 0} with routing, "
            f"of {len(self.probed) * len(self.seeds)} and {len(claims_study.ROUTED) * len(self.seeds)}",
            f"depth probes: {deep.groupby(['depth', 'variant', 'seed']).ngroups if len(deep) else 0} of "
            f"{len(self.depth_sizes) * len(claims_study.DEPTH_VARIANTS) * len(self.depth_seeds)} runs probed"]

    # ------------------------------------------------------------ the conversion
    @cached_property
    def conversions(self) -> pd.DataFrame:
        """The conversion's start, per seed."""
        return claims_study.read_conversions(self.p.root("convert_gated"), self.p.convert_size, self.convert_seeds)

    @cached_property
    def fresh_arm_tests(self) -> dict:
        """The non-inferiority design's arms against the continued model, on its fresh seeds."""
        p, seeds = self.p, claims_study.FRESH_CONVERT_SEEDS
        return conversion.arm_tests(sources.finished(p.root("convert"), p.convert_size, seeds),
                                    sources.finished(p.root("convert_gated"), p.convert_size, seeds), p.margin,
                                    self.alpha)

    @property
    def controls(self) -> pd.DataFrame:
        """Every control the readers read, one row each, by the record it bears on (rrlib.claims.controls)."""
        return pd.DataFrame([{"record": record, **dataclasses.asdict(control)} for record, readings in
                             self.control_readings.items() for control in readings],
                            columns=["record", "study", "role", "state", "finding", "unsettles"])

    @cached_property
    def arm_tests(self) -> dict:
        """The conversion's arms against the continued model."""
        p = self.p
        return conversion.arm_tests(sources.finished(p.root("convert"), p.convert_size, self.convert_seeds),
                                    sources.finished(p.root("convert_gated"), p.convert_size, self.convert_seeds),
                                    p.margin, self.alpha)
