"""The report's notebooks in reading order, and what a build reads off each before running it: its jupytext source,
its parameters cell, and the sweeps its parameters name (what it would train when results are missing)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..home import NOTEBOOK_DIR, PROJECT_ROOT  # torch-free: `report --help` lists NOTEBOOKS


@dataclass(frozen=True)
class Notebook:
    name: str  # notebooks/<name>.py
    blurb: str  # one line for the index
    per_size: bool = False  # executed once per size, with its parameter `size`
    quick: dict = field(default_factory=dict)  # parameters of a --quick build
    requires: str | None = None  # a size whose results a full build needs; without them it skips the notebook
    summary: bool = False  # reads the other pages' tables: built after them, listed before them in the index
    own_roots: tuple = ()  # run roots beside the runs' (outputs/<root>) that only the pages naming them read


# The report, in reading order: adding a notebook is one line.
NOTEBOOKS = (
    Notebook("01_mechanism", "What a Review gate computes at initialisation, why the identity path matters, and "
             "what trained gates do.", quick={"size": "tiny", "n_windows": 4}),
    Notebook("02_depth_stability", "Convex against additive residuals from shallow to deep models: training, "
             "final loss and the gradient reaching the embeddings.",
             quick={"depths": [2, 4], "seeds": [0], "steps": 20, "grad_windows": 2}),
    Notebook("03_sweep", "One size: every variant and seed, training curves at equal compute, the results "
             "table.", per_size=True),
    Notebook("04_statistics", "The paper's runs and ours through the same tests: Welch beside paired with Holm, "
             "intervals, the emergence curve, calibration, tokens per parameter.",
             quick={"n_boot": 1000, "exclude_sizes": []}, own_roots=("power",)),
    Notebook("05_related_methods", "The family in one harness: AttnRes, Block and Delta AttnRes, MGR, "
             "Hyper-Connections and mHC beside Review and standard, and learning-rate transfer in looped models.",
             quick={"size": "tiny", "variants": ["standard", "review", "attnres", "attnres_block", "delta_attnres",
                                                 "mgr", "hc", "mhc"], "seeds": [0], "loops": [1, 2],
                    "lrs": [0.002, 0.004], "loop_seeds": [0], "loop_steps": 4, "train_looped": True, "edge_root": None,
                    "power_loop_root": None,
                    "wide_size": None},
             requires="family", own_roots=("power",)),
    Notebook("06_size_vs_tokens", "Scale or undertraining: Review's gap over a grid of two model sizes × three "
             "token budgets, regressed on log size and log tokens per parameter, beside the paper's sizes.",
             quick={"grid_sizes": ["tiny"]}, requires="mini_steps1200"),
    Notebook("07_claims", "The claims ledger: every headline claim of the papers, its test here, effect, "
             "interval and verdict, with the evidence it rests on.",
             quick={"family_size": "tiny", "wide_size": None, "claims_size": "tiny", "seeds": [0, 1],
                    "claims_variants": ["standard", "review", "attnres", "attnres_block", "delta_attnres",
                                        "delta_attnres_block", "mgr"],
                    "depth_sizes": ["tiny"], "depth_seeds": [0, 1], "convert_size": "tiny", "convert_seeds": [0, 1],
                    "train_missing": True, "gate_size": "tiny", "gate_windows": 4,
                    "exclude_sizes": [], "power_loop_root": None},
             requires="family", summary=True,
             # and the roots of the studies that answer the rows registered for the CPU's reach (their designs:
             # rrlib.studies.depth_reach_study, looped_reach_study), so their runs reach only this page's inputs
             own_roots=("claims", "convert", "convert_gated", "highway_depth", "layerscale_depth", "rezero_depth",
                        "rezero_speed", "mechanisms", "loop_norms", "looped_unique", "highway_control", "highway_rates",
                        "highway_horizon", "rezero_control", "rezero_horizon", "layerscale_eps", "layerscale_rates",
                        "layerscale_horizon", "attnres_outputs")),
    Notebook("08_leaderboard", "The leaderboard: every rule of the family against standard at one size, sorted by "
             "the paired gap, with its verdict, detectable gap, parameters, FLOPs and step time per FLOP.",
             own_roots=("power",)),
)
# Every run root beside the runs' folder that some page reads (outputs/<root>): the report checks these, and only
# these, before any page runs; another folder beside --runs is not the report's.
SIDE_ROOTS = ("looped_grid", "looped_edges", "looped_power", "recipe", *sorted({r for nb in NOTEBOOKS for r in nb.own_roots}))
QUICK_SIZES = ["tiny"]  # the smoke-test size: seconds on a CPU, so a build trains its missing runs unasked


def _train_overrides(values: dict) -> dict:
    """A page's overrides as its notebook builds them: ``settings`` by section, then steps/device/precision."""
    overrides = {section: dict(v) for section, v in (values.get("settings") or {}).items()}
    overrides["train"] = {**overrides.get("train", {}),
                          **{k: values[k] for k in ("steps", "device", "precision") if values.get(k) is not None}}
    return overrides


def _size_sweep(values: dict) -> list[tuple]:
    return [(values["size"], values.get("variants"), values.get("seeds"), _train_overrides(values))]


def _depth_sweeps(values: dict) -> list[tuple]:
    from ..runs.presets import available_sizes

    depths = values.get("depths") or [int(s[5:]) for s in available_sizes()
                                       if s.startswith("depth") and s[5:].isdigit()]
    return [(f"depth{L}", values.get("variants"), values.get("seeds"), _train_overrides(values)) for L in depths]


# The sweeps a page reads, as (size, variants, seeds, overrides), from its parameters: what it would train when
# results are missing. (Notebook 05's looped sweeps and notebook 06 wait for their `requires` size instead.)
SWEEPS = {"02_depth_stability": _depth_sweeps, "03_sweep": _size_sweep, "05_related_methods": _size_sweep}


def shown(path: Path) -> str:
    """A path as a notebook parameter: relative to the project root, where papermill runs (no machine paths)."""
    return Path(os.path.relpath(os.path.abspath(path), PROJECT_ROOT)).as_posix()


def notebook_source(nb: Notebook):
    """The notebook the report executes: its jupytext source ``notebooks/<name>.py``, once it agrees with the
    paired ``.ipynb`` (jupytext metadata ``formats: ipynb,py:percent``; JupyterLab with jupytext saves both, and
    ``jupytext --sync`` carries an edit made elsewhere from the newer file to the other)."""
    import jupytext

    from ..runs.config import ConfigError

    path = NOTEBOOK_DIR / f"{nb.name}.py"
    if not path.exists():
        raise ConfigError(f"notebook source {shown(path)} is missing; valid notebooks: "
                          f"{', '.join(n.name for n in NOTEBOOKS)}")
    source = jupytext.read(path)
    paired = path.with_suffix(".ipynb")
    if paired.exists() and _cells(jupytext.read(paired)) != _cells(source):
        newer = paired if paired.stat().st_mtime > path.stat().st_mtime else path
        raise ConfigError(f"{shown(paired)} and {shown(path)} differ ({newer.name} is newer); carry the edit to "
                          f"the other with `jupytext --sync {shown(newer)}`")
    return source


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def declared_parameters(notebook) -> set[str]:
    """Names assigned in the notebook's one cell tagged ``parameters``."""
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"a notebook needs exactly one cell tagged 'parameters', found {len(cells)}")
    return set(re.findall(r"^(\w+)\s*=", cells[0].source, re.M))


def parameter_values(notebook) -> dict:
    """The values of the parameters cell, as written (literals only: the cell is read, never executed)."""
    import ast

    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    return {t.id: ast.literal_eval(node.value) for node in ast.parse(cell.source).body
            if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
