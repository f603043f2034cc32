"""The ledger's readers: each record of records.yaml names the reader that makes its row (its ``reader`` field: the
reader's name, or a one-key mapping of the name to the reader's arguments, e.g. ``{growth: [attnres, endpoint]}``),
and ``READERS`` maps each name to its function, ``f(claim, context, *arguments) -> row``. So changing one claim
touches its record and at most its reader.

A reader reads the results of a study (rrlib.results, the studies' own readers) through the ``Context``, which
computes each of them once, on first use, from the ledger's ``Inputs`` (rrlib.claims.assemble): the ledger costs what
its records read. Where one function judges several records together (the depth ablation's two claims, the paper's
runs, the looped study's three), the context keeps its rows and each record takes its own, by its label. Where more
than one registered design answers a claim, the reader passes them all to rrlib.stats.ledger.decide, whose rule (the
smallest detectable gap decides) picks the row.
"""
from __future__ import annotations

from typing import Callable

from rrlib import stats
from rrlib.runs.config import project_path
from rrlib.runs.presets import load_preset
from rrlib.stats import ledger as verdicts
from rrlib.results import depth, mechanism
from rrlib.studies import claims_study, looped_reach_study

from . import board, controls, conversion, family as family_rows, gate, looped, mechanisms, reach_rows, review
from . import rows as claim_rows
from .context import Context, gap_factors, looped_reading
from .rows import link

REACH_LINK = link("07_claims", "07_reach_runs")

READERS: dict[str, Callable[..., dict]] = {}


def reader(name: str):
    """Register ``f(claim, context, *arguments) -> row`` as the reader ``name``."""
    def register(f):
        READERS[name] = f
        return f
    return register


def named(claim) -> tuple[str, list]:
    """The reader a record names and its arguments; one sentence naming the record where it names none known."""
    spec = claim.reader
    name, arguments = (next(iter(spec.items())) if isinstance(spec, dict) and len(spec) == 1 else (spec, []))
    if not isinstance(name, str) or name not in READERS:
        raise ValueError(f"record {claim.id} names the reader {spec!r}; a record's reader is one of "
                         f"{', '.join(sorted(READERS))}, alone or as a one-key mapping to its arguments")
    return name, list(arguments) if isinstance(arguments, (list, tuple)) else [arguments]


def read(claim, context: "Context") -> dict:
    """The record's row, made by the reader it names."""
    name, arguments = named(claim)
    return READERS[name](claim, context, *arguments)


# ---------------------------------------------------------------- what a record alone makes
@reader("out_of_reach")
def out_of_reach(claim, c: Context, *evidence_page: str) -> dict:
    """Beyond this machine's reach, priced at the committed runs' FLOP rate; ``evidence_page`` links a page."""
    return claim_rows.beyond_reach(claim, c.rate, link(*evidence_page) if evidence_page else "")


# ---------------------------------------------------------------- Review Residuals
@reader("review_depth")
def review_depth(claim, c: Context) -> dict:
    """The depth ablation's two claims (page 02)."""
    return c.group("review_depth", lambda: review.depth_rows(
        c.claims, depth.depth_runs(out_root=c.p.out_root),
        (link("02_depth_stability", "02_runs", "02_final_loss"), link("02_depth_stability", "02_final_loss")),
        c.alpha))[claim.label]


@reader("gate_neutral")
def gate_neutral(claim, c: Context) -> dict:
    """The gate starts neutral and learns: its deviation at init, and page 01's trained gate per sublayer."""
    p = c.p
    per_sublayer = mechanism.gates_per_sublayer(p.gate_size, seed=0, n_windows=p.gate_windows, out_root=p.out_root,
                                                local_out_root=p.local_out_root)
    return gate.neutral_row(claim, gate.init_deviation(p.claims_size, c.seeds[0], claims_study.PROBE_WINDOWS),
                            per_sublayer, p.claims_size, link("01_mechanism", "01_gates_per_sublayer"))


@reader("gate_halves")
def gate_halves(claim, c: Context) -> dict:
    """Which half of the gate matters, against the committed runs a retrained one reproduces."""
    if c.halves is None:
        return claim_rows.unfinished(claim, "the gate-halves", gate.halves_seeds(c.halves_runs), len(c.seeds))
    return gate.halves_row(claim, c.halves, c.p.claims_size, link("07_claims", "07_gate_halves"), c.alpha)


@reader("review_no_gain_cpu")
def review_no_gain_cpu(claim, c: Context) -> dict:
    items = [name for name, table in c.power_designs.items() if table is not None]
    return review.no_gain_cpu_row(claim, c.power_tests, items, c.ours_tests, c.paper_tests, c.alpha)


@reader("review_paper_runs")
def review_paper_runs(claim, c: Context) -> dict:
    """The claims read on the paper's own runs (page 04's tests of its table), judged together."""
    return c.group("review_paper_runs", lambda: review.paper_run_rows(
        c.claims, c.paper_tests, stats.load_results(project_path(c.p.paper_csv)),
        link("04_statistics", "04_paper_tests"), c.alpha))[claim.label]


@reader("review_trend")
def review_trend(claim, c: Context) -> dict:
    return review.trend_row(c.claims, c.trend, link("04_statistics", "04_paper_trend"), c.alpha)


@reader("review_size")
def review_size(claim, c: Context) -> dict:
    return review.size_row(c.claims, gap_factors(c.p.out_root), review.paper_slope(c.trend),
                           link("06_size_vs_tokens", "06_gap_factors"), c.alpha)


@reader("gate_params")
def gate_params(claim, c: Context) -> dict:
    return gate.params_row(claim, c.shares, link("07_claims", "07_gate_share"))


# ---------------------------------------------------------------- growth over depth (AttnRes, MGR)
@reader("growth")
def growth(claim, c: Context, variant: str, reading: str) -> dict:
    """What training changed in ``variant``'s scales over depth (page 07's depth probes), at the endpoint or fit."""
    return mechanisms.growth_row(claim, c.growth_by_depth, variant, reading, len(c.depth_seeds),
                                 link("07_claims", "07_growth", "07_growth.png"), c.alpha)


# ---------------------------------------------------------------- the reach studies (page 07's confirmatory designs)
REACH_READS = {"mechanism": reach_rows.mechanism_row, "outputs": reach_rows.output_growth_row,
               "loop_norm": reach_rows.loop_norm_row, "trained": reach_rows.trained_row,
               "speed": reach_rows.speed_row, "layerscale": reach_rows.layerscale_row}


@reader("reach")
def reach(claim, c: Context, study: str, read: str, *arguments) -> dict:
    """A reach study's reading (``read``, one of ``REACH_READS``) of its registered design."""
    return REACH_READS[read](claim, looped_reach_study.REACH[study], *arguments, c.reach_designs[study], REACH_LINK,
                             alpha=c.alpha)


CONTROLS = {  # each controlled record's control readings and the setting its verdict holds in (rrlib.claims.controls)
    "highway": lambda row, a: (controls.highway(a), controls.settings(
        looped_reach_study.REACH["highway_depth"], "the unigram threshold (0.05 nats below the sample's entropy)")),
    "rezero": lambda row, a: (controls.rezero(a), controls.settings(
        looped_reach_study.REACH["rezero_speed"], "the pre-norm standard", 4e-3)),
    "layerscale": lambda row, a: (controls.layerscale(row["effect"], a), controls.settings(
        looped_reach_study.REACH["layerscale_depth"], "the pre-norm standard")),
}


@reader("reach_controlled")
def reach_controlled(claim, c: Context, study: str, read: str, controlled: str) -> dict:
    """A reach study's reading with the control studies registered for it (``controlled``, one of ``CONTROLS``):
    a control that fails makes a decided row inconclusive; otherwise the row names the setting it holds in."""
    row = reach(claim, c, study, read)
    readings, setting = CONTROLS[controlled](row, c.alpha)
    c.control_readings[claim.id] = readings
    return controls.apply(row, readings, setting)


@reader("reach_speed_at")
def reach_speed_at(claim, c: Context, study: str, rezero_lr: float) -> dict:
    """The speed reading at one of ReZero's rates (the rate its paper names)."""
    return reach_rows.speed_row(claim, looped_reach_study.REACH[study], c.reach_designs[study], REACH_LINK,
                                rezero_lr=float(rezero_lr), alpha=c.alpha)


@reader("unique_layers")
def unique_layers(claim, c: Context) -> dict:
    return reach_rows.unique_layers_row(claim, REACH_LINK, c.alpha)


# ---------------------------------------------------------------- the family: the leaderboard beside page 05's designs
def family_gain(claim, c: Context, variant: str) -> dict:
    """``variant`` against standard at the family page's size (three seeds, and the wide family beside it)."""
    return family_rows.gain_over_standard(claim, variant, c.summary, c.family_runs, c.p.family_size, c.family_link,
                                          c.wide, c.p.wide_size, c.alpha)


@reader("gain")
def gain(claim, c: Context, variant: str) -> dict:
    """``variant`` beats standard: page 05's family (or its powered design, where it has one) beside the board."""
    rows = [family_rows.powered_gain(claim, variant, c.family_power_tests, c.alpha) or family_gain(claim, c, variant),
            board.gain_row(claim, variant)]
    return verdicts.decide(rows)


@reader("keeps_gain")
def keeps_gain(claim, c: Context) -> dict:
    """Block AttnRes keeps the per-sublayer form's gain: page 05's family beside the board."""
    return verdicts.decide([family_rows.block_keeps_gain(claim, c.summary, c.family_runs, c.p.family_size,
                                                         c.family_link, c.alpha),
                            board.keeps_gain_row(claim, c.alpha)])


@reader("beats_both")
def beats_both(claim, c: Context, delta: str, base: str) -> dict:
    """``delta`` beats both standard and ``base``: page 05's powered design beside the board."""
    return verdicts.decide([family_rows.beats_both(claim, delta, base, c.family_power_tests, c.family_runs,
                                                   c.p.family_size, c.alpha),
                            board.beats_both_row(claim, delta, base, c.alpha)])


@reader("over")
def over(claim, c: Context, variant: str, baseline: str) -> dict:
    """``variant`` against ``baseline``, paired by seed: page 05's family beside the board."""
    return verdicts.decide([family_rows.over(claim, variant, baseline, c.family_runs, c.p.family_size, c.alpha),
                            board.over_row(claim, variant, baseline, c.alpha)])


# ---------------------------------------------------------------- Delta AttnRes: routing and the conversion
@reader("routing")
def routing(claim, c: Context) -> dict:
    p = c.p
    return mechanisms.routing_row(claim, c.contrast_by_depth, mechanisms.block_contrast(c.routing, c.alpha),
                                  p.claims_size, load_preset(p.claims_size).model.n_layers, len(c.depth_seeds),
                                  link("07_claims", "07_routing_depth", "07_routing"), c.alpha)


@reader("conversion_noninferior")
def converts_noninferior(claim, c: Context) -> dict:
    """The conversion as the paper claims it, non-inferiority against continued training, on the design's fresh
    seeds: registered before its runs, untested until every recipe has them all."""
    tests, planned = c.fresh_arm_tests, len(claims_study.FRESH_CONVERT_SEEDS)
    if not tests:
        return claim_rows.pending(claim)
    if len(tests) == 2 and conversion.seeds_done(tests) == planned:
        return conversion.non_inferior(claim, tests, c.p.convert_size,
                                       link("07_claims", "07_conversion_fresh"), c.alpha)
    return claim_rows.unfinished(claim, "the fresh conversion", conversion.seeds_done(tests), planned)


@reader("conversion")
def converts(claim, c: Context) -> dict:
    if len(c.arm_tests) == 2 and conversion.seeds_done(c.arm_tests) == len(c.convert_seeds):
        return conversion.ends_better(claim, c.arm_tests, c.p.convert_size, c.conversions, c.p.margin,
                                      link("07_claims", "07_conversion_arms", "07_conversion"), c.alpha)
    return claim_rows.unfinished(claim, "the conversion", conversion.seeds_done(c.arm_tests), len(c.convert_seeds))


# ---------------------------------------------------------------- the looped transformers
@reader("looped")
def looped_study(claim, c: Context) -> dict:
    """Page 05's looped study's three claims, judged together: the powered design once all its runs have finished,
    until then the 200-step study."""
    def make():
        reading, tables, powered = looped_reading(c.p.loop_root, c.p.power_loop_root)
        return looped.ledger_rows(c.claims, reading.trainability, reading.transfer, reading.optima, powered,
                                  link("05_related_methods", f"{tables}_transfer", f"{tables}_trainability"),
                                  c.alpha)
    return c.group("looped", make)[claim.label]
