"""Token budgets in tokens per parameter, and what a preset's sweep costs (rrlib.budget)."""
import pandas as pd
import pytest

from rrlib.home import REFERENCE_CSV
from rrlib.model import count_params
from rrlib.runs.config import ConfigError
from rrlib.runs.presets import load_preset, resolve_run
from rrlib.speed.budget import paper_tokens_per_s, preset_cost


@pytest.mark.parametrize("size,tpp", [("60m_tpp2", 2), ("60m_tpp20", 20), ("150m_tpp2", 2), ("150m_tpp20", 20)])
def test_tpp_presets_train_reviews_model_to_its_budget_at_the_papers_architecture(size, tpp):
    paper = load_preset(size.split("_")[0])
    review = resolve_run(size, "review", 0)
    assert (review.model.d_model, review.model.n_layers, review.model.n_heads, review.data.tokenizer) == \
        (paper.model.d_model, paper.model.n_layers, paper.model.n_heads, "gpt2")
    tokens = review.train.steps * review.train.batch_size * review.model.seq_len
    per_step = review.train.batch_size * review.model.seq_len
    assert tpp <= tokens / count_params(review.model) < tpp + per_step / count_params(review.model)
    # every variant trains the same steps, so the runs stay paired and equal in tokens
    assert {resolve_run(size, v, 0).train.steps for v in load_preset(size).variants} == {review.train.steps}


@pytest.mark.parametrize("tpp", [-1, float("inf")])
def test_a_bad_budget_is_one_sentence(tpp):
    with pytest.raises(ConfigError, match="tokens_per_param must be a positive finite number"):
        resolve_run("60m_tpp2", "review", 0, {"train": {"tokens_per_param": tpp}})


def test_the_papers_own_sweep_costs_its_recorded_minutes_at_its_measured_speed():
    csv = REFERENCE_CSV
    speed = paper_tokens_per_s(csv)
    runs = pd.read_csv(csv)
    for paper_size, size in (("60M", "60m"), ("150M", "150m")):
        cost = preset_cost(size, speed)
        recorded = runs[runs["size"] == paper_size]
        assert cost["runs"] == len(recorded)
        assert cost["hours_at_paper_speed"] == pytest.approx(recorded["minutes"].sum() / 60, rel=1e-9)
    # a budget ten times the tokens costs ten times the hours at the same speed
    assert preset_cost("60m_tpp20", speed)["hours_at_paper_speed"] == pytest.approx(
        10 * preset_cost("60m_tpp2", speed)["hours_at_paper_speed"], rel=1e-3)
    assert preset_cost("mini", speed)["hours_at_paper_speed"] is None  # no paper size has mini's architecture


def test_sweep_hours_come_as_a_range_from_the_predicted_mfu_of_the_size():
    from rrlib.speed.budget import PREDICTED_MFU, parse_mfu, predicted_mfu

    assert predicted_mfu("60m_tpp20") == predicted_mfu("60m") == PREDICTED_MFU["60m"]  # the same architecture
    assert predicted_mfu("1b") == PREDICTED_MFU["1b"]
    assert predicted_mfu("150m_tpp2") == (PREDICTED_MFU["60m"][0], PREDICTED_MFU["1b"][1])  # between: the span
    assert predicted_mfu("mini") is None  # below every prediction: none
    cost = preset_cost("60m_tpp2", None, 1e15, (0.2, 0.4))
    assert cost["mfu"] == "20%-40%" and cost["hours_to"] == pytest.approx(2 * cost["hours_from"])
    assert cost["hours_from"] == pytest.approx(cost["train_PFLOP"] * 1e15 / (0.4 * 1e15) / 3600)
    assert parse_mfu("0.3") == (0.3, 0.3) and parse_mfu("0.24-0.29") == (0.24, 0.29)
    for bad in ("30", "0.5-0.2", "fast", "0-0.2"):
        with pytest.raises(ConfigError, match=r"--mfu must be a fraction in \(0, 1\] or a range LOW-HIGH"):
            parse_mfu(bad)


@pytest.mark.parametrize("column, value", [("minutes", "soon"), ("steps", "many")])
def test_a_bad_row_of_the_paper_s_table_is_named_by_its_own_line(tmp_path, column, value):
    """A word in a column makes pandas read the whole column as text: the row named is the one that holds it."""
    from rrlib.speed.pricing import read_paper_csv

    lines = REFERENCE_CSV.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[5].split(",")
    cells[header.index(column)] = value
    lines[5] = ",".join(cells)
    (tmp_path / "paper.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=rf"paper.csv line 6: {column} must be a positive.*, got '{value}'"):
        read_paper_csv(tmp_path / "paper.csv")
