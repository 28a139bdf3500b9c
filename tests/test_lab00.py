"""Lab 00's grader, both ways: the reference solution passes; the baseline and wrong answers do not."""

import pytest

from labkit.exercises import lab00
from labkit.record import Experiment


def planned(ratio=0.05):
    return Experiment.plan("dict keeps order", "dict.fromkeys is one hash insert per item instead of a list "
                           "scan, so it should be far faster", predicted_ratio=ratio)


def reference(items):
    return list(dict.fromkeys(items))


def test_reference_solution_passes():
    grade = lab00.check(reference, planned(), n=2000, rounds=6, save=False)
    assert grade.passed, str(grade)
    assert "PASSED" in str(grade)


def test_baseline_fails_on_speed():
    grade = lab00.check(lab00.unique_in_order, planned(), n=2000, rounds=6, save=False)
    assert not grade.passed
    assert any(not i.ok and "need 'faster'" in i.message for i in grade.items)


@pytest.mark.parametrize("wrong", [
    lambda items: list(set(items)),                 # loses the order
    lambda items: sorted(set(items), key=str),      # reorders
    lambda items: items,                            # keeps duplicates
])
def test_wrong_answers_fail_on_correctness_first(wrong):
    grade = lab00.check(wrong, planned(), save=False)
    assert not grade.passed and len(grade.items) == 1 and "wrong answer" in grade.items[0].message


def test_crashing_solution_is_reported_not_raised():
    grade = lab00.check(lambda items: 1 / 0, planned(), save=False)
    assert not grade.passed and "ZeroDivisionError" in grade.items[0].message


def test_placeholder_hypothesis_fails():
    todo = Experiment.plan("x", "TODO: what will you change?", predicted_ratio=1.0)
    grade = lab00.check(reference, todo, n=1000, rounds=4, save=False)
    assert not grade.passed and any("replace the TODO" in i.message for i in grade.items)
    assert not lab00.check(reference, None, n=1000, rounds=4, save=False).passed
