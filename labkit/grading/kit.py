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
* **Work left for later.** The :class:`Caller` copies each answer the moment its call returns (a container a
  thread fills afterwards is checked empty), compares the copy with the object itself once the timing is over
  (a buffer the next call overwrites is caught), and fails a call that leaves a thread it started running —
  or, where a component keeps one by design (lab 09's ledgers, ``Caller(threads="idle")``), working.
* **The other side slowed from outside the call.** A call that changes the switch interval, the garbage
  collector (on/off, thresholds, callbacks), a profile or trace hook, the CPU affinity or priority of the
  grading threads, or the recursion limit is put back and fails, saying what it changed. Before a meter or a
  clock starts, :func:`quiet` looks at the rest of the process (its other Python threads, its children) and
  refuses while it works; during a timing, a metered pair or a load run, :class:`Watch` does the same: a
  thread started by a notebook cell that burns the CPU whenever the learner's function is not running (while
  the baseline is timed or metered) makes the check refuse, never pass.
* **The caller's data.** Every argument list, dict, set or array is copied before the call and compared after
  it: a solution that writes into its input, returns it, or returns a view of it fails (unless the exercise
  asks for an update in place: ``inplace=True``).
* **Records that are not this experiment.** :func:`planned` reads the record's fields, of their exact types
  (never its text), and refuses one that is concluded already, dated in the future or not dated, changed on the
  instance (a replaced ``save`` or ``conclude``), or planned in another lab's notebook (the notebook's name, from
  Jupyter Server, is on the record). :func:`prediction` concludes with the grader's own comparison, signed by
  the process that measured it (:func:`labkit.measure.comparison.measured_here`), through the class's own
  methods, and re-reads the saved file.
* **Measuring tools swapped.** Every tool a grader measures or drives a load with (``labkit.load.run``, the
  HTTP probes, the allocation census, the catalog clients) is bound when it is imported, like the rest of its
  sealed namespace.
* **Crashing the grader.** Anything the learner's code raises — in the call, in the comparison of its
  answer, in a message describing it — becomes a failed item.

What it does **not** withstand (out of scope for a teaching lab; say so rather than pretend): code that
deliberately reaches into the grader's own state — ``sys._current_frames()``, ``gc.get_objects()``, a
function's ``__globals__`` or ``__closure__``, the frames' ``f_locals`` —, monkey-patching the third-party or
standard modules that the baseline itself calls (``numpy.vstack``, ``sqlite3``, ``labkit.toyshop.export``'s
helpers), the private helpers of unsealed labkit modules (``labkit.compare._estimate``, ``labkit.measure.stats``), the
attributes of the kit's classes (``Caller.call``, ``Exercise.grade``), ``ctypes``, a second process that is not
the kernel's child (a spinner started from a terminal), threads started by C code (which :mod:`threading` does
not know: they are not watched, because the libraries the grader uses keep such threads too), a change the
learner's code makes and undoes within one call, or a record planned in this lab's notebook for another of its
experiments (it is a plan; only its hypothesis says what for). A
phase can still be told apart by a learner who looks for the meter itself (``sys.gettrace()`` during lab 04's
budget): nothing pays for it, because every answer is checked on inputs made for the grading. Such code can
also read the hints' answer; the grader is a teacher, not a sandbox.

Inputs are drawn from :func:`fresh_seed`, a new seed per grading run (shown in the result). Every failed item
reads the same way: what failed — by how much. Try: what to do.
"""

from __future__ import annotations

import copy as _copy
import datetime as _dt
import inspect
import math
import os as _os
import random
import re as _re
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as _FIELDS  # noqa: N812
from html import escape
from time import sleep as _sleep
from typing import Any

import numpy as np

from labkit.grading.calls import CLOCK as _CLOCK
from labkit.grading.calls import CallBroke, Caller, Meter, Outcome, Uncopyable, others_cpu_ns
from labkit.grading.calls import _name as _thread_name
from labkit.grading.exact import difference
from labkit.grading.exact import kind as _kind
from labkit.grading.gradings import record_grading
from labkit.grading.sealing import seal
from labkit.learner.record import Experiment as _Experiment
from labkit.measure.comparison import Comparison as _Comparison
from labkit.measure.comparison import compare as _compare
from labkit.measure.comparison import measured_here as _measured_here
from labkit.results import read_json as _read_json

_NP_NDARRAY = np.ndarray
_SHARES = np.shares_memory
#: the lab being graded now ("05"), set by Exercise.grade for planned() to hold a record to its lab
_GRADING: list[str] = [""]
_CONCLUDE, _SAVE = _Experiment.conclude, _Experiment.save

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
        found = _re.match(r"Lab (\d\d)\b", title)
        #: the lab's two-digit number, read from the title ("Lab 05 — …"): records planned elsewhere are refused
        self.lab = found.group(1) if found else ""
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
        _GRADING[0] = self.lab
        try:
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
        finally:
            _GRADING[0] = ""
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


def _raised(e: BaseException) -> str:
    """What the learner's function did, after "your function": ``raised Type: message``, or the sentence of a
    call that broke the grading's rules (left a thread running, changed the process)."""
    if isinstance(e, CallBroke):
        return str(e)
    return f"raised {_text(e)}"


class _Kept:
    """Copies of a call's inputs taken before it, to tell after it whether it wrote into them or handed one back
    (:func:`_kept`)."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args
        self.copies: list[tuple[int, Any]] = []
        for i, a in enumerate(args):
            if type(a) is _NP_NDARRAY:
                self.copies.append((i, a.copy()))
            elif type(a) in (list, dict, set):
                try:
                    self.copies.append((i, _copy.deepcopy(a)))
                except Exception:  # an input that cannot be copied: not checked
                    continue

    def problem(self, answer: Any) -> str | None:
        """Where the call broke its inputs (a sentence after "your function"), or None; ``answer`` is the object
        the call returned (:attr:`Outcome.raw`, not its copy)."""
        for i, a in enumerate(self.args):
            if answer is a and type(a) not in (int, float, str, bytes, bool, tuple, frozenset, type(None)):
                return (f"returned its input (argument {i + 1}) itself: the answer must be a new object, the "
                        "caller's data left as it was")
            if type(a) is _NP_NDARRAY and type(answer) is _NP_NDARRAY and a.size and _SHARES(a, answer):
                return (f"returned a view of its input (argument {i + 1}): writing the answer into the caller's "
                        "array destroys the caller's data — allocate the output")
        for i, copy in self.copies:
            try:
                d = difference(copy, self.args[i], f"argument {i + 1}")
            except Exception:  # a part difference() cannot compare: not checked
                continue
            if d is not None:
                return (f"wrote into its input ({d}): a function must leave the caller's data as it was — "
                        "never write into the caller's arrays or lists; allocate what you return")
        return None


def _kept(args: tuple[Any, ...], inplace: bool) -> _Kept | None:
    return None if inplace else _Kept(args)


def _differs(differ: Callable[[Any, Any], str | None], want: Any, got: Any) -> str | None:
    """``differ`` made safe: a comparison the answer breaks (it raises, recurses forever) is a difference."""
    if type(got) is Uncopyable:
        return f"your answer could not be copied as it was returned ({got.why}); return plain values"
    try:
        return differ(want, got)
    except Exception as e:  # the answer's own code ran (or broke the comparison): that is a wrong answer
        return f"your answer could not be compared ({_text(e)}); return plain values of the stated type"


def answers(caller: Caller, solution: Callable[..., Any], baseline: Callable[..., Any],
            cases: Iterable[tuple[Any, ...] | Callable[[], tuple[Any, ...]]], *, differ: Callable[[Any, Any], str | None] = difference,
            show: Callable[[tuple[Any, ...]], str] | None = None, copy: bool = True, inplace: bool = False) -> Item:
    """Correctness: the solution (called through ``caller``) answers every case exactly as the baseline does.

    Args:
        cases: argument tuples — edge cases, fresh random inputs, **and inputs of the timed size** — or
            zero-argument callables that build one (each side then gets its own build, nothing copied).
        differ: ``differ(want, got)`` → where they differ, or None (default :func:`difference`).
        show: how a case is named in a message (default: a short ``repr`` of its arguments).
        copy: deep-copy the arguments for each call, so neither side sees the other's mutations.
        inplace: the exercise asks for an update in place; otherwise (the default) a solution that writes into its
            inputs (lists, dicts, sets, arrays) or returns one of them (or a view of one) fails.

    Where the baseline raises, the solution must raise the same exception type (or a subclass).
    """
    n = 0
    broken: Item | None = None
    for case in cases:
        n += 1
        built = callable(case)
        args = case() if built else case
        name = show(args) if show else _short(args)
        want, want_err = _call(baseline, args, copy and not built)
        mine = case() if built else _copy.deepcopy(args) if copy else args
        kept = _kept(mine, inplace)
        got = caller.call(solution, mine)
        if want_err is not None:
            if got.error is None:
                return failed(f"on {name}: expected {type(want_err).__name__} (as the baseline raises)",
                              f"got an answer of type {_kind(got.value)}", "raise the same error for the same input",
                              criterion="correctness")
            if not isinstance(got.error, type(want_err)):
                return failed(f"on {name}: expected {type(want_err).__name__} (as the baseline raises)",
                              f"got {_text(got.error)}", criterion="correctness")
            continue
        if got.error is not None:  # the input travels with the item: a generated one can be run again by hand
            return failed(f"on {name}: your function {_raised(got.error)}",
                          hint=None if isinstance(got.error, CallBroke) else
                          "run it on this input yourself and read the traceback (the arguments are this item's "
                          "detail: `args = result.items[-1].detail`, then `your_function(*args)`)",
                          detail=args, criterion="correctness")
        where = _differs(differ, want, got.value)
        if where is not None:
            return failed(f"wrong answer on {name}", where, criterion="correctness")
        if broken is None and kept is not None and (broke := kept.problem(got.raw)) is not None:
            # a right answer got by breaking the inputs: said after the other cases, so a wrong answer on any of
            # them (the more basic fault) is what the learner reads first, whatever order the cases come in
            broken = failed(f"on {name}: your function {broke}", criterion="correctness")
    if broken is not None:
        return broken
    return passed(f"same answers as the baseline on all {n} inputs", criterion="correctness")


def metered(caller: Caller, solution: Callable[..., Any], baseline: Callable[..., Any],
            build: Callable[[], tuple[Any, ...]], *, meter: Callable[[], Meter], unit: str, what: str,
            limit: float | None = None, max_fraction: float | None = None, floor: float = 0.01,
            differ: Callable[[Any, Any], str | None] = difference, warm: Callable[[], tuple[Any, ...]] | None = None,
            hint: str | None = None, inplace: bool = False) -> Item:
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
    if (busy := quiet(caller, what, "budget")) is not None:
        return busy
    if warm is not None:
        caller.call(baseline, warm())
        caller.call(solution, warm())
    base_meter, mine = meter(), meter()
    watch = Watch(caller)
    base = caller.call(baseline, build(), base_meter)
    if base.error is not None:
        return failed(f"{what}: the baseline itself failed under the meter ({_text(base.error)})",
                      hint="a grader problem: report it", criterion="budget")
    args = build()
    kept = _kept(args, inplace)
    got = caller.call(solution, args, mine)
    if got.error is not None:
        return failed(f"{what}: your function {_raised(got.error)}", criterion="budget")
    if (busy := watch.busy()) is not None:
        return failed(f"{what}: {busy}", "the meter may have counted that work with one side",
                      "stop the threads or processes your notebook started (or that your function left) and check "
                      "again", criterion="budget")
    where = _differs(differ, base.value, got.value)
    if where is not None:
        return failed(f"wrong answer on {what} (the metered call)", where, criterion="budget")
    if kept is not None and (broke := kept.problem(got.raw)) is not None:
        return failed(f"{what}: your function {broke}", criterion="budget")
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


#: the most CPU the rest of the process (other threads, child processes) may use during a timing, as a share of
#: its wall time, before the comparison is refused (plus a fixed allowance for a notebook's own chatter)
OTHERS_SHARE = 0.05
_OTHERS_ALLOWANCE_NS = 30_000_000


def quiet(caller: Caller, what: str, criterion: str, *, children: bool = True) -> Item | None:
    """A refusal when the rest of the process is using the CPU right now (over a short look), else None: a
    meter or a clock would count, or suffer, that work too. ``children=False``: the process's child processes
    are the grader's (its service), not counted."""
    watch = Watch(caller, children=children)
    _sleep(QUIET_LOOK_S)
    per, kids, wall = watch.used()  # the wall after the second reading: reading /proc waits for the interpreter too
    used = sum(max(0, v) for v in per.values()) + kids
    if used <= QUIET_SHARE * wall:
        return None
    busiest = max(per, key=lambda t: per[t], default=None)
    who = f" (busiest: {_thread_name(busiest)})" if busiest is not None else ""
    return failed(f"{what}: something else in this process is using the CPU right now — {used / wall:.0%} of a "
                  f"core over {wall / 1e6:.0f} ms{who}", "it would be metered or timed with your function",
                  "stop the threads or processes your notebook started, then check again", criterion=criterion)


#: how long the grader looks at the rest of the process before metering or timing (s), and the share of a core
#: it may be using then
QUIET_LOOK_S = 0.05
QUIET_SHARE = 0.25


class Watch:
    """The CPU that the rest of the process (its other Python threads, its child processes) uses during a phase
    of a grading: ``w = Watch(caller)`` before, ``w.busy()`` after — a sentence when it used more than
    :data:`OTHERS_SHARE` of the phase's time, else None. ``children=False``: child processes are the grader's
    own (its service) and not counted."""

    def __init__(self, caller: Caller, *, children: bool = True) -> None:
        self._mine, self._children = frozenset((caller.grader_id, caller.worker_id)), children
        self._before, self._t0 = others_cpu_ns(self._mine, children), _CLOCK()

    def used(self) -> tuple[dict[int, int], int, int]:
        """Since the watch began: each other thread's CPU (ns, by native id), the child processes' CPU (ns),
        and the wall time (ns)."""
        (total0, per0), (total1, per1) = self._before, others_cpu_ns(self._mine, self._children)
        wall = _CLOCK() - self._t0
        per = {tid: ns - per0.get(tid, 0) for tid, ns in per1.items()}
        kids = max(0, (total1 - sum(per1.values())) - (total0 - sum(per0.values())))
        return per, kids, wall

    def busy(self) -> str | None:
        """A sentence naming the CPU the rest of the process used, when it is more than allowed, else None."""
        per, children, wall_ns = self.used()
        threads = sum(max(0, v) for v in per.values())
        spent = threads + children
        if spent <= OTHERS_SHARE * wall_ns + _OTHERS_ALLOWANCE_NS:
            return None
        top = sorted((v, t) for t, v in per.items() if v > 0)[::-1][:3]
        who = ", ".join(f"{_thread_name(t)} {v / 1e6:,.0f} ms" for v, t in top)
        if children > threads:
            who = f"child processes {children / 1e6:,.0f} ms" + (f"; threads: {who}" if who else "")
        return (f"while the grader timed, other work in this process used {spent / 1e9:.2f} s of CPU in "
                f"{wall_ns / 1e9:.2f} s ({who})")


class _LearnerRaised(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(_text(error))
        self.error = error


def timed(caller: Caller, baseline: Callable[..., Any], solution: Callable[..., Any], *,
          inputs: Callable[[int], tuple[Any, ...]], required_speedup: float, rounds: int, rng: Any,
          what: str = "", differ: Callable[[Any, Any], str | None] = difference, sample: int | None = None,
          inplace: bool = False, **compare_kw: Any) -> Item:
    """Speed on fresh inputs, every answer (or a sample of ``sample`` ≥ 3, chosen after the run) checked.

    :func:`labkit.compare` (bound at import) interleaves both sides, each call through ``caller`` (its
    hand-off is taken off the clock: a sample is the call's own time). The rounds (``rounds`` plus up to half
    as many again) and warm-ups (1–3) are drawn from ``rng``. Then the solution's answers are compared with
    the baseline's for the same inputs — all, or ``sample`` of them drawn with :mod:`secrets` once the run is
    over. ``required_speedup``: choose it far from the real effect, so an honest solution passes 10 in 10.

    Each answer is copied the moment it is returned (a thread filling it later changes nothing checked), the
    solution's inputs are checked as :func:`answers` does (``inplace``), and the comparison is refused when the
    process's other threads or its child processes used the CPU meanwhile (more than :data:`OTHERS_SHARE` of
    the run's time): the learner's code could be slowing the baseline from there.
    """
    got: tuple[dict[int, Any], dict[int, Any]] = ({}, {})
    kept: dict[int, _Kept] = {}
    raw: dict[int, Any] = {}
    current, lost = [0], [0]

    def clock() -> int:
        return _CLOCK() - lost[0]

    def inputs_at(k: int) -> tuple[Any, ...]:
        current[0] = k
        return inputs(k)

    def side(i: int, fn: Callable[..., Any]) -> Callable[..., None]:
        def call(*args: Any) -> None:
            t0 = _CLOCK()
            if i == 1 and not inplace:
                kept[current[0]] = _Kept(args)
            out = caller.call(fn, args)
            if out.error is None:
                got[i][current[0]] = out.value  # as returned: the caller copied it then
                if i == 1:
                    raw[current[0]] = out.raw
            lost[0] += (_CLOCK() - t0) - out.ns
            if out.error is not None:
                raise _LearnerRaised(out.error)
        return call

    where = f"{what}: " if what else ""
    n = rounds + rng.randrange(0, max(2, rounds // 2 + 1))
    if (busy := quiet(caller, what or "timing your function", "speed")) is not None:
        return busy
    watch = Watch(caller)
    try:
        c = _compare(side(0, baseline), side(1, solution), inputs=inputs_at, rounds=n, names=("baseline", "yours"),
                     warmup=rng.randint(1, 3), clock=clock, **compare_kw)
    except _LearnerRaised as e:
        verb = _raised(e.error)
        return failed(f"timing {what or 'your function'}: a call {verb}" if verb.startswith("raised") else
                      f"timing {what or 'your function'}: your function {verb}", criterion="speed")
    except Exception as e:  # anything else the answer broke inside the comparison
        return failed(f"timing {what or 'your function'}: {_text(e)}", criterion="speed")
    if (busy := watch.busy()) is not None:
        return failed(f"{where}{busy}", "the comparison cannot be trusted: that work may have slowed one side",
                      "stop the threads or processes your notebook started (or that your function left) and check "
                      "again", criterion="speed")
    keys = sorted(set(got[0]) & set(got[1]))
    if sample is not None and len(keys) > max(3, sample):
        keys = sorted(secrets.SystemRandom().sample(keys, max(3, sample)))
    for k in keys:
        if (d := _differs(differ, got[0][k], got[1][k])) is not None:
            return failed(f"{where}wrong answer on a timed call", d, "every answer counts, timed or not",
                          criterion="speed")
        if k in kept and (broke := kept[k].problem(raw.get(k))) is not None:
            return failed(f"{where}on a timed call your function {broke}", criterion="speed")
        if k in raw and type(got[1][k]) is not Uncopyable and (d := _differs(difference, got[1][k], raw[k])) is not None:
            return failed(f"{where}an answer changed after your function returned it ({d})",
                          "the caller's copy is not yours to change: a buffer reused by the next call, or a thread "
                          "still writing, hands every caller the last answer",
                          "return a new object from every call", criterion="speed")
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


def _when(stamp: Any) -> _dt.datetime | None:
    """A record's ISO timestamp as an aware datetime (UTC if it names no zone), or None when it is not one."""
    if type(stamp) is not str:
        return None
    try:
        t = _dt.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=_dt.UTC)


def _record_problem(experiment: Any) -> str | None:
    """Why a record is not a plan made for this check (a sentence), or None: its fields read as fields — of
    their exact types, never through the record's text —, not concluded yet, dated in the past, planned in this
    lab's notebook when the notebook is known."""
    e = experiment
    extra = sorted(set(vars(e)) - {f.name for f in _FIELDS(_Experiment)})
    if extra:
        return f"it has been altered: {', '.join(extra)} replaced on the record itself"
    for name, want in (("title", str), ("hypothesis", str), ("planned_at", str), ("id", str), ("lab", str),
                       ("notes", str)):
        if type(getattr(e, name, None)) is not want:
            return f"its {name} is a {_kind(getattr(e, name, None))}, not a plain {want.__name__}"
    if e.concluded_at is not None or e.outcome is not None or e.verdict is not None or len(e.measurements):
        return ("it is already concluded (it holds a measurement): a record from an earlier run, or another "
                "exercise's — plan a new one for this check")
    planned_at = _when(e.planned_at)
    now = _dt.datetime.now(_dt.UTC)
    if planned_at is None:
        return f"its plan date {e.planned_at!r} is not a date: plan it with Experiment.plan(...)"
    if planned_at > now + _dt.timedelta(seconds=2):
        return f"it is dated in the future ({e.planned_at}): plan it with Experiment.plan(...), which dates it now"
    if e.lab and _GRADING[0] and e.lab != _GRADING[0]:
        return (f"it was planned in lab {e.lab}'s notebook, and this is lab {_GRADING[0]}'s exercise: a prediction "
                "is about this exercise's change — plan it here")
    return None


def planned(experiment: Any, *, template: str | None = None) -> Item:
    """The prediction is required: an :class:`~labkit.learner.record.Experiment` (that exact type) planned for
    this check — not concluded yet, dated before now, planned in this lab's notebook (when the notebook is
    known: :func:`labkit.learner.record.notebook_lab`), its fields plain values — with a hypothesis in the
    learner's words (not ``template``, nothing marked TODO) and a predicted ratio."""
    if experiment is None:
        return failed("no prediction: experiment= is None", "a prediction is part of passing", _PLAN,
                      criterion="prediction")
    if type(experiment) is not _Experiment:
        return failed(f"experiment= must be a labkit Experiment record, got a {_kind(experiment)}", hint=_PLAN,
                      criterion="prediction")
    if (why := _record_problem(experiment)) is not None:
        return failed(f"this experiment record is not a plan for this check: {why}", hint=_PLAN,
                      criterion="prediction")
    text = " ".join(experiment.hypothesis.split())
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


def _saved_problem(done: Any, path: Any) -> str | None:
    """Why the file at ``path`` does not hold the concluded record ``done`` (a sentence), or None."""
    if path is None:
        return "it was not saved (save() wrote nothing)"
    try:
        data = _read_json(path)
    except Exception as e:  # missing, unreadable, not JSON: not saved
        return f"the file it names ({path}) cannot be read back ({_text(e)})"
    for name in ("id", "predicted_ratio", "outcome", "concluded_at", "measured_ratio"):
        if data.get(name) != getattr(done, name):
            return f"the file it names ({path}) does not hold it: its {name} reads {_short(data.get(name), 40)}"
    return None


def prediction(experiment: Any, comparison: Any, *, save: bool = True) -> Item:
    """The learner's experiment (checked by :func:`planned` first) concluded with the grader's measurement
    (``comparison``, the speed item's ``detail``), judged by :func:`labkit.learner.record.judge` and
    saved. A refuted prediction is a result, and passes: what fails is a record that cannot be concluded."""
    first = planned(experiment)
    if not first.ok:
        return first
    if comparison is None:
        return failed("nothing was measured to conclude your experiment with", criterion="prediction")
    if type(comparison) is _Comparison and not _measured_here(comparison):
        return failed("the comparison to conclude with was not measured by labkit in this check",
                      hint="a grader problem if you did not build it: report it", criterion="prediction")
    try:
        done = _CONCLUDE(experiment, comparison)  # the class's own methods, not what the record holds
        where = ""
        if save:
            path = _SAVE(done)
            if (why := _saved_problem(done, path)) is not None:
                return failed(f"your concluded experiment was not saved: {why}",
                              hint="save it where the results folder is writable (labkit doctor says where)",
                              criterion="prediction")
            where = f"; saved to {path}"
    except Exception as e:  # a record that cannot be concluded or saved
        return failed(f"your experiment could not be concluded: {_text(e)}", hint=_PLAN, criterion="prediction")
    if done.outcome is None or type(done) is not _Experiment:
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
