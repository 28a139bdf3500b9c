"""The grader kit: what every exercise check is built from, so that no check can be passed without the work.

An exercise module (``labkit.exercises.labNN``) declares its :class:`Exercise` once — title, three hints, the
reference solution — and grades with :meth:`Exercise.grade`, which runs the criteria in order and stops at the
first one that fails (a fast wrong answer earns nothing):

1. :func:`same_answers` — the baseline's answers (or the exception types it raises) on several inputs,
   edge cases included;
2. :func:`budget` — the lab's meter (queries, allocator calls, bytes…) on an input the correctness pass
   **never saw**, failing a call that did no measurable work: a memoised or hard-coded answer is not a fix;
3. :func:`speed` — :func:`labkit.compare` interleaving baseline and solution with a **fresh input for every
   timed call** (``compare(..., inputs=…)``), the same sequence for both sides, so no cache keyed on the
   input can answer for either;
4. :func:`concluded` — the learner's experiment record (their prediction) concluded with the measured ratio.

Inputs are drawn from :func:`fresh_seed`, a new seed per grading run (shown in the result), so answers
hard-coded for one run fail the next. Every failed item reads the same way: what failed — by how much.
Try: what to do.
"""

from __future__ import annotations

import copy as _copy
import inspect
import operator
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

__all__ = ["CheckResult", "Item", "Exercise", "Note", "passed", "failed", "same_answers", "budget", "speed", "concluded",
           "fresh_seed", "not_callable"]


@dataclass(frozen=True)
class Item:
    """One graded criterion: whether it held, a sentence saying what was checked or what to fix, and the
    measurement behind it when there is one (a :class:`labkit.comparison.Comparison`, a count)."""

    ok: bool
    message: str
    detail: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CheckResult:
    """The grade of one exercise: ``passed`` only when every item holds."""

    title: str
    items: tuple[Item, ...]

    @property
    def passed(self) -> bool:
        """True when every item holds (and there is at least one)."""
        return bool(self.items) and all(i.ok for i in self.items)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = f"{'PASSED' if self.passed else 'NOT YET'} — {self.title}"
        return "\n".join([head, *(f"  {'✔' if i.ok else '✘'} {i.message}" for i in self.items)])

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        rows = "".join(
            f"<li style='color:{'#1a7f37' if i.ok else '#cf222e'}'>{'✔' if i.ok else '✘'} {escape(i.message)}</li>"
            for i in self.items)
        return (f"<div style='border-left:4px solid {colour};padding-left:8px'><b style='color:{colour}'>"
                f"{'PASSED' if self.passed else 'NOT YET'}</b> — {escape(self.title)}<ul>{rows}</ul></div>")


def passed(message: str, detail: Any = None) -> Item:
    """A criterion that held, saying what was checked."""
    return Item(True, message, detail)


def failed(what: str, by: str | None = None, hint: str | None = None, detail: Any = None) -> Item:
    """A criterion that failed, in the kit's one style: ``what failed — by how much. Try: what to do.``"""
    message = what + (f" — {by}" if by else "") + (f". Try: {hint}" if hint else "")
    return Item(False, message, detail)


def fresh_seed() -> int:
    """A seed drawn from the operating system: a new one per grading run, so graded inputs cannot be known
    (or hard-coded) ahead of the run. Graders print it, so a run can be reproduced with ``seed=``."""
    return secrets.randbelow(2**31)


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _call(fn: Callable[..., Any], args: tuple[Any, ...], copy: bool) -> tuple[Any, BaseException | None]:
    try:
        return fn(*(_copy.deepcopy(args) if copy else args)), None
    except Exception as e:  # the learner's code may raise anything: it is reported, never raised
        return None, e


def same_answers(solution: Callable[..., Any], baseline: Callable[..., Any], cases: Iterable[tuple[Any, ...]], *,
                 same: Callable[[Any, Any], bool] = operator.eq, show: Callable[[tuple[Any, ...]], str] | None = None,
                 describe: Callable[[Any, Any], str] | None = None, copy: bool = True) -> Item:
    """Correctness: the solution answers every case as the baseline does.

    Args:
        solution, baseline: called as ``fn(*case)``.
        cases: argument tuples — edge cases (empty, one, many, an unknown id) and fresh random inputs.
        same: how two answers are compared (default ``==``).
        show: how a case is named in a message (default: a short ``repr`` of its arguments).
        describe: ``describe(want, got)`` → where two answers differ (default: both, shortened).
        copy: deep-copy the arguments for each call, so neither side sees the other's mutations.

    Where the baseline raises, the solution must raise the same exception type (an unknown id → the same
    ``NotFoundError``). The first difference fails the item, naming the case.
    """
    n = 0
    for case in cases:
        n += 1
        name = show(case) if show else _short(case)
        want, want_err = _call(baseline, case, copy)
        got, got_err = _call(solution, case, copy)
        if want_err is not None:
            if got_err is None:
                return failed(f"on {name}: expected {type(want_err).__name__} (as the baseline raises)",
                              f"got an answer, {_short(got, 60)}", "raise the same error for the same input")
            if not isinstance(got_err, type(want_err)):
                return failed(f"on {name}: expected {type(want_err).__name__} (as the baseline raises)",
                              f"got {type(got_err).__name__}: {got_err}")
            continue
        if got_err is not None:
            return failed(f"on {name}: your function raised {type(got_err).__name__}: {got_err}",
                          hint="run it on this input yourself and read the traceback")
        try:
            equal = bool(same(want, got))
        except Exception as e:  # an answer of a type that cannot be compared is a wrong answer
            equal, got = False, f"<uncomparable {type(got).__name__}: {e}>"
        if not equal:
            where = describe(want, got) if describe else f"expected {_short(want, 70)}, got {_short(got, 70)}"
            return failed(f"wrong answer on {name}", where)
    return passed(f"same answers as the baseline on all {n} inputs")


def budget(solution: Callable[..., Any], args: tuple[Any, ...], *, meter: Callable[..., float], limit: float,
           unit: str, what: str, hint: str | None = None, baseline_amount: float | None = None) -> Item:
    """The budget: the lab's meter on one call of the solution, on an input it has never seen.

    Args:
        solution: called as ``meter(solution, *args)``.
        args: an input the correctness pass never used (draw it from the grading run's seed).
        meter: ``meter(fn, *args) -> amount`` — queries made, allocator calls, bytes written…
        limit: the most allowed.
        unit: what the amount counts ("queries", "allocations").
        what: what was measured ("customer 417's export").
        hint: what to try when over the limit.
        baseline_amount: the baseline's amount on the same input, shown for scale.

    A call that did **no measurable work** (amount 0) fails: on an input never seen before, only a cached or
    hard-coded answer costs nothing, and that is not a fix.
    """
    try:
        amount = meter(solution, *args)
    except Exception as e:  # the learner's code ran under the meter: report, don't crash
        return failed(f"{what}: your function raised {type(e).__name__}: {e}")
    scale = f" (the baseline: {baseline_amount:,.6g})" if baseline_amount is not None else ""
    if amount <= 0:
        return failed(f"{what}: no {unit} at all on an input it had never seen",
                      "a call that does no work can only be answering from a cache or a hard-coded table",
                      "compute the answer from the input; no work is not a fix", detail=amount)
    if amount > limit:
        return failed(f"{what}: {amount:,.6g} {unit}{scale}", f"over the budget of {limit:,.6g} by "
                      f"{amount - limit:,.6g}", hint, detail=amount)
    return passed(f"{what}: {amount:,.6g} {unit}{scale}, within the budget of {limit:,.6g}", detail=amount)


def speed(baseline: Callable[..., Any], solution: Callable[..., Any], *, inputs: Callable[[int], tuple[Any, ...]],
          required_speedup: float, rounds: int = 10, what: str = "", **compare_kw: Any) -> Item:
    """Speed on fresh inputs: ``labkit.compare(baseline, solution, inputs=inputs)`` must say ``faster`` by at
    least ``required_speedup``.

    Every timed call gets a new input (``inputs(k)`` → an argument tuple), the same sequence for both sides,
    so a cache keyed on the input cannot answer. Choose ``required_speedup`` far from the real effect (half of
    it, say), so an honest solution passes 10 times in 10 on a busy machine. An inconclusive verdict is
    called "too noisy" only when its interval still reaches the required factor; otherwise the solution is
    simply not fast enough. The comparison is on ``item.detail``.
    """
    from labkit.comparison import compare

    try:
        c = compare(baseline, solution, inputs=inputs, rounds=rounds, names=("baseline", "yours"), **compare_kw)
    except Exception as e:  # the learner's code runs inside compare
        return failed(f"timing your function{' on ' + what if what else ''}: it raised {type(e).__name__}: {e}")
    where = f"{what}: " if what else ""
    if c.verdict == "faster" and c.speedup >= required_speedup:
        return passed(f"{where}{c.summary()}", detail=c)
    best = 1 / c.ci[0] if c.ci[0] > 0 else float("inf")  # the speed-up at the interval's most favourable end
    if c.verdict == "inconclusive" and best >= required_speedup:
        return failed(f"{where}{c.summary()}", "too noisy to grade: the interval reaches the required "
                      f"{required_speedup:g}×", "close other programs and run the check again", detail=c)
    return failed(f"{where}{c.summary()}", f"need 'faster' by at least {required_speedup:g}×",
                  "find where the baseline spends its time (the lab's tool) and remove that work", detail=c)


def concluded(experiment: Any, comparison: Any, *, save: bool = True) -> tuple[Item, ...]:
    """The learner's prediction beside the measurement: ``experiment`` (a :class:`labkit.record.Experiment`)
    concluded with ``comparison`` (the speed item's ``detail``) and saved; the item's ``detail`` is the
    concluded record. Nothing when there is no experiment or nothing was measured. Graders call it right after
    :func:`speed`, in the same step, so a prediction is judged whether or not the speed passed."""
    if experiment is None or comparison is None:
        return ()
    try:
        done = experiment.conclude(comparison)
        where = f"; saved to {done.save()}" if save else ""
    except Exception as e:  # a record that cannot be concluded (already concluded, not an Experiment…)
        return (failed(f"your experiment could not be concluded: {type(e).__name__}: {e}",
                       hint="plan a new one with Experiment.plan(...) and pass it as experiment="),)
    predicted = "none stated" if done.predicted_ratio is None else f"{done.predicted_ratio:g}"
    return (passed(f"your prediction ({predicted}) vs measured ({comparison.ratio:.3g}): "
                   f"{done.outcome or 'not judged without a predicted ratio'}{where}", detail=done),)


class Exercise:
    """An exercise's hints, reference solution and attempts.

    Args:
        title: shown on every grade.
        hints: from a nudge to nearly the answer; ``hint(1)`` shows the first.
        solution: the reference solution (a function, whose source is shown, or text).

    ``solution()`` shows the reference only after at least one graded attempt in this session.
    """

    def __init__(self, title: str, hints: Sequence[str], solution: Callable[..., Any] | str) -> None:
        self.title = title
        self.hints = tuple(hints)
        self._solution = solution
        self.attempts = 0

    def grade(self, *steps: Callable[[], Item | Sequence[Item]]) -> CheckResult:
        """Run the criteria in order, stopping after the first failed item; count the attempt."""
        self.attempts += 1
        items: list[Item] = []
        for step in steps:
            got = step()
            items.extend([got] if isinstance(got, Item) else got)
            if not all(i.ok for i in items):
                break
        return CheckResult(self.title, tuple(items))

    def refuse(self, message: str) -> CheckResult:
        """A grade that stops before any criterion (the argument is not a function, say); not an attempt."""
        return CheckResult(self.title, (Item(False, message),))

    def hint(self, k: int = 1) -> Note:
        """Hint ``k`` (1 to ``len(hints)``), as text that a notebook cell shows once."""
        if not isinstance(k, int) or not 1 <= k <= len(self.hints):
            return Note(f"there are hints 1 to {len(self.hints)}: hint(1) is a nudge, hint({len(self.hints)}) "
                        "nearly the answer")
        return Note(f"Hint {k} of {len(self.hints)}: {self.hints[k - 1]}")

    def solution(self) -> Note:
        """The reference solution — only after at least one graded attempt (``check(...)``) — as text a cell shows
        once (as code, when it is a function's source)."""
        if self.attempts == 0:
            return Note("Try the exercise first: run check(...) on your own attempt at least once (a wrong one "
                        "counts), then ask for the solution. The hints come first: hint(1).")
        if callable(self._solution):
            return Note(inspect.getsource(self._solution), code=True)
        return Note(str(self._solution))


class Note(str):
    """Text for the learner (a hint, a solution): a ``str``, shown once and as written when it ends a cell — not
    as a quoted repr, and not printed a second time."""

    code: bool = False

    def __new__(cls, text: str, code: bool = False) -> Note:
        note = super().__new__(cls, text)
        note.code = code
        return note

    def __repr__(self) -> str:
        return str(self)

    def _repr_markdown_(self) -> str:
        return f"```python\n{self}\n```" if self.code else str(self)


def not_callable(exercise: Exercise, value: Any) -> CheckResult | None:
    """The refusal every grader gives when handed something that is not a function, or None if it is one."""
    if callable(value):
        return None
    hint = " — did you call it? pass my_fn, not my_fn()" if value is not None else ""
    return exercise.refuse(f"pass your function itself, not {type(value).__name__}{hint}")
