"""Lab 06's grader: the reference passes; the baseline, the cheats, a wrong answer and in-place cleaning fail."""

from __future__ import annotations

import copy
import sys
import time

import pytest
from graderkit import (
    assert_grader,
    hard_coded,
    input_cheats,
    memoised,
    mutating,
    standard_cheats,
)
from toolfakes import fewer_allocations

from labkit.exercises import lab06
from labkit.learner.record import Experiment

pytest.importorskip("memray")  # the allocation budget is a memray census


def reference(orders):
    totals = {}
    for order in orders:
        who = order["customer"].strip().lower()
        for line in order["lines"]:
            key = (who, line["sku"].strip().upper())
            gross = line["qty"] * line["unit_cents"]
            u, v = totals.get(key, (0, 0))
            totals[key] = (u + line["qty"], v + gross - gross * line.get("discount_pct", 0) // 100)
    return sorted(((c, s, u, v) for (c, s), (u, v) in totals.items()), key=lambda r: (-r[3], r[0], r[1]))


def _no_discount(orders):
    """Forgets the discounts: fast, lean, and wrong."""
    totals = {}
    for order in orders:
        who = order["customer"].strip().lower()
        for line in order["lines"]:
            key = (who, line["sku"].strip().upper())
            u, v = totals.get(key, (0, 0))
            totals[key] = (u + line["qty"], v + line["qty"] * line["unit_cents"])
    return sorted(((c, s, u, v) for (c, s), (u, v) in totals.items()), key=lambda r: (-r[3], r[0], r[1]))


_CLOCK = time.perf_counter  # bound now: a cheat that slows time.perf_counter must not shorten this one's sleep


def lean_but_slow(orders):
    """Right and lean, but no faster than the baseline (it sleeps the time it saved): what the generic cheats
    wrap, so a gated or tampering cheat reaches the speed check instead of failing at the allocation budget.
    The reference is about 20 times faster than the baseline here, so sleeping 9 times its own time left this
    cheat about 2 times faster — on the bar, and it passed on a loaded run; 30 times puts it beyond the baseline."""
    t0 = _CLOCK()
    out = reference(orders)
    time.sleep(30 * (_CLOCK() - t0))
    return out


def in_place(orders):
    """Lean and fast, but the caller's data is changed: the names and SKUs cleaned where they lie."""
    for order in orders:
        order["customer"] = order["customer"].strip().lower()
        for line in order["lines"]:
            line["sku"] = line["sku"].strip().upper()
    return reference(orders)


def _cleans_in_place(orders):
    for order in orders:
        order["customer"] = order["customer"].strip().lower()


_SEEN = [(lab06.make_orders(s),) for s in range(4)] + [(lab06.make_orders(s, 60),) for s in range(4)]


def _experiment():
    return Experiment.plan("Copy nothing in the report", "deepcopy of every order is most of the work: "
                           "dropping it leaves a tenth", predicted_ratio=0.1)


GRADER_CASES = {
    "grade": lambda fn, experiment: lab06.check(fn, experiment, rounds=4, save=False),
    "experiment": _experiment,
    "reference": reference,
    "baseline": lab06.baseline,
    "wrong": _no_discount,
    "cheats": {**input_cheats(reference, returns=False),
               "lean, not faster": lean_but_slow,
               "memoised baseline": memoised(lab06.baseline),
               **standard_cheats(lab06.baseline, lab06, honest=lean_but_slow, wrong=_no_discount, size=lambda orders: len(orders),
                                 at_least=lab06.TIMED_ORDERS),
               "hard-coded": hard_coded(lab06.baseline, _SEEN, fallback=lab06.baseline),
               "hard-coded, no fallback": hard_coded(lab06.baseline, _SEEN),
               "replaces the allocation census": fewer_allocations(lab06.baseline, lab06),
               "cleans in place": in_place,
               "mutates its input first": mutating(lab06.baseline, _cleans_in_place)},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_reference_passes_every_criterion_and_concludes_the_experiment():
    result = lab06.check(lab06.EXERCISE._solution, _experiment(), rounds=4, seed=3, save=False)
    assert result.passed, str(result)
    assert [i.criterion for i in result.items] == ["correctness", "prediction", "budget", "speed", "prediction"]
    assert "within the budget" in result.items[2].message and "seed 3" in result.title
    assert "timed answers checked" in result.items[3].message
    assert result.items[4].detail.outcome in ("confirmed", "refuted", "inconclusive")


def test_the_baseline_fails_at_the_allocation_budget_saying_by_how_much():
    result = lab06.check(lab06.baseline, _experiment(), rounds=4, save=False)
    assert [i.ok for i in result.items] == [True, True, False]
    assert "over the budget" in result.items[2].message and "allocator calls" in result.items[2].message


def test_cleaning_the_callers_orders_in_place_fails_correctness():
    result = lab06.check(in_place, _experiment(), rounds=4, save=False)
    assert not result.passed and len(result.items) == 1 and "wrote into its input" in result.items[0].message


def test_a_wrong_answer_fails_first_naming_where():
    result = lab06.check(_no_discount, _experiment(), rounds=4, save=False)
    assert not result.passed and len(result.items) == 1
    assert "wrong answer" in result.items[0].message and "the answer[" in result.items[0].message


def test_a_float_for_an_int_or_a_list_for_a_tuple_is_a_wrong_answer():
    def floats(orders):
        return [(c, s, u, float(v)) for c, s, u, v in reference(orders)]

    def lists(orders):
        return [list(r) for r in reference(orders)]

    for fn, says in ((floats, "expected type int, got type float"), (lists, "expected type tuple, got type list")):
        result = lab06.check(fn, _experiment(), rounds=4, save=False)
        assert not result.passed and says in result.items[0].message


def test_baseline_and_reference_agree_and_leave_the_input_alone():
    for seed in range(5):
        orders = lab06.make_orders(seed, 80)
        kept = copy.deepcopy(orders)
        assert lab06.baseline(orders) == lab06.EXERCISE._solution(orders) == reference(orders)
        assert orders == kept
    assert lab06.baseline([]) == []


def test_not_a_function_is_refused_and_hints_and_solution_follow_the_kit():
    assert "pass your function itself" in str(lab06.check(lab06.baseline(lab06.make_orders(0, 2))))
    assert "Hint 1 of 3" in lab06.hint(1) and "profile" in lab06.hint(1)
    lab06.check(_no_discount, _experiment(), rounds=4, seed=5, save=False)
    assert "def _reference" in lab06.solution()


def test_a_faked_census_changes_no_verdict():
    # the census replaced where it lives: the grader's meter, bound at import, still counts the cheat's every call
    cheat = GRADER_CASES["cheats"]["replaces the allocation census"]
    try:
        result = lab06.check(cheat, _experiment(), rounds=4, save=False)
    finally:
        cheat.undo()
    assert not result.passed and result.items[-1].criterion == "budget", str(result)
    honest = fewer_allocations(lab06.EXERCISE._solution, lab06)
    try:
        result = lab06.check(honest, _experiment(), rounds=4, save=False)
    finally:
        honest.undo()
    assert result.passed, str(result)
    from labkit.alloc import Census

    assert sys.modules["labkit.alloc.census"].Census is Census
