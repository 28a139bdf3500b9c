"""Lab 00's exercise: make ``unique_in_order`` fast — same answers, a measured speed-up, a hypothesis first.

The baseline keeps the first occurrence of each item, in order, by scanning a list for every item:
quadratic time. The learner writes a faster version and an experiment record predicting the gain.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from labkit.check import CheckResult, Item
from labkit.compare import compare
from labkit.record import Experiment

__all__ = ["unique_in_order", "check", "make_items"]


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


def _cases() -> list[list[Any]]:
    return [[], [1], [3, 1, 3, 2, 1], ["b", "a", "b", "c"], [(1, 2), (1, 2), 0, 0.0, False],
            make_items(500, 50, seed=1), make_items(2000, 2000, seed=2)]


def check(solution: Callable[[Sequence[Hashable]], Any], experiment: Experiment | None = None, *,
          n: int = 2000, rounds: int = 10, required_speedup: float = 2.0, save: bool = True) -> CheckResult:
    """Grade a faster ``unique_in_order``.

    Criteria, in order: (1) the same answer as the baseline on every case (order kept, first occurrence
    wins, ``0``/``0.0``/``False`` treated as Python treats them); (2) an experiment record planned with a
    hypothesis in your words and a predicted ratio; (3) measured interleaved against the baseline on ``n``
    items, the verdict is "faster" by at least ``required_speedup``. The record is concluded with that
    measurement (and saved when ``save``); whether your prediction held is reported, not graded.
    """
    title = "Lab 00 — a faster unique_in_order"
    if not callable(solution):
        return CheckResult(title, (Item(False, f"pass your function itself, not {type(solution).__name__}"),))
    items: list[Item] = []
    for case in _cases():
        try:
            got = list(solution(list(case)))
        except Exception as e:  # the learner's code may raise anything; report it, don't crash the grader
            return CheckResult(title, (Item(False, f"your function raised {type(e).__name__}: {e} on {case[:6]!r}…"),))
        want = unique_in_order(case)
        if got != want or [type(x) for x in got] != [type(x) for x in want]:
            return CheckResult(title, (Item(False, f"wrong answer on {case[:8]!r}{'…' if len(case) > 8 else ''}: "
                                                   f"expected {want[:8]!r}, got {got[:8]!r}"),))
    items.append(Item(True, "same answers as the baseline on every case (order and first occurrence kept)"))
    planned = (isinstance(experiment, Experiment) and experiment.predicted_ratio is not None
               and "TODO" not in experiment.hypothesis)
    items.append(Item(planned, "experiment planned with your hypothesis and a predicted ratio" if planned else
                      "plan the experiment first: replace the TODO with your hypothesis and set predicted_ratio "
                      "(your expected time / baseline time) in Experiment.plan(...)"))
    c = compare(unique_in_order, solution, make_items(n), rounds=rounds, min_sample_time=0.002,
                names=("baseline", "yours"))
    fast = c.verdict == "faster" and c.speedup >= required_speedup
    items.append(Item(fast, f"measured on {n} items: {c.summary()}"
                      + ("" if fast else f" — need 'faster' by at least {required_speedup:g}×")))
    if planned and experiment is not None:
        done = experiment.conclude(c)
        where = f"; saved to {done.save()}" if save else ""
        items.append(Item(True, f"your prediction ({experiment.predicted_ratio:g}) vs measured ({c.ratio:.3g}): "
                                f"{done.outcome}{where}"))
    return CheckResult(title, tuple(items))
