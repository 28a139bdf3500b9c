"""Lab 09's grader: the points ledger. The reference (and a queue to one writer thread) passes; the baseline, every
generic cheat, dropping the updates (all of them, or those that would wait for the lock), skipping the lock and
hoping, skipping the audit write, state shared between ledgers, a ledger that turns careless once many threads run,
a per-customer lock that still holds the write, and a wrong answer all fail — and so do the races whose window is a
line boundary, which only the forced-switch runs split: no lock on a ``defaultdict``, the balance read outside the
lock and stored inside it, per-customer locks made by the adds that race for them, and an audit line written with
the balance read again after the lock."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import defaultdict
from typing import Any

from graderkit import assert_grader, mutating, size_gated, standard_cheats

from labkit.exercises import lab09
from labkit.learner.record import Experiment


class Reference:
    """A learner's fix: the lock guards the read-modify-write of the balance; the audit write happens after it."""

    def __init__(self, audit: Any) -> None:
        self._lock, self._audit, self._balance = threading.Lock(), audit, {}

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            balance = self._balance[customer_id] = self._balance.get(customer_id, 0) + points
        self._audit.write(customer_id, points, balance)

    def balances(self) -> dict[int, int]:
        with self._lock:
            return dict(self._balance)


class Queued:
    """Another fix: the add hands its entry to one writer thread (balance and line, in order); a read drains it."""

    def __init__(self, audit: Any) -> None:
        import queue

        self._q: queue.Queue = queue.Queue()
        self._audit, self._balance = audit, {}
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            c, p = self._q.get()
            b = self._balance[c] = self._balance.get(c, 0) + p
            self._audit.write(c, p, b)
            self._q.task_done()

    def add(self, customer_id: int, points: int) -> None:
        self._q.put((customer_id, points))

    def balances(self) -> dict[int, int]:
        self._q.join()
        return dict(self._balance)


class Wrong(Reference):
    """Fast, and counts every add as one point."""

    def add(self, customer_id: int, points: int) -> None:
        super().add(customer_id, 1)


class SkipTheLockAndHope(lab09.baseline):
    """The baseline with its lock deleted: "the lock is the problem"."""

    def add(self, customer_id: int, points: int) -> None:
        balance = self._balance.get(customer_id, 0) + points
        self._audit.write(customer_id, points, balance)
        self._balance[customer_id] = balance


class DropsTheUpdates(Reference):
    """Nothing recorded: the fastest add there is."""

    def add(self, customer_id: int, points: int) -> None:
        return None


class DropsWhenBusy(lab09.baseline):
    """Never waits: an add that finds the lock taken is dropped (a "non-blocking" fix that loses data)."""

    def add(self, customer_id: int, points: int) -> None:
        if not self._lock.acquire(blocking=False):
            return
        try:
            balance = self._balance.get(customer_id, 0) + points
            self._audit.write(customer_id, points, balance)
            self._balance[customer_id] = balance
        finally:
            self._lock.release()


class SkipsTheAudit(Reference):
    """Exact balances, and no audit line: the slow write simply left out."""

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            self._balance[customer_id] = self._balance.get(customer_id, 0) + points


class WritesLater(Reference):
    """The audit lines written by a thread of its own that balances() does not wait for: lines go missing."""

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            balance = self._balance[customer_id] = self._balance.get(customer_id, 0) + points
        threading.Timer(0.05, self._audit.write, (customer_id, points, balance)).start()


class PerCustomerLockStillHoldsTheWrite(lab09.baseline):
    """Sharded locks, one per customer, each still held across the write: hot customers still queue."""

    def __init__(self, audit: Any) -> None:
        super().__init__(audit)
        self._locks: dict[int, threading.Lock] = {}

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            mine = self._locks.setdefault(customer_id, threading.Lock())
        with mine:
            balance = self._balance.get(customer_id, 0) + points
            self._audit.write(customer_id, points, balance)
            self._balance[customer_id] = balance


class NoLockAtAll:
    """No lock: ``+=`` on a ``defaultdict`` (one line no switch splits here), then the balance read back for the
    line — by then another add may have added its points."""

    def __init__(self, audit: Any) -> None:
        self._audit, self._b = audit, defaultdict(int)

    def add(self, customer_id: int, points: int) -> None:
        self._b[customer_id] += points
        b = self._b[customer_id]
        self._audit.write(customer_id, points, b)

    def balances(self) -> dict[int, int]:
        return dict(self._b)


class ReadsOutsideTheLock(Reference):
    """The read outside the lock, only the store inside it: two adds read the same balance."""

    def add(self, customer_id: int, points: int) -> None:
        b = self._balance.get(customer_id, 0) + points
        with self._lock:
            self._balance[customer_id] = b
        self._audit.write(customer_id, points, b)


class PerCustomerLocksMadeRacily(Reference):
    """One lock per customer, made by the first add that finds none — two first adds make two locks."""

    def __init__(self, audit: Any) -> None:
        super().__init__(audit)
        self._locks: dict[int, threading.Lock] = {}

    def add(self, customer_id: int, points: int) -> None:
        lock = self._locks.get(customer_id)
        if lock is None:
            lock = self._locks[customer_id] = threading.Lock()
        with lock:
            b = self._balance.get(customer_id, 0) + points
            self._balance[customer_id] = b
        self._audit.write(customer_id, points, b)


class StaleAuditBalance(Reference):
    """Exact balances; the audit line's balance read again after the lock: another add's points may be in it."""

    def add(self, customer_id: int, points: int) -> None:
        with self._lock:
            self._balance[customer_id] = self._balance.get(customer_id, 0) + points
        self._audit.write(customer_id, points, self._balance[customer_id])


_shared: dict[int, int] = {}


class OneLineNoLock:
    """No lock at all, the update and its read-back on one line: no switch point between them under 3.11's GIL,
    so only the instruction-level forced switches split it (as a free-threaded build would)."""

    def __init__(self, audit: Any) -> None:
        from collections import defaultdict

        self._b: dict[int, int] = defaultdict(int)
        self._audit = audit

    def add(self, customer_id: int, points: int) -> None:
        self._b[customer_id] += points; b = self._b[customer_id]  # noqa: E702 — the one line is the point
        self._audit.write(customer_id, points, b)

    def balances(self) -> dict[int, int]:
        return dict(self._b)


class SharedAcrossLedgers(Reference):
    """One balance table for every ledger ever made (a module-level dict): the next run starts from the last."""

    def __init__(self, audit: Any) -> None:
        super().__init__(audit)
        self._balance = _shared


def _unhooks(audit: Any) -> None:
    for name in ("hold_s", "delay_ms", "_hold"):  # an audit trail with no delay: the work made free
        with contextlib.suppress(AttributeError):
            setattr(audit, name, 0.0)


def _threads(audit: Any) -> int:
    return threading.active_count()


def _experiment() -> Experiment:
    return Experiment.plan("points ledger", "The write leaves the lock: an add no longer queues behind ~7 others' "
                           "writes, so its P99 falls to about one write: ratio ~0.15.", predicted_ratio=0.15)


GRADER_CASES = {
    "grade": lambda fn, experiment: lab09.check(fn, experiment, save=False),
    "experiment": _experiment,
    "reference": Reference,
    "baseline": lab09.baseline,
    "wrong": Wrong,
    "cheats": {**standard_cheats(lab09.baseline, lab09, wrong=Wrong, size=_threads, at_least=6),
               "skip the lock and hope": SkipTheLockAndHope,
               "no lock, update and read-back on one line": OneLineNoLock,
               "drop the updates": DropsTheUpdates,
               "drop the updates that would wait": DropsWhenBusy,
               "skips the audit write": SkipsTheAudit,
               "writes the audit later, unwaited": WritesLater,
               "per-customer locks still hold the write": PerCustomerLockStillHoldsTheWrite,
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


def test_a_queue_off_the_request_path_passes_too():
    grade = lab09.check(Queued, _experiment(), save=False)
    assert grade.passed, str(grade)


def test_the_baseline_is_exact_and_fails_the_wait_budget():
    grade = lab09.check(lab09.baseline, _experiment(), save=False, seed=3)
    assert [i.ok for i in grade.items] == [True, True, False], str(grade)
    assert "median audit write" in grade.items[2].message and "over the budget" in grade.items[2].message


def test_lost_updates_and_missing_lines_say_what_went_wrong():
    lost = lab09.check(SkipTheLockAndHope, _experiment(), save=False)
    assert len(lost.items) == 1 and "lost updates" in lost.items[0].message
    missing = lab09.check(SkipsTheAudit, _experiment(), save=False)
    assert "audit trail does not hold every add's line" in missing.items[0].message
    later = lab09.check(WritesLater, _experiment(), save=False)
    assert not later.passed and "missing" in later.items[0].message


def test_a_deadlock_fails_with_a_message_and_the_check_returns():
    class TakesItTwice(Reference):
        def add(self, customer_id: int, points: int) -> None:
            with self._lock, self._lock:  # a Lock is not reentrant: the first add waits for itself forever
                pass

    run = lab09.stress(TakesItTwice, [[(1, 2)], [(1, 3)]], timeout_s=0.5)
    assert run.error is not None and "deadlock" in run.error


def test_the_stress_restores_the_switch_interval_and_refusals_say_what_to_pass():
    import sys

    before = sys.getswitchinterval()
    lab09.stress(Reference, [[(1, 2)] * 3] * 2)
    assert sys.getswitchinterval() == before
    assert "pass your function itself" in str(lab09.check(None))
    assert "did you call it?" in str(lab09.check(Reference(None)))


def test_the_prediction_is_concluded_with_the_measured_p99_ratio():
    grade = lab09.check(Reference, _experiment(), save=False, seed=5)
    assert grade.passed, str(grade)
    assert "seed 5" in grade.title and "your prediction (0.15)" in grade.items[-1].message
    assert "every run's answer checked" in grade.items[-2].message


def test_the_audit_trail_must_be_a_serial_history_with_every_line_once():
    import numpy as np

    load = [[(7, 5), (7, 3)], [(8, 2)]]
    empty = np.zeros(0, dtype=np.int64)

    def run_of(answer, lines):
        return lab09.Stress(answer, tuple(lines), empty, empty, 1.0, 2)

    assert lab09._problem(run_of({7: 8, 8: 2}, [(7, 5, 5), (8, 2, 2), (7, 3, 8)]), load) is None
    assert lab09._problem(run_of({7: 8, 8: 2}, [(7, 3, 3), (7, 5, 8), (8, 2, 2)]), load) is None  # any serial order
    lost = lab09._problem(run_of({7: 5, 8: 2}, [(7, 5, 5), (7, 3, 3), (8, 2, 2)]), load)
    assert lost is not None and "lost updates: 3 points of 10 missing" in lost
    stale = lab09._problem(run_of({7: 8, 8: 2}, [(7, 5, 5), (7, 3, 3), (8, 2, 2)]), load)
    assert stale is not None and "no serial history" in stale
    missing = lab09._problem(run_of({7: 8, 8: 2}, [(7, 5, 5), (7, 3, 8)]), load)
    assert missing is not None and "1 missing, 0 extra" in missing
    typed = lab09._problem(run_of({7: 8.0, 8: 2}, []), load)
    assert typed is not None and "expected type int" in typed


def test_races_fail_under_the_forced_switches_and_say_so():
    # with a switch before every instruction, a ledger with no lock loses updates in its own `+=` (as on a
    # free-threaded build) or, when that happens to hold, writes a stale balance: either is said
    either = ("lost updates", "no serial history")
    for racy, says in ((NoLockAtAll, either), (OneLineNoLock, either), (ReadsOutsideTheLock, ("lost updates",)),
                       (PerCustomerLocksMadeRacily, ("lost updates",)), (StaleAuditBalance, ("no serial history",))):
        grade = lab09.check(racy, _experiment(), save=False)
        message = grade.items[0].message
        assert len(grade.items) == 1 and any(s in message for s in says), (racy.__name__, str(grade))
        assert "forced before every instruction" in message or "hammer" in message, (racy.__name__, str(grade))


def test_the_forced_switch_run_passes_the_reference_and_fails_a_ledger_that_removes_its_trace():
    class Untraced(Reference):
        def add(self, customer_id: int, points: int) -> None:
            sys.settrace(None)
            super().add(customer_id, points)

    load = [[(1, 2)] * 3] * 2
    assert lab09._problem(lab09.stress(Reference, load, forced=True), load) is None
    run = lab09.stress(Untraced, load, forced=True)
    assert run.error is not None and "trace function" in run.error
