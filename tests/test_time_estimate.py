"""The CPU time estimate compare states before it trains (rrlib.runs.pace): a small model's step is timed at its own
micro-batch, so noise in two tiny steps is not multiplied into it, and only a step too long to time whole is read off
the line through steps of one and two sequences. A stand-in clock makes every step's cost exact, so nothing here
depends on this machine's speed."""
import types

import pytest

from rrlib.runs import pace
from rrlib.runs.presets import resolve_run


def stand_in_clock(monkeypatch, cost):
    """``pace``'s clock advanced by ``cost(b)`` seconds for each optimizer step on b sequences."""
    now = [0.0]
    monkeypatch.setattr(pace, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def step(model, fwd, optimizer, x, y, *args, **kwargs):
        now[0] += cost(x.shape[0])

    monkeypatch.setattr(pace, "optimizer_step", step)


def test_a_small_model_s_step_is_timed_at_its_own_micro_batch(monkeypatch):
    run = resolve_run("tiny", "standard", 0)
    micro = run.train.batch_size
    assert micro > 2
    # a step of two sequences caught while the machine was busy: a line through it would overstate the rest
    stand_in_clock(monkeypatch, lambda b: {1: 0.03, 2: 0.30}.get(b, 0.02 + 0.01 * b))
    assert pace.time_step(run) == pytest.approx(0.02 + 0.01 * micro)


def test_a_step_too_long_to_time_whole_is_read_off_the_line(monkeypatch):
    run = resolve_run("tiny", "standard", 0)
    micro = run.train.batch_size
    timed = []
    stand_in_clock(monkeypatch, lambda b: timed.append(b) or 1.0 + 2.0 * b)
    assert pace.time_step(run) == pytest.approx(1.0 + 2.0 * micro)  # a + c·b from b = 1 and 2
    assert micro not in timed
