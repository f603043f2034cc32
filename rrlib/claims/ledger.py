"""The claims ledger from run folders alone: ``ledger()`` returns one row per registered record (rrlib/claims/
records.yaml), each judged by the one verdict rule (``rrlib.stats.ledger.judge``); ``build()`` returns it with the
tables and probe readings the rows were made from, which page 07 shows beside it.

Each row is made by its study's reader (``review``, ``gate``, ``mechanisms``, ``family``, ``conversion``,
``looped``, ``reach_rows``; ``rows`` for a record alone), in the order of the page's sections, from the results the
other pages show (``rrlib.results``), never from a page's table. What the defaults read: the committed runs under
``outputs/`` and the paper's run table; ``Inputs`` names other folders (a quick build's, a user's).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rrlib import stats
from rrlib.runs.config import project_path
from rrlib.runs.presets import load_preset
from rrlib.stats import ledger as verdicts
from rrlib.results import depth, family as family_results, looped as looped_results, looped_power, mechanism, power
from rrlib.results import size_tokens, statistics
from rrlib.studies import claims_study, looped_reach_study, power_study
from rrlib.studies.registry import POWER_DESIGNS

from . import board, conversion, family as family_rows, gate, looped, mechanisms, reach_rows, records, review
from . import sources
from . import page as claim_page
from . import rows as claim_rows
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
    arm_tests: pd.DataFrame | None = None  # the conversion's arms against the continued model


def ledger(**settings) -> pd.DataFrame:
    """The whole ledger from run folders: one row per record, judged by the one rule (``Inputs`` names the
    settings)."""
    return build(Inputs(**settings)).table


def build(inputs: Inputs = Inputs()) -> Ledger:
    """Every record's row, in the order page 07 explains them, and what they were made from."""
    p = inputs
    alpha = p.alpha
    claims = records.by_id()
    claims_root, convert_root, gated_root = p.root("claims"), p.root("convert"), p.root("convert_gated")
    family = list(p.claims_variants or load_preset(p.claims_size).variants)
    seeds, depth_seeds, convert_seeds = list(p.seeds), list(p.depth_seeds), list(p.convert_seeds)
    depth_sizes = list(p.depth_sizes)
    out = Ledger(table=pd.DataFrame())

    rate = sources.cpu_rate(p.out_root, p.family_size)  # the FLOP rate of the committed CPU runs

    def beyond_reach(cid, evidence=""):
        return claim_rows.beyond_reach(claims[cid], rate, evidence)

    reach = looped_reach_study.REACH
    designs = {name: looped_reach_study.reach_design(name) for name in reach}
    reach_link = link("07_claims", "07_reach_runs")

    def reach_row(cid, name, read, *args):
        return read(claims[cid], reach[name], *args, designs[name], reach_link, alpha=alpha)

    rows = []
    # page 04's runs: the paper's table and ours (without the sizes page 04 leaves off its scale axis)
    where = {"paper_csv": p.paper_csv, "out_root": p.out_root,
             **({"exclude_sizes": list(p.exclude_sizes)} if p.exclude_sizes is not None else {})}
    paper_tests, ours_tests = (statistics.tests(source, **where) if statistics.comparable(source, **where) else None
                               for source in ("paper", "ours"))
    # page 04's powered designs at two widths, each once all its runs have finished: one family for the claim they
    # share, Holm over all their comparisons
    power_root = power.root_beside(p.out_root)
    power_designs = {table: power.design_tests(power_root, size, {rule: list(baselines)}, seeds, alpha)
                     for table, (size, rule, baselines, seeds) in PAGE_04_DESIGNS.items()}
    power_items = [name for name, table in power_designs.items() if table is not None]
    power_tests = power_study.pooled(power_designs.values())
    family_runs = sources.finished(p.out_root, p.family_size, seeds)
    # page 05's family at its own seeds (the preset's), and its powered design, once all its runs have finished
    summary = family_results.family_summary(p.family_size, variants=p.claims_variants,
                                            seeds=load_preset(p.family_size).seeds, out_root=p.out_root).reset_index()
    wide = family_results.family_summary(p.wide_size, out_root=p.out_root).reset_index() \
        if p.wide_size and (project_path(p.out_root) / p.wide_size).is_dir() else None
    family_power_tests = power.design_tests(power_root, *PAGE_05_DESIGN, alpha=alpha)

    # Review (a): depth
    rows += review.depth_rows(claims, depth.depth_runs(out_root=p.out_root),
                              (link("02_depth_stability", "02_runs", "02_final_loss"),
                               link("02_depth_stability", "02_final_loss")), alpha)
    # (b): the gate starts neutral and learns
    per_sublayer = mechanism.gates_per_sublayer(p.gate_size, seed=0, n_windows=p.gate_windows, out_root=p.out_root,
                                                local_out_root=p.local_out_root)
    rows.append(gate.neutral_row(claims["review-gate-neutral"],
                                      gate.init_deviation(p.claims_size, seeds[0], claims_study.PROBE_WINDOWS),
                                      per_sublayer, p.claims_size, link("01_mechanism", "01_gates_per_sublayer")))
    # (c): which half of the gate matters, against the committed runs a retrained one reproduces
    claims_runs = sources.finished(claims_root, p.claims_size, seeds)
    committed = sources.finished(p.out_root, p.claims_size, seeds)
    plan = claims_study.study_plan(p.claims_size, seeds, claims_root, family)
    out.notes = sources.study_note(plan, p.claims_size, claims_root, claims_runs, committed, p.out_root, p.wide_size,
                                   seeds)
    halves_runs = gate.halves_runs(claims_runs, committed, claims_study.GATE_HALVES)
    halves_seeds = gate.halves_seeds(halves_runs)
    if halves_seeds == len(seeds):
        out.halves = gate.halves_table(halves_runs, alpha)
        rows.append(gate.halves_row(claims["review-update-conditioning"], out.halves, p.claims_size,
                                    link("07_claims", "07_gate_halves"), alpha))
    else:
        rows.append(claim_rows.unfinished(claims["review-update-conditioning"], "the gate-halves", halves_seeds,
                                          len(seeds)))
    # (d, e, f): where the gain appears
    rows.append(review.no_gain_cpu_row(claims["review-no-gain-cpu"], power_tests, power_items, ours_tests,
                                       paper_tests, alpha))
    rows += review.paper_run_rows(claims, paper_tests, stats.load_results(project_path(p.paper_csv)),
                                  link("04_statistics", "04_paper_tests"), alpha)
    rows.append(beyond_reach("review-gain-590m-harness", link("04_statistics")))
    trend = statistics.trend("paper", **where)
    rows.append(review.trend_row(claims, trend, link("04_statistics", "04_paper_trend"), alpha))
    rows.append(review.size_row(claims, gap_factors(p.out_root), review.paper_slope(trend),
                                link("06_size_vs_tokens", "06_gap_factors"), alpha))
    # (g): what the gate costs in parameters
    out.shares = gate.share_table()
    rows.append(gate.params_row(claims["review-gate-params"], out.shares, link("07_claims", "07_gate_share")))

    # the family's probes, and what training changed over depth
    probed = family + claims_study.GATE_HALVES
    out.scales = claims_study.read_probes(claims_root, p.claims_size, probed, seeds, "scales")
    out.routing = claims_study.read_probes(claims_root, p.claims_size, claims_study.ROUTED, seeds, "routing")
    out.depth_scales = sources.depth_probes(claims_root, depth_sizes, claims_study.DEPTH_VARIANTS, depth_seeds,
                                            "scales")
    out.growth_by_depth = mechanisms.growth_by_depth(out.depth_scales, MECHANISMS, depth_sizes, alpha)
    scales, routing, deep = out.scales, out.routing, out.depth_scales
    out.probe_notes = [
        f"probe files: {scales.groupby(['variant', 'seed']).ngroups if len(scales) else 0} runs with read scales, "
        f"{routing.groupby(['variant', 'seed']).ngroups if len(routing) else 0} with routing, "
        f"of {len(probed) * len(seeds)} and {len(claims_study.ROUTED) * len(seeds)}",
        f"depth probes: {deep.groupby(['depth', 'variant', 'seed']).ngroups if len(deep) else 0} of "
        f"{len(depth_sizes) * len(claims_study.DEPTH_VARIANTS) * len(depth_seeds)} runs probed"]

    def growth_row(cid, variant, reading):
        return mechanisms.growth_row(claims[cid], out.growth_by_depth, variant, reading, len(depth_seeds),
                                     link("07_claims", "07_growth", "07_growth.png"), alpha)

    def family_gain_row(cid, variant):
        """A claim that ``variant`` beats the standard residual at the family page's size."""
        return family_rows.gain_over_standard(claims[cid], variant, summary, family_runs, p.family_size,
                                              link("05_related_methods", f"05_{p.family_size}_summary"),
                                              wide, p.wide_size, alpha)

    # Attention Residuals
    rows += [growth_row("attnres-growth", "attnres", "endpoint"),
             growth_row("attnres-growth-fit", "attnres", "fit"),
             reach_row("attnres-growth-confirm", "mechanisms", reach_rows.mechanism_row, "attnres"),
             reach_row("attnres-outputs-confirm", "attnres_outputs", reach_rows.output_growth_row, "attnres")]
    rows.append(verdicts.decide([
        family_rows.block_keeps_gain(claims["attnres-block-keeps-gain"], summary, family_runs, p.family_size,
                                     link("05_related_methods", f"05_{p.family_size}_summary"), alpha),
        board.keeps_gain_row(claims["attnres-block-keeps-gain"], alpha)]))
    rows += [beyond_reach("attnres-compute"), beyond_reach("attnres-latency")]

    # Delta Attention Residuals: routing over depth, the gain, the conversion
    depth_routing = sources.depth_probes(claims_root, depth_sizes, ["attnres", "delta_attnres"], depth_seeds,
                                         "routing")
    out.contrast_by_depth = mechanisms.routing_by_depth(depth_routing, depth_sizes, alpha)
    rows.append(mechanisms.routing_row(claims["delta-routing"], out.contrast_by_depth,
                                       mechanisms.block_contrast(out.routing, alpha), p.claims_size,
                                       load_preset(p.claims_size).model.n_layers, len(depth_seeds),
                                       link("07_claims", "07_routing_depth", "07_routing"), alpha))
    rows += [verdicts.decide([family_rows.beats_both(claims[cid], delta, base, family_power_tests, family_runs,
                                                     p.family_size, alpha),
                              board.beats_both_row(claims[cid], delta, base, alpha)])
             for cid, base, delta in (("delta-beats-per-sublayer", "attnres", "delta_attnres"),
                                      ("delta-beats-per-block", "attnres_block", "delta_attnres_block"))]
    rows.append(beyond_reach("delta-at-scale"))
    out.conversions = claims_study.read_conversions(gated_root, p.convert_size, convert_seeds)
    rows.append(conversion.start_row(claims["delta-conversion-start"], out.conversions, len(convert_seeds),
                                     link("07_claims", "07_conversion")))
    out.arm_tests = conversion.arm_tests(sources.finished(convert_root, p.convert_size, convert_seeds),
                                         sources.finished(gated_root, p.convert_size, convert_seeds), p.margin, alpha)
    if len(out.arm_tests) == 2 and conversion.seeds_done(out.arm_tests) == len(convert_seeds):
        rows.append(conversion.ends_better(claims["delta-conversion"], out.arm_tests, p.convert_size,
                                           out.conversions, p.margin,
                                           link("07_claims", "07_conversion_arms", "07_conversion"), alpha))
    else:
        rows.append(claim_rows.unfinished(claims["delta-conversion"], "the conversion",
                                          conversion.seeds_done(out.arm_tests), len(convert_seeds)))

    # Multi-Gate Residuals and the looped transformers
    rows += [growth_row("mgr-activation-scales", "mgr", "endpoint"),
             growth_row("mgr-activation-scales-fit", "mgr", "fit"),
             reach_row("mgr-activation-scales-confirm", "mechanisms", reach_rows.mechanism_row, "mgr")]
    rows.append(beyond_reach("mgr-communication"))
    # the powered design, sized for 0.017 nats, reads alone once it has finished (page 05)
    rows.append(verdicts.decide([family_rows.powered_gain(claims["mgr-gain"], "mgr", family_power_tests, alpha)
                                 or family_gain_row("mgr-gain", "mgr"), board.gain_row(claims["mgr-gain"], "mgr")]))
    rows.append(beyond_reach("mgr-large-scale"))
    # the powered looped design reads alone once page 05 has all its runs; until then the 200-step study does
    reading, looped_tables, powered = looped_reading(p.loop_root, p.power_loop_root)
    rows += looped.ledger_rows(claims, reading.trainability, reading.transfer, reading.optima, powered,
                               link("05_related_methods", f"{looped_tables}_transfer",
                                    f"{looped_tables}_trainability"), alpha)
    rows += [reach_rows.unique_layers_row(claims["looped-depends-on-l"], reach_link, alpha),
             reach_row("looped-stream-norm", "loop_norms", reach_rows.loop_norm_row)]

    # the family's older members
    rows.append(reach_row("highway-hundreds-of-layers", "highway_depth", reach_rows.trained_row))
    rows.append(verdicts.decide([family_gain_row("rezero-converges-faster", "rezero"),
                                 board.gain_row(claims["rezero-converges-faster"], "rezero")]))
    rows += [reach_row("rezero-converges-faster-as-run", "rezero_speed", reach_rows.speed_row),
             reach_rows.speed_row(claims["rezero-converges-faster-8e-3"], reach["rezero_speed"],
                                  designs["rezero_speed"], reach_link, rezero_lr=0.008, alpha=alpha),
             reach_row("rezero-120-layers", "rezero_depth", reach_rows.trained_row),
             reach_row("layerscale-deeper", "layerscale_depth", reach_rows.layerscale_row)]
    rows.append(verdicts.decide([family_gain_row("hc-gain", "hc"), board.gain_row(claims["hc-gain"], "hc")]))
    rows.append(verdicts.decide([family_rows.over(claims["mhc-over-hc"], "mhc", "hc", family_runs, p.family_size,
                                                  alpha), board.over_row(claims["mhc-over-hc"], "mhc", "hc", alpha)]))
    rows.append(beyond_reach("mhc-stable-at-scale"))

    out.table = claim_page.attach(verdicts.ledger(rows), claims.values())
    return out


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
