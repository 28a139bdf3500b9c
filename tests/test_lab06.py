"""Lab 06's grader: the reference passes; the baseline, the cheats, a wrong answer and in-place cleaning fail."""

from __future__ import annotations

import copy

import pytest
from graderkit import assert_grader, hard_coded, memoised

from labkit.exercises import lab06
from labkit.record import Experiment

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


_SEEN = [(lab06.make_orders(s),) for s in range(4)] + [(lab06.make_orders(s, 60),) for s in range(4)]

GRADER_CASES = {
    "grade": lambda fn: lab06.check(fn, rounds=4),
    "reference": reference,
    "baseline": lab06.baseline,
    "wrong": _no_discount,
    "cheats": {"memoised": memoised(lab06.baseline),
               "hard-coded": hard_coded(lab06.baseline, _SEEN, fallback=lab06.baseline),
               "hard-coded, no fallback": hard_coded(lab06.baseline, _SEEN)},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_reference_passes_every_criterion_and_concludes_the_experiment():
    exp = Experiment.plan("Copy nothing in the report", "deepcopy of every order is most of the work: "
                          "dropping it leaves a tenth", predicted_ratio=0.1)
    result = lab06.check(lab06.EXERCISE._solution, exp, rounds=4, seed=3)
    assert result.passed, str(result)
    assert [i.ok for i in result.items] == [True, True, True, True]
    assert "within the budget" in result.items[1].message and "seed 3" in result.title
    assert result.items[3].detail.outcome in ("confirmed", "refuted", "inconclusive")


def test_the_baseline_fails_at_the_allocation_budget_saying_by_how_much():
    result = lab06.check(lab06.baseline, rounds=4)
    assert [i.ok for i in result.items] == [True, False]
    assert "over the budget" in result.items[1].message and "allocator calls" in result.items[1].message


def test_cleaning_the_callers_orders_in_place_fails_correctness():
    def in_place(orders):
        for order in orders:  # lean and fast, but the caller's data is changed
            order["customer"] = order["customer"].strip().lower()
            for line in order["lines"]:
                line["sku"] = line["sku"].strip().upper()
        return reference(orders)

    result = lab06.check(in_place, rounds=4)
    assert not result.passed and len(result.items) == 1 and "changed the orders" in result.items[0].message


def test_a_wrong_answer_fails_first_naming_the_row():
    result = lab06.check(_no_discount, rounds=4)
    assert not result.passed and len(result.items) == 1
    assert "wrong answer" in result.items[0].message and "row" in result.items[0].message


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
    lab06.check(_no_discount, rounds=4, seed=5)
    assert "def _reference" in lab06.solution()
