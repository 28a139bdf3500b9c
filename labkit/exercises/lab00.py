"""Lab 00's exercise: make ``unique_in_order`` fast — same answers, a measured speed-up, a hypothesis first.

The baseline keeps the first occurrence of each item, in order, by scanning a list for every item:
quadratic time. The learner writes a faster version and an experiment record predicting the gain.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from labkit.check import (
    CheckResult,
    Exercise,
    Item,
    failed,
    fresh_seed,
    not_callable,
    passed,
    same_answers,
    speed,
)
from labkit.record import Experiment

__all__ = ["unique_in_order", "check", "make_items", "hint", "solution"]


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
hint = EXERCISE.hint
solution = EXERCISE.solution


def _cases(rng: random.Random) -> list[tuple[list[Any]]]:
    fixed: list[list[Any]] = [[], [1], [3, 1, 3, 2, 1], ["b", "a", "b", "c"], [(1, 2), (1, 2), 0, 0.0, False]]
    fresh = [make_items(rng.randrange(50, 600), rng.randrange(1, 300), seed=rng.randrange(2**31)) for _ in range(3)]
    return [(case,) for case in fixed + fresh]


def _same(want: list[Any], got: Any) -> bool:
    got = list(got)
    return got == want and [type(x) for x in got] == [type(x) for x in want]


def check(solution: Callable[[Sequence[Hashable]], Any], experiment: Experiment | None = None, *,
          n: int = 2000, rounds: int = 10, required_speedup: float = 2.0, save: bool = True,
          seed: int | None = None) -> CheckResult:
    """Grade a faster ``unique_in_order``.

    Criteria, in order: (1) the same answer as the baseline on fixed edge cases and on fresh random inputs
    (order kept, first occurrence wins, ``0``/``0.0``/``False`` treated as Python treats them); (2) an
    experiment record planned with a hypothesis in your words and a predicted ratio; (3) timed interleaved
    against the baseline on fresh inputs of ``n`` items — a new input for every call, so no cache can answer —
    the verdict is "faster" by at least ``required_speedup``. The record is concluded with that measurement
    (and saved when ``save``); whether your prediction held is reported, not graded. ``seed`` reproduces a
    grading run (a new one is drawn each time by default).
    """
    refused = not_callable(EXERCISE, solution)
    if refused is not None:
        return refused
    seed = fresh_seed() if seed is None else seed
    rng = random.Random(seed)

    def planned() -> Item:
        ok = (isinstance(experiment, Experiment) and experiment.predicted_ratio is not None
              and "TODO" not in experiment.hypothesis)
        return passed("experiment planned with your hypothesis and a predicted ratio") if ok else failed(
            "no experiment planned", hint="replace the TODO with your hypothesis and set predicted_ratio (your "
            "expected time / baseline time) in Experiment.plan(...)")

    def fast_then_concluded() -> tuple[Item, ...]:
        base = rng.randrange(2**31)
        item = speed(unique_in_order, solution, inputs=lambda k: (make_items(n, seed=base + k),),
                     required_speedup=required_speedup, rounds=rounds, what=f"fresh inputs of {n} items")
        c = item.detail
        if experiment is None or c is None:
            return (item,)
        done = experiment.conclude(c)  # the prediction is judged whether or not the speed passed
        where = f"; saved to {done.save()}" if save else ""
        return item, passed(f"your prediction ({experiment.predicted_ratio:g}) vs measured ({c.ratio:.3g}): "
                            f"{done.outcome}{where}")

    result = EXERCISE.grade(lambda: same_answers(solution, unique_in_order, _cases(rng), same=_same),
                            planned, fast_then_concluded)
    return CheckResult(f"{result.title} (seed {seed})", result.items)
