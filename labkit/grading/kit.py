"""The grader kit: what every exercise check is built from, so that no check can be passed without the work.

An exercise module (``labkit.exercises.labNN``) declares its :class:`Exercise` once — title, three hints, the
reference solution — and grades with :meth:`Exercise.grade`, which runs the criteria in order and stops at the
first one that fails (a fast wrong answer earns nothing):

1. :func:`answers` — the baseline's answers (or the exception types it raises) on several inputs, edge cases
   included **and inputs of the size that is timed**;
2. :func:`metered` — the lab's meter (queries, allocator calls, lines…) on an input generated fresh for this
   grading, **the answer checked**, at most ``limit`` and at least ``floor`` × the baseline's amount: a call
   that does only a sliver of the baseline's work on an input nobody has seen is a cache, not a fix;
3. :func:`timed` — :func:`labkit.compare` interleaving baseline and solution on a fresh input for every timed
   call, **the answers of a random sample of the timed calls (chosen after the run) checked**;
4. :func:`prediction` — the learner's :class:`~labkit.learner.record.Experiment` is required: planned with a
   predicted ratio before the check, concluded with the measured comparison (judged against the measured
   interval widened by the napkin tolerance, :func:`labkit.learner.record.judge`) and saved.

Threat model — what a grader built on this kit withstands:

* **Telling the phases apart.** Every call of the learner's function, in every phase, goes through one
  :class:`Caller`: the same worker thread, the same two frames above the function (``_timed`` in ``_serve``),
  arguments built fresh for that call. Sizes are drawn per grading from a band (:func:`band`), call counts
  vary, the correctness pass includes inputs of the timed size, and every answer the grader measures is
  checked, so a function that detects "am I timed?" (by size, count, stack or time) gains nothing.
* **Faked answers.** :func:`difference` compares in a canonical form: every node must be of the *exact* type
  of the baseline's answer (no subclasses, proxies or lazy objects), compared by the grader's code, never by
  the answer's own ``__eq__``; ``True`` is not ``1``, ``3.0`` is not ``3``.
* **Tampering with names.** The kit and each exercise module :func:`seal` their namespaces at import: the
  functions they run look names up in a snapshot taken then. Rebinding ``labNN.baseline``, ``labNN.check``'s
  helpers, ``labkit.grading.kit.*``, ``labkit.compare.compare`` or ``time.perf_counter_ns`` after import, or swapping
  a function's ``__code__``, changes nothing the grader runs.
* **Mutating shared objects, walking around meters, reading fakes.** A grader gives the learner's function
  its own objects (a connection, a client), meters where the function cannot unhook them (SQLite's trace
  callback, verified after the call by a canary query), and grades on data generated for the grading.
* **Crashing the grader.** Anything the learner's code raises — in the call, in the comparison of its
  answer, in a message describing it — becomes a failed item.

What it does **not** withstand (out of scope for a teaching lab; say so rather than pretend): code that
deliberately reaches into the grader's own state — ``sys._current_frames()``, ``gc.get_objects()``, a
function's ``__globals__`` or ``__closure__``, the frames' ``f_locals`` —, monkey-patching the third-party or
standard modules that the baseline itself calls (``numpy.vstack``, ``sqlite3``, ``labkit.toyshop.export``'s
helpers), the private helpers of unsealed labkit modules (``labkit.compare._estimate``, ``labkit.measure.stats``), the
attributes of the kit's classes (``Caller.call``, ``Exercise.grade``), ``ctypes``, or a second process. A
phase can still be told apart by a learner who looks for the meter itself (``sys.gettrace()`` during lab 04's
budget): nothing pays for it, because every answer is checked on inputs made for the grading. Such code can
also read the hints' answer; the grader is a teacher, not a sandbox.

Inputs are drawn from :func:`fresh_seed`, a new seed per grading run (shown in the result). Every failed item
reads the same way: what failed — by how much. Try: what to do.
"""

from __future__ import annotations

import copy as _copy
import inspect
import math
import os as _os
import random
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from labkit.grading.calls import CLOCK as _CLOCK
from labkit.grading.calls import Caller, Meter, Outcome
from labkit.grading.exact import difference
from labkit.grading.exact import kind as _kind
from labkit.grading.gradings import record_grading
from labkit.grading.sealing import seal
from labkit.learner.record import Experiment as _Experiment
from labkit.measure.comparison import compare as _compare

__all__ = ["CheckResult", "Item", "Exercise", "Note", "passed", "failed", "fresh_seed", "not_callable", "Caller",
           "Outcome", "difference", "answers", "metered", "timed", "planned", "prediction", "band", "seal", "Meter"]


@dataclass(frozen=True)
class Item:
    """One graded criterion: whether it held, a sentence saying what was checked or what to fix, and the
    measurement behind it when there is one (a :class:`labkit.measure.comparison.Comparison`, a count)."""

    ok: bool
    message: str
    detail: Any = field(default=None, compare=False, repr=False)
    #: which criterion this item grades: "correctness", "budget", "speed", "prediction" (or "" for others)
    criterion: str = ""


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


def passed(message: str, detail: Any = None, criterion: str = "") -> Item:
    """A criterion that held, saying what was checked."""
    return Item(True, message, detail, criterion)


def failed(what: str, by: str | None = None, hint: str | None = None, detail: Any = None,
           criterion: str = "") -> Item:
    """A criterion that failed, in the kit's one style: ``what failed — by how much. Try: what to do.``"""
    message = what + (f" — {by}" if by else "") + (f". Try: {hint}" if hint else "")
    return Item(False, message, detail, criterion)


def fresh_seed() -> int:
    """A seed drawn from the operating system: a new one per grading run, so graded inputs cannot be known
    (or hard-coded) ahead of the run. Graders print it, so a run can be reproduced with ``seed=``."""
    return secrets.randbelow(2**31)


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _call(fn: Callable[..., Any], args: tuple[Any, ...], copy: bool) -> tuple[Any, BaseException | None]:
    """The baseline's answer (or the exception it raised) on ``args``, deep-copied when asked."""
    try:
        return fn(*(_copy.deepcopy(args) if copy else args)), None
    except Exception as e:  # the baseline's own error is what the solution must raise too
        return None, e


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
        self._graded: Any = None
        self.attempts = 0

    def start(self, solution: Any, seed: int | None) -> tuple[CheckResult | None, int, random.Random]:
        """What every grader does first: the refusal when ``solution`` is not a function (else ``None``), the
        grading's seed (a fresh one, :func:`fresh_seed`, unless ``seed`` reproduces a run) and a generator on it.

            refused, seed, rng = EXERCISE.start(solution, seed)
            if refused is not None:   # a refusal is a CheckResult, which is falsy (not passed)
                return refused
        """
        seed = fresh_seed() if seed is None else seed
        self._graded = solution  # the fix the grading's record keeps (labkit.grading.gradings)
        return not_callable(self, solution), seed, random.Random(seed)

    def grade(self, *steps: Callable[[], Item | Sequence[Item]], seed: int | None = None,
              about: str = "") -> CheckResult:
        """Run the criteria in order, stopping after the first failed item; count the attempt. The title names
        ``about`` (what was graded: "order 42") and the ``seed`` that reproduces the run."""
        said = ", ".join(x for x in (about, "" if seed is None else f"seed {seed}") if x)
        title = f"{self.title} ({said})" if said else self.title
        self.attempts += 1
        items: list[Item] = []
        for step in steps:
            try:
                got = step()
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # whatever the answer broke in the grader's own code: a failed item
                got = failed(f"the check could not grade this step: {_text(e)}",
                             hint="return an answer of the stated type; if it is one, report this")
            items.extend([got] if isinstance(got, Item) else got)
            if not all(i.ok for i in items):
                break
        result = CheckResult(title, tuple(items))
        if _os.environ.get("PERFLAB_GRADINGS", "on") != "off":  # the graders' benchmark turns the records off
            record_grading(self.title, result, self._graded, seed)
        return result

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


# ---- the kit: one code path for every call, exact answers, meters, the prediction ---------------------------

def band(rng: Any, n: int, spread: float = 0.25) -> int:
    """A size drawn for this grading from ``n × (1 ± spread)``: no fixed, public size tells a timed input."""
    lo, hi = max(1, round(n * (1 - spread))), max(1, round(n * (1 + spread)))
    return rng.randint(lo, hi)


def _text(e: BaseException) -> str:
    """``Type: message`` for an exception the learner's code raised, even one whose ``str`` raises."""
    try:
        msg = str(e)
    except Exception:  # an exception that cannot even be printed is still a failure to report
        msg = "<its message could not be printed>"
    return f"{type(e).__name__}: {msg[:200]}"


def _differs(differ: Callable[[Any, Any], str | None], want: Any, got: Any) -> str | None:
    """``differ`` made safe: a comparison the answer breaks (it raises, recurses forever) is a difference."""
    try:
        return differ(want, got)
    except Exception as e:  # the answer's own code ran (or broke the comparison): that is a wrong answer
        return f"your answer could not be compared ({_text(e)}); return plain values of the stated type"


def answers(caller: Caller, solution: Callable[..., Any], baseline: Callable[..., Any],
            cases: Iterable[tuple[Any, ...] | Callable[[], tuple[Any, ...]]], *, differ: Callable[[Any, Any], str | None] = difference,
            show: Callable[[tuple[Any, ...]], str] | None = None, copy: bool = True) -> Item:
    """Correctness: the solution (called through ``caller``) answers every case exactly as the baseline does.

    Args:
        cases: argument tuples — edge cases, fresh random inputs, **and inputs of the timed size** — or
            zero-argument callables that build one (each side then gets its own build, nothing copied).
        differ: ``differ(want, got)`` → where they differ, or None (default :func:`difference`).
        show: how a case is named in a message (default: a short ``repr`` of its arguments).
        copy: deep-copy the arguments for each call, so neither side sees the other's mutations.

    Where the baseline raises, the solution must raise the same exception type (or a subclass).
    """
    n = 0
    for case in cases:
        n += 1
        built = callable(case)
        args = case() if built else case
        name = show(args) if show else _short(args)
        want, want_err = _call(baseline, args, copy and not built)
        got = caller.call(solution, case() if built else _copy.deepcopy(args) if copy else args)
        if want_err is not None:
            if got.error is None:
                return failed(f"on {name}: expected {type(want_err).__name__} (as the baseline raises)",
                              f"got an answer of type {_kind(got.value)}", "raise the same error for the same input",
                              criterion="correctness")
            if not isinstance(got.error, type(want_err)):
                return failed(f"on {name}: expected {type(want_err).__name__} (as the baseline raises)",
                              f"got {_text(got.error)}", criterion="correctness")
            continue
        if got.error is not None:
            return failed(f"on {name}: your function raised {_text(got.error)}",
                          hint="run it on this input yourself and read the traceback", criterion="correctness")
        where = _differs(differ, want, got.value)
        if where is not None:
            return failed(f"wrong answer on {name}", where, criterion="correctness")
    return passed(f"same answers as the baseline on all {n} inputs", criterion="correctness")


def metered(caller: Caller, solution: Callable[..., Any], baseline: Callable[..., Any],
            build: Callable[[], tuple[Any, ...]], *, meter: Callable[[], Meter], unit: str, what: str,
            limit: float | None = None, max_fraction: float | None = None, floor: float = 0.01,
            differ: Callable[[Any, Any], str | None] = difference, warm: Callable[[], tuple[Any, ...]] | None = None,
            hint: str | None = None) -> Item:
    """The budget: the lab's meter on one call of each side, on an input built fresh for this grading.

    Args:
        build: a new argument tuple per call (the baseline and the solution each get their own, equal ones);
            generate it from the grading's seed, so it exists nowhere before the call.
        meter: a new :class:`Meter` per call.
        unit, what: what is counted ("queries") and on what ("customer 417's export").
        limit, max_fraction: the most allowed — an amount, or a fraction of the baseline's (either or both; a
            budget needs one: ValueError without).
        floor: the least allowed, as a fraction of the baseline's amount: a call doing less than that (or
            nothing) on an input nobody has seen is answering from a cache or a precomputed table.
        differ: the metered answer is checked too, like every answer (default :func:`difference`).
        warm: when given, each side is first called on ``warm()`` (another input), so buffers a solution keeps
            between calls exist before the metered one.
    """
    if limit is None and max_fraction is None:
        raise ValueError(f"metered({what!r}) has no budget: give limit= (an amount of {unit}), max_fraction= (of "
                         "the baseline's) or both")
    if warm is not None:
        caller.call(baseline, warm())
        caller.call(solution, warm())
    base_meter, mine = meter(), meter()
    base = caller.call(baseline, build(), base_meter)
    if base.error is not None:
        return failed(f"{what}: the baseline itself failed under the meter ({_text(base.error)})",
                      hint="a grader problem: report it", criterion="budget")
    got = caller.call(solution, build(), mine)
    if got.error is not None:
        return failed(f"{what}: your function raised {_text(got.error)}", criterion="budget")
    where = _differs(differ, base.value, got.value)
    if where is not None:
        return failed(f"wrong answer on {what} (the metered call)", where, criterion="budget")
    amount, base_amount = float(mine.amount), float(base_meter.amount)
    cap = min(x for x in (limit, None if max_fraction is None else max_fraction * base_amount) if x is not None)
    scale = f" (the baseline: {base_amount:,.6g})"
    if amount <= 0 or amount < floor * base_amount:
        little = f"no {unit} at all" if amount <= 0 else \
            f"{amount:,.6g} {unit}{scale}, less than {floor:.1%} of the baseline's work"
        return failed(f"{what}: {little} on an input generated just now",
                      "only a cache or a precomputed answer does that little",
                      "compute the answer from the input; no work is not a fix", detail=amount, criterion="budget")
    if amount > cap:
        return failed(f"{what}: {amount:,.6g} {unit}{scale}", f"over the budget of {cap:,.6g} by {amount - cap:,.6g}",
                      hint, detail=amount, criterion="budget")
    return passed(f"{what}: {amount:,.6g} {unit}{scale}, within the budget of {cap:,.6g}, the answer checked",
                  detail=amount, criterion="budget")


class _LearnerRaised(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(_text(error))
        self.error = error


def timed(caller: Caller, baseline: Callable[..., Any], solution: Callable[..., Any], *,
          inputs: Callable[[int], tuple[Any, ...]], required_speedup: float, rounds: int, rng: Any,
          what: str = "", differ: Callable[[Any, Any], str | None] = difference, sample: int | None = None,
          **compare_kw: Any) -> Item:
    """Speed on fresh inputs, every answer (or a sample of ``sample`` ≥ 3, chosen after the run) checked.

    :func:`labkit.compare` (bound at import) interleaves both sides, each call through ``caller`` (its
    hand-off is taken off the clock: a sample is the call's own time). The rounds (``rounds`` plus up to half
    as many again) and warm-ups (1–3) are drawn from ``rng``. Then the solution's answers are compared with
    the baseline's for the same inputs — all, or ``sample`` of them drawn with :mod:`secrets` once the run is
    over. ``required_speedup``: choose it far from the real effect, so an honest solution passes 10 in 10.
    """
    got: tuple[dict[int, Any], dict[int, Any]] = ({}, {})
    current, lost = [0], [0]

    def clock() -> int:
        return _CLOCK() - lost[0]

    def inputs_at(k: int) -> tuple[Any, ...]:
        current[0] = k
        return inputs(k)

    def side(i: int, fn: Callable[..., Any]) -> Callable[..., None]:
        def call(*args: Any) -> None:
            t0 = _CLOCK()
            out = caller.call(fn, args)
            lost[0] += (_CLOCK() - t0) - out.ns
            if out.error is not None:
                raise _LearnerRaised(out.error)
            got[i][current[0]] = out.value
        return call

    where = f"{what}: " if what else ""
    n = rounds + rng.randrange(0, max(2, rounds // 2 + 1))
    try:
        c = _compare(side(0, baseline), side(1, solution), inputs=inputs_at, rounds=n, names=("baseline", "yours"),
                     warmup=rng.randint(1, 3), clock=clock, **compare_kw)
    except _LearnerRaised as e:
        return failed(f"timing {what or 'your function'}: a call raised {e}", criterion="speed")
    except Exception as e:  # anything else the answer broke inside the comparison
        return failed(f"timing {what or 'your function'}: {_text(e)}", criterion="speed")
    keys = sorted(set(got[0]) & set(got[1]))
    if sample is not None and len(keys) > max(3, sample):
        keys = sorted(secrets.SystemRandom().sample(keys, max(3, sample)))
    for k in keys:
        if (d := _differs(differ, got[0][k], got[1][k])) is not None:
            return failed(f"{where}wrong answer on a timed call", d, "every answer counts, timed or not",
                          criterion="speed")
    checked = f"; {len(keys)} timed answers checked"
    if c.verdict == "faster" and c.speedup >= required_speedup:
        return passed(f"{where}{c.summary()}{checked}", detail=c, criterion="speed")
    best = 1 / c.ci[0] if c.ci[0] > 0 else float("inf")  # the speed-up at the interval's most favourable end
    if c.verdict == "inconclusive" and best >= required_speedup:
        return failed(f"{where}{c.summary()}", "too noisy to grade: the interval reaches the required "
                      f"{required_speedup:g}×", "close other programs and run the check again", detail=c,
                      criterion="speed")
    return failed(f"{where}{c.summary()}", f"need 'faster' by at least {required_speedup:g}×",
                  "find where the baseline spends its time (the lab's tool) and remove that work", detail=c,
                  criterion="speed")


_PLAN = ("plan it before the check: exp = Experiment.plan('my fix', 'what I change, the cost it removes, and the "
         "ratio that follows', predicted_ratio=0.3), then check(my_fn, exp)")


def planned(experiment: Any, *, template: str | None = None) -> Item:
    """The prediction is required: an :class:`~labkit.learner.record.Experiment` (that exact type) with a hypothesis in
    the learner's words (not ``template``, nothing marked TODO) and a predicted ratio."""
    if experiment is None:
        return failed("no prediction: experiment= is None", "a prediction is part of passing", _PLAN,
                      criterion="prediction")
    if type(experiment) is not _Experiment:
        return failed(f"experiment= must be a labkit Experiment record, got a {_kind(experiment)}", hint=_PLAN,
                      criterion="prediction")
    text = " ".join(str(experiment.hypothesis).split())
    if "TODO" in text or (template is not None and text.lower() == " ".join(template.split()).lower()):
        return failed("the hypothesis is still the template's text", None,
                      "write your own: what you will change, why it should be faster, and by how much",
                      criterion="prediction")
    ratio = experiment.predicted_ratio
    if type(ratio) is not float or not (math.isfinite(ratio) and ratio > 0):
        return failed("your experiment has no predicted ratio", "without one there is nothing to confirm",
                      "Experiment.plan(..., predicted_ratio=your time / the baseline's, from your napkin math)",
                      criterion="prediction")
    return passed(f"prediction planned: a ratio of {ratio:g}", criterion="prediction")


def prediction(experiment: Any, comparison: Any, *, save: bool = True) -> Item:
    """The learner's experiment (checked by :func:`planned` first) concluded with the grader's measurement
    (``comparison``, the speed item's ``detail``), judged by :func:`labkit.learner.record.judge` and
    saved. A refuted prediction is a result, and passes: what fails is a record that cannot be concluded."""
    first = planned(experiment)
    if not first.ok:
        return first
    if comparison is None:
        return failed("nothing was measured to conclude your experiment with", criterion="prediction")
    try:
        done = experiment.conclude(comparison)
        where = f"; saved to {done.save()}" if save else ""
    except Exception as e:  # a record that cannot be concluded or saved
        return failed(f"your experiment could not be concluded: {_text(e)}", hint=_PLAN, criterion="prediction")
    if done.outcome is None:
        return failed("your experiment is not concluded", hint=_PLAN, criterion="prediction")
    saving = f"predicted saving {1 - done.predicted_ratio:.0%}, measured {1 - comparison.ratio:.0%}"
    lo, hi = comparison.ci
    # the item holds because the prediction is on record and judged (the ✔ says that, not "right"): the
    # judgement names the range it was judged by, and a miss says what to do with it
    miss = {"refuted": " — a result, not a failure: say what your napkin math left out",
            "inconclusive": " — the measurement could not tell"}.get(done.outcome, "")
    return passed(f"prediction on record — your prediction ({done.predicted_ratio:g}) vs measured "
                  f"({comparison.ratio:.3g}, interval {lo:.3g}–{hi:.3g}; {saving}) → {done.judgement}{miss}{where}",
                  detail=done, criterion="prediction")


_SEALED = seal(globals())
