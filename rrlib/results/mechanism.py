"""Page 01's results: what a Review gate computes, at initialisation and trained, read from one run folder.

Every function reads the Review run ``<out_root>/<size>/review/seed<seed>`` (the model it measures is built from
its resolved config, or loaded from its kept weights by ``rrlib.runs.loading.trained_model``) on the first
``n_windows`` windows of its fixed held-out set, and measures it with ``rrlib.studies.gates``. The trained model
is read in float64: in float32 the gates differ between CPUs (other SIMD kernels) by about 1e-7, enough to move a
Spearman rho in its 5th digit; in float64 the differences (about 1e-16) stay far below any digit a page writes.

Columns (every table is one row per sublayer application, ``attn0, mlp0, attn1, ...``, unless it says otherwise):

- ``gates_per_sublayer``: index ``sublayer``; ``r_mean``, ``r_sd`` (n − 1), ``r_p10``, ``r_p90``: the trained gate
  r over every token and channel of the held-out windows.
- ``gate_tokens``: one row per (sublayer, token): ``sublayer``, ``index`` (its position in depth), ``kind``
  (attn or mlp), ``r_mean`` and ``r_std`` (over channels), ``update_norm`` (‖u‖/‖h‖), ``cosine`` (cos(u, h)).
- ``gate_correlation``: index ``sublayer``; ``rho_update_norm``, ``rho_cosine``: Spearman's rho of a token's
  ``r_mean`` with its ``update_norm`` and with its ``cosine``, over the tokens of ``gate_tokens`` as a page
  stores them (rounded to ``GATE_DIGITS`` significant digits).
- ``gate_sample``: ``sublayer``, ``r``: a fixed random sample of each sublayer's r values (for a distribution).
- ``gate_probe``: one row per (sublayer, scale, cosine): ``sublayer``, ``index``, ``scale`` (‖u‖/‖h‖),
  ``cosine``, ``r_mean`` (over channels): the trained gate's response to synthetic proposals beside the real
  state of one held-out token (``rrlib.studies.gates.probe_gate``).
- ``carry_product``: index ``sublayers`` (1 … max); one column per gate value r (the number itself): the convex
  form's ∏(1 − r) over the sublayers (the additive forms' is 1: their identity path is never gated). Reads no run.

``init_gates``, ``probed_run`` and ``gate_summary`` return the dataclasses below.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import torch

from ..model import GPT
from ..runs import loading
from ..runs.config import run_folder
from ..runs.presets import resolve_run
from ..stats.digits import round_significant
from ..studies import gates
from . import result

OUT_ROOT = "outputs/runs"
LOCAL_OUT_ROOT = "build/runs"  # where the run is trained again when out_root keeps its result but no weights
N_WINDOWS = 16
SAMPLE = 20_000  # r values per sublayer in ``gate_sample``
SCALES = (0.1, 1.0, 10.0)  # ‖u‖/‖h‖ of the probe: a 100-fold range
N_COSINES = 41
GATE_DIGITS = 5  # the significant digits a page stores per-token values in (rrlib.views.tables.SIGNIFICANT)


def _run_roots(size, seed=0, n_windows=N_WINDOWS, out_root=OUT_ROOT, local_out_root=LOCAL_OUT_ROOT, **_):
    return [run_folder(out_root, size, "review", seed), run_folder(local_out_root, size, "review", seed)]


def _reading(size, seed, n_windows, out_root, local_out_root) -> dict:
    """One call's arguments as keywords, so that a result that reads another hits the page's own call in memo."""
    return {"size": size, "seed": seed, "n_windows": n_windows, "out_root": out_root, "local_out_root": local_out_root}


def _heldout(size: str, seed: int, n_windows: int, out_root) -> torch.Tensor:
    """The held-out windows every gate is read on (inputs only)."""
    return loading.heldout_batch(resolve_run(size, "review", seed, out_root=str(out_root)), n_windows)[0]


def _trained(size: str, seed: int, out_root, local_out_root) -> tuple[GPT, object]:
    """The trained Review model in float64, and its resolved config."""
    model, run, _ = loading.trained_model(size, "review", seed, out_root, local_out_root)
    return model.double(), run


@dataclasses.dataclass(frozen=True)
class InitGates:
    """Every gate of a freshly built Review model (torch seed 0) on the held-out windows."""

    gates: int  # gate applications (two per block)
    tokens: int  # tokens read
    channels: int  # d_model
    values: int  # gates × tokens × channels
    r_min: float
    r_max: float


@result(_run_roots)
def init_gates(size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
               local_out_root=LOCAL_OUT_ROOT) -> InitGates:
    """The gate at initialisation: W_r = 0 and b_r = 0 make every r = σ(0) = 0.5 (``local_out_root`` unused)."""
    run = resolve_run(size, "review", seed, out_root=str(out_root))
    torch.manual_seed(0)
    fresh = GPT(run.model).eval()
    x = _heldout(size, seed, n_windows, out_root)
    r = torch.cat([r.flatten() for r in gates.gate_activity(fresh, x)])
    return InitGates(gates=fresh.shape.n_steps, tokens=x.numel(), channels=run.model.d_model, values=r.numel(),
                     r_min=r.min().item(), r_max=r.max().item())


@result(lambda *args, **kwargs: ())
def carry_product(max_sublayers: int = 48, gate_values=(0.1, 0.3, 0.5, 0.7)) -> pd.DataFrame:
    """The weight of the embedding x0 on the convex form's direct path after n sublayers at each constant gate
    value r: ∏(1 − r). (The additive forms keep it at 1: their identity path is never gated.)"""
    return pd.DataFrame({r: np.cumprod(np.full(max_sublayers, 1 - r)) for r in gate_values},
                        index=pd.Index(np.arange(1, max_sublayers + 1), name="sublayers"))


@dataclasses.dataclass(frozen=True)
class ProbedRun:
    """The trained run the gates are read from."""

    size: str
    d_model: int
    n_layers: int  # blocks
    steps: int  # training steps
    params: int


@result(_run_roots)
def probed_run(size: str, seed: int = 0, out_root=OUT_ROOT, local_out_root=LOCAL_OUT_ROOT) -> ProbedRun:
    model, run = _trained(size, seed, out_root, local_out_root)
    return ProbedRun(size=run.size, d_model=run.model.d_model, n_layers=run.model.n_layers, steps=run.train.steps,
                     params=model.n_params())


def _gate_values(size, seed, n_windows, out_root, local_out_root) -> tuple[list[str], list[torch.Tensor]]:
    model, _ = _trained(size, seed, out_root, local_out_root)
    x = _heldout(size, seed, n_windows, out_root)
    return gates.sublayer_names(model), [r.flatten() for r in gates.gate_activity(model, x)]


@result(_run_roots)
def gates_per_sublayer(size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
                       local_out_root=LOCAL_OUT_ROOT) -> pd.DataFrame:
    """The trained gate's r per sublayer over every held-out token and channel: mean, SD, 10th and 90th
    percentiles."""
    names, values = _gate_values(size, seed, n_windows, out_root, local_out_root)
    return pd.DataFrame([{"r_mean": r.mean().item(), "r_sd": r.std().item(), "r_p10": r.quantile(0.1).item(),
                          "r_p90": r.quantile(0.9).item()} for r in values], index=pd.Index(names, name="sublayer"))


@result(_run_roots)
def gate_sample(size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
                local_out_root=LOCAL_OUT_ROOT, *, n: int = SAMPLE) -> pd.DataFrame:
    """``n`` of each sublayer's r values, drawn without replacement by one generator seeded 0, sublayers in order
    (so that a figure drawn from it is the same on every build)."""
    names, values = _gate_values(size, seed, n_windows, out_root, local_out_root)
    draw = torch.Generator().manual_seed(0)
    return pd.concat([pd.DataFrame({"sublayer": name, "r": r[torch.randperm(len(r), generator=draw)[:n]].numpy()})
                      for name, r in zip(names, values)], ignore_index=True)


@result(_run_roots)
def gate_tokens(size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
                local_out_root=LOCAL_OUT_ROOT) -> pd.DataFrame:
    """One row per (sublayer, held-out token): the gate's mean r over channels beside the update it reviews."""
    model, _ = _trained(size, seed, out_root, local_out_root)
    return gates.gate_table(model, _heldout(size, seed, n_windows, out_root))


@result(_run_roots)
def gate_correlation(size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
                     local_out_root=LOCAL_OUT_ROOT) -> pd.DataFrame:
    """Per sublayer, Spearman's rho of a token's mean r with the update's relative size and with its cosine to
    the state. Ranked on the stored values, so that it reads the same on another CPU."""
    tokens = gate_tokens(**_reading(size, seed, n_windows, out_root, local_out_root))
    for column in ("r_mean", "update_norm", "cosine"):
        tokens[column] = tokens[column].map(lambda x: round_significant(x, GATE_DIGITS))
    rho = tokens.groupby("sublayer", sort=False)[["r_mean", "update_norm", "cosine"]].corr(method="spearman")
    return (rho.xs("r_mean", level=1)[["update_norm", "cosine"]]
            .rename(columns={"update_norm": "rho_update_norm", "cosine": "rho_cosine"}))


class GateExplorer:
    """The trained gate of every sublayer, probed at one held-out token (position ``T // 2`` of the first window)
    with synthetic proposals: what a page's live controls call. Holds the model, so it is built, not cached."""

    def __init__(self, size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
                 local_out_root=LOCAL_OUT_ROOT):
        self.model, _ = _trained(size, seed, out_root, local_out_root)
        x = _heldout(size, seed, n_windows, out_root)
        self.sublayers = gates.sublayer_names(self.model)
        token = (0, x.shape[1] // 2)
        self._states = [(h[token], u[token]) for h, u, _ in gates.gate_records(self.model, x)]

    def r(self, i: int, cosine, scale) -> torch.Tensor:
        """r per channel of sublayer application ``i`` for proposals at ``cosine`` with the state and ``scale``
        times its norm (both broadcast: ``(..., d)``)."""
        h, u = self._states[i]
        return gates.probe_gate(self.model, i, h, u, cosine, scale)


@result(_run_roots)
def gate_probe(size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
               local_out_root=LOCAL_OUT_ROOT, *, scales=SCALES, n_cosines: int = N_COSINES) -> pd.DataFrame:
    """The trained gate's mean r over channels for proposals swept over ``n_cosines`` cosines in [−1, 1] at each
    of ``scales``, every sublayer at one held-out token (``GateExplorer``)."""
    explorer = GateExplorer(size, seed, n_windows, out_root, local_out_root)
    cosines = torch.linspace(-1, 1, n_cosines, dtype=torch.float64)  # float32 linspace differs between kernels
    return pd.concat([pd.DataFrame({"sublayer": name, "index": i, "scale": scale, "cosine": cosines.numpy(),
                                    "r_mean": explorer.r(i, cosines, scale).mean(-1).numpy()})
                      for i, name in enumerate(explorer.sublayers) for scale in scales], ignore_index=True)


@dataclasses.dataclass(frozen=True)
class GateSummary:
    """The page's recap of the trained gates."""

    r_mean_low: float  # the lowest mean r of any sublayer, and that sublayer
    r_mean_low_sublayer: str
    r_mean_high: float
    r_mean_high_sublayer: str
    r_sd_average: float  # the within-sublayer SD of r, averaged over sublayers
    strongest_sublayer: str  # the sublayer whose r follows the update's direction most (largest |rho_cosine|)
    strongest_rho_cosine: float
    scale_effect: float  # the most a 100-fold change of the proposal's size moves mean r (any sublayer, cosine)
    direction_effect: float  # how far sweeping the proposal's direction moves mean r, averaged over (sublayer, scale)

    @property
    def reviews_direction(self) -> bool:
        """Whether the gate responds to what an update says, not how loudly: size moves r less than a tenth as
        much as direction."""
        return self.scale_effect < self.direction_effect / 10


@result(_run_roots)
def gate_summary(size: str, seed: int = 0, n_windows: int = N_WINDOWS, out_root=OUT_ROOT,
                 local_out_root=LOCAL_OUT_ROOT) -> GateSummary:
    reading = _reading(size, seed, n_windows, out_root, local_out_root)
    per_sublayer = gates_per_sublayer(**reading)
    rho = gate_correlation(**reading)["rho_cosine"]
    probe = gate_probe(**reading)

    def spread(by):  # how far mean r moves within each group of probes
        return probe.groupby(by, sort=False)["r_mean"].agg(lambda r: r.max() - r.min())

    strongest = rho.abs().idxmax()
    return GateSummary(r_mean_low=per_sublayer["r_mean"].min(), r_mean_low_sublayer=per_sublayer["r_mean"].idxmin(),
                       r_mean_high=per_sublayer["r_mean"].max(), r_mean_high_sublayer=per_sublayer["r_mean"].idxmax(),
                       r_sd_average=per_sublayer["r_sd"].mean(), strongest_sublayer=strongest,
                       strongest_rho_cosine=rho[strongest], scale_effect=spread(["index", "cosine"]).max(),
                       direction_effect=spread(["index", "scale"]).mean())
