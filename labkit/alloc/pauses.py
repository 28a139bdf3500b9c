"""Garbage-collector pauses: every collection's generation, duration and yield, recorded as it happens.

    with alloc.PauseRecorder() as rec:          # or rec = PauseRecorder().start(); ...; rec.stop()
        handle_many_requests()
    pauses = rec.result                         # a GCPauses value: one row per collection
    pauses.by_generation()                      # per generation: collections, total, largest, P99
    pauses.to_frame()                           # t_s, ms, generation, collected, uncollectable

CPython's cyclic collector calls every function in :data:`gc.callbacks` just before and just after each
collection; the recorder reads the clock at both and keeps ``(start, duration, generation, collected,
uncollectable)``. What it can and cannot see:

* it **sees** every collection of the process, whichever thread triggered it — a collection stops every
  thread that needs the GIL, so it is a pause for all of them — and the objects each one freed
  (``collected``) or could not free (``uncollectable``, cycles kept alive by ``gc.garbage``);
* it **cannot see** freeing by reference counting, which is most of the freeing in CPython and happens
  inline, nor the allocator's own work: it times the *cyclic* collector only;
* generations: 0 is the youngest (collected most often, cheapest), 2 is a full collection that traverses
  every tracked object not frozen with :func:`gc.freeze`. What triggers each and how they are counted
  changes between Python releases (3.12 and 3.13 count differently; 3.14 collects gen 2 incrementally):
  print ``sys.version`` and ``gc.get_threshold()`` beside any pause you report.

The clock is :func:`time.perf_counter_ns`: on Linux ``CLOCK_MONOTONIC``, shared by every process on the
machine, so pauses recorded inside a service line up with request latencies measured by a load generator in
another process (``labkit.alloc.gclog`` does that with toyshop). The recorder keeps at most ``limit``
pauses (the oldest are dropped and counted), so it can run for the life of a service.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np

from labkit.errors import BadInputError
from labkit.results import Saveable, TextRepr

__all__ = ["PauseRecorder", "GCPauses", "Pause", "clock_is_shared"]

#: one pause: (start_ns, duration_ns, generation, collected, uncollectable); start on the recorder's clock.
Pause = tuple[int, int, int, int, int]
_clock = time.perf_counter_ns


def clock_is_shared() -> bool:
    """True when :func:`time.perf_counter_ns` reads a machine-wide clock (so two processes' times compare)."""
    impl = time.get_clock_info("perf_counter").implementation
    return "CLOCK_MONOTONIC" in impl or "mach_absolute_time" in impl or "QueryPerformanceCounter" in impl


def _gc_settings() -> dict[str, Any]:
    return {"threshold": tuple(gc.get_threshold()), "frozen": gc.get_freeze_count(),
            "python": sys.version.split()[0], "enabled": gc.isenabled()}


@dataclass(frozen=True)
class GCPauses(TextRepr, Saveable):
    """The collections of one recording window: one row per pause, raw values kept.

    Attributes:
        pauses: ``(start_ns, dur_ns, generation, collected, uncollectable)`` per collection, in order;
            ``start_ns`` counts from ``t0_ns``.
        t0_ns: the start of the window on the (machine-wide, monotonic) ``perf_counter_ns`` clock.
        window_ns: how long the window lasted (0 while unknown).
        threshold, frozen, python, enabled: ``gc.get_threshold()``, ``gc.get_freeze_count()``, the Python
            version and ``gc.isenabled()`` of the recorded process, read when the window ended.
        dropped: pauses lost because the recorder's buffer was full (the oldest go first).
        source: where it was recorded (``"this process"``, ``"toyshop pid 1234"``).
        notes: anything that affects the reading.
    """

    KIND = "gc-pauses"

    pauses: tuple[Pause, ...]
    t0_ns: int
    window_ns: int = 0
    threshold: tuple[int, ...] = ()
    frozen: int = 0
    python: str = ""
    enabled: bool = True
    dropped: int = 0
    source: str = "this process"
    notes: tuple[str, ...] = ()
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # -- arrays and totals -------------------------------------------------------------------------------------
    def column(self, name: str) -> np.ndarray:
        """One column as an int64 array: ``start_ns``, ``dur_ns``, ``generation``, ``collected``,
        ``uncollectable``."""
        names = ("start_ns", "dur_ns", "generation", "collected", "uncollectable")
        if name not in names:
            raise BadInputError(f"unknown column {name!r}: use one of {', '.join(names)}")
        if not self.pauses:
            return np.zeros(0, dtype=np.int64)
        return np.asarray([p[names.index(name)] for p in self.pauses], dtype=np.int64)

    @property
    def count(self) -> int:
        """Collections recorded."""
        return len(self.pauses)

    @property
    def total_ns(self) -> int:
        """Time spent in collections, summed."""
        return int(sum(p[1] for p in self.pauses))

    @property
    def max_ns(self) -> int:
        """The largest single pause (0 when there was none)."""
        return max((p[1] for p in self.pauses), default=0)

    @property
    def share(self) -> float | None:
        """Fraction of the window spent in collections (None while the window's length is unknown)."""
        return self.total_ns / self.window_ns if self.window_ns > 0 else None

    def generation(self, gen: int) -> GCPauses:
        """Only the collections of one generation (0, 1 or 2)."""
        if gen not in (0, 1, 2):
            raise BadInputError(f"generation must be 0, 1 or 2, got {gen!r}")
        return self._replace(tuple(p for p in self.pauses if p[2] == gen))

    def between(self, start_ns: int, end_ns: int) -> GCPauses:
        """The pauses that started in ``[start_ns, end_ns)`` (times counted from ``t0_ns``), as a new window."""
        kept = tuple((s - start_ns, *rest) for s, *rest in self.pauses if start_ns <= s < end_ns)
        return GCPauses(kept, self.t0_ns + start_ns, end_ns - start_ns, self.threshold, self.frozen,  # type: ignore[arg-type]
                        self.python, self.enabled, 0, self.source, self.notes, self.fingerprint)

    def _replace(self, pauses: tuple[Pause, ...]) -> GCPauses:
        return GCPauses(pauses, self.t0_ns, self.window_ns, self.threshold, self.frozen, self.python,
                        self.enabled, self.dropped, self.source, self.notes, self.fingerprint)

    # -- views ------------------------------------------------------------------------------------------------
    def to_frame(self) -> Any:
        """One row per collection: t_s (start, seconds into the window), ms, generation, collected,
        uncollectable."""
        import pandas as pd

        return pd.DataFrame({"t_s": self.column("start_ns") / 1e9, "ms": self.column("dur_ns") / 1e6,
                             "generation": self.column("generation"), "collected": self.column("collected"),
                             "uncollectable": self.column("uncollectable")})

    def summary(self) -> str:
        """A few lines of text: how many pauses, how long in total and at most, and the collector's settings."""
        return str(self)

    def by_generation(self) -> Any:
        """A table (DataFrame), one row per generation and one for all: collections, per second, total ms,
        mean, P99 and largest pause (ms), objects collected."""
        import pandas as pd

        rows = []
        secs = self.window_ns / 1e9 if self.window_ns > 0 else None
        for label, part in [(f"gen {g}", self.generation(g)) for g in (0, 1, 2)] + [("all", self)]:
            d = part.column("dur_ns") / 1e6
            rows.append({"generation": label, "collections": part.count,
                         "per_s": round(part.count / secs, 1) if secs else None,
                         "total_ms": float(d.sum()), "mean_ms": float(d.mean()) if d.size else 0.0,
                         "p99_ms": float(np.percentile(d, 99)) if d.size else 0.0,
                         "max_ms": float(d.max()) if d.size else 0.0,
                         "collected": int(part.column("collected").sum())})
        return pd.DataFrame(rows).set_index("generation")

    def __str__(self) -> str:
        by = ", ".join(f"gen {g}: {self.generation(g).count}" for g in (0, 1, 2))
        share = f", {self.share:.2%} of the window" if self.share is not None else ""
        text = (f"{self.count} GC pauses in {self.source} over {self.window_ns / 1e9:.2f} s ({by}); "
                f"{self.total_ns / 1e6:.2f} ms in total{share}, largest {self.max_ns / 1e6:.3f} ms — "
                f"Python {self.python}, threshold {self.threshold}, {self.frozen:,} objects frozen")
        if self.dropped:
            text += f"\n  note: {self.dropped:,} older pauses were dropped (the recorder's buffer was full)"
        return "\n".join([text, *(f"  note: {n}" for n in self.notes)])


class PauseRecorder:
    """Record every cyclic-GC collection of this process (``gc.callbacks``) between start and stop.

    Three forms, one recorder: ``rec.start()`` … ``rec.stop()``; ``with PauseRecorder() as rec:`` (then
    ``rec.result``); ``@PauseRecorder()`` on a function (each call's pauses in ``rec.result``).

    Args:
        limit: the most pauses kept; beyond it the oldest are dropped (and counted), so memory stays bounded.
        on_pause: called after each collection as ``on_pause(start_ns, dur_ns, generation, collected,
            uncollectable)`` — toyshop adds each pause to the running request's ``Server-Timing`` with it. It
            runs inside the collector's callback: keep it short, and never let it raise.
        clock: a nanosecond clock (inject a fake one in tests).
    """

    def __init__(self, *, limit: int = 100_000, on_pause: Callable[..., None] | None = None,
                 clock: Callable[[], int] = _clock) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise BadInputError(f"limit must be a positive number of pauses to keep, got {limit!r}")
        self.limit, self.on_pause, self.clock = limit, on_pause, clock
        self._buf: deque[Pause] = deque(maxlen=limit)
        self._seen = 0
        self._t_start = 0
        self._t0 = self._t1 = 0
        self._running = False
        self._lock = threading.Lock()
        self.result: GCPauses | None = None

    # collections never nest and run with the GIL held, so one start stamp suffices
    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t_start = self.clock()
            return
        end = self.clock()
        pause = (self._t_start, end - self._t_start, info["generation"], info["collected"], info["uncollectable"])
        self._buf.append(pause)
        self._seen += 1
        if self.on_pause is not None:
            # an exception here would surface inside an unrelated allocation: swallowed
            with contextlib.suppress(Exception):
                self.on_pause(*pause)

    @property
    def dropped(self) -> int:
        """Pauses recorded and then dropped because more than ``limit`` came after them."""
        return max(0, self._seen - len(self._buf))

    @property
    def running(self) -> bool:
        """True between start and stop."""
        return self._running

    def start(self) -> PauseRecorder:
        """Start recording (clears what an earlier run kept). Returns ``self``."""
        with self._lock:
            if self._running:
                raise BadInputError("this PauseRecorder is already recording: stop() it first, or make another")
            self._buf.clear()
            self._seen = 0
            self.result = None
            self._t0 = self.clock()
            gc.callbacks.append(self._callback)
            self._running = True
        return self

    def stop(self) -> GCPauses:
        """Stop recording; returns (and keeps in ``result``) the window's :class:`GCPauses`."""
        with self._lock:
            if not self._running:
                raise BadInputError("this PauseRecorder is not recording: call start() first")
            with contextlib.suppress(ValueError):  # someone cleared gc.callbacks: what was recorded is kept
                gc.callbacks.remove(self._callback)
            self._running = False
            self._t1 = self.clock()
            self.result = self.snapshot()
        return self.result

    def snapshot(self, since_ns: int | None = None, *, source: str = "this process") -> GCPauses:
        """What was recorded so far (the recorder keeps running), optionally only pauses that started at or
        after ``since_ns`` on the recorder's clock. Times in the result count from the window's start."""
        for _ in range(5):  # copy first; a collection triggered by the copy itself may append meanwhile
            try:
                pauses = list(self._buf)
                break
            except RuntimeError:
                continue
        else:
            pauses = []
        dropped = max(0, self._seen - len(pauses))
        t0 = self._t0 if since_ns is None else max(self._t0, since_ns)
        end = self._t1 if not self._running else self.clock()
        kept = tuple((s - t0, d, g, c, u) for s, d, g, c, u in pauses if s >= t0)
        s = _gc_settings()
        return GCPauses(kept, t0, max(0, end - t0), s["threshold"], s["frozen"], s["python"], s["enabled"],
                        dropped if since_ns is None else 0, source)

    def __enter__(self) -> PauseRecorder:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._running:
            self.stop()

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return wrapper

    def __repr__(self) -> str:
        state = "recording" if self._running else "stopped"
        return f"<PauseRecorder {state}: {len(self._buf)} pauses kept (limit {self.limit:,})>"
