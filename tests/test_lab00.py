"""Lab 00's grader: the reference passes; the baseline, every cheat of tests/graderkit.py that applies, wrong
answers and a missing prediction fail."""

import pytest
from graderkit import assert_grader, hard_coded, input_cheats, standard_cheats

from labkit.exercises import lab00
from labkit.learner.record import Experiment


def planned(ratio=0.05):
    return Experiment.plan("dict keeps order", "dict.fromkeys is one hash insert per item instead of a list "
                           "scan, so it should be far faster", predicted_ratio=ratio)


def reference(items):
    return list(dict.fromkeys(items))


def shown_inputs():
    # every input a learner could see or guess: the notebook's make_items with small seeds and sizes
    return [(lab00.make_items(n, seed=s),) for n in (2000, 1000, 500) for s in range(5)]


def _wrong(items):
    return list(set(items))  # fast, and loses the order


GRADER_CASES = {
    "grade": lambda fn, experiment: lab00.check(fn, experiment, rounds=6, save=False),
    "experiment": planned,
    "reference": reference,
    "baseline": lab00.unique_in_order,
    "wrong": _wrong,
    # lab 00 has no meter: the gated cheats answer wrong (fast) where they think they are timed, and every
    # timed answer is checked; 13 honest calls cover the largest correctness pass
    "cheats": {**input_cheats(reference), **standard_cheats(lab00.unique_in_order, lab00, wrong=_wrong, size=len, at_least=1500,
                                 honest_calls=13),
               "hard-coded": hard_coded(lab00.unique_in_order, shown_inputs())},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_a_passing_grade_says_so_and_concludes_the_record():
    grade = lab00.check(reference, planned(), rounds=6, save=False, seed=7)
    assert grade.passed, str(grade)
    assert "PASSED" in str(grade) and "seed 7" in str(grade) and "your prediction" in grade.items[-1].message


def test_the_baseline_fails_on_speed_and_its_prediction_is_still_judged():
    grade = lab00.check(lab00.unique_in_order, planned(), rounds=6, save=False)
    assert not grade.passed
    assert any(not i.ok and "need 'faster'" in i.message for i in grade.items)
    assert "your prediction" in grade.items[-1].message


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


@pytest.mark.parametrize("hypothesis,ratio,why", [
    (lab00.TEMPLATE_HYPOTHESIS, 0.1, "template"),                                    # left as it is
    (lab00.TEMPLATE_HYPOTHESIS.replace("TODO: ", ""), 0.1, "template"),               # TODO deleted, text kept
    ("what will you change, why will it be faster, and by how much", 0.1, "template"),
    ("a set is faster", 0.1, "too short"),
    ("a set answers 'seen?' in one hash lookup instead of a scan of the list", 1.0, "no change"),
    ("a set answers 'seen?' in one hash lookup instead of a scan of the list", 1.04, "no change"),
    ("a set answers 'seen?' in one hash lookup instead of a scan of the list", None, "no predicted_ratio"),
])
def test_a_plan_that_is_not_the_learners_own_prediction_fails(hypothesis, ratio, why):
    plan = Experiment.plan("x", hypothesis, predicted_ratio=ratio)
    grade = lab00.check(reference, plan, rounds=4, save=False)
    assert not grade.passed and grade.items[0].ok and not grade.items[1].ok and len(grade.items) == 2
    assert why in grade.items[1].message and "Try:" in grade.items[1].message


def test_a_plan_predicting_a_slowdown_is_allowed_and_judged():
    plan = Experiment.plan("x", "a set answers 'seen?' in one hash lookup, but hashing ints costs more", 1.5)
    grade = lab00.check(reference, plan, rounds=4, save=False)
    assert grade.items[1].ok and "refuted" in grade.items[-1].message


def test_no_plan_fails():
    grade = lab00.check(reference, None, rounds=4, save=False)
    assert not grade.passed and "no experiment planned" in grade.items[1].message


def test_a_generator_or_a_tuple_is_not_the_stated_list():
    for shape in (tuple, iter):
        grade = lab00.check(lambda items, shape=shape: shape(dict.fromkeys(items)), planned(), rounds=4, save=False)
        assert not grade.passed and "expected type list" in grade.items[0].message


def test_solution_is_shown_only_after_an_attempt(capsys):
    lab00.EXERCISE.attempts = 0
    assert "Try the exercise first" in lab00.solution()
    lab00.check(lambda items: items, None, save=False)
    assert "dict.fromkeys" in lab00.solution()
    assert lab00.hint(1).startswith("Hint 1 of 3") and "hints 1 to 3" in lab00.hint(9)
    # shown once when it ends a cell (its repr is the text, as code for a solution), never printed as well
    assert capsys.readouterr().out == ""
    assert repr(lab00.hint(1)) == str(lab00.hint(1)) and lab00.solution()._repr_markdown_().startswith("```python")
