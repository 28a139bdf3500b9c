"""Lab 03's grader: the reference passes; the baseline, the cheats, a wrong answer and careless reuse fail."""

from __future__ import annotations

import numpy as np
import pytest
from graderkit import assert_grader, hard_coded, memoised

from labkit.exercises import lab03
from labkit.record import Experiment

pytest.importorskip("memray")  # the allocation budget is a memray census


def reference(demand, start, reorder_at, batch):
    days, products = demand.shape
    history = np.empty((days, products), dtype=np.int64)
    stock = start.copy()
    for d in range(days):
        stock = stock - np.minimum(demand[d], stock)
        stock += (stock < reorder_at) * batch
        history[d] = stock
    return history


def _wrong(demand, start, reorder_at, batch):
    """Sells what is asked even beyond the stock (negative stock): fast, and wrong."""
    days, products = demand.shape
    history = np.empty((days, products), dtype=np.int64)
    stock = start.copy()
    for d in range(days):
        stock = stock - demand[d]
        stock += (stock < reorder_at) * batch
        history[d] = stock
    return history


_SEEN = [lab03.make_input(s) for s in range(3)] + [lab03.make_input(s, 365, 25) for s in range(3)]

GRADER_CASES = {
    "grade": lambda fn: lab03.check(fn, rounds=4),
    "reference": reference,
    "baseline": lab03.baseline,
    "wrong": _wrong,
    "cheats": {"memoised": memoised(lab03.baseline),
               "hard-coded": hard_coded(lab03.baseline, _SEEN, fallback=lab03.baseline),
               "hard-coded, no fallback": hard_coded(lab03.baseline, _SEEN)},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_reference_passes_every_criterion_and_concludes_the_experiment():
    exp = Experiment.plan("Preallocate the history", "vstack copies the history every day: quadratic; "
                          "preallocating leaves the per-day work, ~4x less", predicted_ratio=0.25)
    result = lab03.check(lab03.EXERCISE._solution, exp, rounds=4)
    assert result.passed, str(result)
    assert [i.ok for i in result.items] == [True, True, True, True]
    assert "within the budget" in result.items[1].message and "the baseline:" in result.items[1].message
    done = result.items[3].detail
    assert done.measured_ratio is not None and done.outcome in ("confirmed", "refuted", "inconclusive")
    assert "seed" in result.title


def test_the_baseline_fails_at_the_allocation_budget_saying_by_how_much():
    result = lab03.check(lab03.baseline, rounds=4)
    assert [i.ok for i in result.items] == [True, False]
    assert "over the budget" in result.items[1].message and "allocator calls" in result.items[1].message


def test_a_reused_buffer_returned_whole_fails_correctness():
    buffers: dict[int, np.ndarray] = {}

    def stale(demand, start, reorder_at, batch):
        days, products = demand.shape
        buf = buffers.get(products)
        if buf is None or len(buf) < days:
            buf = buffers[products] = np.empty((days, products), dtype=np.int64)
        stock = start.copy()
        for d in range(days):
            stock = stock - np.minimum(demand[d], stock)
            stock += (stock < reorder_at) * batch
            buf[d] = stock
        return buf  # the trap: rows past `days` belong to a longer, earlier call

    result = lab03.check(stale, rounds=4)
    assert not result.passed and len(result.items) == 1
    assert "wrong answer" in result.items[0].message and "expected shape" in result.items[0].message


def test_a_reused_result_array_overwritten_by_the_next_call_fails():
    buffers: dict[tuple[int, int], np.ndarray] = {}

    def overwrites(demand, start, reorder_at, batch):
        out = buffers.setdefault(demand.shape, np.empty(demand.shape, dtype=np.int64))
        out[...] = reference(demand, start, reorder_at, batch)
        return out  # right when returned, overwritten by the next call of the same shape

    result = lab03.check(overwrites, rounds=4)
    assert not result.passed and "changed after the next call" in result.items[0].message


def test_not_a_function_is_refused_and_hints_and_solution_follow_the_kit(capsys):
    assert "pass your function itself" in str(lab03.check(lab03.baseline(*lab03.make_input(0, 2, 2))))
    assert "Hint 1 of 3" in lab03.hint(1)
    lab03.check(_wrong, rounds=4, seed=5)
    assert "def _reference" in lab03.solution()


def test_make_input_is_deterministic_and_int64():
    a, b = lab03.make_input(7, 5, 3), lab03.make_input(7, 5, 3)
    assert all(np.array_equal(x, y) and x.dtype == np.int64 for x, y in zip(a, b, strict=True))
    assert a[0].shape == (5, 3) and a[1].shape == (3,)
