"""An event-loop lag monitor: a timer that measures how late it fires.

    mon = LagMonitor().start()        # inside a running loop (or start(loop) from any thread)
    ...                               # the loop serves requests; one blocking call stalls all of them
    mon.report()                      # LagReport(samples=…, worst_ms=…, worst_at=…, p99_ms=…)
    mon.stop()

    async with LagMonitor() as mon:   # in a notebook cell (Jupyter's cells run on its loop)
        await asyncio.sleep(1)
    mon.report().over(10)             # samples that fired 10 ms or more late

Every ``interval_s`` the monitor asks the loop to call it back; the callback measures how late it runs (its
*lag*: the time the loop was busy with something else when the timer came due — a blocking call, a long
callback, a collection) and asks again. An idle, healthy loop fires within a fraction of a millisecond; a loop
blocked for 20 ms shows a 20 ms sample. The worst sample is stamped with the wall clock (``worst_at``,
``time.time()``) so it can be matched with a log or a load test's timeline. Asyncio's own detector of slow
callbacks is ``loop.set_debug(True)`` with ``loop.slow_callback_duration`` (Python docs, "Developing with
asyncio"); it names the callback, at the cost of debug mode's overhead on every one.

The lag is timed with ``time.perf_counter``. A loop's timers have a resolution of their own: uvloop's (libuv's) are
whole milliseconds, so there a sample below about 1 ms says nothing; asyncio's own loop is finer. A timer that
fires early counts as 0. The last :data:`KEEP` samples are kept; :meth:`LagMonitor.report` is safe to call from
any thread.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from labkit.errors import BadInputError

__all__ = ["LagMonitor", "LagReport", "KEEP"]

KEEP = 100_000  #: samples a monitor keeps (the oldest are dropped first): 500 s at the default interval


@dataclass(frozen=True)
class LagReport:
    """The lag samples of a window, as a value.

    Attributes:
        interval_s: the timer's interval.
        lags_ms: each sample's lag (ms), oldest first.
        at: each sample's wall-clock time (``time.time()``), parallel to ``lags_ms``.
        dropped: samples older than the window's first kept one (beyond :data:`KEEP`).
    """

    interval_s: float
    lags_ms: tuple[float, ...]
    at: tuple[float, ...]
    dropped: int = 0

    @property
    def samples(self) -> int:
        """How many samples the report holds."""
        return len(self.lags_ms)

    @property
    def worst_ms(self) -> float:
        """The largest lag (ms; 0 with no sample)."""
        return max(self.lags_ms, default=0.0)

    @property
    def worst_at(self) -> float | None:
        """When the worst sample fired (``time.time()``), or None with no sample."""
        if not self.lags_ms:
            return None
        return self.at[max(range(len(self.lags_ms)), key=self.lags_ms.__getitem__)]

    @property
    def p99_ms(self) -> float:
        """The 99th percentile of the lags (ms, nearest rank; 0 with no sample)."""
        if not self.lags_ms:
            return 0.0
        ordered = sorted(self.lags_ms)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]

    def over(self, threshold_ms: float) -> int:
        """How many samples lagged ``threshold_ms`` or more."""
        return sum(1 for lag in self.lags_ms if lag >= threshold_ms)

    def to_dict(self, *, raw: bool = True) -> dict[str, Any]:
        """The summary (and with ``raw``, the samples) as plain JSON values."""
        out: dict[str, Any] = {"interval_s": self.interval_s, "samples": self.samples, "worst_ms": self.worst_ms,
                               "worst_at": self.worst_at, "p99_ms": self.p99_ms, "dropped": self.dropped}
        if raw:
            out["lags_ms"], out["at"] = list(self.lags_ms), list(self.at)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LagReport:
        """Back from :meth:`to_dict` (with its samples): e.g. the body of toyshop's ``GET /loop``."""
        return cls(float(data["interval_s"]), tuple(data.get("lags_ms", ())), tuple(data.get("at", ())),
                   int(data.get("dropped", 0)))

    def to_frame(self) -> Any:
        """One row per sample: ``at`` (wall clock, datetime) and ``lag_ms`` (pandas)."""
        import pandas as pd

        return pd.DataFrame({"at": pd.to_datetime(list(self.at), unit="s"), "lag_ms": list(self.lags_ms)})

    def __str__(self) -> str:
        if not self.lags_ms:
            return f"LagReport: no sample yet (timer every {self.interval_s * 1e3:g} ms)"
        return (f"LagReport: {self.samples} samples every {self.interval_s * 1e3:g} ms; worst {self.worst_ms:.2f} ms"
                f" at {time.strftime('%H:%M:%S', time.localtime(self.worst_at))}, P99 {self.p99_ms:.2f} ms")


class LagMonitor:
    """A timer on an event loop that records how late each of its callbacks fires.

    Args:
        interval_s: time between one callback and the next request for one (seconds, > 0).

    ``start()``/``stop()``, or ``async with LagMonitor() as mon:`` on the running loop.
    """

    def __init__(self, interval_s: float = 0.005) -> None:
        if isinstance(interval_s, bool) or not isinstance(interval_s, int | float) or not 0 < interval_s <= 60:
            raise BadInputError(f"LagMonitor(interval_s={interval_s!r}): give seconds between timer ticks, "
                                "0 < interval_s <= 60 (default 0.005)")
        self.interval_s = float(interval_s)
        self._lags: deque[tuple[float, float]] = deque(maxlen=KEEP)
        self._seen = 0  # samples since the window began, to count the dropped ones
        self._guard = threading.Lock()  # the loop appends, report() may read from another thread
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._running = False

    @property
    def running(self) -> bool:
        """Whether the timer is scheduled."""
        return self._running

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> LagMonitor:
        """Start measuring on ``loop`` (default: the running loop). From another thread, give the loop.

        Raises BadInputError when already running, or with no loop given outside a running loop."""
        if self._running:
            raise BadInputError("this LagMonitor is already running; stop() it first, or reset() to start a new "
                                "window")
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise BadInputError("LagMonitor.start() needs a loop: call it inside a running event loop (an "
                                    "async function, a notebook cell) or pass start(loop=...)") from None
        self._loop, self._running = loop, True
        if _running_in(loop):
            self._schedule()
        else:
            loop.call_soon_threadsafe(self._schedule)
        return self

    def _schedule(self) -> None:
        if not self._running or self._loop is None:
            return
        # timed on perf_counter, not loop.time(): uvloop's loop clock counts whole milliseconds
        self._due = time.perf_counter() + self.interval_s
        self._handle = self._loop.call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        lag_ms = max(0.0, (time.perf_counter() - self._due) * 1e3)
        with self._guard:
            self._lags.append((lag_ms, time.time()))
            self._seen += 1
        self._schedule()

    def stop(self) -> LagReport:
        """Stop the timer (from any thread) and return the window's report."""
        self._running = False
        handle, loop = self._handle, self._loop
        if handle is not None and loop is not None:
            if _running_in(loop):
                handle.cancel()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(handle.cancel)
        return self.report()

    def reset(self) -> None:
        """Drop every sample so far: a new window starts now (the timer keeps running)."""
        with self._guard:
            self._lags.clear()
            self._seen = 0

    def report(self) -> LagReport:
        """The samples of the window so far, as a :class:`LagReport` (safe from any thread)."""
        with self._guard:
            pairs = tuple(self._lags)
            dropped = self._seen - len(pairs)
        return LagReport(self.interval_s, tuple(p[0] for p in pairs), tuple(p[1] for p in pairs), dropped)

    async def __aenter__(self) -> LagMonitor:
        return self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LagMonitor(every {self.interval_s * 1e3:g} ms, {'running' if self._running else 'stopped'})"


def _running_in(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this code runs on ``loop``'s thread, inside it (else the loop is reached thread-safely)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
