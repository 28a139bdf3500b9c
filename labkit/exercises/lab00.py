"""Lab 00's exercise: make ``unique_in_order`` fast — same answers, a measured speed-up, a hypothesis first.

The baseline keeps the first occurrence of each item, in order, by scanning a list for every item:
quadratic time. The learner writes a faster version and an experiment record predicting the gain.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Experiment,
    Item,
    answers,
    band,
    failed,
    passed,
    prediction,
    seal,
    timed,
)

__all__ = ["unique_in_order", "check", "make_items", "hint", "solution", "TEMPLATE_HYPOTHESIS"]


def unique_in_order(items: Sequence[Hashable]) -> list[Hashable]:
    """The baseline: every item once, in order of first appearance (a list scan per item: O(n²))."""
    seen: list[Hashable] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def make_items(n: int, distinct: int | None = None, seed: int = 0) -> list[int]:
    """A reproducible input: ``n`` integers drawn from ``distinct`` values (default n // 2)."""
    rng = random.Random(seed)
    distinct = distinct or max(1, n // 2)
    return [rng.randrange(distinct) for _ in range(n)]


def _reference(items: Sequence[Hashable]) -> list[Hashable]:
    # a dict remembers insertion order and finds a key by hashing: one O(1) step per item instead of a scan
    return list(dict.fromkeys(items))


EXERCISE = Exercise(
    "Lab 00 — a faster unique_in_order",
    hints=("Time goes into `item not in seen`: how long does that take when `seen` holds a thousand items?",
           "A set or a dict answers 'have I seen this?' in one hash lookup, whatever its size.",
           "Keep the order with a dict (insertion-ordered since Python 3.7): `list(dict.fromkeys(items))`, "
           "or a set for membership beside the output list."),
    solution=_reference,
)
#: the exercise cell's starting hypothesis; a plan that still says (nearly) this is not the learner's own
TEMPLATE_HYPOTHESIS = "TODO: what will you change, why will it be faster, and by how much?"

hint = EXERCISE.hint
solution = EXERCISE.solution


def _cases(rng: random.Random, n: int) -> list[tuple[list[Any]]]:
    fixed: list[list[Any]] = [[], [1], [3, 1, 3, 2, 1], ["b", "a", "b", "c"], [(1, 2), (1, 2), 0, 0.0, False],
                              [True, 1, 1.0, "1", b"1", None, None]]
    fresh = [make_items(rng.randrange(50, 600), rng.randrange(1, 300), seed=rng.randrange(2**31))
             for _ in range(rng.randint(2, 5))]
    # inputs of the size that is timed, too: nothing tells a checked call from a timed one by its size
    timed_size = [make_items(n, seed=rng.randrange(2**31)) for _ in range(rng.randint(1, 2))]
    cases = fixed + fresh + timed_size
    rng.shuffle(cases)
    return [(case,) for case in cases]


def _plan_item(experiment: Any) -> Item:
    """The plan criterion: a hypothesis in the learner's words and a prediction that is not "no change"."""
    if type(experiment) is not Experiment:
        return failed("no experiment planned", f"got {type(experiment).__name__}",
                      "pass the record from labkit.Experiment.plan(...) as the second argument of check: a "
                      "prediction is part of passing", criterion="prediction")
    text = " ".join(str(experiment.hypothesis).split())
    template = " ".join(TEMPLATE_HYPOTHESIS.split())
    if "TODO" in text or difflib.SequenceMatcher(None, text.lower(), template.lower()).ratio() > 0.6:
        return failed("the hypothesis is still the template's text", None,
                      "write your own: what you will change, why it should be faster, and by how much",
                      criterion="prediction")
    if len(text.split()) < 8:
        return failed(f"the hypothesis is {len(text.split())} words", "too short to say what, why and how much",
                      "name the change, the cost it removes, and the ratio that follows", criterion="prediction")
    ratio = experiment.predicted_ratio
    if ratio is None or experiment.expected_verdict() == "same":
        said = "no predicted_ratio" if ratio is None else f"predicted_ratio={ratio:g} says 'no change'"
        return failed(f"{said}", "the prediction must follow from your hypothesis",
                      "set predicted_ratio to your time / the baseline's time (0.5 = twice as fast), "
                      "worked out from the cost your change removes", criterion="prediction")
    return passed(f"experiment planned: your hypothesis, and a predicted ratio of {ratio:g}", criterion="prediction")


def check(solution: Callable[[Sequence[Hashable]], Any], experiment: Experiment | None = None, *,
          n: int = 2000, rounds: int = 10, required_speedup: float = 2.0, save: bool = True,
          seed: int | None = None) -> CheckResult:
    """Grade a faster ``unique_in_order``.

    Criteria, in order: (1) exactly the baseline's answer — a ``list`` of the same items, of the same types,
    in the same order (``0``/``0.0``/``False`` treated as Python treats them) — on edge cases, on fresh random
    inputs and on inputs of the timed size; (2) an experiment record planned with a hypothesis in your words
    (not the exercise cell's template) and a predicted ratio that is not "no change" (outside 1 ± 5 %): a
    prediction is part of passing; (3) timed interleaved against the baseline on fresh inputs of about ``n``
    items (the size is drawn for each grading, a new input for every call, every answer checked): the verdict
    is "faster" by at least ``required_speedup``; (4) the record concluded with that measurement (and saved
    when ``save``): whether your prediction held is reported — a refuted prediction is a result, and passes.
    ``seed`` reproduces a grading run (a new one is drawn each time by default).
    """
    refused, seed, rng = EXERCISE.start(solution, seed)
    if refused is not None:
        return refused
    size = band(rng, n, 0.25)
    cases = _cases(rng, size)
    base = rng.randrange(2**31)

    with Caller() as caller:
        def fast_then_concluded() -> tuple[Item, ...]:
            item = timed(caller, unique_in_order, solution, inputs=lambda k: (make_items(size, seed=base + k),),
                         required_speedup=required_speedup, rounds=rounds, rng=rng,
                         what=f"fresh inputs of {size:,} items")
            return item, prediction(experiment, item.detail, save=save)

        result = EXERCISE.grade(lambda: answers(caller, solution, unique_in_order, cases),
                                lambda: _plan_item(experiment), fast_then_concluded, seed=seed)
    return result


_SEALED = seal(globals())
