"""The order service's in-flight accounting: how many requests are inside the app, for ``GET /stats``.

:class:`InFlight` is pure ASGI middleware on the event loop's thread that counts every HTTP request inside the
app (parsing, queued for a pool thread, waiting on the catalog, encoding: all of them); :class:`Counts` holds
the count, the peak, how many were served, the time they spent inside the app and the count's integral over
time — for Little's law in the tail-latency lab (``labkit.queueing.observe`` samples it). ``/stats``, which
reports the counts, is not counted itself.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["InFlight", "Counts"]

_clock = time.perf_counter_ns


class Counts:
    """The counts: ``in_flight`` now, ``peak_in_flight``, ``served``, ``time_in_app_ns`` (summed: with
    ``served``, the app's own mean time in system) and ``in_flight_ns``, the running integral of the count over
    time (between two reads, its change over the change of ``now_ns`` is the exact mean number in flight — no
    sampling). Touched only on the event loop's thread, so plain integers suffice."""

    __slots__ = ("in_flight", "peak_in_flight", "served", "time_in_app_ns", "in_flight_ns", "_since")

    def __init__(self) -> None:
        self.in_flight = self.peak_in_flight = self.served = self.time_in_app_ns = self.in_flight_ns = 0
        self._since = _clock()

    def step(self, by: int) -> int:
        """Change the count by ``by`` now, first adding (count × time since the last change) to the integral."""
        now = _clock()
        self.in_flight_ns += self.in_flight * (now - self._since)
        self._since = now
        self.in_flight += by
        return now

    def as_dict(self) -> dict[str, int]:
        """Every count, and ``now_ns``: the server's clock at this read (``/stats``'s body)."""
        self.step(0)
        out = {name: getattr(self, name) for name in self.__slots__[:-1]}
        out["now_ns"] = self._since
        return out


class InFlight:
    """ASGI middleware that counts every HTTP request but ``/stats`` into ``counter`` while it is inside ``app``."""

    def __init__(self, app: Any, counter: Counts) -> None:
        self.app, self.counts = app, counter

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == "/stats":
            return await self.app(scope, receive, send)
        c = self.counts
        t0 = c.step(+1)
        c.peak_in_flight = max(c.peak_in_flight, c.in_flight)
        try:
            await self.app(scope, receive, send)
        finally:
            c.time_in_app_ns += c.step(-1) - t0
            c.served += 1
