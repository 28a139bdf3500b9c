"""Lab 09's exercise: the loyalty leaderboard — readers that copy a large structure under the lock starve the writers.

The points ledger of the lab's section 10 is already the fixed one: an add holds its lock for the balance's
read-modify-write only, and writes the audit line (an emulated write to a remote audit store, ``hold_ms`` a line —
named as an emulation wherever it is used) after the lock. What is new is its **reader**: the dashboard's
leaderboard, ``top()``, the :data:`TOP` customers with the highest balances, asked by :data:`READERS` threads
again and again while orders come in. :class:`baseline` answers it the obvious way — every balance of a table of
about :data:`CUSTOMERS` customers, sorted, under the lock — so every add that comes while a read sorts queues for
the lock behind it. The learner writes ``MyLedger(audit, opening)`` with the same three methods:

* ``add(customer_id: int, points: int) -> None`` — called from many threads at once (points are positive);
* ``top() -> list[tuple[int, int]]`` — the :data:`TOP` highest balances as ``(customer_id, balance)``, highest
  first, ties by the lower customer id first; called from reader threads while the adds run;
* ``balances() -> dict[int, int]`` — every customer's balance (the opening ones too), once the adds have returned;
  by then the audit trail must hold every add's line (its order is not graded).

:func:`check` grades it in this process. Every graded run is a **many-thread stress**: a fresh ledger of the
learner's class over fresh opening balances (:data:`CUSTOMERS` ± 25 % customers, 0–5,000 points each, ids never
seen before), its own audit trail, 6–10 writer threads (8 ± 25 %, drawn per run) released together, each adding
its share of a load generated for that run — 18–30 adds a thread (24 ± 25 %), about 60 % of them on 1–2 hot
customers (who climb into the leaderboard as the run goes), the rest on 20–60 others — and :data:`READERS` reader
threads asking ``top()`` every :data:`READ_GAP_MS` ms until the writers are done. Every run but the hammer is
paced alike: the interpreter's default switch interval (:data:`SWITCH_S`, set explicitly), a :data:`HOLD_MS`
audit write a line, and each writer pausing as long again after each add (its other work). In order:

1. **exact** — on every run, in every phase: ``balances()`` exactly the opening balances plus what was added (a
   ``dict`` of ``int``, compared by :func:`labkit.grading.exact.difference`); an audit trail with every add's line
   once whose balances make a serial history per customer from its opening balance (each line's balance = the
   previous line's + its points); the final ``top()`` exactly the table's top; and **every read during the run
   fresh**: each of its balances between what the adds that had returned before the read began had made it and
   what the adds begun before the read returned could have made it, in the leaderboard's order, with no customer
   left out whose balance was above the last one shown throughout the read. The runs: edge cases (no adds, one
   add, one customer from every thread), runs of the timed size, three with a **thread switch forced before
   every instruction** of the writers' calls into the ledger (a quarter of the adds a writer: each is slowed a
   thousandfold there), and a
   **hammer**: ~:data:`HAMMER_ADDS` adds a writer back to back, 90 % on a few hot customers, audit writes that
   take no time, a short switch interval (:data:`HAMMER_SWITCH_S`);
2. **the prediction** — your :class:`labkit.learner.record.Experiment`, planned before the check, is required;
3. **the wait budget** — on a load nobody has seen, the time each add spends *waiting* (its time minus the audit
   write's own time, the median of writes the grader makes alone just before the run) at P90 at most
   ``wait_budget_x`` × that write;
4. **faster at P99 end to end** — interleaved rounds of the baseline and your ledger on fresh loads, each round's
   P99 of an add as its writer sees it, compared by :func:`labkit.compare`: ``faster`` by ``required_speedup``,
   every run's answers checked; then your experiment, concluded with the measured P99 ratio.

Why the interpreter's default switch interval in the timed runs: a reader that copies the table under the lock
and sorts it after the lock still runs Python (or a sort in C) the whole time, holding the GIL; a writer that
wants the interpreter waits until the reader gives it up — at most a switch interval later. With a short interval
(10 µs, the hammer's) that wait would all but vanish, and moving the sort out of the lock would pass
here while it does not help in a service running at the default. So the budget is the lesson: the reader must do
less work per read, not the same work elsewhere. A ledger that changes the switch interval fails the run.

What a ledger can tell: the timed runs and the exactness runs of the timed size have the same thread counts, load
sizes, pace, switch interval and frames (every run is made through one :class:`labkit.grading.kit.Caller`, and
the module is sealed at import: :mod:`labkit.grading.kit`'s threat model). The forced runs can be told by
``sys.gettrace()`` in ``add``, and the hammer by its writes' taking no time. A ledger careless only in the timed
runs is checked there too — every read's freshness by its times, and every balance and line at the end — but a
lost update needs a switch inside its race window, which the default interval rarely gives. Readers' own latency
is not graded beyond the run's timeout; a read is judged by its freshness, which a stale cache or a copy kept up
by a thread of its own fails.

What the forced runs split, and why by instruction: with the GIL, CPython 3.11 hands the interpreter to another
thread only where it checks its *eval breaker* — at function entry (``RESUME``), backward jumps (``JUMP_BACKWARD``)
and calls — so an unlocked ``d[k] += n`` on a plain ``dict`` of ``int`` has no switch point between its read and
its store, and a stress alone never splits it. A trace function asked for an event before every instruction
(``frame.f_trace_opcodes``, CPython's ``sys.settrace`` documentation) and sleeping there splits it (and a
leaderboard updated in several steps, which a reader then sees half done): so a ledger with no lock fails however
its lines are written. That is the honest verdict — on a free-threaded build (3.13t, 3.14t, the GIL off) threads
run at once and the same line loses updates. Readers are not traced: a sort under a trace of every instruction
would take minutes. Checked on CPython 3.11; the instruction events exist on 3.12–3.14 alike (there through
``sys.monitoring`` underneath).
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

__all__ = ["baseline", "check", "hint", "solution", "stress", "Stress", "SWITCH_S", "HAMMER_SWITCH_S", "WAIT_BUDGET_X",
           "HOLD_MS", "TOP", "CUSTOMERS", "READERS", "READ_GAP_MS", "NUDGE_S", "STALL_S", "NUDGE_ODDS", "HAMMER_ADDS"]

#: the leaderboard's length: ``top()`` answers the TOP highest balances
TOP = 10
#: about this many customers hold an opening balance in every graded run (drawn per run, ± 25 %)
CUSTOMERS = 10_000
#: reader threads asking ``top()`` in every graded run, each pausing :data:`READ_GAP_MS` between reads
READERS = 2
READ_GAP_MS = 2.0
#: the switch interval every plain run sets (seconds): CPython's default, set explicitly — a thread that wants the
#: interpreter waits up to this long for a thread running Python (or a C call that keeps the GIL) to give it up
SWITCH_S = 0.005
#: the hammer's switch interval: short, so that back-to-back adds are split wherever a switch can fall
HAMMER_SWITCH_S = 1e-5
#: the budget: an add's wait (its time minus the audit write's own, measured alone) at P90, in those writes
WAIT_BUDGET_X = 0.5
#: the emulated audit write, per line (ms)
HOLD_MS = 0.2
#: the sleep before every instruction of the ledger's code in a forced-switch run (seconds): the GIL is released, and a thread
#: that waits for it runs — so a read and a store on two lines are split as often as there are threads to split them
NUDGE_S = 1e-6
#: one instruction in :data:`NUDGE_ODDS`, drawn at random, sleeps :data:`STALL_S` instead: a thread stalled in a short
#: window (after a lock's release, before a balance is read back) lets another add run its whole critical section
#: there. Equal nudges alone do not: the stalled window is a few instructions, the other add's section more.
STALL_S = 1e-3
NUDGE_ODDS = 16
#: adds per thread in the hammer run (about; drawn per run): thousands in all, back to back, on a few hot customers
HAMMER_ADDS = 300
_SLEEP = time.sleep
_RANDOM = random.Random
_SETTRACE, _GETTRACE = sys.settrace, sys.gettrace
_GETSWITCH, _SETSWITCH = sys.getswitchinterval, sys.setswitchinterval
#: the files whose frames a forced-switch run leaves alone: the grader's own (the drivers, the audit trail's write),
#: and the standard library's thread and queue machinery a ledger may call (their waits release the GIL already)
_UNTRACED = frozenset({__file__, threading.__file__, queue.__file__})
_PERCENTILE = np.percentile
_SORTED = sorted


def _rank(kv: tuple[int, int]) -> tuple[int, int]:
    """The leaderboard's order: the higher balance first, then the lower customer id."""
    return -kv[1], kv[0]


class baseline:  # noqa: N801 — the lab's public name for the component as it is (labNN.baseline)
    """The points ledger with the lab's fix (the audit write after the lock), and its leaderboard as toyshop has
    it: every balance sorted, under the lock, on every read."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        self._lock = threading.Lock()
        self._audit = audit
        self._balance: dict[int, int] = dict(opening)

    def add(self, customer_id: int, points: int) -> None:
        """Add ``points`` to the customer's balance under the lock; write the audit line after it."""
        with self._lock:
            balance = self._balance.get(customer_id, 0) + points
            self._balance[customer_id] = balance
        self._audit.write(customer_id, points, balance)

    def top(self) -> list[tuple[int, int]]:
        """The TOP highest balances, ``(customer_id, balance)``, highest first (ties: the lower id first)."""
        with self._lock:
            ranked = sorted(self._balance.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:TOP]

    def balances(self) -> dict[int, int]:
        """Every customer's balance."""
        with self._lock:
            return dict(self._balance)


class _Reference:
    """The fix: balances only grow, so the adds keep the ten best up to date under the lock they already take, and
    a read copies ten pairs."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        self._lock = threading.Lock()
        self._audit = audit
        self._balance: dict[int, int] = dict(opening)
        self._top = sorted(self._balance.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]  # once, at the start

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:  # a dict update and a look at ten pairs: microseconds
            balance = self._balance.get(customer_id, 0) + points
            self._balance[customer_id] = balance
            board = [kv for kv in self._top if kv[0] != customer_id]
            if len(board) < TOP or (-balance, customer_id) < (-board[-1][1], board[-1][0]):
                board.append((customer_id, balance))
                board.sort(key=lambda kv: (-kv[1], kv[0]))
                self._top = board[:TOP]
        self._audit.write(customer_id, points, balance)

    def top(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._top)

    def balances(self) -> dict[int, int]:
        with self._lock:
            return dict(self._balance)


EXERCISE = Exercise(
    "Lab 09 — the leaderboard that starves the points ledger",
    hints=("Time one baseline.top() alone on a table of lab09.CUSTOMERS customers, and an add: how long does a read "
           "hold the lock, and what share of the time do two readers hold it? Price a writer's P99 with section 4's "
           "closed-loop napkin: the readers are callers of the same lock.",
           "Moving the sort out of the lock is the first idea: try it and read the wait the check prints. If the "
           "writers still wait, what for? (Section 2: which threads can run Python at once, and section 9's last "
           "paragraph: a waiter can pay up to a switch interval for the interpreter.) The read must do less, not the "
           "same work elsewhere.",
           "Points are positive, so a balance only grows. What would a read have to copy if the leaderboard were kept "
           "up to date by the adds themselves, under the lock they already take? Keep the order exact: ties go to the "
           "lower customer id."),
    solution=_Reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def _trail(hold_s: float) -> tuple[Any, list[tuple[Any, Any, Any]], list[int]]:
    """A fresh audit trail: the object the ledger gets (``write`` only), its lines, and each write's time (the
    grader's; nothing on the object reaches them)."""
    lines: list[tuple[Any, Any, Any]] = []
    took: list[int] = []
    clock, sleep = _CLOCK, _SLEEP

    class AuditTrail:
        __slots__ = ()

        def write(self, customer_id: int, points: int, balance: int) -> None:
            """Write one line: the customer, the points added, the balance after them (an emulated remote write)."""
            t0 = clock()
            if hold_s:  # a zero hold (the hammer's) is no sleep at all: the GIL is kept, the adds come back to back
                sleep(hold_s)
            lines.append((customer_id, points, balance))
            took.append(clock() - t0)

        def __repr__(self) -> str:
            return f"AuditTrail(write(customer_id, points, balance): {hold_s * 1e3:g} ms a line, emulated)"

    return AuditTrail(), lines, took


@dataclass(frozen=True)
class Stress:
    """One many-thread run of a ledger: its answers, its audit lines, its reads, and what each add cost its caller."""

    answer: Any
    lines: tuple[tuple[Any, Any, Any], ...]
    latency_ns: np.ndarray  #: each add's time, as its caller saw it
    wait_ns: np.ndarray     #: each add's time minus :attr:`write_ns`: what it spent on anything but its own write
    write_ns: float         #: the audit write's own time: the median of writes made alone just before the run, ns
    threads: int
    error: str | None = None
    opening: dict[int, int] | None = None  #: the opening balances the ledger was made with (the grader's copy)
    ranked: Any = None      #: the final ``top()``, once every add had returned
    #: every add as ``(customer, points, start ns, end ns)``, and every read as ``(start ns, end ns, answer)``
    adds: tuple[tuple[int, int, int, int], ...] = ()
    reads: tuple[tuple[int, int, Any], ...] = ()

    def p(self, q: float) -> float:
        """The ``q``-th percentile of an add's latency (ns)."""
        return float(_PERCENTILE(self.latency_ns, q)) if self.latency_ns.size else 0.0


def _describe(e: BaseException) -> str:
    try:
        msg = str(e)[:160]
    except Exception:  # an exception that cannot be printed is still a failure to report
        msg = "<its message could not be printed>"
    return f"{type(e).__name__}: {msg}"


def _write_alone(hold_ms: float, n: int = 15) -> float:
    """The audit write's own time on this machine now: the median of ``n`` writes made in this thread on a trail
    of their own, before any thread of a run starts (ns). A write timed *inside* a run would include its wait for
    the interpreter after its sleep — the very wait a read that holds the GIL imposes — and hide it."""
    if not hold_ms:
        return 0.0
    audit, _lines, took = _trail(hold_ms / 1e3)
    for k in range(n):
        audit.write(0, 1, k + 1)
    return float(np.median(took))


def _failed_run(load: Sequence[Any], why: str) -> Stress:
    empty = np.zeros(0, dtype=np.int64)
    return Stress(None, (), empty, empty, 0.0, len(load), why)


def stress(ledger: Callable[..., Any], load: Sequence[Sequence[tuple[int, int]]],
           opening: dict[int, int] | None = None, *, hold_ms: float = HOLD_MS, switch_s: float = SWITCH_S,
           timeout_s: float = 20.0, think_ms: float = 0.0, forced: bool = False, readers: int = READERS,
           read_gap_ms: float = READ_GAP_MS, seed: int | None = None) -> Stress:
    """Run ``ledger(audit, opening)`` under the grader's stress: one writer thread per share of ``load`` (a list of
    ``(customer_id, points)`` per thread) and ``readers`` threads asking ``top()`` every ``read_gap_ms`` until the
    writers are done, released together, the switch interval at ``switch_s``; then ``balances()`` and a last
    ``top()``. With ``think_ms``, each writer pauses that long after each add (its caller's other work); without,
    its adds come back to back. With ``forced``, each writer's adds run under a trace function that sleeps
    :data:`NUDGE_S` before every instruction of the ledger's own code (not the grader's, nor ``threading``'s or
    ``queue``'s), releasing the GIL there — and :data:`STALL_S` before one instruction in :data:`NUDGE_ODDS`, drawn
    per thread from ``seed`` — so another thread runs between any two of them; the run's timings then measure the
    trace, not the ledger. Never raises what the ledger raises: a failed run says why in ``error``."""
    opening = dict(opening or {})
    alone_ns = _write_alone(hold_ms)
    audit, lines, _took = _trail(hold_ms / 1e3)
    clock, think_s, nudge_s, gap_s = _CLOCK, think_ms / 1e3, NUDGE_S, read_gap_ms / 1e3
    lat: list[list[int]] = [[] for _ in load]
    spans: list[list[tuple[int, int]]] = [[] for _ in load]
    reads: list[tuple[int, int, Any]] = []
    errors: list[str] = []
    go, done, abandoned = threading.Event(), threading.Event(), threading.Event()
    untraced = _UNTRACED
    stall_s, odds = STALL_S, NUDGE_ODDS

    def tracer(i: int) -> Callable[..., Any]:
        """Thread ``i``'s trace function: its own random stream, so the stalls land on every thread alike."""
        pick = _RANDOM(None if seed is None else seed * 1009 + i).randrange

        def nudge(frame: Any, event: str, arg: Any) -> Any:
            if abandoned.is_set():  # the run timed out: end this thread's adds (raised into them) instead of leaking it
                raise TimeoutError("the grader's run was over")
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
        mine, span = lat[i], spans[i]
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
                span.append((t0, t1))
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

    def watch(j: int, obj: Any) -> None:
        try:
            top = obj.top
            go.wait()
            _SLEEP(gap_s * j / max(readers, 1))  # the readers spread over the gap, not in step
            while True:
                t0 = clock()
                got = top()
                t1 = clock()
                reads.append((t0, t1, got[:] if type(got) is list else got))  # what it said then, not what it holds later
                if done.is_set():
                    return
                _SLEEP(gap_s)
        except BaseException as e:  # the learner's top()
            errors.append(f"top() raised {_describe(e)}")

    old = _GETSWITCH()
    try:
        obj = ledger(audit, dict(opening))
    except BaseException as e:  # the learner's constructor
        return _failed_run(load, f"MyLedger(audit, opening) raised {_describe(e)}")
    writers = [threading.Thread(target=drive, args=(i, obj), daemon=True, name=f"labkit-lab09-{i}")
               for i in range(len(load))]
    watchers = [threading.Thread(target=watch, args=(j, obj), daemon=True, name=f"labkit-lab09-read-{j}")
                for j in range(readers)]
    _SETSWITCH(switch_s)
    try:
        for t in writers + watchers:
            t.start()
        go.set()
        deadline = time.monotonic() + timeout_s
        for t in writers:
            t.join(max(0.0, deadline - time.monotonic()))
        done.set()
        for t in watchers:
            t.join(max(0.0, deadline - time.monotonic()))
        changed = abs(_GETSWITCH() - switch_s) > 1e-7  # kept in whole µs: 1e-05 reads back as 1e-05 + ε
    finally:
        _SETSWITCH(old)
    alive = sum(t.is_alive() for t in writers + watchers)
    if alive:
        abandoned.set()
        slow = (" — or, in this run, code that runs many Python instructions per add (each one is slowed here: a "
                "sort inside add, say)") if forced else ""
        return _failed_run(load, f"{alive} of {len(writers) + len(watchers)} threads (writers and readers) had not "
                           f"finished after {timeout_s:g} s — a deadlock? (a Lock taken twice by one thread, or two "
                           f"locks taken in opposite orders){slow}")
    if errors:
        return _failed_run(load, errors[0])
    if changed:
        return _failed_run(load, f"the ledger changed the interpreter's switch interval during the run (the run set "
                           f"{switch_s:g} s): every request in a service shares that setting — leave it alone")
    got: list[Any] = []

    def read() -> None:
        try:
            got.append(obj.balances())
            got.append(obj.top())
        except BaseException as e:  # the learner's balances() or top()
            errors.append(f"{'balances()' if not got else 'top()'} raised {_describe(e)}")

    reader = threading.Thread(target=read, daemon=True, name="labkit-lab09-end")
    reader.start()
    reader.join(timeout_s)
    if reader.is_alive() or errors:
        return _failed_run(load, errors[0] if errors else f"balances() or top() had not returned after {timeout_s:g} s "
                           "— a deadlock?")
    flat_lat = np.array([x for share in lat for x in share], dtype=np.int64)
    adds = tuple((c, p, t0, t1) for share, span in zip(load, spans, strict=True)
                 for (c, p), (t0, t1) in zip(share, span, strict=True))
    return Stress(got[0], tuple(lines), flat_lat, flat_lat - int(alone_ns), alone_ns, len(load), None, opening, got[1],
                  adds, tuple(reads))


def _board_shape(answer: Any, what: str) -> str | None:
    """Why ``answer`` is not a leaderboard (a list of up to TOP ``(int, int)`` tuples in its order), or None."""
    if type(answer) is not list:
        return f"{what} returned {kind(answer)}, not a list of (customer_id, balance) tuples"
    for e in answer:
        if type(e) is not tuple or len(e) != 2 or type(e[0]) is not int or type(e[1]) is not int:
            return f"{what} holds {kind(e)}, not a (customer_id, balance) tuple of two int"
    if len(answer) > TOP:
        return f"{what} returned {len(answer)} entries, not the top {TOP}"
    if len({c for c, _ in answer}) != len(answer):
        return f"{what} names a customer twice"
    if any(_rank(a) >= _rank(b) for a, b in zip(answer, answer[1:], strict=False)):
        return f"{what} is not in the leaderboard's order (the higher balance first, ties: the lower customer id first)"
    return None


def _stale_read(run: Stress) -> str | None:
    """The first read during the run that no moment of its own call could have given (a sentence), or None: each
    balance it shows at least what the adds returned before the read began had made it and at most what the adds
    begun before it returned could have, and nobody left out whose balance stayed above its last entry."""
    opening = run.opening or {}
    if not run.reads:
        return None
    ids = sorted({c for c, *_ in run.adds})
    index = {c: k for k, c in enumerate(ids)}
    cust = np.array([index[c] for c, *_ in run.adds], dtype=np.int64)
    pts = np.array([p for _, p, *_ in run.adds], dtype=np.int64)
    t0 = np.array([a[2] for a in run.adds], dtype=np.int64)
    t1 = np.array([a[3] for a in run.adds], dtype=np.int64)
    base = np.array([opening.get(c, 0) for c in ids], dtype=np.int64)
    held = np.array([c in opening for c in ids], dtype=bool)
    quiet_ranked: list[tuple[int, int]] | None = None  # the opening's best customers that no add touched
    for n, (r0, r1, answer) in enumerate(run.reads):
        what = f"top() read {n + 1} of {len(run.reads)} during the run"
        if (shape := _board_shape(answer, what)) is not None:
            return shape
        done_ = np.bincount(cust, weights=pts * (t1 < r0), minlength=len(ids)).astype(np.int64)
        begun = np.bincount(cust, weights=pts * (t0 < r1), minlength=len(ids)).astype(np.int64)
        known_lo = held | (np.bincount(cust, weights=(t1 < r0), minlength=len(ids)) > 0)
        known_hi = held | (np.bincount(cust, weights=(t0 < r1), minlength=len(ids)) > 0)
        lo, hi = base + done_, base + begun
        for c, b in answer:
            if c in index:
                k = index[c]
                if not known_hi[k] or not lo[k] <= b <= hi[k]:
                    span = f"between {lo[k]:,} and {hi[k]:,}" if known_hi[k] else "none yet (no add of it had begun)"
                    return (f"{what} says customer {c} has {b:,} points; while that read ran, its balance was {span} — "
                            "a stale or torn leaderboard (a copy kept from before, or a read while an add was half done)")
            elif opening.get(c) != b:
                return (f"{what} says customer {c} has {b:,} points; no add touched it, and its balance was "
                        f"{opening[c]:,}" if c in opening else f"{what} names customer {c}, who has no balance")
        shown = {c for c, _ in answer}
        n_known = int(known_lo.sum()) + len(opening) - int(held.sum())
        if len(answer) < min(TOP, n_known):
            return f"{what} returned {len(answer)} entries while at least {min(TOP, n_known)} customers had a balance"
        if len(answer) < TOP:
            continue
        last = _rank((answer[-1][0], int(hi[index[answer[-1][0]]]) if answer[-1][0] in index else answer[-1][1]))
        for k, c in enumerate(ids):
            if known_lo[k] and c not in shown and _rank((c, int(lo[k]))) < last:
                return (f"{what} leaves out customer {c}, whose balance was at least {lo[k]:,} throughout the read — "
                        f"above its last entry, {answer[-1]}: the leaderboard was stale")
        if quiet_ranked is None:
            quiet_ranked = _SORTED(((c, b) for c, b in opening.items() if c not in index), key=_rank)[:TOP + 1]
        for c, b in quiet_ranked:
            if c not in shown:
                if _rank((c, b)) < last:
                    return (f"{what} leaves out customer {c}, whose balance of {b:,} no add changed — above its last "
                            f"entry, {answer[-1]}")
                break
    return None


def _problem(run: Stress, load: Sequence[Sequence[tuple[int, int]]]) -> str | None:
    """What is wrong with a run's answers, audit trail or reads (a sentence), or None: exact sums, every line once,
    a serial history of balances per customer, the final top exact, and every read during the run fresh."""
    if run.error is not None:
        return run.error
    opening = run.opening or {}
    want: dict[int, int] = dict(opening)
    sent: Counter[tuple[int, int]] = Counter()
    for share in load:
        for c, p in share:
            want[c] = want.get(c, 0) + p
            sent[(c, p)] += 1
    if type(run.answer) is dict and all(type(k) is int and type(v) is int for k, v in run.answer.items()):
        short = sum(want.values()) - sum(run.answer.values())
        if short > 0 and set(run.answer) <= set(want):
            added = sum(sum(p for _, p in share) for share in load)
            d = difference(want, run.answer, "balances()")
            return (f"lost updates: {short:,} points of the {added:,} added missing ({d}) — two adds read the same "
                    "balance and both wrote theirs back")
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
        before = opening.get(c, 0)
        for b, p in sorted(entries):
            if b != before + p:
                return (f"customer {c}'s audit lines are no serial history: a line says balance {b:,} after "
                        f"{p} points, but the balance before it was {before:,} — a line's balance is not the one its "
                        "own add made (two adds read the same balance, or it was read again after another add)")
            before = b
    if (stale := _stale_read(run)) is not None:
        return stale
    if (shape := _board_shape(run.ranked, "the last top() (after every add had returned)")) is not None:
        return shape
    best = _SORTED(want.items(), key=_rank)[:TOP]
    if run.ranked != best:
        wrong = next((i for i, (a, b) in enumerate(zip(run.ranked, best, strict=False)) if a != b),
                     min(len(run.ranked), len(best)))
        return (f"the last top() (after every add had returned) is not the table's top {TOP}: place {wrong + 1} is "
                f"{run.ranked[wrong] if wrong < len(run.ranked) else 'missing'}, the table says "
                f"{best[wrong] if wrong < len(best) else 'nobody'}")
    return None


def _load(rng: random.Random, threads: int, adds: int, hot: float = 0.6) -> tuple[list[list[tuple[int, int]]],
                                                                                  dict[int, int]]:
    """A load made for one run and the opening balances it meets: ``threads`` shares of ~``adds`` adds each; a few
    hot customers (customers already) get the ``hot`` share of them, the rest spread over many, some of them new;
    about :data:`CUSTOMERS` opening balances of 0–5,000 points; ids never seen before this run."""
    base = rng.randrange(10**6, 10**9)
    size = band(rng, CUSTOMERS, 0.25)
    ids = rng.sample(range(base, base + 20 * size), size + 60)
    opening = {c: rng.randint(0, 5000) for c in ids[:size]}
    hot_ids = [ids[rng.randrange(size)] for _ in range(rng.randint(1, 2))]
    cold = [ids[rng.randrange(size)] if rng.random() < 0.5 else ids[size + k] for k in range(rng.randint(20, 60))]
    out = []
    for _ in range(threads):
        n = band(rng, adds, 0.25)
        out.append([(rng.choice(hot_ids) if rng.random() < hot else rng.choice(cold), rng.randint(1, 500))
                    for _ in range(n)])
    return out, opening


def check(my_ledger: Callable[..., Any], experiment: Experiment | None = None, *, rounds: int = 8,
          required_speedup: float = 2.0, wait_budget_x: float = WAIT_BUDGET_X, threads: int = 8, adds: int = 24,
          hold_ms: float = HOLD_MS, save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade a points ledger with a leaderboard: exact and fresh under the stress in every run, then the wait
    budget, then P99 end to end.

    Args:
        my_ledger: your class (or any callable) — ``my_ledger(audit, opening)`` returns an object with
            ``add(customer_id, points)``, ``top() -> list[tuple[int, int]]`` and ``balances() -> dict[int, int]``.
        experiment: your :class:`labkit.learner.record.Experiment` (planned before the check with a predicted P99 ratio,
            yours / the baseline's: required), concluded with the measured one.
        rounds: interleaved rounds of the P99 comparison (a few more drawn per grading).
        required_speedup: how many times lower than the baseline's your P99 must be.
        wait_budget_x: the most an add may wait at P90, in audit writes (each measured alone).
        threads, adds: about this many writer threads per run, and adds per thread (each drawn per run from a band).
        hold_ms: the emulated audit write, per line.
        save: save the concluded experiment record.
        seed: reproduce a grading run (a new seed is drawn each time by default).
    """
    refused, seed, rng = EXERCISE.start(my_ledger, seed)
    if refused is not None:
        return refused
    # how a run is paced: (audit write, other work between a writer's adds, both ms; a switch forced before every
    # instruction; the switch interval). Every run but the hammer is paced alike, so that nothing in the pace tells a
    # timed run
    paced, forced, hammer = (hold_ms, hold_ms, False, SWITCH_S), (hold_ms, hold_ms, True, SWITCH_S), \
        (0.0, 0.0, False, HAMMER_SWITCH_S)
    Load = tuple[list[list[tuple[int, int]]], dict[int, int]]  # noqa: N806 — a local alias

    def yours(load: Load, pace: tuple[float, float, bool, float]) -> Stress:
        return stress(my_ledger, load[0], load[1], hold_ms=pace[0], think_ms=pace[1], forced=pace[2],
                      switch_s=pace[3], seed=rng.randrange(2**31) if pace[2] else None)

    def base(load: Load, pace: tuple[float, float, bool, float]) -> Stress:
        return stress(baseline, load[0], load[1], hold_ms=pace[0], think_ms=pace[1], forced=pace[2],
                      switch_s=pace[3])

    def sized() -> Load:
        return _load(rng, band(rng, threads, 0.25), adds)

    # a ledger may keep a thread of its own (a writer behind a queue): allowed while it waits, not while it works
    with Caller(threads="idle") as caller:
        def run(fn: Callable[..., Stress], load: Load, pace: tuple[float, float, bool, float] = paced) -> Stress:
            out = caller.call(fn, (load, pace))
            if out.error is not None or type(out.value) is not Stress:
                return _failed_run(load[0], f"the run failed: {_describe(out.error) if out.error else kind(out.value)}")
            return out.value

        def exact() -> Item:
            if (busy := quiet(caller, "before the stress runs", "correctness")) is not None:
                return busy
            many = band(rng, threads, 0.25)

            def crowd(n: int = adds) -> Load:  # one customer, every thread
                _, opening = _load(rng, 1, 1)
                one = next(iter(opening))
                return [[(one, rng.randint(1, 500)) for _ in range(band(rng, n, 0.25))] for _ in range(many)], opening

            def edge(shares: int, n: int) -> Load:
                load, opening = _load(rng, shares, max(n, 1))
                return [share[:n] for share in load], opening

            switched = "a thread switch forced before every instruction of your adds"
            traced = max(4, adds // 4)  # adds a writer makes under the trace: each is a thousand times slower there
            cases = [("no adds at all", edge(many, 0), paced),
                     ("one add", edge(1, 1), paced),
                     (f"one customer from {many} threads", crowd(), paced),
                     (f"one customer from {many} threads, {switched}", crowd(traced), forced),
                     ("the hammer: adds back to back on a few hot customers, audit writes that take no time",
                      _load(rng, band(rng, threads, 0.25), HAMMER_ADDS, hot=0.9), hammer)]
            cases += [(f"a run of the timed size ({i + 1})", sized(), paced) for i in range(rng.randint(1, 2))]
            cases += [(f"a run of the timed size's threads, {traced} adds each, {switched} ({i + 1})",
                       _load(rng, band(rng, threads, 0.25), traced), forced) for i in range(2)]
            hammered = sum(len(share) for _, load, pace in cases if pace is hammer for share in load[0])
            rng.shuffle(cases)
            reads = 0
            for name, load, pace in cases:
                got = run(yours, load, pace)
                if (where := _problem(got, load[0])) is not None:
                    n = sum(len(s) for s in load[0])
                    return failed(f"on {name} ({len(load[0])} writers, {n:,} adds, {READERS} readers): {where}",
                                  hint="every add must count exactly once, however many threads race, and every read "
                                  "must show the table as it was at some moment of that read: a balance's read, sum "
                                  "and store — and anything kept beside it — under one lock every add takes",
                                  criterion="correctness")
                reads += len(got.reads)
            return passed(f"exact on all {len(cases)} stress runs (balances, audit trail, the last top(), and all "
                          f"{reads:,} reads during the runs fresh; three with {switched}, one hammer of {hammered:,} "
                          "adds back to back)", criterion="correctness")

        def within_budget() -> Item:
            load = sized()
            watch = Watch(caller)
            got = run(yours, load)
            if (busy := watch.busy()) is not None:
                return failed(f"the budget's run: {busy}", "the waits cannot be trusted",
                              "stop the threads your notebook started, then check again", criterion="budget")
            if (where := _problem(got, load[0])) is not None:
                return failed(f"wrong answer on the budget's load: {where}", criterion="budget")
            p90, write = float(_PERCENTILE(got.wait_ns, 90)), max(got.write_ns, 1.0)
            what = (f"an add's wait on a load never seen ({got.threads} writers, {got.latency_ns.size} adds, "
                    f"{READERS} readers making {len(got.reads)} reads) — its time minus the audit write's own, "
                    f"{write / 1e3:,.0f} µs when made alone: P90 {p90 / 1e3:,.0f} µs = {p90 / write:.2f} × that write")
            if p90 > wait_budget_x * write:
                return failed(what, f"over the budget of {wait_budget_x:g}×",
                              "an add still waits while a read runs: for the lock, or for the interpreter? (a read "
                              "that sorts outside the lock still holds the GIL while it sorts)",
                              detail=got, criterion="budget")
            return passed(f"{what}, within the budget of {wait_budget_x:g}×, every answer checked", detail=got,
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
                    if (where := _problem(got, load[0])) is not None:
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
                item = passed(f"{what}; every run's answers checked", detail=c, criterion="speed")
            else:
                item = failed(what, f"need 'faster' by at least {required_speedup:g}×",
                              "the tail is the adds that came while a read ran: make the read shorter",
                              detail=c, criterion="speed")
                return (item,)
            return item, prediction(experiment, c, save=save)

        result = EXERCISE.grade(exact, lambda: planned(experiment), within_budget, faster, seed=seed)
    return result


_SEALED = seal(globals())
