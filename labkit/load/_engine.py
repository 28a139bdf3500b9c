"""The load-generation loop: open loop (arrivals on a schedule) and closed loop (fixed concurrency).

Open loop, and why latency starts at the *intended* send time: a request scheduled for time t that goes out
late -- because every connection was still busy with a stalled response -- would, timed from its actual send,
hide exactly the wait a real user would have suffered ("coordinated omission"). Like wrk2, we time each request
from its scheduled time; the time from the actual send (``service``) is kept too, and the difference is the
client-side queueing (``lag``).

Shape: ``connections`` worker tasks, each owning one keep-alive connection. A worker that is free claims the
next slot of the shared arrival schedule, waits until its time and sends. No task hands work to another, so
no dispatch hop is added to the measured latency; when every worker is busy, the due slots queue and the first
worker to free up takes the oldest one (a pool of N connections: the queue is M/G/N-like, not N separate
queues). The default pool is ``clamp(ceil(rate / 50), 8, 128)`` connections: enough that at rates a lab
uses the pool is rarely the queue; raise ``connections=`` for deep-queue experiments (a warning says when
requests waited for a connection). Waiting: a coarse ``sleep`` to ~2 ms before the slot (uvloop timers have 1 ms resolution), then a
spin of ``sleep(0)`` yields, so requests leave within tens of microseconds of their slot.

``timeout_s`` bounds both waits, and nothing is silently dropped: a slot that waited ``timeout_s`` for a free
connection is not sent and counts as ``unsent`` (the client sheds what it cannot even send); a sent request
without a full response ``timeout_s`` after its send counts as ``timeout``. So a latency sample is at most
2 × ``timeout_s``, and the backlog drains within that at the end (no slot at or after ``end`` is claimed).
Why not one budget from the intended time: under overload every request would then go out late with a sliver
of budget left, time out, and cost the server work nobody waits for -- the generator itself would collapse the
service's goodput, where this rule keeps it at capacity (``tests/benchmarks/bench_toyshop_overload.py``
drives the service at twice its capacity).

The clock, ``sleep`` and the connection factory are injected so tests can replay a scenario exactly.
"""

from __future__ import annotations

import asyncio
import random
import time
from array import array
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from labkit.clock import Clock
from labkit.load._http import ConnectError, HTTPConnection, ProtocolError
from labkit.load._options import PathPicker, Settings, Target

__all__ = ["Engine", "RawRun", "Connection"]

SPIN_NS = 2_000_000
WATCH_S = 0.005  # how often the watchdog looks for requests past their timeout (they fire <= 5 ms late)


class _Watch:
    """One worker's in-flight request as the watchdog sees it: its deadline (0 = idle) and task."""

    __slots__ = ("deadline", "task", "fired")

    def __init__(self) -> None:
        self.deadline = 0
        self.task: asyncio.Task | None = None
        self.fired = False


class Connection(Protocol):
    """What the engine needs from a connection (the real one is :class:`HTTPConnection`).

    A connection may also offer ``done_ns``: when the last byte of its latest response arrived, on the
    engine's clock; the engine then uses it instead of reading the clock after its task wakes up.
    """

    opens: int

    async def request(self, path: str) -> int: ...

    def close(self) -> None: ...


@dataclass
class RawRun:
    """What a run recorded, before it becomes a LoadResult. Times are ns relative to the measured start."""

    intended: array = field(default_factory=lambda: array("q"))
    sent: array = field(default_factory=lambda: array("q"))
    done: array = field(default_factory=lambda: array("q"))
    status: array = field(default_factory=lambda: array("h"))
    path_id: array = field(default_factory=lambda: array("i"))
    paths: list[str] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    error_examples: dict[str, str] = field(default_factory=dict)
    warmup_requests: int = 0
    elapsed_ns: int = 0  # measured window: to the planned end, or to the last response if later or cut short
    connections_opened: int = 0
    t0_ns: int = 0  # the measured start, on the engine's clock (what every time above counts from)


class Engine:
    """One run. ``await engine.run()`` returns a RawRun; ``stop()`` (thread-safe via the loop) ends it early."""

    def __init__(
        self,
        settings: Settings,
        target: Target,
        picker: PathPicker,
        *,
        clock: Clock = time.perf_counter_ns,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        connect: Callable[[], Connection] | None = None,
        spin_ns: int = SPIN_NS,
    ) -> None:
        self.s = settings
        self._picker = picker
        self._clock = clock
        self._sleep = sleep
        self._connect = connect or (lambda: HTTPConnection(target.host, target.port, target.host_header, clock))
        self._spin_ns = spin_ns
        self.raw = RawRun()
        self._path_ids: dict[str, int] = {}
        self._index = 0  # next request index given to the picker (warm-up included)
        self._measured = 0  # requests claimed inside the measured window
        self._stopped = False
        self._user_stopped = False
        self._schedule: Iterator[int] | None = None
        # progress counters, read (not written) by the progress bar in another thread
        self.completed = 0
        self.failed = 0
        self.start_ns = self.measure_ns = self.end_ns = 0

    # -- public -----------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """End the run early: nothing new is claimed; in-flight requests finish."""
        self._user_stopped = True
        self._stopped = True

    async def run(self) -> RawRun:
        """Run the load to completion and return what was recorded."""
        s = self.s
        conns = [self._connect() for _ in range(s.connections)]
        # Start a little in the future so that every worker is parked before the first slot is due.
        self.start_ns = self._clock() + 1_000_000
        self.measure_ns = self.start_ns + round(s.warmup_s * 1e9)
        self.end_ns = self.measure_ns + round(s.duration_s * 1e9)
        self._budget_ns = round(s.timeout_s * 1e9)
        self._last_done = self.measure_ns
        worker = self._open_worker if s.mode == "open" else self._closed_worker
        if s.mode == "open":
            self._schedule = self._arrivals()
        self._watches = [_Watch() for _ in conns]
        workers = [asyncio.ensure_future(worker(c, w)) for c, w in zip(conns, self._watches, strict=True)]
        for task, w in zip(workers, self._watches, strict=True):
            w.task = task
        dog = asyncio.ensure_future(self._watchdog())
        try:
            await asyncio.gather(*workers)
        finally:
            dog.cancel()
            for task in workers:
                task.cancel()
            for c in conns:
                c.close()
        # A run that went the full duration is measured over it (or longer, if responses came in after the end);
        # one cut short by the request cap or stop() is measured to its last response.
        cut_short = self._user_stopped or self._measured >= s.max_requests
        last = self._last_done if cut_short else max(self._last_done, self.end_ns)
        self.raw.elapsed_ns = last - self.measure_ns
        self.raw.t0_ns = self.measure_ns
        self.raw.connections_opened = sum(c.opens for c in conns)
        return self.raw

    # -- schedule ---------------------------------------------------------------------------------------------
    def _arrivals(self) -> Iterator[int]:
        rate, start = self.s.rate, self.start_ns
        assert rate is not None
        if self.s.arrivals == "constant":
            interval = 1e9 / rate
            i = 0
            while True:
                yield start + round(i * interval)
                i += 1
        rng = random.Random(self.s.seed)
        t = float(start)
        while True:
            yield round(t)
            t += rng.expovariate(rate) * 1e9

    def _claim_slot(self) -> int | None:
        if self._stopped or self._measured >= self.s.max_requests:
            return None
        assert self._schedule is not None
        t = next(self._schedule)
        if t >= self.end_ns:
            self._stopped = True  # the schedule is in time order: every later slot is past the end too
            return None
        if t >= self.measure_ns:
            self._measured += 1
        return t

    async def _wait_until(self, t: int) -> None:
        clock = self._clock
        delay = t - clock()
        if delay <= 0:
            return
        if delay > self._spin_ns:
            await self._sleep((delay - self._spin_ns) / 1e9)
        while clock() < t:
            await self._sleep(0)

    # -- workers ----------------------------------------------------------------------------------------------
    async def _watchdog(self) -> None:
        # One timer for all requests instead of an asyncio.timeout() per request (a timer handle each, on the
        # hot path).
        # It sleeps on the real loop clock, never the injected sleep, which would move a fake clock.
        clock, watches = self._clock, self._watches
        while True:
            await asyncio.sleep(WATCH_S)
            now = clock()
            for w in watches:
                if w.deadline and now >= w.deadline and not w.fired and w.task is not None:
                    w.fired = True
                    w.task.cancel()

    async def _open_worker(self, conn: Connection, watch: _Watch) -> None:
        while (t := self._claim_slot()) is not None:
            await self._wait_until(t)
            if self._clock() - t >= self._budget_ns:
                if t >= self.measure_ns:
                    self._error("unsent", f"waited timeout_s={self.s.timeout_s} for a free connection; never sent")
                continue
            await self._one(conn, t, watch)

    async def _closed_worker(self, conn: Connection, watch: _Watch) -> None:
        clock, s = self._clock, self.s
        # Closed loop: wait for the common start, then send back to back until the end or the cap.
        await self._wait_until(self.start_ns)
        while not self._stopped:
            now = clock()
            if now >= self.end_ns:
                break
            if now >= self.measure_ns:
                if self._measured >= s.max_requests:
                    break
                self._measured += 1
            await self._one(conn, now, watch)

    async def _one(self, conn: Connection, intended: int, watch: _Watch) -> None:
        index = self._index
        self._index += 1
        path = self._picker(index)
        clock = self._clock
        sent = clock()
        status = 0
        kind = example = ""
        watch.deadline = sent + self._budget_ns
        try:
            status = await conn.request(path)
        except asyncio.CancelledError:
            if not watch.fired:
                raise
            watch.fired = False
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            conn.close()  # the response may still arrive later: never reuse this connection
            kind, example = "timeout", f"no complete response within timeout_s={self.s.timeout_s} of the send"
        except ConnectError as exc:
            kind, example = "connect", str(exc)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            kind, example = "closed", f"connection closed mid-response ({type(exc).__name__})"
        except ProtocolError as exc:
            kind, example = "protocol", str(exc)
        except OSError as exc:
            conn.close()
            kind, example = "os", f"{type(exc).__name__}: {exc}"
        # a connection that stamps the arrival of the response's last byte (before this task is woken) says so
        done = getattr(conn, "done_ns", 0) if status else 0
        if done < sent:
            done = clock()
        watch.deadline = 0
        if done > self._last_done:
            self._last_done = done
        if intended < self.measure_ns:  # warm-up: neither samples nor errors are counted
            self.raw.warmup_requests += 1
            return
        if kind:
            self._error(kind, example)
            return
        raw = self.raw
        pid = self._path_ids.get(path)
        if pid is None:
            pid = self._path_ids[path] = len(raw.paths)
            raw.paths.append(path)
        m = self.measure_ns
        raw.intended.append(intended - m)
        raw.sent.append(sent - m)
        raw.done.append(done - m)
        raw.status.append(status)
        raw.path_id.append(pid)
        self.completed += 1
        if not 200 <= status < 300:
            self.failed += 1
            raw.errors[f"http_{status}"] = raw.errors.get(f"http_{status}", 0) + 1

    def _error(self, kind: str, example: str) -> None:
        self.failed += 1
        self.raw.errors[kind] = self.raw.errors.get(kind, 0) + 1
        self.raw.error_examples.setdefault(kind, example)
