"""Every study of the report as one entry of data: its name, the module that holds its design, the page that reads
it, and how its plan is made. ``rrlib study`` (rrlib.studies.command) lists, plans, runs and reports them; adding a
study is one entry here, not a script.

A plan is made from the files as they stand (rrlib.studies.work.Plan): a study sized from a pilot plans its pilot
until every pilot run has ended, then the design the pilot sized. With ``ready`` (``rrlib study run``) a plan first
does what its design needs measured: the step timing of a reach study (step_times.json) and the probe files of its
finished runs. Importing this module loads no study module and no torch: each plan imports what it reads when made.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from . import leaderboard_study
from .user_board import Board
from .work import Job, Plan, parsed_sweep, sweep_job

RUNS = "outputs/runs"
POWER_RUNS = "outputs/power/runs"


@dataclass(frozen=True)
class Entry:
    """One study: ``plan(ready)`` its Plan; ``logs`` where its calls' logs go; ``board``, for a design that compares
    rules, what a user's rule joins (rrlib.studies.user_board)."""
    name: str
    module: str
    about: str
    plan: Callable[[bool], Plan]
    logs: str = "outputs/logs"
    board: Board | None = None


# ---------------------------------------------------------------- sweeps of presets (pages 04 to 06)


def preset_sweeps(sizes, root: str = RUNS, seeds=None, seed_major: bool = False, extra=()) -> Callable[[bool], Plan]:
    """One sweep per size of its preset's variants at its seeds (or ``seeds``) into ``root``; ``seed_major``: one
    per (seed, size), so that a study stopped part-way leaves every size at fewer seeds."""
    def plan(ready: bool) -> Plan:
        from ..runs.presets import load_preset

        presets = {size: load_preset(size) for size in sizes}
        chosen = {size: list(p.seeds if seeds is None else seeds) for size, p in presets.items()}
        if not seed_major:
            return Plan([[sweep_job(size, size, p.variants, chosen[size], root, *extra)
                          for size, p in presets.items()]])
        every = sorted({s for c in chosen.values() for s in c})
        return Plan([[sweep_job(f"{size}-seed{s}", size, p.variants, [s], root, *extra) for s in every
                      for size, p in presets.items() if s in chosen[size]]])
    return plan


# ---------------------------------------------------------------- the reach studies (page 07)


def reach_plan(name: str) -> Callable[[bool], Plan]:
    """A registered ``Study`` (rrlib.studies.study_plan): timed, its probes written (``ready``), its pilot, then the
    design the pilot sizes, one sweep per (arm, size); ``describe`` gives its arithmetic."""
    def plan(ready: bool) -> Plan:
        from ..runs.config import project_path
        from . import study_plan as sp
        from .claims_study import write_probes
        from .looped_reach_study import REACH, reach_design

        study = REACH[name]
        if ready and not (project_path(study.root) / sp.STEP_TIMES).exists():
            sp.time_study(study, module_of(study.name))
        if ready and study.probe:
            seeds = sorted(set(sp.finished(study)["seed"]))
            for arm in study.arms:
                for size in study.arm_sizes(arm):
                    write_probes(study.arm_root(arm), size, [arm.variant], seeds)
        design = reach_design(name)

        def jobs(arms, seeds):
            return [parsed_sweep(line.split()[0], line.split()[1:],
                                 sp.step_seconds(study, arm, size) * study.arm_steps(arm) / 60)
                    for arm in arms for size, line in zip(study.arm_sizes(arm), sp.sweep_lines(study, (arm,), seeds))]

        steps = [jobs(study.arms, study.pilot_seeds)] if study.pilot_seeds else []
        if design["seeds"]:
            steps.append(jobs(design["arms"], design["seeds"]))
        notes = sp.describe(study, design, design["arms"], design["seeds"]).splitlines()
        return Plan(steps, notes if design["seeds"] else notes + ["  the design's seeds follow once the pilot has "
                                                                  "ended; `rrlib study run` runs both in order"])
    return plan


def module_of(name: str) -> str:
    for module in ("depth_reach_study", "looped_reach_study", "reach_control_study"):
        if name in importlib.import_module(f"rrlib.studies.{module}").STUDIES:
            return f"rrlib.studies.{module}"
    raise KeyError(name)


def looped_plan(design_name: str) -> Callable[[bool], Plan]:
    """A looped_study design: its lattice of rates per cell, seed-major, with the extension its finished runs ask
    for (each plan made after a step asks again, until no cell asks for more)."""
    def plan(ready: bool) -> Plan:
        from . import looped_study

        design = looped_study.DESIGNS[design_name]
        runs = looped_study.study_runs(design.out_root, design.count_setting)
        lines = looped_study.plan(runs, list(design.seeds), design)
        notes = []
        if design_name == "power" and len(runs):  # the pilot's arithmetic (page 05 shows it)
            finished = runs[runs["status"] == "finished"]
            _, pilot = looped_study.seeds_own_grid(finished, looped_study.POWER_PILOT_SEEDS, design)
            fixed = looped_study.pilot_design(looped_study.readings(pilot)["contrast"], pilot,
                                              len(looped_study.POWER_PILOT_SEEDS), design)
            notes = [f"  pilot (seeds {list(looped_study.POWER_PILOT_SEEDS)}): the contrast of slopes, paired SD per "
                     f"estimator, the seeds that detect {looped_study.CONTRAST_TARGET:g} per doubling (80 % power):",
                     "    " + fixed[["estimator", "sd", "seeds_needed", "design_seeds", "design_cpu_hours"]]
                     .to_string(index=False).replace("\n", "\n    ")]
        if design_name == "unique_layers":
            from .looped_reach_study import unique_layers_sizing

            notes = ["  sizing (rrlib.studies.looped_reach_study):", "    "
                     + unique_layers_sizing()[["estimator", "sd_upper", "seeds", "detectable", "cpu_hours"]]
                     .to_string(index=False).replace("\n", "\n    ")]
        return Plan([[parsed_sweep(line.split()[0], line.split()[1:] + ["--device", "cpu"]) for line in lines]], notes)
    return plan


# ---------------------------------------------------------------- the claims study's parts (page 07)


def claims_plan(part: str) -> Callable[[bool], Plan]:
    """A part of rrlib.studies.claims_study: its sweeps (the conversion's sources before what they convert), with
    the probe files of every finished run written first (``ready``: the last plan made writes the last of them)."""
    def plan(ready: bool) -> Plan:
        from . import claims_study as claims
        from .work import override_args

        sweeps = {"family": lambda: claims.study_plan("family"), "depth": claims.depth_plan,
                  "conversion": claims.conversion_plan,
                  "conversion_fresh": lambda: claims.conversion_plan(seeds=claims.FRESH_CONVERT_SEEDS)}[part]()
        if ready:
            for s in sweeps:
                claims.write_probes(s["out_root"], s["size"], s["variants"], s["seeds"])
        jobs = [sweep_job(f"claims-{part}-{k}", s["size"], s["variants"], s["seeds"], s["out_root"],
                          *override_args(s["overrides"])) for k, s in enumerate(sweeps) if s["variants"]]
        steps = [jobs[:1], jobs[1:]] if part.startswith("conversion") else [jobs]
        return Plan(steps, [f"  {s['label']}: {', '.join(s['variants'])} at {s['size']}, seeds {s['seeds']}, under "
                            f"{s['out_root']}" for s in sweeps if s["variants"]])
    return plan


# ---------------------------------------------------------------- the powered designs (pages 04, 05) and page 08


# name -> (size, the rule, its baselines, the design's seeds, the gap its pilot sized it for: pages 04 and 05)
POWER_DESIGNS = {
    "review_power_micro": ("review_power_micro", "review", ("standard", "highway"), 37, 0.010),
    "family_power_delta": ("family_power", "delta_attnres", ("standard", "attnres"), 47, 0.017),
    "family_power_mgr": ("family_power", "mgr", ("standard",), 47, 0.017),
    "review_power_mini": ("review_power_mini", "review", ("highway",), 10, 0.010),
}
POWER_PILOT = ("review_power_micro", "family_power", "review_power_mini")


def compare_steps(name: str, size: str, rules, baselines, seeds: int, runs: str, out: str) -> list[list[Job]]:
    """A design through ``rrlib compare``: its runs in shards side by side, then the call that writes its verdict
    (the verdict of a call left unsharded is written by that call)."""
    from .work import cells

    argv = ("compare", "--allow-slow", "--size", size, "--variants", ",".join(rules), "--against",
            ",".join(baselines), "--seeds", str(seeds), "--runs", runs, "--out", out)
    owned = cells(size, [*rules, *baselines], range(seeds), runs)
    return [[Job(name, argv, owned)], [Job(f"{name}-verdict", argv, owned, shardable=False,
                                           product=f"{out}/verdict.json")]]


def power_plan(name: str) -> Callable[[bool], Plan]:
    def plan(ready: bool) -> Plan:
        from .power_study import PILOT_SEEDS, design_runs, pilot_design, pilot_sentence

        size, rule, baselines, seeds, target = POWER_DESIGNS[name]
        pilot = design_runs(POWER_RUNS, size, [rule, *baselines], range(PILOT_SEEDS))
        notes = [f"  {rule} against {', '.join(baselines)} at {size}, {seeds} seeds (fixed from the pilot, "
                 f"`rrlib study plan power_pilot`); verdict in outputs/power/{name}"]
        if len(pilot) == (1 + len(baselines)) * PILOT_SEEDS:
            notes.append("  pilot: " + pilot_sentence(size, pilot_design(pilot, rule, baselines, target)))
        return Plan(compare_steps(name, size, [rule], baselines, seeds, POWER_RUNS, f"outputs/power/{name}"), notes)
    return plan


def power_board(name: str) -> Board:
    """A powered design as a board a user's rule joins: the design's rule and its other baselines against its first
    baseline, at its size and seeds, read where the design keeps its runs."""
    size, rule, baselines, seeds, _ = POWER_DESIGNS[name]
    return Board(size, baselines[0], seeds, POWER_RUNS, lambda: [rule, *baselines[1:]])


def preset_board(size: str) -> Board:
    """A preset's grid as a board: its variants against standard at its seeds (seeds 0 to n - 1), its runs under
    outputs/runs, trained with the preset's own settings."""
    from ..runs.presets import load_preset

    seeds = load_preset(size).seeds
    if list(seeds) != list(range(len(seeds))):  # Board counts seeds from 0
        raise ValueError(f"preset {size}'s seeds {seeds} do not run from 0; a board counts seeds 0 to n - 1")
    return Board(size, "standard", len(seeds), RUNS, lambda: list(load_preset(size).variants))


def leaderboard_plan(ready: bool) -> Plan:
    """Page 08's board: each rule's design within the budget (rrlib.studies.leaderboard_study.plan), then one call
    over every rule at all its seeds for the board, Holm over all its comparisons."""
    from . import leaderboard_study as board

    unmeasured = (lambda rules: board.step_ratios(rules)) if ready else (lambda rules: {r: float("nan") for r in rules})
    rows = board.plan(board.BUDGET_CPU_HOURS, board.minutes_per_run(unmeasured))
    steps: list[list[Job]] = [[], []]
    for r in (r for r in rows if r["seeds"]):
        first, verdict = compare_steps(r["rule"], board.SIZE, [r["rule"]], [board.BASELINE], r["seeds"], board.RUNS,
                                       f"{board.OUT}/{r['rule']}")
        steps[0] += first
        steps[1] += verdict
    whole = [r["rule"] for r in rows if r["seeds"] == board.SEEDS]
    if whole:
        steps.append(compare_steps("board", board.SIZE, whole, [board.BASELINE], board.SEEDS, board.RUNS,
                                   f"{board.OUT}/board")[1])
    notes = [f"  {r['rule']}: {r['finished']} seeds finished, stands at {r['seeds']}, {r['to_train']} to train, "
             f"{r['minutes']:.2f} min/run, {r['cpu_hours']:.1f} CPU-h" for r in rows]
    return Plan(steps, notes + [f"  budget {board.BUDGET_CPU_HOURS:g} CPU-hours; the whole board at {board.SEEDS} "
                                f"seeds: {sum(r['all_seeds_cpu_hours'] for r in rows):.1f} CPU-hours left"])


# ---------------------------------------------------------------- the registry


def _entries() -> list[Entry]:
    reach = [Entry(n, "rrlib.studies.depth_reach_study", "page 07: a depth claim the CPU reaches", reach_plan(n))
             for n in ("rezero_speed", "layerscale_depth", "rezero_depth", "highway_depth", "mechanisms")]
    loop_norms = Entry("loop_norms", "rrlib.studies.looped_reach_study", "page 07: the stream's norm over the loops",
                       reach_plan("loop_norms"))
    controls = [Entry(n, "rrlib.studies.reach_control_study", "page 07: what a reach verdict holds in",
                      reach_plan(n))
                for n in ("highway_control", "highway_rates", "highway_horizon", "rezero_control", "rezero_horizon",
                          "layerscale_eps", "layerscale_rates", "layerscale_horizon", "attnres_outputs")]
    return [
        Entry("sizes", "rrlib.runs.sweep", "page 04: the CPU-scale study (micro, mini, midi)",
              preset_sweeps(("midi", "mini", "micro"))),
        Entry("depth", "rrlib.runs.sweep", "page 02: the depth ablation (2 to 24 blocks)",
              preset_sweeps(("depth24", "depth20", "depth16", "depth12", "depth8", "depth4", "depth2"))),
        Entry("size_tokens", "rrlib.runs.sweep", "page 06: the size x tokens grid",
              preset_sweeps(("mini_steps1200", "micro_steps1200", "mini_steps300", "micro_steps300", "mini_steps100",
                             "micro_steps100"))),
        Entry("recipe_ablation", "rrlib.runs.sweep", "page 04: rrlib's recipe against the paper's at mini",
              preset_sweeps(("mini_paper", "mini"), "outputs/recipe", seed_major=True)),
        Entry("family", "rrlib.runs.sweep", "page 05: every method of the family at micro's width",
              preset_sweeps(("family",)), board=preset_board("family")),
        Entry("family_mini", "rrlib.runs.sweep", "page 05: the family at mini's width",
              preset_sweeps(("family_mini",)), board=preset_board("family_mini")),
        Entry("looped_grid", "rrlib.studies.looped_study", "page 05: the looped learning-rate study",
              looped_plan("grid")),
        Entry("looped_power", "rrlib.studies.looped_study", "page 05: the powered looped design",
              looped_plan("power")),
        Entry("power_pilot", "rrlib.studies.power_study", "pages 04, 05: the powered designs' pilot (seeds 0-3)",
              preset_sweeps(POWER_PILOT, POWER_RUNS, seeds=range(4), extra=("--device", "cpu"))),
        *[Entry(n, "rrlib.studies.power_study", "pages 04, 05: a powered design through compare", power_plan(n),
                board=power_board(n)) for n in POWER_DESIGNS],
        Entry("claims_family", "rrlib.studies.claims_study", "page 07: the family retrained with its weights, probed",
              claims_plan("family")),
        Entry("claims_depth", "rrlib.studies.claims_study", "page 07: four rules at 8-24 blocks, probed",
              claims_plan("depth")),
        Entry("claims_conversion", "rrlib.studies.claims_study", "page 07: standard converted into Delta AttnRes",
              claims_plan("conversion")),
        Entry("conversion_fresh", "rrlib.studies.claims_study", "page 07: the conversion's non-inferiority design "
              "on fresh seeds", claims_plan("conversion_fresh")),
        *reach, loop_norms,
        Entry("unique_layers", "rrlib.studies.looped_study", "page 07: the looped L sweep",
              looped_plan("unique_layers")),
        *controls,
        Entry("leaderboard", "rrlib.studies.leaderboard_study", "page 08: every rule against standard at "
              "family_power", leaderboard_plan,
              board=Board(leaderboard_study.SIZE, leaderboard_study.BASELINE, leaderboard_study.SEEDS,
                          leaderboard_study.RUNS, leaderboard_study.board)),
    ]


STUDIES: dict[str, Entry] = {e.name: e for e in _entries()}
