"""Lab 03's grader: the reference passes; the baseline, every cheat of tests/graderkit.py that applies, a wrong
answer, careless reuse and a missing prediction fail."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from graderkit import assert_grader, hard_coded, input_cheats, standard_cheats
from toolfakes import fewer_allocations

from labkit.exercises import lab03
from labkit.learner.record import Experiment

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

def planned():
    return Experiment.plan("Preallocate the history", "vstack copies the history every day: quadratic; "
                           "preallocating leaves the per-day work, ~4x less", predicted_ratio=0.25)


GRADER_CASES = {
    "grade": lambda fn, experiment: lab03.check(fn, experiment, rounds=4, save=False),
    "experiment": planned,
    "reference": reference,
    "baseline": lab03.baseline,
    "wrong": _wrong,
    # timed inputs hold ≥ 750 × 30 = 22,500 cells, the correctness pass's other inputs ≤ 400 × 30; 15 honest
    # calls cover the correctness pass (and the two calls in a row): the metered call is the first stale one
    "cheats": {**input_cheats(reference), **standard_cheats(lab03.baseline, lab03, wrong=_wrong, size=lambda demand, *_: demand.size,
                                 at_least=20_000, honest_calls=15),
               "hard-coded": hard_coded(lab03.baseline, _SEEN, fallback=lab03.baseline),
               "hard-coded, no fallback": hard_coded(lab03.baseline, _SEEN),
               "replaces the allocation census": fewer_allocations(lab03.baseline, lab03)},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_reference_passes_every_criterion_and_concludes_the_experiment():
    result = lab03.check(lab03.EXERCISE._solution, planned(), rounds=4, save=False)
    assert result.passed, str(result)
    assert [i.criterion for i in result.items] == ["correctness", "prediction", "budget", "speed", "prediction"]
    assert "within the budget" in result.items[2].message and "the baseline:" in result.items[2].message
    assert "timed answers checked" in result.items[3].message
    done = result.items[4].detail
    assert done.measured_ratio is not None and done.outcome in ("confirmed", "refuted", "inconclusive")
    assert "seed" in result.title


def test_the_baseline_fails_at_the_allocation_budget_saying_by_how_much():
    result = lab03.check(lab03.baseline, planned(), rounds=4, save=False)
    assert [i.ok for i in result.items] == [True, True, False]
    assert "over the budget" in result.items[2].message and "allocator calls" in result.items[2].message


def test_an_answer_copied_from_a_cache_allocates_too_little_to_be_a_fix():
    first = []

    def cached(demand, start, reorder_at, batch):
        if demand.size < 20_000:
            return reference(demand, start, reorder_at, batch)
        if not first:
            first.append(reference(demand, start, reorder_at, batch))
        return first[0].copy()

    result = lab03.check(cached, planned(), rounds=4, save=False)
    assert not result.passed and result.items[-1].criterion in ("correctness", "budget")


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

    result = lab03.check(stale, planned(), rounds=4, save=False)
    assert not result.passed and len(result.items) == 1
    assert "wrong answer" in result.items[0].message and "expected shape" in result.items[0].message


def test_a_reused_result_array_overwritten_by_the_next_call_fails():
    buffers: dict[tuple[int, int], np.ndarray] = {}

    def overwrites(demand, start, reorder_at, batch):
        out = buffers.setdefault(demand.shape, np.empty(demand.shape, dtype=np.int64))
        out[...] = reference(demand, start, reorder_at, batch)
        return out  # right when returned, overwritten by the next call of the same shape

    result = lab03.check(overwrites, planned(), rounds=4, save=False)
    assert not result.passed and "changed after the next call" in result.items[0].message


def test_not_a_function_is_refused_and_hints_and_solution_follow_the_kit(capsys):
    assert "pass your function itself" in str(lab03.check(lab03.baseline(*lab03.make_input(0, 2, 2))))
    assert "Hint 1 of 3" in lab03.hint(1)
    lab03.check(_wrong, planned(), rounds=4, seed=5, save=False)
    assert "def _reference" in lab03.solution()


def test_make_input_is_deterministic_and_int64():
    a, b = lab03.make_input(7, 5, 3), lab03.make_input(7, 5, 3)
    assert all(np.array_equal(x, y) and x.dtype == np.int64 for x, y in zip(a, b, strict=True))
    assert a[0].shape == (5, 3) and a[1].shape == (3,)


def test_a_faked_census_changes_no_verdict():
    # the census replaced where it lives: the grader's meter, bound at import, still counts the cheat's every call
    cheat = GRADER_CASES["cheats"]["replaces the allocation census"]
    try:
        result = lab03.check(cheat, planned(), rounds=4, save=False)
    finally:
        cheat.undo()
    assert not result.passed and result.items[-1].criterion == "budget", str(result)
    honest = fewer_allocations(lab03.EXERCISE._solution, lab03)
    try:
        result = lab03.check(honest, planned(), rounds=4, save=False)
    finally:
        honest.undo()
    assert result.passed, str(result)
    from labkit.alloc import Census

    assert sys.modules["labkit.alloc.census"].Census is Census
