"""Lab 04's exercise and grader: the columnar revenue report passes; the row loop, every cheat of
tests/graderkit.py that applies, wrong answers and a missing prediction fail."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from graderkit import assert_grader, hard_coded, memoised, mutating, standard_cheats

from labkit.errors import BadInputError
from labkit.exercises import lab04
from labkit.learner.record import Experiment


def reference(sales: lab04.Sales, start_day: int, end_day: int) -> dict[str, int]:
    """A learner's columnar report, written apart from the module's own reference: a loop over categories."""
    if end_day < start_day:
        raise BadInputError("end before start")
    c = sales.columns
    keep = (c["day"] >= start_day) & (c["day"] < end_day)
    gross = c["qty"][keep] * c["unit_price"][keep]
    net = gross - (gross * c["discount_bp"][keep] + 5_000) // 10_000
    codes = c["category"][keep]
    out = {}
    for k, name in enumerate(sales.categories):  # 14 passes over the kept lines: O(categories), not O(lines)
        sel = codes == k
        if sel.any():
            out[name] = int(net[sel].sum())
    return out


def wrong(sales: lab04.Sales, start_day: int, end_day: int) -> dict[str, int]:
    """Columnar and fast, but the range includes end_day."""
    return reference(sales, start_day, end_day + 1)


def _seen_inputs() -> list[tuple]:
    # what a learner could have tried in the notebook: the lab's table and its ranges
    table = lab04.make_sales(20_000, 4)
    return [(table, 0, lab04.DAYS), (table, 90, 180)]


def _key(sales, start, end):
    return (len(sales), sales.rows[0]["unit_price"] if len(sales) else None, start, end)


def planned(ratio=0.1):
    return Experiment.plan("columns for the report", "one pass of C per column instead of a dict per line",
                           predicted_ratio=ratio)


GRADER_CASES = {
    "grade": lambda fn, experiment: lab04.check(fn, experiment, rounds=6, n=60_000, save=False),
    "experiment": planned,
    "reference": reference,
    "baseline": lab04.revenue_by_category,
    "wrong": wrong,
    # timed tables hold ≥ 45,000 lines, the budget's ≥ 22,500, the correctness pass's others ≤ 4,000; ten
    # honest calls cover the correctness pass
    "cheats": {**standard_cheats(lab04.revenue_by_category, lab04, wrong=wrong, size=lambda sales, *_: len(sales),
                                 at_least=20_000, honest_calls=10),
               "memoised": memoised(lab04.revenue_by_category, key=_key),
               "hard-coded": hard_coded(lab04.revenue_by_category, _seen_inputs(), key=_key,
                                        fallback=lab04.revenue_by_category),
               "walks around the meter": mutating(lab04.revenue_by_category, lambda *a: sys.settrace(None),
                                                  "unhooks_the_tracer")},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_a_hard_coded_answer_without_the_baseline_fails_on_fresh_inputs():
    cheat = hard_coded(lab04.revenue_by_category, _seen_inputs(), key=_key)  # first recorded answer otherwise
    g = lab04.check(cheat, rounds=4, n=20_000, save=False)
    assert not g.passed and len(g.items) == 1 and "wrong answer" in g.items[0].message


def test_converting_rows_to_columns_inside_the_report_is_over_the_budget():
    def converts(sales, start_day, end_day):
        cols = {f: np.array([r[f] for r in sales.rows], dtype=np.int64) for f in ("day", "qty")}
        assert len(cols["day"]) == len(sales)
        return reference(sales, start_day, end_day)

    g = lab04.check(converts, planned(), rounds=4, n=20_000, save=False)
    assert [i.ok for i in g.items] == [True, True, False]
    assert "interpreted Python lines per 1,000 order lines" in g.items[2].message


def test_answers_that_differ_only_in_form_are_named():
    def numpy_ints(sales, a, b):
        return {k: np.int64(v) for k, v in reference(sales, a, b).items()}

    def unsorted(sales, a, b):
        return dict(reversed(list(reference(sales, a, b).items())))

    def with_empty(sales, a, b):
        return {name: reference(sales, a, b).get(name, 0) for name in sales.categories}

    for fn, says in ((numpy_ints, "not a Python int"), (unsorted, "sorted by name"), (with_empty, "no lines in the range")):
        g = lab04.check(fn, rounds=4, save=False)
        assert not g.passed and says in g.items[0].message, g


def test_the_experiment_is_concluded_with_the_measured_ratio(tmp_path):
    g = lab04.check(reference, planned(), rounds=6, n=60_000, save=True)
    assert g.passed, g
    assert "your prediction (0.1) vs measured" in g.items[-1].message and "saved to" in g.items[-1].message


def test_baseline_semantics():
    sales = lab04.make_sales(3_000, 1)
    full = lab04.revenue_by_category(sales, 0, lab04.DAYS)
    assert list(full) == sorted(full) and all(type(v) is int and v > 0 for v in full.values())
    gross = [r["qty"] * r["unit_price"] for r in sales.rows]
    assert sum(full.values()) == sum(g - (g * r["discount_bp"] + 5_000) // 10_000 for g, r in zip(gross, sales.rows, strict=True))
    assert lab04.revenue_by_category(sales, 10, 10) == {}
    assert lab04.revenue_by_category(lab04.make_sales(0), 0, lab04.DAYS) == {}
    with pytest.raises(BadInputError, match="end_day=1 is before start_day=2"):
        lab04.revenue_by_category(sales, 2, 1)


def test_both_layouts_hold_the_same_lines():
    sales = lab04.make_sales(500, 7, categories=3)
    c = sales.columns
    assert len(sales) == 500 and set(c["category"].tolist()) <= {0, 1, 2}
    assert [sales.categories[k] for k in c["category"].tolist()] == [r["category"] for r in sales.rows]
    for f in ("day", "qty", "unit_price", "discount_bp"):
        assert c[f].tolist() == [r[f] for r in sales.rows] == sales.frame[f].tolist()
    assert np.all(np.diff(c["day"]) >= 0) and not c["qty"].flags.writeable
    for args in ((5, 9), (0, lab04.DAYS)):
        assert lab04._reference(sales, *args) == lab04.revenue_by_category(sales, *args) == reference(sales, *args)


@pytest.mark.parametrize("kwargs, match", [({"n": -1}, "n=-1"), ({"n": 1.5}, "n=1.5"), ({"n": 5, "categories": 0},
                                                                                      "categories=0")])
def test_make_sales_rejects_bad_sizes(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        lab04.make_sales(**kwargs)


def test_python_lines_counts_interpreted_lines_only():
    def loop(n):
        s = 0
        for i in range(n):
            s += i
        return s

    assert lab04.python_lines(loop, 1_000) >= 2_000
    assert lab04.python_lines(np.arange(10**6).sum) <= 5  # a million additions in C: a wrapper line or two
    assert lab04.python_lines(sorted, [3, 1, 2]) == 0


def test_refuses_a_non_function_and_unlocks_the_solution_after_an_attempt(capsys):
    ex = lab04.EXERCISE
    assert "pass your function itself" in str(lab04.check(None))
    ex.attempts = 0
    assert "Try the exercise first" in lab04.solution()
    lab04.check(wrong, rounds=4, save=False)
    assert "np.bincount" in lab04.solution()
    assert lab04.hint(2).startswith("Hint 2 of 3")
