"""The test kit for exercise graders (LABS.md): a grader must pass the reference and fail everything else.

    from graderkit import assert_grader, hard_coded, memoised

    GRADER_CASES = {                      # module level in tests/test_labNN.py; bench_graders.py runs it 10×
        "grade": lambda fn: lab03.check(fn, rounds=4),
        "reference": reference, "baseline": lab03.baseline, "wrong": wrong,
        "cheats": {"memoised": memoised(lab03.baseline), "hard-coded": hard_coded(lab03.baseline, seen_args)},
    }

    def test_grader():
        assert_grader(**GRADER_CASES)

The cheats are what a learner might try instead of the work: :func:`memoised` (the baseline behind a cache
keyed on its input: fast on any input it has seen), :func:`hard_coded` (answers recorded for the inputs the
learner could see, the baseline's work skipped). Each must fail.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from labkit.check import CheckResult

__all__ = ["memoised", "hard_coded", "assert_grader", "run_cases", "Verdict"]


def _key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return pickle.dumps((args, sorted(kwargs.items())))
    except Exception:  # unpicklable arguments (a connection): key on what can be keyed
        return repr((tuple(a for a in args if isinstance(a, int | str | float | tuple)), sorted(kwargs.items())))


def memoised(fn: Callable[..., Any], key: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """The baseline behind a cache keyed on its input (``key(*args)``, default: the pickled arguments)."""
    cache: dict[Any, Any] = {}

    @functools.wraps(fn)
    def cheat(*args: Any, **kwargs: Any) -> Any:
        k = key(*args) if key is not None else _key(args, kwargs)
        if k not in cache:
            cache[k] = fn(*args, **kwargs)
        return cache[k]

    cheat.__name__ = f"memoised_{getattr(fn, '__name__', 'fn')}"
    return cheat


def hard_coded(fn: Callable[..., Any], inputs: Iterable[tuple[Any, ...]],
               key: Callable[..., Any] | None = None, fallback: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """Answers recorded up front for ``inputs`` (the ones a learner could have seen), returned without any
    work; any other input gets ``fallback(*args)`` (default: the first recorded answer)."""
    table = {(key(*a) if key else _key(a, {})): fn(*a) for a in inputs}
    first = next(iter(table.values()), None)

    def cheat(*args: Any) -> Any:
        k = key(*args) if key else _key(args, {})
        if k in table:
            return table[k]
        return fallback(*args) if fallback is not None else first

    cheat.__name__ = f"hard_coded_{getattr(fn, '__name__', 'fn')}"
    return cheat


@dataclass(frozen=True)
class Verdict:
    """One case's grade: its name, whether it passed, and the grade itself."""

    case: str
    passed: bool
    grade: CheckResult


def run_cases(grade: Callable[[Callable[..., Any]], CheckResult], reference: Callable[..., Any],
              baseline: Callable[..., Any], wrong: Callable[..., Any],
              cheats: Mapping[str, Callable[..., Any]]) -> list[Verdict]:
    """Grade the reference, the baseline, the wrong answer and every cheat once each."""
    cases = {"reference": reference, "baseline": baseline, "wrong": wrong, **cheats}
    out = []
    for name, fn in cases.items():
        g = grade(fn)
        out.append(Verdict(name, g.passed, g))
    return out


def assert_grader(grade: Callable[[Callable[..., Any]], CheckResult], reference: Callable[..., Any],
                  baseline: Callable[..., Any], wrong: Callable[..., Any],
                  cheats: Mapping[str, Callable[..., Any]]) -> None:
    """The reference passes; the baseline, the wrong answer and every cheat fail (the wrong answer at the
    first item, correctness)."""
    if not cheats:
        raise AssertionError("a grader test needs its cheats: at least memoised and hard_coded")
    for v in run_cases(grade, reference, baseline, wrong, cheats):
        if v.case == "reference":
            assert v.passed, f"the reference solution must pass:\n{v.grade}"
        else:
            assert not v.passed, f"the {v.case} case must fail, but passed:\n{v.grade}"
        if v.case == "wrong":
            assert len(v.grade.items) == 1 and not v.grade.items[0].ok, \
                f"a wrong answer must fail at correctness, first:\n{v.grade}"
