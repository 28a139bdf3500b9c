"""Lab 09's exercise: a second contended component — the loyalty-points ledger — without its lock on the hot path.

Every order adds loyalty points to its customer's balance and writes a line to the points audit trail (the
customer, the points, the balance after them): :class:`baseline` holds **one lock** around the balance *and* the
audit write (an emulated write to a remote audit store, ``hold_ms`` a line — named as an emulation wherever it is
used). Every add from every thread queues for that lock while another add's write is in flight: a server of
one, as section 4 of the lab models it. The learner writes ``MyLedger(audit)`` with the same two methods:

* ``add(customer_id: int, points: int) -> None`` — called from many threads at once;
* ``balances() -> dict[int, int]`` — every customer's balance, once the adds have returned; by then the audit
  trail must hold every add's line (its order is not graded).

:func:`check` grades it in this process. Every graded run is a **many-thread stress**: a fresh ledger of the
learner's class, its own audit trail, 6–10 threads (8 ± 25 %, drawn per run) released together, each adding its
share of a load generated for that run — 18–30 adds a thread (24 ± 25 %), about 60 % of them on 1–2 hot customers,
the rest on 20–60 others; ids never seen before — the interpreter's switch interval set short (:data:`SWITCH_S`).
Every run but the hammer is paced alike: a :data:`HOLD_MS` audit write a line, and each caller pausing as long
again after each add (its other work). In order:

1. **exact** — on every run, in every phase: ``balances()`` exactly the sums of what was added (a ``dict`` of
   ``int``, compared by :func:`labkit.grading.exact.difference`), and an audit trail with every add's line once whose
   balances make a serial history per customer (each line's balance = the previous line's + its points: the
   balance the ledger held when that add was made, so a line written with a balance read again later, after
   another add, fails). The runs: edge cases (no adds, one add, one customer from every thread), runs of the
   timed size, three runs (one customer from every thread, two of the timed size) with a **thread switch forced
   before every instruction** of the ledger's code, and a **hammer**: ~:data:`HAMMER_ADDS` adds a thread back to back, 90 % on
   a few hot customers, audit writes that take no time (thousands of adds in all);
2. **the prediction** — your :class:`labkit.learner.record.Experiment`, planned before the check, is required;
3. **the wait budget** — on a load nobody has seen, the time each add spends *waiting* (its time minus its own
   audit write, both timed by the grader: the write by the audit trail it hands you) at P90 at most
   ``wait_budget_x`` × the median audit write. A lock held across the write makes every add wait for the others';
4. **faster at P99 end to end** — interleaved rounds of the baseline and your ledger on fresh loads, each round's
   P99 of an add as its caller sees it, compared by :func:`labkit.compare`: ``faster`` by ``required_speedup``,
   every run's answer checked; then your experiment, concluded with the measured P99 ratio (judged against its interval, widened by ±25 %).

Why the forced switches: each add sleeps in its audit write with the GIL released, so a thread switch lands there,
and almost never in the microseconds between a racy ledger's read of a balance and its store — the short switch
interval alone passed a ledger with no lock at all. In a forced run, each driver thread runs its adds under a trace
function (``sys.settrace``, set in that thread and removed after) that sleeps :data:`NUDGE_S` before every
instruction of the ledger's own code (not the grader's file, ``threading``'s or ``queue``'s), releasing the GIL there: another add runs
between any two of its instructions. One instruction in :data:`NUDGE_ODDS`, at random, stalls for :data:`STALL_S`
instead, so a window of a few instructions is sometimes long enough for another add's whole critical section (with
equal nudges, a balance read back after the lock passed about a third of the runs). A read outside the lock and a store inside it, a balance read back after the lock
for the audit line, per-customer locks made by the adds that race for them: all split, every run. The forced runs'
timings measure the trace and are not used; the budget and the P99 are measured on plain runs.

What a ledger can tell: the timed runs and the exactness runs of the timed size have the same thread counts, load
sizes, pace and frames (every run is made through one :class:`labkit.grading.kit.Caller`, and the module is sealed
at import: :mod:`labkit.grading.kit`'s threat model). The forced runs can be told by ``sys.gettrace()`` in ``add``,
and the hammer by its writes' taking no time (both accepted: nothing else can split a line-boundary race here). A
ledger honest only when traced is racy in the plain runs, where every answer is checked too — but there only a
switch that lands in its race window catches it.

What the forced runs split, and why by instruction: with the GIL, CPython 3.11 hands the interpreter to another
thread only where it checks its *eval breaker* — at function entry (``RESUME``), backward jumps (``JUMP_BACKWARD``)
and calls — so an unlocked ``d[k] += n`` on a plain ``dict`` of ``int`` (``BINARY_SUBSCR``, ``BINARY_OP``,
``STORE_SUBSCR``) has no switch point between its read and its store, and a stress alone never splits it (four
threads, 200,000 adds each, 10 µs switch interval: none lost). A trace function asked for an event before every
instruction (``frame.f_trace_opcodes``, CPython's ``sys.settrace`` documentation) and sleeping there splits it too:
so a ledger with no lock fails however its lines are written. That is the honest verdict — on a free-threaded build
(3.13t, 3.14t, the GIL off) threads run at once and the same line loses updates; a ledger exact only because of
where 3.11 checks for a switch is exact by accident. Checked on CPython 3.11; the instruction events exist on
3.12–3.14 alike (there through ``sys.monitoring`` underneath).
"""

from __future__ import annotations

import queue
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.grading import CLOCK as _CLOCK
from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Experiment,
    Item,
    Watch,
    band,
    difference,
    failed,
    kind,
    passed,
    planned,
    prediction,
    quiet,
    seal,
)
from labkit.grading import compare as _compare

__all__ = ["baseline", "check", "hint", "solution", "stress", "Stress", "SWITCH_S", "WAIT_BUDGET_X", "HOLD_MS",
           "NUDGE_S", "STALL_S", "NUDGE_ODDS", "HAMMER_ADDS"]

#: the switch interval every graded run sets (seconds; CPython's default is 0.005): a thread that waits for the
#: interpreter asks the running one to let go after this long, so a read-modify-write split by a call is split
SWITCH_S = 1e-5
#: the budget: an add's wait (its time minus its own audit write) at P90, in median audit writes
WAIT_BUDGET_X = 0.5
#: the emulated audit write, per line (ms)
HOLD_MS = 0.2
#: the sleep before every instruction of the ledger's code in a forced-switch run (seconds): the GIL is released, and a thread
#: that waits for it runs — so a read and a store on two lines are split as often as there are threads to split them
NUDGE_S = 1e-6
#: one instruction in :data:`NUDGE_ODDS`, drawn at random, sleeps :data:`STALL_S` instead: a thread stalled in a short
#: window (after a lock's release, before a balance is read back) lets another add run its whole critical section
#: there. Equal nudges alone do not: the stalled window is a few instructions, the other add's section more, so the
#: window's owner always came first and a stale read-back passed about a third of the runs.
STALL_S = 1e-3
NUDGE_ODDS = 16
#: adds per thread in the hammer run (about; drawn per run): thousands in all, back to back, on a few hot customers
HAMMER_ADDS = 300
_SLEEP = time.sleep
_RANDOM = random.Random
_SETTRACE, _GETTRACE = sys.settrace, sys.gettrace
#: the files whose frames a forced-switch run leaves alone: the grader's own (the drivers, the audit trail's write),
#: and the standard library's thread and queue machinery a ledger may call (their waits release the GIL already)
_UNTRACED = frozenset({__file__, threading.__file__, queue.__file__})
_PERCENTILE = np.percentile


class baseline:  # noqa: N801 — the lab's public name for the component as it is (labNN.baseline)
    """The points ledger as toyshop has it: one lock around the balance **and** the audit write."""

    def __init__(self, audit: Any) -> None:
        self._lock = threading.Lock()
        self._audit = audit
        self._balance: dict[int, int] = {}

    def add(self, customer_id: int, points: int) -> None:
        """Add ``points`` to the customer's balance and write the audit line, all under the one lock."""
        with self._lock:
            balance = self._balance.get(customer_id, 0) + points
            self._audit.write(customer_id, points, balance)  # the slow part: a write, with the lock held
            self._balance[customer_id] = balance

    def balances(self) -> dict[int, int]:
        """Every customer's balance."""
        with self._lock:
            return dict(self._balance)


class _Reference:
    """The fix: the lock guards only the read-modify-write of the balance; the write happens outside it."""

    def __init__(self, audit: Any) -> None:
        self._lock = threading.Lock()
        self._audit = audit
        self._balance: dict[int, int] = {}

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:  # held for a dict read and a dict write: a microsecond, not a write's round trip
            balance = self._balance.get(customer_id, 0) + points
            self._balance[customer_id] = balance
        self._audit.write(customer_id, points, balance)  # this add's own balance: correct in any order

    def balances(self) -> dict[int, int]:
        with self._lock:
            return dict(self._balance)


EXERCISE = Exercise(
    "Lab 09 — the points ledger without its lock on the hot path",
    hints=("Read baseline.add (labkit.exercises.lab09.baseline): how long is the lock held, and which part of that "
           "time needs it? Price it with section 4's closed-loop napkin: about 8 callers at once, each holding the "
           "lock for one audit write, then pausing as long.",
           "Two things must stay true: no two adds of one customer may read the same balance (that is a lost "
           "update), and every add writes its own line. Only the first needs the lock; the write needs the new "
           "balance, not the lock.",
           "Keep the lock around `balance = get + points; store it` and make the audit.write call after the `with` "
           "block, with the balance you computed inside it. Do not drop the lock: the check's stress finds that."),
    solution=_Reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def _trail(hold_s: float) -> tuple[Any, list[tuple[Any, Any, Any]], list[int], Callable[[], int]]:
    """A fresh audit trail: the object the ledger gets (``write`` only), its lines, each write's time, and a
    reader of the calling thread's write time since it last asked (the grader's; nothing on the object reaches
    them)."""
    lines: list[tuple[Any, Any, Any]] = []
    took: list[int] = []
    local = threading.local()
    clock, sleep = _CLOCK, _SLEEP

    class AuditTrail:
        __slots__ = ()

        def write(self, customer_id: int, points: int, balance: int) -> None:
            """Write one line: the customer, the points added, the balance after them (an emulated remote write)."""
            t0 = clock()
            if hold_s:  # a zero hold (the hammer's) is no sleep at all: the GIL is kept, the adds come back to back
                sleep(hold_s)
            lines.append((customer_id, points, balance))
            ns = clock() - t0
            took.append(ns)
            local.ns = getattr(local, "ns", 0) + ns

        def __repr__(self) -> str:
            return f"AuditTrail(write(customer_id, points, balance): {hold_s * 1e3:g} ms a line, emulated)"

    def taken() -> int:
        ns = getattr(local, "ns", 0)
        local.ns = 0
        return ns

    return AuditTrail(), lines, took, taken


@dataclass(frozen=True)
class Stress:
    """One many-thread run of a ledger: its answer, its audit lines, and what each add cost its caller."""

    answer: Any
    lines: tuple[tuple[Any, Any, Any], ...]
    latency_ns: np.ndarray  #: each add's time, as its caller saw it
    wait_ns: np.ndarray     #: each add's time minus its own audit write (both timed by the grader)
    write_ns: float         #: the median audit write of the run (timed by the trail, in whichever thread), ns
    threads: int
    error: str | None = None

    def p(self, q: float) -> float:
        """The ``q``-th percentile of an add's latency (ns)."""
        return float(_PERCENTILE(self.latency_ns, q)) if self.latency_ns.size else 0.0


def _describe(e: BaseException) -> str:
    try:
        msg = str(e)[:160]
    except Exception:  # an exception that cannot be printed is still a failure to report
        msg = "<its message could not be printed>"
    return f"{type(e).__name__}: {msg}"


def stress(ledger: Callable[[Any], Any], load: Sequence[Sequence[tuple[int, int]]], *, hold_ms: float = HOLD_MS,
           switch_s: float = SWITCH_S, timeout_s: float = 20.0, think_ms: float = 0.0, forced: bool = False,
           seed: int | None = None) -> Stress:
    """Run ``ledger(audit)`` under the grader's stress: one thread per share of ``load`` (a list of
    ``(customer_id, points)`` per thread), released together, the switch interval at :data:`SWITCH_S`; then
    ``balances()``. With ``think_ms``, each thread pauses that long after each add (its caller's other work);
    without, its adds come back to back. With ``forced``, each thread's adds run under a trace function that
    sleeps :data:`NUDGE_S` before every instruction of the ledger's own code (not the grader's, nor ``threading``'s or
    ``queue``'s), releasing the GIL there — and :data:`STALL_S` before one instruction in :data:`NUDGE_ODDS`, drawn
    per thread from ``seed`` — so another thread runs between any two lines, a read-modify-write spread over two
    lines is split, and a short window is sometimes long enough for another add's whole critical section; the
    run's timings then measure the trace, not the ledger. Never raises what the ledger raises: a failed run says
    why in ``error``."""
    audit, lines, took, taken = _trail(hold_ms / 1e3)
    clock, think_s, nudge_s = _CLOCK, think_ms / 1e3, NUDGE_S
    lat: list[list[int]] = [[] for _ in load]
    wait: list[list[int]] = [[] for _ in load]
    errors: list[str] = []
    go = threading.Event()
    empty = np.zeros(0, dtype=np.int64)
    untraced = _UNTRACED

    stall_s, odds = STALL_S, NUDGE_ODDS

    def tracer(i: int) -> Callable[..., Any]:
        """Thread ``i``'s trace function: its own random stream, so the stalls land on every thread alike."""
        pick = _RANDOM(None if seed is None else seed * 1009 + i).randrange

        def nudge(frame: Any, event: str, arg: Any) -> Any:
            if event == "opcode":  # the GIL is released: a thread waiting for it runs before this instruction does
                _SLEEP(stall_s if pick(odds) == 0 else nudge_s)
            return nudge

        def enter(frame: Any, event: str, arg: Any) -> Any:
            if frame.f_code.co_filename in untraced:
                return None
            frame.f_trace_opcodes = True  # an event before every bytecode instruction, not only at each line
            return nudge

        return enter

    def drive(i: int, obj: Any) -> None:
        mine, waited = lat[i], wait[i]
        before = _GETTRACE()
        enter = tracer(i)
        try:
            add = obj.add
            if forced:
                _SETTRACE(enter)
            go.wait()
            for customer, points in load[i]:
                t0 = clock()
                add(customer, points)
                t1 = clock()
                mine.append(t1 - t0)
                waited.append(t1 - t0 - taken())
                if think_s:
                    _SLEEP(think_s)
            if forced and _GETTRACE() is not enter:
                errors.append("the ledger replaced the grader's trace function (sys.settrace) during its adds — "
                              "this run forces a thread switch before every instruction of your code. Try: leave the "
                              "interpreter's hooks alone")
        except BaseException as e:  # the learner's code: reported, never raised in the grader's thread
            errors.append(f"add raised {_describe(e)}")
        finally:
            if forced:
                _SETTRACE(before)

    old = sys.getswitchinterval()
    try:
        obj = ledger(audit)
    except BaseException as e:  # the learner's constructor
        return Stress(None, (), empty, empty, 0.0, len(load), f"MyLedger(audit) raised {_describe(e)}")
    threads = [threading.Thread(target=drive, args=(i, obj), daemon=True, name=f"labkit-lab09-{i}")
               for i in range(len(load))]
    sys.setswitchinterval(switch_s)
    try:
        for t in threads:
            t.start()
        go.set()
        deadline = time.monotonic() + timeout_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    finally:
        sys.setswitchinterval(old)
    alive = sum(t.is_alive() for t in threads)
    if alive:
        return Stress(None, (), empty, empty, 0.0, len(load), f"{alive} of {len(threads)} threads had not finished "
                      f"their adds after {timeout_s:g} s — a deadlock? (a Lock taken twice by one thread, or two "
                      "locks taken in opposite orders)")
    if errors:
        return Stress(None, (), empty, empty, 0.0, len(load), errors[0])
    got: list[Any] = []

    def read() -> None:
        try:
            got.append(obj.balances())
        except BaseException as e:  # the learner's balances()
            errors.append(f"balances() raised {_describe(e)}")

    reader = threading.Thread(target=read, daemon=True, name="labkit-lab09-read")
    reader.start()
    reader.join(timeout_s)
    if reader.is_alive() or errors:
        return Stress(None, (), empty, empty, 0.0, len(load), errors[0] if errors else
                      f"balances() had not returned after {timeout_s:g} s — a deadlock?")
    flat_lat = np.array([x for share in lat for x in share], dtype=np.int64)
    flat_wait = np.array([x for share in wait for x in share], dtype=np.int64)
    write_ns = float(np.median(took)) if took else 0.0
    return Stress(got[0], tuple(lines), flat_lat, flat_wait, write_ns, len(load))


def _problem(run: Stress, load: Sequence[Sequence[tuple[int, int]]]) -> str | None:
    """What is wrong with a run's answer or audit trail (a sentence), or None: exact sums, every line once, and
    a serial history of balances per customer."""
    if run.error is not None:
        return run.error
    want: dict[int, int] = {}
    sent: Counter[tuple[int, int]] = Counter()
    for share in load:
        for c, p in share:
            want[c] = want.get(c, 0) + p
            sent[(c, p)] += 1
    if type(run.answer) is dict and all(type(k) is int and type(v) is int for k, v in run.answer.items()):
        short = sum(want.values()) - sum(run.answer.values())
        if short > 0 and set(run.answer) <= set(want):
            lost = f"{short:,} points of {sum(want.values()):,} missing"
            d = difference(want, run.answer, "balances()")
            return f"lost updates: {lost} ({d}) — two adds read the same balance and both wrote theirs back"
    try:
        d = difference(want, run.answer, "balances()")
    except Exception as e:  # an answer that breaks the comparison is a wrong answer
        return f"balances() could not be compared ({_describe(e)}); return a plain dict of int"
    if d is not None:
        return d
    for line in run.lines:
        if type(line) is not tuple or len(line) != 3 or any(type(x) is not int for x in line):
            return "the audit trail holds a line that is not (customer_id, points, balance) as plain ints"
    got = Counter((c, p) for c, p, _ in run.lines)
    if got != sent:
        missing, extra = sum((sent - got).values()), sum((got - sent).values())
        return (f"the audit trail does not hold every add's line once: {missing} missing, {extra} extra of "
                f"{sum(sent.values())} — every add writes its own line, before balances() returns")
    per: dict[int, list[tuple[int, int]]] = {}
    for c, p, b in run.lines:
        per.setdefault(c, []).append((b, p))
    for c, entries in per.items():
        before = 0
        for b, p in sorted(entries):
            if b != before + p:
                return (f"customer {c}'s audit lines are no serial history: a line says balance {b:,} after "
                        f"{p} points, but the line before it says {before:,} — a line's balance is not the one its "
                        "own add made (two adds read the same balance, or it was read again after another add)")
            before = b
    return None


def _load(rng: random.Random, threads: int, adds: int, hot: float = 0.6) -> list[list[tuple[int, int]]]:
    """A load made for one run: ``threads`` shares of ~``adds`` adds each; a few hot customers get the ``hot``
    share of them (as real ones do), the rest spread over many; ids never seen before this run."""
    base = rng.randrange(10**5, 10**9)
    hot_ids = [base + rng.randrange(10**4) for _ in range(rng.randint(1, 2))]
    cold = [base + 10**4 + rng.randrange(10**5) for _ in range(rng.randint(20, 60))]
    out = []
    for _ in range(threads):
        n = band(rng, adds, 0.25)
        out.append([(rng.choice(hot_ids) if rng.random() < hot else rng.choice(cold), rng.randint(1, 500))
                    for _ in range(n)])
    return out


def check(my_ledger: Callable[[Any], Any], experiment: Experiment | None = None, *, rounds: int = 8,
          required_speedup: float = 2.0, wait_budget_x: float = WAIT_BUDGET_X, threads: int = 8, adds: int = 24,
          hold_ms: float = HOLD_MS, save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade a points ledger: exact under the stress in every run, then the wait budget, then P99 end to end.

    Args:
        my_ledger: your class (or any callable) — ``my_ledger(audit)`` returns an object with
            ``add(customer_id, points)`` and ``balances() -> dict[int, int]``.
        experiment: your :class:`labkit.learner.record.Experiment` (planned before the check with a predicted P99 ratio,
            yours / the baseline's: required), concluded with the measured one.
        rounds: interleaved rounds of the P99 comparison (a few more drawn per grading).
        required_speedup: how many times lower than the baseline's your P99 must be.
        wait_budget_x: the most an add may wait at P90, in median audit writes.
        threads, adds: about this many threads per run, and adds per thread (each drawn per run from a band).
        hold_ms: the emulated audit write, per line.
        save: save the concluded experiment record.
        seed: reproduce a grading run (a new seed is drawn each time by default).
    """
    refused, seed, rng = EXERCISE.start(my_ledger, seed)
    if refused is not None:
        return refused
    # how a run is paced: (audit write, other work between a caller's adds, both ms; a switch forced before every instruction).
    # Every run but the hammer is paced alike — each caller's adds one audit write apart, so that an add's wait is
    # its queue for the ledger (back to back, a ledger whose add is nearly free, a queue to a writer thread, would
    # be charged its callers' queue for the GIL instead) — so that nothing in the pace tells a timed run
    paced, forced, hammer = (hold_ms, hold_ms, False), (hold_ms, hold_ms, True), (0.0, 0.0, False)

    def yours(load: list[list[tuple[int, int]]], pace: tuple[float, float, bool]) -> Stress:
        return stress(my_ledger, load, hold_ms=pace[0], think_ms=pace[1], forced=pace[2],
                      seed=rng.randrange(2**31) if pace[2] else None)

    def base(load: list[list[tuple[int, int]]], pace: tuple[float, float, bool]) -> Stress:
        return stress(baseline, load, hold_ms=pace[0], think_ms=pace[1], forced=pace[2])

    def sized() -> list[list[tuple[int, int]]]:
        return _load(rng, band(rng, threads, 0.25), adds)

    # a ledger may keep a thread of its own (a writer behind a queue): allowed while it waits, not while it works
    with Caller(threads="idle") as caller:
        def run(fn: Callable[..., Stress], load: list[list[tuple[int, int]]],
                pace: tuple[float, float, bool] = paced) -> Stress:
            out = caller.call(fn, (load, pace))
            if out.error is not None or type(out.value) is not Stress:
                return Stress(None, (), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0.0, len(load),
                              f"the run failed: {_describe(out.error) if out.error else kind(out.value)}")
            return out.value

        def exact() -> Item:
            if (busy := quiet(caller, "before the stress runs", "correctness")) is not None:
                return busy
            many = band(rng, threads, 0.25)

            def crowd() -> list[list[tuple[int, int]]]:  # one customer, every thread
                one = rng.randrange(10**7, 10**8)
                return [[(one, rng.randint(1, 500)) for _ in range(band(rng, adds, 0.25))] for _ in range(many)]

            switched = "a thread switch forced before every instruction of your code"
            cases = [("no adds at all", [[] for _ in range(many)], paced),
                     ("one add", [[(rng.randrange(10**6, 10**7), rng.randint(1, 500))]], paced),
                     (f"one customer from {many} threads", crowd(), paced),
                     (f"one customer from {many} threads, {switched}", crowd(), forced),
                     ("the hammer: adds back to back on a few hot customers, audit writes that take no time",
                      _load(rng, band(rng, threads, 0.25), HAMMER_ADDS, hot=0.9), hammer)]
            cases += [(f"a run of the timed size ({i + 1})", sized(), paced) for i in range(rng.randint(1, 2))]
            cases += [(f"a run of the timed size, {switched} ({i + 1})", sized(), forced) for i in range(2)]
            hammered = sum(len(share) for _, load, pace in cases if pace is hammer for share in load)
            rng.shuffle(cases)
            for name, load, pace in cases:
                got = run(yours, load, pace)
                if (where := _problem(got, load)) is not None:
                    n = sum(len(s) for s in load)
                    return failed(f"on {name} ({len(load)} threads, {n:,} adds): {where}",
                                  hint="every add must count exactly once, however many threads race: the read, "
                                  "the sum and the store of a balance — and the balance its audit line says — under "
                                  "one lock that every add takes (made once, not by the adds that race for it)",
                                  criterion="correctness")
            return passed(f"exact on all {len(cases)} stress runs (balances and audit trail, {SWITCH_S * 1e6:g} µs "
                          "switch interval; three with a thread switch forced before every instruction of your code, "
                          f"one hammer of {hammered:,} adds back to back)",
                          criterion="correctness")

        def within_budget() -> Item:
            load = sized()
            watch = Watch(caller)
            got = run(yours, load)
            if (busy := watch.busy()) is not None:
                return failed(f"the budget's run: {busy}", "the waits cannot be trusted",
                              "stop the threads your notebook started, then check again", criterion="budget")
            if (where := _problem(got, load)) is not None:
                return failed(f"wrong answer on the budget's load: {where}", criterion="budget")
            p90, write = float(_PERCENTILE(got.wait_ns, 90)), max(got.write_ns, 1.0)
            what = (f"an add's wait on a load never seen ({got.threads} threads, {got.latency_ns.size} adds): "
                    f"P90 {p90 / 1e3:,.0f} µs = {p90 / write:.2f} × the median audit write ({write / 1e3:,.0f} µs)")
            if p90 > wait_budget_x * write:
                return failed(what, f"over the budget of {wait_budget_x:g}×",
                              "an add still waits for other adds' writes: what does the lock guard while it is held?",
                              detail=got, criterion="budget")
            return passed(f"{what}, within the budget of {wait_budget_x:g}×, the answer checked", detail=got,
                          criterion="budget")

        def faster() -> tuple[Item, ...]:
            n = rounds + rng.randrange(0, max(2, rounds // 2 + 1))
            p99: tuple[list[float], list[float]] = ([], [])
            watch = Watch(caller)
            for r in range(n):
                sub = rng.randrange(2**31)
                sides = [(0, base), (1, yours)] if r % 2 == 0 else [(1, yours), (0, base)]
                for i, fn in sides:
                    load = _load(random.Random(sub), band(random.Random(sub), threads, 0.25), adds)
                    got = run(fn, load)
                    if (where := _problem(got, load)) is not None:
                        who = "the baseline (a grader problem: report it)" if i == 0 else "yours"
                        return (failed(f"round {r + 1}, {who}: {where}", hint="every answer counts, timed or not",
                                       criterion="speed"),)
                    p99[i].append(got.p(99))
            if (busy := watch.busy()) is not None:
                return (failed(f"the P99 rounds: {busy}", "the comparison cannot be trusted: that work may have "
                               "slowed one side", "stop the threads your notebook started, then check again",
                               criterion="speed"),)
            try:
                c = _compare(p99[0], p99[1], names=("baseline: P99 of an add", "yours: P99 of an add"))
            except Exception as e:  # too few rounds to compare, say
                return (failed(f"the P99 comparison failed: {_describe(e)}", criterion="speed"),)
            what = f"P99 of an add over {n} interleaved rounds: {c.summary()}"
            if c.verdict == "faster" and c.speedup >= required_speedup:
                item = passed(f"{what}; every run's answer checked", detail=c, criterion="speed")
            else:
                item = failed(what, f"need 'faster' by at least {required_speedup:g}×",
                              "the tail is the adds that queued longest for the lock: shorten what it guards",
                              detail=c, criterion="speed")
                return (item,)
            return item, prediction(experiment, c, save=save)

        result = EXERCISE.grade(exact, lambda: planned(experiment), within_budget, faster, seed=seed)
    return result


_SEALED = seal(globals())
