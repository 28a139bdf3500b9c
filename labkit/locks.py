"""A lock that measures itself: how often it was taken, how long takers waited, how long it was held.

    lock = MeteredLock("stats")
    with lock:                      # or lock.acquire() / lock.release()
        ...                         # the critical section
    lock.stats()                    # LockStats(acquisitions=…, contended=…, wait_s=…, hold_s=…)
    lock.stats().utilisation(10.0)  # the share of 10 s the lock was held: a lock is a server (lab 09)

Each acquisition that had to block times its wait; each release times the hold since the acquisition. The
totals are updated while the lock is held, so they are exact under any number of threads. The wait is also
added to the trace collecting in the releasing thread's context (:func:`labkit.trace.add`: one call per
acquisition, ``<name>;dur=<total wait ms>;count=<acquisitions>`` in a request's ``Server-Timing``), after the
lock is released, so the accounting does not lengthen the critical section. With ``with lock:`` the
releasing thread is the one that waited; without a trace collecting the call costs one context-variable
lookup.

What a metered acquire costs beside a bare :class:`threading.Lock`: ``tests/benchmarks/bench_contention.py``
prints it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType

from labkit import trace as _trace
from labkit.clock import Clock
from labkit.errors import BadInputError

__all__ = ["MeteredLock", "LockStats"]


@dataclass(frozen=True)
class LockStats:
    """What a :class:`MeteredLock` saw since it was made or last reset.

    Attributes:
        name: the lock's name (its Server-Timing metric).
        acquisitions: successful acquisitions.
        contended: those that found the lock taken and had to wait.
        wait_s: the total time takers spent waiting for it (seconds).
        hold_s: the total time it was held, acquisition to release (seconds; a hold still running is not in it).
    """

    name: str
    acquisitions: int
    contended: int
    wait_s: float
    hold_s: float

    def utilisation(self, elapsed_s: float) -> float:
        """The share of ``elapsed_s`` the lock was held: ``hold_s / elapsed_s`` (ρ of the lock as a server)."""
        if not elapsed_s > 0:
            raise BadInputError(f"utilisation(elapsed_s={elapsed_s!r}): give the seconds the stats cover (> 0)")
        return self.hold_s / elapsed_s

    @property
    def mean_wait_s(self) -> float:
        """The mean wait per acquisition (0 with none)."""
        return self.wait_s / self.acquisitions if self.acquisitions else 0.0

    @property
    def mean_hold_s(self) -> float:
        """The mean hold per acquisition (0 with none): the lock's service time."""
        return self.hold_s / self.acquisitions if self.acquisitions else 0.0

    def to_dict(self) -> dict[str, float | int | str]:
        """The stats as plain JSON values."""
        return {"name": self.name, "acquisitions": self.acquisitions, "contended": self.contended,
                "wait_s": self.wait_s, "hold_s": self.hold_s}


class MeteredLock:
    """A :class:`threading.Lock` that counts its acquisitions and times their waits and holds.

    Args:
        name: its name, the Server-Timing metric its waits are added to (a token: letters, digits, ``-_.``).
        clock: the clock in ns (injectable for exact tests; default ``time.perf_counter_ns``).

    Not re-entrant, like ``threading.Lock``: a thread that acquires it twice without releasing blocks forever.
    """

    __slots__ = ("name", "_lock", "_clock", "_acquisitions", "_contended", "_wait_ns", "_hold_ns", "_since",
                 "_last_wait")

    def __init__(self, name: str = "lock", *, clock: Clock = time.perf_counter_ns) -> None:
        _trace.span(name)  # checks the name is a valid Server-Timing token, with the message that says so
        self.name, self._clock = name, clock
        self._lock = threading.Lock()
        self._acquisitions = self._contended = self._wait_ns = self._hold_ns = 0
        self._since = self._last_wait = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock (as :meth:`threading.Lock.acquire`); True if taken. A failed try counts nothing."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")  # threading.Lock's own rule
        if self._lock.acquire(False):
            wait, contended = 0, 0
        else:
            if not blocking:
                return False
            t0 = self._clock()
            if not self._lock.acquire(True, timeout):
                return False
            wait, contended = self._clock() - t0, 1
        # held from here: the counters are only touched while the lock is held
        self._since = self._clock()
        self._acquisitions += 1
        self._contended += contended
        self._wait_ns += wait
        self._last_wait = wait
        return True

    def release(self) -> None:
        """Release the lock, add the hold to the totals, then the wait to the releasing context's trace."""
        if not self._lock.locked():
            raise RuntimeError(f"release of MeteredLock {self.name!r}, which is not held")
        end = self._clock()
        wait = self._last_wait
        self._hold_ns += end - self._since
        self._lock.release()
        _trace.add(self.name, wait, 1)

    def locked(self) -> bool:
        """Whether some thread holds it now."""
        return self._lock.locked()

    def __enter__(self) -> MeteredLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def stats(self) -> LockStats:
        """The totals so far, as a value (read under the lock, so they are consistent with each other)."""
        with self._lock:
            return LockStats(self.name, self._acquisitions, self._contended, self._wait_ns / 1e9,
                             self._hold_ns / 1e9)

    def reset(self) -> None:
        """Start the totals again from zero (a hold running now is counted in the new totals from its start)."""
        with self._lock:
            self._acquisitions = self._contended = self._wait_ns = self._hold_ns = 0

    def __repr__(self) -> str:
        s = self.stats()
        return (f"MeteredLock({self.name!r}: {s.acquisitions} acquisitions, {s.contended} contended, "
                f"wait {s.wait_s * 1e3:.3f} ms, hold {s.hold_s * 1e3:.3f} ms)")
