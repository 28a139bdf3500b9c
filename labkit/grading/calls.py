"""One code path for every graded call: a worker thread that runs the learner's function, timed and metered.

A grader (see :mod:`labkit.grading.kit`) makes every call of the learner's function — correctness, budget, timing —
through one :class:`Caller`, so nothing in the call's stack, thread or frames tells one phase from another.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labkit.grading.sealing import seal

__all__ = ["Outcome", "Meter", "Caller", "CLOCK"]

#: the clock graded calls are timed with, bound at import: rebinding time.perf_counter_ns later changes nothing
CLOCK = time.perf_counter_ns
_CLOCK = CLOCK


@dataclass(frozen=True)
class Outcome:
    """One call of a graded function: its answer, or the exception it raised, and the call's own time (ns)."""

    value: Any
    error: BaseException | None
    ns: int


class Meter:
    """What a grader counts around one call: entered just before the call and left just after, in the thread
    that runs it (so a per-thread hook such as ``sys.settrace`` sees the call); ``amount`` holds the count once
    left. Subclass it; this base counts nothing (every unmetered call goes through it too: the same frames)."""

    amount: float = 0.0

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_METER = Meter()


def _timed(fn: Callable[..., Any], args: tuple[Any, ...], clock: Callable[[], int], meter: Meter
           ) -> tuple[Any, BaseException | None, int]:
    with meter:  # the do-nothing meter when nothing is counted: the same lines, the same frames, every phase
        t0 = clock()
        try:
            value = fn(*args)
        except BaseException as e:  # the learner's code: reported by the grader, never raised here
            return None, e, clock() - t0
        return value, None, clock() - t0


def _serve(jobs: queue.SimpleQueue[Any], done: queue.SimpleQueue[Any], clock: Callable[[], int]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, args, meter = job
        job = None
        try:
            out = _timed(fn, args, clock, meter)
        except BaseException as e:  # the meter itself failed (or was unhooked): the call counts as failed
            out = (None, e, 0)
        fn = args = meter = None
        done.put(out)
        out = None


class Caller:
    """Every call of a graded function, in every phase, made the same way: in one worker thread, two frames
    below its entry (``_serve`` → ``_timed`` → the function), timed with the clock bound at import.

    Args:
        timeout_s: a call that has not returned by then fails (and so does every later call of this caller).

    Use it as a context manager (the worker stops at the end), or call :meth:`close`.
    """

    def __init__(self, timeout_s: float = 300.0) -> None:
        self.timeout_s = timeout_s
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._broken: BaseException | None = None
        self._thread = threading.Thread(target=_serve, args=(self._jobs, self._done, _CLOCK), daemon=True,
                                        name="labkit-graded-calls")
        self._thread.start()

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], meter: Meter | None = None) -> Outcome:
        """``fn(*args)`` in the worker, inside ``meter`` when given; never raises what ``fn`` raises."""
        if self._broken is not None:
            return Outcome(None, self._broken, 0)
        self._jobs.put((fn, args, _NO_METER if meter is None else meter))
        try:
            value, error, ns = self._done.get(timeout=self.timeout_s)
        except queue.Empty:
            self._broken = TimeoutError(f"a call did not return within {self.timeout_s:g} s")
            return Outcome(None, self._broken, 0)
        if isinstance(error, KeyboardInterrupt):
            raise error  # the learner pressed stop: that is theirs to raise
        return Outcome(value, error, ns)

    def close(self) -> None:
        """Stop the worker (after the call in progress, if any)."""
        self._jobs.put(None)
        if self._broken is None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Caller:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_SEALED = seal(globals())
