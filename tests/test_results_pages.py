"""Pages 01, 02 and 06's results (rrlib.results.mechanism, depth and size_tokens) against numbers computed here
another way from the committed runs (result files read with json, the gate written out from its weights, the tests
with scipy, the fit with numpy), and against the pages' committed tables byte for byte, as the pages write them;
every column a name its module documents."""
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as scipy_stats

from rrlib.model import GPT
from rrlib.views import tables
from rrlib.results import depth, mechanism, size_tokens
from rrlib.runs import loading
from rrlib.runs.presets import resolve_run
from rrlib.studies import gates

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "paper" / "tables"
RUNS = ROOT / "outputs" / "runs"
NAME = re.compile(r"^[a-z][A-Za-z0-9_]*$")  # a name a program reads (params_M): no spaces, units or signs
VARIANT_COLUMNS = set(depth.VARIANTS) | set(size_tokens.VARIANTS)  # a table's columns per variant, by its name


def as_stored(table: pd.DataFrame, digits: int = tables.STORED_DIGITS, index: bool = True) -> str:
    """``table`` as a page writes it (rrlib.views.tables: rounded, then CSV)."""
    return tables.rounded(table, digits).to_csv(index=index)


def committed(name: str) -> str:
    return (PAGE / f"{name}.csv").read_text(encoding="utf-8")


def documented(module, table: pd.DataFrame, skip=()) -> list[str]:
    """The columns and index names of ``table`` that are not program names its module's docstring names."""
    names = [c for c in table.columns if c not in VARIANT_COLUMNS and c not in skip]
    names += [n for n in table.index.names if n is not None]
    return [n for n in names if not (isinstance(n, str) and NAME.match(n) and f"``{n}``" in module.__doc__)]


def result_files(size: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((RUNS / size).glob("*/seed*/result.json"))]


# page 01: the gate


@pytest.fixture(scope="module")
def trained(data):
    """The trained mini Review model in float64 and the held-out windows page 01 reads, loaded here."""
    model, run, _ = loading.trained_model("mini", "review", 0)
    x, _ = loading.heldout_batch(resolve_run("mini", "review", 0), mechanism.N_WINDOWS)
    return model.double(), x


def test_a_fresh_gate_reads_one_half_everywhere(data):
    init = mechanism.init_gates("mini")
    assert (init.r_min, init.r_max) == (0.5, 0.5)
    assert init.gates == 2 * 4 and init.channels == 128 and init.tokens == mechanism.N_WINDOWS * 128
    assert init.values == init.gates * init.tokens * init.channels


def test_the_carry_product_is_the_closed_form():
    carry = mechanism.carry_product(48, (0.1, 0.5))
    assert list(carry.index) == list(range(1, 49)) and carry.index.name == "sublayers"
    assert carry.loc[40, 0.5] == pytest.approx(0.5**40, rel=1e-12)
    assert carry.loc[7, 0.1] == pytest.approx(0.9**7, rel=1e-12)


def test_the_gates_per_sublayer_recompute_from_the_per_token_table_and_match_the_page(trained):
    per_sublayer = mechanism.gates_per_sublayer("mini")
    tokens = mechanism.gate_tokens("mini")
    assert list(per_sublayer.index) == ["attn0", "mlp0", "attn1", "mlp1", "attn2", "mlp2", "attn3", "mlp3"]
    # every token has d channels, so the mean over (token, channel) is the mean of the per-token means
    by_token = tokens.groupby("sublayer", sort=False)["r_mean"].mean()
    assert per_sublayer["r_mean"].to_numpy() == pytest.approx(by_token[per_sublayer.index].to_numpy(), rel=1e-10)
    assert (per_sublayer["r_p10"] < per_sublayer["r_mean"]).all() and (per_sublayer["r_mean"]
                                                                        < per_sublayer["r_p90"]).all()
    r = gates.gate_activity(trained[0], trained[1])[5].flatten().numpy()  # mlp2, read here
    assert (per_sublayer.loc["mlp2", "r_sd"], per_sublayer.loc["mlp2", "r_p90"]) == pytest.approx(
        (r.std(ddof=1), np.quantile(r, 0.9)), rel=1e-9)
    page = per_sublayer.rename(columns={"r_mean": "mean r", "r_sd": "sd r", "r_p10": "p10", "r_p90": "p90"})
    assert as_stored(page.rename_axis(None), tables.SIGNIFICANT) == committed("01_gates_per_sublayer")


def test_the_gate_correlation_recomputes_with_scipy_and_matches_the_page(data):
    tokens = tables.rounded(mechanism.gate_tokens("mini"))  # as the page stores per-token values
    correlation = mechanism.gate_correlation("mini")
    for sublayer, part in tokens.groupby("sublayer", sort=False):
        rho_norm = scipy_stats.spearmanr(part["r_mean"], part["update_norm"]).statistic
        rho_cos = scipy_stats.spearmanr(part["r_mean"], part["cosine"]).statistic
        assert (correlation.loc[sublayer, "rho_update_norm"], correlation.loc[sublayer, "rho_cosine"]) == \
            pytest.approx((rho_norm, rho_cos), rel=1e-9)
    page = correlation.rename(columns={"rho_update_norm": "ρ(r, ‖u‖/‖h‖)", "rho_cosine": "ρ(r, cos)"})
    assert as_stored(page, tables.SIGNIFICANT) == committed("01_gate_correlation")


def test_the_probe_is_the_gate_formula_written_out(trained):
    model, x = trained
    probe = mechanism.gate_probe("mini")
    assert len(probe) == 8 * len(mechanism.SCALES) * mechanism.N_COSINES
    h, u, _ = gates.gate_records(model, x)[3]  # mlp1, at the page's token
    h, u = h[0, x.shape[1] // 2], u[0, x.shape[1] // 2]
    weight, bias = model.rule.gates[3].weight, model.rule.gates[3].bias
    for cosine, scale in ((-0.5, 0.1), (0.9, 10.0)):
        h_hat = h / h.norm()
        w = u - (u @ h_hat) * h_hat
        proposal = scale * h.norm() * (cosine * h_hat + np.sqrt(1 - cosine**2) * w / w.norm())
        rms = [v / torch.sqrt((v**2).mean() + 1e-5) for v in (h, proposal)]  # the rules' RMS_EPS
        r = torch.sigmoid(weight @ torch.cat(rms) + bias).mean().item()
        row = probe[(probe["index"] == 3) & (probe["scale"] == scale) & np.isclose(probe["cosine"], cosine)]
        assert row["sublayer"].item() == "mlp1" and row["r_mean"].item() == pytest.approx(r, rel=1e-6)


def test_the_gate_summary_reads_its_tables(data):
    summary = mechanism.gate_summary("mini")
    per_sublayer, correlation = mechanism.gates_per_sublayer("mini"), mechanism.gate_correlation("mini")
    assert (summary.r_mean_low_sublayer, summary.r_mean_high) == (per_sublayer["r_mean"].idxmin(),
                                                                  per_sublayer["r_mean"].max())
    assert summary.r_sd_average == pytest.approx(per_sublayer["r_sd"].mean())
    assert summary.strongest_sublayer == correlation["rho_cosine"].abs().idxmax() == "mlp2"
    probe = mechanism.gate_probe("mini")
    widest = probe.groupby(["index", "cosine"])["r_mean"].agg(np.ptp).max()
    assert summary.scale_effect == pytest.approx(widest) and summary.reviews_direction


def test_the_mechanism_tables_name_their_columns(data):
    for table in (mechanism.gates_per_sublayer("mini"), mechanism.gate_tokens("mini"),
                  mechanism.gate_correlation("mini"), mechanism.gate_sample("mini", n=10),
                  mechanism.gate_probe("mini")):
        assert documented(mechanism, table) == []


# page 02: depth


def test_the_depth_runs_are_the_result_files_and_the_page_table():
    runs = depth.depth_runs()
    files = [r for L in depth.available_depths() for r in result_files(f"depth{L}")]
    assert len(runs) == len(files) == 7 * 5 * 3
    by_run = {(r["size"], r["variant"], r["seed"]): r["fixed_loss"] for r in files}
    assert runs["fixed_loss"].tolist() == [by_run[k] for k in zip(runs["size"], runs["variant"], runs["seed"])]
    assert (runs["sublayers"] == 2 * runs["n_layers"]).all()
    assert as_stored(runs, index=False) == committed("02_runs")
    per_depth = depth.runs_per_depth()
    assert per_depth["runs"].tolist() == [15] * 7
    assert per_depth["finished"].sum() == sum(r["status"] == "finished" for r in files)


def test_the_final_loss_recomputes_from_the_result_files_and_matches_the_page():
    files = pd.DataFrame([r for L in depth.available_depths() for r in result_files(f"depth{L}")])
    expected = files.groupby(["n_layers", "variant"])["fixed_loss"].agg(["mean", "std"])
    final = depth.final_loss().set_index(["sublayers", "variant"])
    for (blocks, variant), row in expected.iterrows():
        assert final.loc[(2 * blocks, variant), ["fixed_loss_mean", "fixed_loss_sd"]].tolist() == pytest.approx(
            [row["mean"], row["std"]], rel=1e-12)
    mean = depth.mean_final_loss()
    assert list(mean.columns) == list(depth.VARIANTS)
    assert as_stored(mean) == committed("02_final_loss")
    assert as_stored(depth.provenance()) == committed("02_provenance")


def test_the_loss_curves_are_the_logs_at_their_flops():
    curves = depth.loss_curves(depths=[2], seeds=[0])
    one = curves[curves["variant"] == "highway"]
    log = [json.loads(line) for line in (RUNS / "depth2/highway/seed0/metrics.jsonl").read_text().splitlines()]
    logged = [r for r in log if "loss" in r]
    result = json.loads((RUNS / "depth2/highway/seed0/result.json").read_text())
    assert one["loss"].tolist() == [r["loss"] for r in logged] and set(one["blocks"]) == {2}
    assert one["flops"].iloc[-1] == pytest.approx(logged[-1]["step"] * result["train_flops"] / result["steps"])


def test_the_embedding_gradient_is_the_backward_pass_written_out_and_matches_the_page(data):
    grad = depth.embedding_grad(depths=[2])
    x, y = loading.heldout_batch(resolve_run("depth2", "review", 0), depth.GRAD_WINDOWS)
    norms = []
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        model = GPT(resolve_run("depth2", "review_convex", seed).model)
        logits, _ = model(x)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
        norms.append(model.wpe.weight.grad.norm().item())
    assert grad.loc[4, "review_convex"] == pytest.approx(np.mean(norms), rel=1e-5)
    page = pd.read_csv(PAGE / "02_embedding_grad.csv", index_col="sublayers")
    assert grad.loc[4].to_numpy() == pytest.approx(page.loc[4, list(depth.VARIANTS)].to_numpy(), rel=1e-4)


def test_convex_against_additive_reads_the_loss_and_gradient_tables(data):
    ablation = {"depths": [2, 4], "seeds": [0]}
    pairs = depth.convex_against_additive(**ablation).set_index("convex")
    loss, grad = depth.mean_final_loss(**ablation), depth.embedding_grad(**ablation)
    assert list(pairs.index) == ["review_convex", "highway_convex"]
    assert pairs.loc["review_convex", "loss_gap_deep"] == pytest.approx(loss.loc[8, "review_convex"]
                                                                        - loss.loc[8, "review"])
    assert pairs.loc["highway_convex", "grad_ratio_shallow"] == pytest.approx(grad.loc[4, "highway_convex"]
                                                                             / grad.loc[4, "highway"])


def test_the_depth_tables_name_their_columns(data):
    for table in (depth.depth_runs(depths=[2]), depth.runs_per_depth(depths=[2]), depth.final_loss(depths=[2]),
                  depth.mean_final_loss(depths=[2]), depth.loss_curves(depths=[2]), depth.provenance(depths=[2]),
                  depth.convex_against_additive(depths=[2, 4], seeds=[0])):
        run_columns = set(depth.depth_runs(depths=[2]).columns) - {"sublayers"}  # results_table's, by reference
        assert documented(depth, table, skip=run_columns) == []


# page 06: size against tokens per parameter


def grid_files() -> pd.DataFrame:
    rows = [r for size in size_tokens.GRID_SIZES for r in result_files(size)]
    return pd.DataFrame([r for r in rows if r["status"] == "finished" and r["variant"] in size_tokens.VARIANTS])


def holm(p):
    """Holm's step-down adjustment, written out."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate([(len(p) - k) * p[i] for k, i in enumerate(order)]).clip(max=1)
    out = np.empty_like(p)
    out[order] = adjusted
    return out


def gaps(runs: pd.DataFrame, metric: str) -> dict:
    """baseline − review per seed, by (size, baseline)."""
    out = {}
    for size, part in runs.groupby("size"):
        wide = part.pivot(index="seed", columns="variant", values=metric)
        for baseline in ("highway", "standard"):
            out[size, baseline] = (wide[baseline] - wide["review"]).dropna().to_numpy()
    return out


def test_the_paired_gaps_recompute_with_scipy_and_match_the_page():
    found = size_tokens.paired_gaps()
    per_seed = gaps(grid_files(), "fixed_loss")
    assert len(found) == len(per_seed) == 12
    for row in found.itertuples():
        d = per_seed[row.size, row.baseline]
        test = scipy_stats.ttest_1samp(d, 0.0)
        ci = test.confidence_interval(0.95)
        assert (row.paired_gap, row.paired_p, row.ci_low, row.ci_high) == pytest.approx(
            (d.mean(), test.pvalue, ci.low, ci.high), rel=1e-9)
    assert found["p_holm"].to_numpy() == pytest.approx(holm(found["paired_p"]), rel=1e-12)
    assert as_stored(found, index=False) == committed("06_paired_gaps")


def test_the_gap_factors_recompute_by_least_squares_and_match_the_page():
    factors = size_tokens.gap_factors()
    runs = grid_files()
    per_seed = gaps(runs, "val_loss")
    review = runs[runs["variant"] == "review"].groupby("size")[["params_M", "tokens_per_param"]].mean()
    for baseline in ("highway", "standard"):
        sizes = sorted(review.index)
        x = np.column_stack([np.ones(len(sizes)), np.log10(review.loc[sizes, "params_M"]),
                             np.log10(review.loc[sizes, "tokens_per_param"])])
        y = np.array([per_seed[s, baseline].mean() for s in sizes])
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        fit = factors[(factors["metric"] == "val_loss") & (factors["baseline"] == baseline)].set_index("term")
        assert fit.loc[["intercept", "log10_size", "log10_tokens_per_param"], "coef"].to_numpy() == pytest.approx(
            coef, rel=1e-9)
    assert list(factors["metric"].unique()) == ["fixed_loss", "val_loss"]
    assert as_stored(factors, index=False) == committed("06_gap_factors")


def test_the_grid_cells_match_the_page(data):
    cells = size_tokens.grid_cells()
    runs = grid_files()
    assert cells["review"].to_dict() == pytest.approx(
        runs[runs["variant"] == "review"].groupby("size")["fixed_loss"].mean().to_dict(), rel=1e-12)
    assert list(cells["steps"]) == sorted(cells["steps"])
    assert as_stored(cells) == committed("06_grid")


def test_the_papers_sizes_move_size_and_tokens_together():
    paper = size_tokens.paper_gaps()
    table = pd.read_csv(ROOT / size_tokens.PAPER_CSV)
    review = table[table["variant"] == "review_neutral"].groupby("size")[["params_M", "steps"]].mean()
    tokens = review["steps"] * 64 * 256 / (review["params_M"] * 1e6)
    r = np.corrcoef(np.log10(review["params_M"]), np.log10(tokens))[0, 1]
    assert paper.log_size_tokens_correlation == pytest.approx(r, rel=1e-9) and r < -0.9
    assert paper.gaps["tokens_per_param"].to_dict() == pytest.approx(
        {s: tokens[s] for s in paper.gaps.index}, rel=1e-12)


def test_the_sentences_read_the_intervals():
    def fit(tpp_low, tpp_high):
        return pd.DataFrame({"baseline": "highway", "term": ["intercept", "log10_size", "log10_tokens_per_param"],
                             "coef": [0.0, 0.01, (tpp_low + tpp_high) / 2], "ci_low": [-1, -0.02, tpp_low],
                             "ci_high": [1, 0.04, tpp_high], "note": ""})

    shrinking = fit(-0.09, -0.01)
    assert "tokens per parameter -0.050 nats/decade [-0.090, -0.010] (interval excludes 0)" in \
        size_tokens.factor_sentence(shrinking, "highway")
    assert size_tokens.undertraining_sentence(shrinking).startswith("The gap follows undertraining against highway")
    assert "no interval of the tokens coefficient excludes 0" in size_tokens.undertraining_sentence(fit(-0.05, 0.03))


def test_the_size_tokens_tables_name_their_columns(data):
    grid = size_tokens.grid_runs()
    by_reference = {"grid_runs": set(grid.columns) - {"width"},  # results_table's
                    "paired_gaps": set(size_tokens.stats.compare_metrics(grid, n_boot=0).columns)}
    for name in ("grid_runs", "grid_cells", "paired_gaps", "gap_factors"):
        table = getattr(size_tokens, name)()
        assert documented(size_tokens, table, skip=by_reference.get(name, ())) == [], name
    assert {"width", "tokens_per_param"} <= set(size_tokens.paired_gaps().columns) - by_reference["paired_gaps"]
