"""Lab 09's grader: the points ledger's leaderboard. The reference (the adds keep the ten best up to date) and a
read that takes the board without the lock (the adds publish a new list) pass; the baseline fails, and so do an
honest first try that only moves the sort out of the lock (the writers then wait for the interpreter instead),
its heap-based cousin, a ranking cached at the start, one refreshed every so many adds, one refreshed by a thread of
its own, a leaderboard kept after the lock (two writers' updates race), ties in the wrong order, a board that
forgets the opening balances, a ledger that shortens the switch interval, every generic cheat, and the ledger's own
races: no lock, a read outside the lock, per-customer locks made racily, a stale audit balance, updates dropped."""

from __future__ import annotations

import contextlib
import heapq
import sys
import threading
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from graderkit import assert_grader, mutating, size_gated, standard_cheats

from labkit.exercises import lab09
from labkit.learner.record import Experiment


def _ranked(items: Any) -> list[tuple[int, int]]:
    return sorted(items, key=lambda kv: (-kv[1], kv[0]))[: lab09.TOP]


class Reference:
    """A learner's fix: the adds keep the ten best under the lock they take; a read copies them."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        self._lock, self._audit, self._balance = threading.Lock(), audit, dict(opening)
        self._best = _ranked(self._balance.items())

    def _place(self, customer_id: int, balance: int) -> None:
        board = [kv for kv in self._best if kv[0] != customer_id]
        if len(board) < lab09.TOP or (-balance, customer_id) < (-board[-1][1], board[-1][0]):
            self._best = _ranked([*board, (customer_id, balance)])

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            balance = self._balance[customer_id] = self._balance.get(customer_id, 0) + points
            self._place(customer_id, balance)
        self._audit.write(customer_id, points, balance)

    def top(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._best)

    def balances(self) -> dict[int, int]:
        with self._lock:
            return dict(self._balance)


class Published(Reference):
    """Another fix: every add publishes a new board (one attribute store), so a read takes it without the lock."""

    def top(self) -> list[tuple[int, int]]:
        return list(self._best)


class Wrong(Reference):
    """Fast, and counts every add as one point."""

    def add(self, customer_id: int, points: int) -> None:
        super().add(customer_id, 1)


class SortsOutsideTheLock(lab09.baseline):
    """The first idea: copy the pairs under the lock, sort after it — the sort still holds the interpreter."""

    def top(self) -> list[tuple[int, int]]:
        with self._lock:
            pairs = list(self._balance.items())
        return _ranked(pairs)


class HeapOutsideTheLock(lab09.baseline):
    """The same, with ``heapq.nsmallest`` (pure Python, so the interpreter changes hands every switch interval)."""

    def top(self) -> list[tuple[int, int]]:
        with self._lock:
            pairs = list(self._balance.items())
        return heapq.nsmallest(lab09.TOP, pairs, key=lambda kv: (-kv[1], kv[0]))


class CachedAtTheStart(Reference):
    """The board sorted once, when the ledger is made, and never again: fast, and stale as soon as an add lands."""

    def _place(self, customer_id: int, balance: int) -> None:
        return None


class RefreshedEveryFewAdds(lab09.baseline):
    """The board sorted again under the lock every 20th add, and read from that copy in between."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        super().__init__(audit, opening)
        self._n, self._best = 0, _ranked(self._balance.items())

    def add(self, customer_id: int, points: int) -> None:
        super().add(customer_id, points)
        with self._lock:
            self._n += 1
            if self._n % 20 == 0:
                self._best = _ranked(self._balance.items())

    def top(self) -> list[tuple[int, int]]:
        return list(self._best)


class RefreshedByAThread(lab09.baseline):
    """A thread of its own sorts the board every 3 ms; a read returns its latest copy."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        super().__init__(audit, opening)
        self._best, self._over = _ranked(self._balance.items()), threading.Event()
        threading.Thread(target=self._refresh, daemon=True).start()

    def _refresh(self) -> None:
        while not self._over.wait(0.003):  # until the run's end (its last balances()), not a minute later
            with self._lock:
                pairs = list(self._balance.items())
            self._best = _ranked(pairs)

    def top(self) -> list[tuple[int, int]]:
        return list(self._best)

    def balances(self) -> dict[int, int]:
        self._over.set()
        return super().balances()


class BoardAfterTheLock(Reference):
    """The board updated after the lock, from the balance the add made: two writers' updates race (a read-modify-
    write of the board with no lock), and a hot customer's newer balance can be overwritten by an older one."""

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            balance = self._balance[customer_id] = self._balance.get(customer_id, 0) + points
        self._place(customer_id, balance)
        self._audit.write(customer_id, points, balance)


class TiesInAnyOrder(Reference):
    """Ranked by balance only: customers with equal balances come in whatever order the table holds them."""

    def _place(self, customer_id: int, balance: int) -> None:
        board = [kv for kv in self._best if kv[0] != customer_id] + [(customer_id, balance)]
        self._best = sorted(board, key=lambda kv: -kv[1])[: lab09.TOP]

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        super().__init__(audit, opening)
        self._best = sorted(self._balance.items(), key=lambda kv: -kv[1])[: lab09.TOP]


class ForgetsTheOpening(Reference):
    """The board of the customers the adds touched only: the opening balances never rank."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        super().__init__(audit, opening)
        self._best = []


class ShortensTheSwitchInterval(SortsOutsideTheLock):
    """Sorts outside the lock and sets a 10 µs switch interval, so the writers get the interpreter back sooner."""

    def top(self) -> list[tuple[int, int]]:
        sys.setswitchinterval(1e-5)
        return super().top()


class SkipTheLockAndHope(Reference):
    """The ledger's lock deleted: "the lock is the problem"."""

    def add(self, customer_id: int, points: int) -> None:
        balance = self._balance.get(customer_id, 0) + points
        self._audit.write(customer_id, points, balance)
        self._balance[customer_id] = balance
        with self._lock:
            self._place(customer_id, balance)


class DropsTheUpdates(Reference):
    """Nothing recorded: the fastest add there is."""

    def add(self, customer_id: int, points: int) -> None:
        return None


class DropsWhenBusy(Reference):
    """Never waits: an add that finds the lock taken (by a read, say) is dropped."""

    def add(self, customer_id: int, points: int) -> None:
        if not self._lock.acquire(blocking=False):
            return
        try:
            balance = self._balance[customer_id] = self._balance.get(customer_id, 0) + points
            self._place(customer_id, balance)
        finally:
            self._lock.release()
        self._audit.write(customer_id, points, balance)


class SkipsTheAudit(Reference):
    """Exact balances and board, and no audit line: the slow write simply left out."""

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            balance = self._balance[customer_id] = self._balance.get(customer_id, 0) + points
            self._place(customer_id, balance)


class NoLockAtAll(Reference):
    """No lock: ``+=`` on a ``defaultdict`` (one line no switch splits here), then the balance read back."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        super().__init__(audit, opening)
        self._balance = defaultdict(int, opening)

    def add(self, customer_id: int, points: int) -> None:
        self._balance[customer_id] += points
        b = self._balance[customer_id]
        self._place(customer_id, b)
        self._audit.write(customer_id, points, b)

    def balances(self) -> dict[int, int]:
        return dict(self._balance)


class ReadsOutsideTheLock(Reference):
    """The read outside the lock, only the store inside it: two adds read the same balance."""

    def add(self, customer_id: int, points: int) -> None:
        b = self._balance.get(customer_id, 0) + points
        with self._lock:
            self._balance[customer_id] = b
            self._place(customer_id, b)
        self._audit.write(customer_id, points, b)


class PerCustomerLocksMadeRacily(Reference):
    """One lock per customer, made by the first add that finds none — two first adds make two locks."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        super().__init__(audit, opening)
        self._locks: dict[int, threading.Lock] = {}

    def add(self, customer_id: int, points: int) -> None:
        lock = self._locks.get(customer_id)
        if lock is None:
            lock = self._locks[customer_id] = threading.Lock()
        with lock:
            b = self._balance.get(customer_id, 0) + points
            self._balance[customer_id] = b
        with self._lock:
            self._place(customer_id, b)
        self._audit.write(customer_id, points, b)


class StaleAuditBalance(Reference):
    """Exact balances; the audit line's balance read again after the lock: another add's points may be in it."""

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            balance = self._balance[customer_id] = self._balance.get(customer_id, 0) + points
            self._place(customer_id, balance)
        self._audit.write(customer_id, points, self._balance[customer_id])


_shared: dict[int, int] = {}


class SharedAcrossLedgers(Reference):
    """One balance table for every ledger ever made (a module-level dict): the next run starts from the last."""

    def __init__(self, audit: Any, opening: dict[int, int]) -> None:
        super().__init__(audit, opening)
        _shared.update(opening)
        self._balance = _shared


def _unhooks(audit: Any, opening: dict[int, int]) -> None:
    for name in ("hold_s", "delay_ms", "_hold"):  # an audit trail with no delay: the work made free
        with contextlib.suppress(AttributeError):
            setattr(audit, name, 0.0)


def _threads(audit: Any, opening: dict[int, int]) -> int:
    return threading.active_count()


def _experiment() -> Experiment:
    return Experiment.plan("leaderboard", "A read copies ten pairs instead of sorting the table under the lock, so an "
                           "add no longer queues behind a sort: its P99 falls to about one write, ratio ~0.05.",
                           predicted_ratio=0.05)


GRADER_CASES = {
    "grade": lambda fn, experiment: lab09.check(fn, experiment, save=False),
    "experiment": _experiment,
    "reference": Reference,
    "others": {"the board published, read without the lock": Published},
    "baseline": lab09.baseline,
    "wrong": Wrong,
    "cheats": {**standard_cheats(lab09.baseline, lab09, wrong=Wrong, size=_threads, at_least=6),
               "sorts outside the lock": SortsOutsideTheLock,
               "a heap outside the lock": HeapOutsideTheLock,
               "a ranking cached at the start": CachedAtTheStart,
               "a ranking refreshed every 20 adds": RefreshedEveryFewAdds,
               "a ranking refreshed by a thread of its own": RefreshedByAThread,
               "the board kept after the lock": BoardAfterTheLock,
               "ties in any order": TiesInAnyOrder,
               "forgets the opening balances": ForgetsTheOpening,
               "shortens the switch interval": ShortensTheSwitchInterval,
               "skip the lock and hope": SkipTheLockAndHope,
               "drop the updates": DropsTheUpdates,
               "drop the updates that would wait": DropsWhenBusy,
               "skips the audit write": SkipsTheAudit,
               "state shared between ledgers": SharedAcrossLedgers,
               "careless once many threads run": size_gated(lab09.baseline, _threads, 8, SkipTheLockAndHope),
               "no lock at all (a defaultdict)": NoLockAtAll,
               "reads outside the lock, stores inside": ReadsOutsideTheLock,
               "per-customer locks made racily": PerCustomerLocksMadeRacily,
               "audit line with a stale balance": StaleAuditBalance,
               "mutates its audit trail": mutating(lab09.baseline, _unhooks)},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_the_baseline_and_a_sort_moved_out_of_the_lock_are_exact_and_fail_the_wait_budget():
    # the honest first try: the lock is no longer held while sorting, yet the writers wait as long, for the GIL
    for cls in (lab09.baseline, SortsOutsideTheLock):
        grade = lab09.check(cls, _experiment(), save=False, seed=3)
        assert [i.ok for i in grade.items] == [True, True, False], str(grade)
        assert "when made alone" in grade.items[2].message and "over the budget" in grade.items[2].message
        assert "for the interpreter" in str(grade)


#: what a correctness failure of a leaderboard or a ledger says: which of them a run meets first depends on where
#: the threads' switches fell (a hammer may show a wrong order before a forced run shows a stale read)
WRONG = ("lost updates", "no serial history", "stale", "torn", "leaves out", "not the table's top", "entries while",
         "leaderboard's order", "code that runs many Python instructions per add")


def test_stale_and_torn_boards_say_what_went_wrong():
    for cls in (CachedAtTheStart, RefreshedEveryFewAdds, ForgetsTheOpening, TiesInAnyOrder, BoardAfterTheLock):
        grade = lab09.check(cls, _experiment(), save=False)
        first = grade.items[0]
        assert not first.ok and first.criterion == "correctness", (cls.__name__, str(grade))
        assert any(s in first.message for s in WRONG), (cls.__name__, str(grade))


def test_a_ledger_that_changes_the_switch_interval_fails_its_run():
    run = lab09.stress(ShortensTheSwitchInterval, [[(1, 2)] * 3] * 2, {5: 10})
    assert run.error is not None and "switch interval" in run.error


def test_lost_updates_and_missing_lines_say_what_went_wrong():
    # a ledger without its lock fails, naming a race; which race a run shows first (an add lost, a line not serial, a
    # stale read) is the scheduler's choice on a loaded machine, so the lost-update sentence is checked on its own
    unlocked = lab09.check(SkipTheLockAndHope, _experiment(), save=False)
    assert len(unlocked.items) == 1 and any(s in unlocked.items[0].message for s in WRONG), str(unlocked)
    two_adds_one_kept = lab09.Stress(answer={7: 5}, lines=((7, 5, 5), (7, 5, 5)), latency_ns=np.zeros(2),
                                     wait_ns=np.zeros(2), write_ns=0.0, threads=2, opening={})
    said = lab09._problem(two_adds_one_kept, [[(7, 5)], [(7, 5)]])
    assert said is not None and said.startswith("lost updates: 5 points of the 10 added missing"), said
    missing = lab09.check(SkipsTheAudit, _experiment(), save=False)
    assert "audit trail does not hold every add's line" in missing.items[0].message


def test_a_deadlock_fails_with_a_message_and_the_check_returns():
    class TakesItTwice(Reference):
        def add(self, customer_id: int, points: int) -> None:
            with self._lock, self._lock:  # a Lock is not reentrant: the first add waits for itself forever
                pass

    run = lab09.stress(TakesItTwice, [[(1, 2)], [(1, 3)]], {}, timeout_s=0.5)
    assert run.error is not None and "deadlock" in run.error


def test_the_stress_restores_the_switch_interval_and_refusals_say_what_to_pass():
    before = sys.getswitchinterval()
    lab09.stress(Reference, [[(1, 2)] * 3] * 2, {7: 1})
    assert sys.getswitchinterval() == before
    assert "pass your function itself" in str(lab09.check(None))
    assert "did you call it?" in str(lab09.check(Reference(None, {})))


def test_the_prediction_is_concluded_with_the_measured_p99_ratio():
    grade = lab09.check(Reference, _experiment(), save=False, seed=5)
    assert grade.passed, str(grade)
    assert "seed 5" in grade.title and "your prediction (0.05)" in grade.items[-1].message
    assert "every run's answers checked" in grade.items[-2].message


def _run_of(answer, lines, *, opening=None, ranked=None, adds=(), reads=()):
    import numpy as np

    empty = np.zeros(0, dtype=np.int64)
    ranked = ranked if ranked is not None else _ranked(answer.items()) if type(answer) is dict else []
    return lab09.Stress(answer, tuple(lines), empty, empty, 1.0, 2, None, opening or {}, ranked, tuple(adds),
                        tuple(reads))


def test_the_audit_trail_must_be_a_serial_history_from_the_opening_balance():
    load = [[(7, 5), (7, 3)], [(8, 2)]]
    assert lab09._problem(_run_of({7: 8, 8: 2}, [(7, 5, 5), (8, 2, 2), (7, 3, 8)]), load) is None
    assert lab09._problem(_run_of({7: 8, 8: 2}, [(7, 3, 3), (7, 5, 8), (8, 2, 2)]), load) is None  # any serial order
    opened = lab09._problem(_run_of({7: 108, 8: 2}, [(7, 5, 105), (8, 2, 2), (7, 3, 108)], opening={7: 100}), load)
    assert opened is None
    lost = lab09._problem(_run_of({7: 5, 8: 2}, [(7, 5, 5), (7, 3, 3), (8, 2, 2)]), load)
    assert lost is not None and "lost updates: 3 points of the 10 added missing" in lost
    stale = lab09._problem(_run_of({7: 8, 8: 2}, [(7, 5, 5), (7, 3, 3), (8, 2, 2)]), load)
    assert stale is not None and "no serial history" in stale
    missing = lab09._problem(_run_of({7: 8, 8: 2}, [(7, 5, 5), (7, 3, 8)]), load)
    assert missing is not None and "1 missing, 0 extra" in missing
    typed = lab09._problem(_run_of({7: 8.0, 8: 2}, []), load)
    assert typed is not None and "expected type int" in typed


def test_a_read_is_judged_by_what_its_own_call_could_have_seen():
    # GIVEN one add to customer 7 (opening 10) of 5 points, made between t = 100 and t = 200
    opening = {7: 10, 8: 12, 9: 1}
    load, lines, adds = [[(7, 5)]], [(7, 5, 15)], [(7, 5, 100, 200)]

    def judged(*reads):
        return lab09._problem(_run_of({7: 15, 8: 12, 9: 1}, lines, opening=opening, adds=adds, reads=reads), load)

    before, after = [(8, 12), (7, 10), (9, 1)], [(7, 15), (8, 12), (9, 1)]
    # THEN a read before the add may show 10, one after it must show 15, one overlapping it either
    assert judged((0, 50, before), (300, 400, after), (150, 160, before), (150, 160, after)) is None
    stale = judged((300, 400, before))
    assert stale is not None and "customer 7 has 10 points" in stale and "between 15 and 15" in stale
    # and a read that names nobody's balance, the wrong order, or a short board says so
    assert "no add touched it" in judged((0, 50, [(8, 13), (7, 10), (9, 1)]))
    assert "order" in judged((0, 50, [(7, 10), (8, 12), (9, 1)]))
    assert "returned 2 entries" in judged((0, 50, [(8, 12), (7, 10)]))
    assert "not a list" in judged((0, 50, tuple(before)))


def test_races_fail_under_the_forced_switches_and_say_so():
    for racy in (NoLockAtAll, ReadsOutsideTheLock, PerCustomerLocksMadeRacily, StaleAuditBalance):
        grade = lab09.check(racy, _experiment(), save=False)
        message = grade.items[0].message
        assert len(grade.items) == 1 and any(s in message for s in WRONG), (racy.__name__, str(grade))


def test_the_forced_switch_run_passes_the_reference_and_fails_a_ledger_that_removes_its_trace():
    class Untraced(Reference):
        def add(self, customer_id: int, points: int) -> None:
            sys.settrace(None)
            super().add(customer_id, points)

    load, opening = [[(1, 2)] * 3] * 2, {1: 3, 2: 4}
    assert lab09._problem(lab09.stress(Reference, load, opening, forced=True), load) is None
    run = lab09.stress(Untraced, load, opening, forced=True)
    assert run.error is not None and "trace function" in run.error


@pytest.mark.parametrize("cls", [lab09._Reference, Reference, Published])
def test_the_references_are_exact_on_a_hammer(cls):
    import random

    load, opening = lab09._load(random.Random(4), 8, lab09.HAMMER_ADDS, hot=0.9)
    run = lab09.stress(cls, load, opening, hold_ms=0, switch_s=lab09.HAMMER_SWITCH_S)
    assert lab09._problem(run, load) is None and run.reads
