"""What the report's notebooks share: figure style and export, offline plotly, run folders, and gate probes.

The notebooks call these so that they hold prose and plots only. Nothing here trains: models are built and
run through ``rrlib.model`` / ``rrlib.train``, and the gate is always the rule's own ``gate`` method.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch

from .config import PARAMS_DIR, RunConfig, resolve_run, run_folder
from .data import fixed_eval_windows
from .model import GPT
from .train import load_run_data, project_path, read_result, train_run

# One colour per residual rule, the same in every figure of the report.
VARIANT_COLORS = {
    "review": "#1f77b4", "review_convex": "#9ecae1", "highway": "#d62728", "highway_convex": "#fc9272",
    "standard": "#2ca02c", "rezero": "#9467bd", "layerscale": "#8c564b", "scaled": "#7f7f7f",
}


def use_style() -> None:
    """The report's matplotlib look: seaborn's whitegrid, readable sizes, PNG output."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "figure.autolayout": True})


def color(variant: str) -> str:
    return VARIANT_COLORS.get(variant, "#333333")


def save_figure(fig, name: str, figures_dir=None) -> Path | None:
    """Write ``fig`` as ``<figures_dir>/<name>.png`` (the report's figure export); no-op without a folder."""
    if figures_dir is None:
        return None
    folder = project_path(figures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, bbox_inches="tight")
    return path


_plotly_js_shown = False


def show_plotly(fig) -> None:
    """Display a plotly figure as self-contained HTML: plotly.js is inlined once per kernel, never a CDN.

    Rendered notebooks then work offline, and the figure survives nbconvert as ordinary HTML.
    """
    from IPython.display import HTML, display

    global _plotly_js_shown
    html = fig.to_html(full_html=False, include_plotlyjs=not _plotly_js_shown, include_mathjax=False,
                       default_width="100%", config={"displaylogo": False})
    _plotly_js_shown = True
    display(HTML(html))


# ---------------------------------------------------------------- run folders

def standalone_sizes(sizes) -> list[str]:
    """The sizes that are presets of their own (``params/<size>.yaml``), in the order given.

    Members of a series preset (``depth<L>``, ``looped<N>``) vary one dial at a fixed width; they are not points
    on the scale axis and belong to their own notebooks.
    """
    own = {p.stem for p in PARAMS_DIR.glob("*.yaml")}
    return [s for s in sizes if s in own]


def read_metrics(run_dir) -> pd.DataFrame:
    """The training log of one run folder (logged steps only, not the periodic evaluations)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return pd.DataFrame(columns=["step", "loss"])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return pd.DataFrame([r for r in rows if "loss" in r])


def loss_curves(out_root, size: str, variants, seeds) -> pd.DataFrame:
    """Training loss of every finished (variant, seed) run of a size, against steps and training FLOPs.

    FLOPs per step come from the run's own result (tokens per step × FLOPs per token), so variants that
    cost different amounts per step are compared at equal compute.
    """
    frames = []
    for variant in variants:
        for seed in seeds:
            folder = run_folder(out_root, size, variant, seed)
            result = read_result(folder)
            if result is None or not result["steps"]:
                continue
            log = read_metrics(folder)
            flops_per_step = result["tokens"] / result["steps"] * result["flops_per_token"]
            frames.append(log.assign(size=size, variant=variant, seed=seed, flops=log["step"] * flops_per_step))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["step", "loss", "size", "variant", "seed", "flops"])


def trained_model(size: str, variant: str = "review", seed: int = 0, out_root="outputs/runs",
                  local_out_root="build/runs") -> tuple[GPT, RunConfig, Path]:
    """A trained model from its run folder's checkpoint, training the run first if no checkpoint exists.

    Results are kept with the project but checkpoints are not: when ``out_root`` has the run's result and
    no checkpoint, the run is trained again under ``local_out_root``, so a kept result is never rewritten.
    Returns (model in eval mode, its resolved config, the run folder).
    """
    folder = run_folder(out_root, size, variant, seed)
    if read_result(folder) is None:  # never run, or stopped: train it (resuming from its checkpoint)
        train_run(resolve_run(size, variant, seed, out_root=str(out_root)))
    elif not (folder / "ckpt.pt").exists():
        train_run(resolve_run(size, variant, seed, out_root=str(local_out_root)))
        folder = run_folder(local_out_root, size, variant, seed)
    run = RunConfig.from_dict(json.loads((folder / "config.json").read_text())["config"])
    model = GPT(run.model)
    model.load_state_dict(torch.load(folder / "ckpt.pt", map_location="cpu", weights_only=True)["model"])
    return model.eval(), run, folder


def heldout_batch(run: RunConfig, n_windows: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n_windows`` windows of the run's fixed held-out set, read as the training code reads it."""
    data = load_run_data(run)
    return next(iter(fixed_eval_windows(data.heldout, run.model.seq_len, batch_size=n_windows)))


# ---------------------------------------------------------------- gates

def gate_records(model: GPT, idx: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(h, u, r) at every sublayer application of one forward pass of ``model`` on ``idx``.

    The model runs its own forward; the rule's ``gate`` is wrapped for the pass, so whatever the gate
    computes is what is recorded. Only rules with a gate (``review``, ``review_convex``) can be probed.
    """
    rule = model.rule
    if not hasattr(rule, "gate"):
        raise ValueError(f"the {model.cfg.variant!r} rule has no review gate; probe review or review_convex")
    records = []
    gate = rule.gate

    def recording_gate(h, i, u):
        r = gate(h, i, u)
        records.append((h.detach(), u.detach(), r.detach()))
        return r

    rule.gate = recording_gate  # an instance attribute shadows the method for this pass only
    try:
        with torch.no_grad():
            model(idx)
    finally:
        del rule.gate
    return records


def gate_activity(model: GPT, idx: torch.Tensor) -> list[torch.Tensor]:
    """r, shaped like the residual stream (B, T, d), at every sublayer application."""
    return [r for _, _, r in gate_records(model, idx)]


def sublayer_names(model: GPT) -> list[str]:
    """attn0, mlp0, attn1, ... for every sublayer application (loops repeat the names)."""
    return [f"{'attn' if i % 2 == 0 else 'mlp'}{model.shape.unique(i) // 2}" for i in range(model.shape.n_steps)]


def gate_table(model: GPT, idx: torch.Tensor) -> pd.DataFrame:
    """One row per (sublayer, token): mean r over channels, ‖u‖/‖h‖ and cos(u, h)."""
    frames = []
    for i, (name, (h, u, r)) in enumerate(zip(sublayer_names(model), gate_records(model, idx))):
        h, u = h.flatten(0, -2), u.flatten(0, -2)
        frames.append(pd.DataFrame({
            "sublayer": name, "index": i, "kind": name.rstrip("0123456789"),
            "r_mean": r.flatten(0, -2).mean(-1).numpy(), "r_std": r.flatten(0, -2).std(-1).numpy(),
            "update_norm": (u.norm(dim=-1) / h.norm(dim=-1)).numpy(),
            "cosine": torch.nn.functional.cosine_similarity(u, h, dim=-1).numpy(),
        }))
    return pd.concat(frames, ignore_index=True)


def probe_gate(model: GPT, i: int, h: torch.Tensor, v: torch.Tensor, cosine, scale) -> torch.Tensor:
    """r of sublayer ``i``'s own gate for synthetic proposals u beside a real state h, shape (..., d).

    u = scale·‖h‖·(c·ĥ + √(1−c²)·ŵ), with c = ``cosine`` and ŵ the unit part of ``v`` orthogonal to h (e.g. the
    update the model really proposed there). ``cosine`` and ``scale`` broadcast against each other.
    """
    h_hat = h / h.norm()
    w = v - (v @ h_hat) * h_hat
    w_hat = w / w.norm()
    c = torch.as_tensor(cosine, dtype=h.dtype)[..., None]
    s = torch.as_tensor(scale, dtype=h.dtype)[..., None]
    u = s * h.norm() * (c * h_hat + torch.sqrt(torch.clamp(1 - c**2, min=0)) * w_hat)
    with torch.no_grad():
        return model.rule.gate(h.expand_as(u), i, u)


def position_grad_norm(model: GPT, x: torch.Tensor, y: torch.Tensor) -> float:
    """‖∂loss/∂W_pos‖ for one batch: the gradient that reaches the bottom of the network.

    Position embeddings, not token embeddings: the token table is tied to the head, so its gradient is
    mostly the head's and says nothing about what flows down through depth.
    """
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y)
    loss.backward()
    norm = model.wpe.weight.grad.norm().item()
    model.zero_grad(set_to_none=True)
    return norm


def provenance(results: pd.DataFrame) -> pd.DataFrame:
    """What produced a table of runs, per size: commit, device, precision, data, torch (from the result files)."""
    columns = [c for c in ("git_commit", "device", "precision", "data_source", "torch_version") if c in results]
    return (results.groupby("size")[columns].agg(lambda s: ", ".join(sorted(set(map(str, s.dropna())))))
            .assign(runs=results.groupby("size").size()))
