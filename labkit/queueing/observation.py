"""Little's law on a live service: offer load, and meanwhile ask the service how many requests are inside it.

    obs = observe(svc.url, rate=300, paths=orders, duration_s=5)
    obs.predicted_in_flight     # λ × W: the achieved rate times the mean time in system, from the load run
    obs.measured_in_flight      # the service's own count of requests inside it, averaged over the run
    obs.to_frame()              # one row per /stats sample: t_s, in_flight (for a timeline)

Little's law (L = λ W) holds for any queue in a steady state, whatever the arrival or service distributions:
the mean number inside equals the arrival rate times the mean time each spends inside. Here λ and W come
from the client (responses per second; each request's time from its actual send to its last byte) and L
from the server: toyshop counts every request between entering and leaving the app and keeps the count's
integral over time, so the change of that integral between two reads of ``GET /stats``, over the time between
them, is the exact mean number inside — no sampling. The client's W also holds the loopback hop and the HTTP
parsing before the app sees the request, so below the knee the prediction sits above the count by that share;
past the knee there is no steady state, the count grows for as long as the run lasts, and the law describes
only the average of a queue still filling.

Between those two reads, ``/stats`` is also asked at random (exponentially spaced) moments, for the timeline
of the count (and its peak). Those samples are *not* an unbiased average: the service answers ``/stats`` on
the same event loop as everything else, only once the loop is free, so a request busy in its last step
(encoding, writing the response) has often left by the time it would be counted. ``/stats`` itself is never
counted. :func:`stages_under_load` is the other look inside: Server-Timing stages of a few probe requests
sent while load runs.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np

from labkit.errors import BadInputError, ServiceError
from labkit.inputs import loopback_url
from labkit.load import LoadResult, background, run
from labkit.load.result import decode_array, encode_array
from labkit.results import Saveable, TextRepr

__all__ = ["Observation", "observe", "stages_under_load", "StatsSampler", "FIELDS"]

#: what the sampler keeps of each ``GET /stats`` answer (see :mod:`labkit.toyshop.app`)
FIELDS = ("in_flight", "served", "time_in_app_ns", "in_flight_ns", "now_ns")


class StatsSampler:
    """A thread that reads ``GET /stats`` of a toyshop at random moments (mean spacing ``every_s``).

    ``start()``, then ``stop()`` returns a 2-D array, one row per sample: the time it was asked
    (``time.perf_counter_ns``) and :data:`FIELDS` of the answer. A context manager too. Errors (the service
    went away) end the sampling and are kept in ``error``.
    """

    def __init__(self, base_url: str, every_s: float = 0.01, seed: int = 0) -> None:
        where = loopback_url(base_url, "StatsSampler", example="http://127.0.0.1:PORT (the service's Service.url)")
        if not every_s > 0:
            raise BadInputError(f"every_s must be > 0 seconds, got {every_s!r}")
        self._host, self._port, self.every_s = where.host, where.port, every_s
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._rows: list[tuple[int, ...]] = []
        self.error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="labkit-stats-sampler", daemon=True)

    def _loop(self) -> None:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=5)
        try:
            while not self._stop.is_set():
                t = time.perf_counter_ns()
                try:
                    conn.request("GET", "/stats")
                    d = json.loads(conn.getresponse().read())
                    self._rows.append((t, *(int(d[k]) for k in FIELDS)))
                except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
                    self.error = f"{type(e).__name__}: {e}"
                    return
                self._stop.wait(self._rng.expovariate(1 / self.every_s))
        finally:
            conn.close()

    def start(self) -> StatsSampler:
        """Begin sampling (returns self)."""
        self._thread.start()
        return self

    def stop(self) -> np.ndarray:
        """Stop; return the samples, one row each: the time asked (ns), then :data:`FIELDS`."""
        self._stop.set()
        self._thread.join(10)
        return np.asarray(self._rows, dtype=np.int64).reshape(-1, 1 + len(FIELDS))

    def __enter__(self) -> StatsSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True, eq=False)
class Observation(TextRepr, Saveable):
    """One load run with the service's in-flight count sampled during its measured window.

    Attributes:
        result: the load run, a :class:`labkit.load.LoadResult`.
        t_s: when each in-flight sample was taken, seconds after the run's measured start.
        in_flight: the service's count of requests inside it at that moment.
        served, time_in_app_ns: the service's running totals at that moment (requests served, and the time
            they spent inside the app), from which the app's own mean time in system follows.
        in_flight_ns, now_ns: the integral of the service's count over time, and the service's clock, at that
            moment: from the first and last sample, the exact mean number in flight in between.
    """

    KIND: ClassVar[str] = "observation"
    VERSION: ClassVar[int] = 1

    result: LoadResult
    t_s: np.ndarray
    in_flight: np.ndarray
    served: np.ndarray
    time_in_app_ns: np.ndarray
    in_flight_ns: np.ndarray
    now_ns: np.ndarray

    @property
    def arrival_rate(self) -> float:
        """λ, requests per second through the service: the run's achieved rate (= arrivals in a steady state)."""
        return self.result.achieved_rate

    @property
    def time_in_system_s(self) -> float:
        """W, the mean time a request spent in the system, seconds (client-side, from its actual send)."""
        s = self.result.service_ns
        return float(s.mean()) / 1e9 if s.size else float("nan")

    @property
    def time_in_app_s(self) -> float:
        """The service's own mean time in system over the window, seconds: the time its served requests spent
        inside the app divided by their number (between the first and the last sample). The client's W is
        longer by the trip to the app and back (loopback, the server's parsing, the client's own loop)."""
        if self.served.size < 2 or self.served[-1] == self.served[0]:
            return float("nan")
        return float(self.time_in_app_ns[-1] - self.time_in_app_ns[0]) / float(self.served[-1] - self.served[0]) / 1e9

    @property
    def predicted_in_flight(self) -> float:
        """L = λ × W, Little's law from the client's numbers."""
        return self.arrival_rate * self.time_in_system_s

    @property
    def measured_in_flight(self) -> float:
        """The service's own in-flight count, averaged exactly over the time between the first and the last
        sample (its integral's change over the elapsed time, both from the service)."""
        if self.now_ns.size < 2 or self.now_ns[-1] == self.now_ns[0]:
            return float("nan")
        return float(self.in_flight_ns[-1] - self.in_flight_ns[0]) / float(self.now_ns[-1] - self.now_ns[0])

    @property
    def sampled_in_flight(self) -> float:
        """The mean of the random ``/stats`` samples: biased low (see the module docstring), for comparison."""
        return float(self.in_flight.mean()) if self.in_flight.size else float("nan")

    @property
    def ratio(self) -> float:
        """measured / predicted in-flight (1.0: the law and the count agree)."""
        return self.measured_in_flight / self.predicted_in_flight if self.predicted_in_flight else float("nan")

    @property
    def label(self) -> str:
        """The load run's label, e.g. ``"open 300/s"``."""
        return self.result.label

    def to_frame(self) -> Any:
        """One row per sample: ``t_s``, ``in_flight``, ``name``."""
        import pandas as pd

        return pd.DataFrame({"t_s": self.t_s, "in_flight": self.in_flight, "name": self.label})

    def summary(self) -> str:
        """Little's law in one line."""
        return (f"{self.label}: λ = {self.arrival_rate:,.1f} req/s × W = {1e3 * self.time_in_system_s:,.2f} ms → "
                f"L predicted {self.predicted_in_flight:.2f}; the service counted {self.measured_in_flight:.2f} "
                f"in flight on average (peak seen {int(self.in_flight.max(initial=0))}); measured/predicted "
                f"{self.ratio:.2f}. Inside the app W = {1e3 * self.time_in_app_s:,.2f} ms "
                f"(λ × that = {self.arrival_rate * self.time_in_app_s:.2f})")

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the load run's dict and the samples."""
        return {"kind": self.KIND, "version": self.VERSION, "result": self.result.to_dict(),
                "t_ns": encode_array(np.round(self.t_s * 1e9).astype(np.int64)),
                "in_flight": encode_array(self.in_flight.astype(np.int64)),
                **{k: encode_array(getattr(self, k).astype(np.int64)) for k in FIELDS[1:]}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Observation:
        """Rebuild an Observation saved with :meth:`to_dict`."""
        cls.check_header(data)
        return cls(result=LoadResult.from_dict(data["result"]), t_s=decode_array(data["t_ns"]) / 1e9,
                   **{k: decode_array(data[k]) for k in FIELDS})


#: a run this long (s) shows load.run's progress bar (inside a notebook) even where short ones stay quiet: a
#: hub's culler counts a kernel's output as activity, and a learner wants to see a long run is alive
LONG_S = 20.0


def _quiet_unless_long(seconds: float) -> bool | None:
    """``progress=`` for a load run inside a helper: False (quiet) when short, None (load.run's default: a bar
    inside a notebook) when it lasts :data:`LONG_S` or more."""
    return None if seconds >= LONG_S else False


def _base(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def observe(url: str, *, every_s: float = 0.01, duration_s: float = 5.0, warmup_s: float = 0.5,
            **run_kwargs: Any) -> Observation:
    """Run :func:`labkit.load.run` and sample the service's in-flight count (``GET /stats``) meanwhile.

    Args:
        url: the service URL (and path) to load, e.g. ``svc.url`` with ``paths=``.
        every_s: mean spacing of the in-flight samples (random, exponential).
        duration_s, warmup_s: of the load run; only samples inside its measured window are kept.
        run_kwargs: ``rate=`` or ``concurrency=``, ``paths=``, ``arrivals=``, ``connections=`` … as for
            :func:`labkit.load.run`.

    Raises:
        ServiceError: the service did not answer ``/stats`` (not a toyshop, or it stopped).
    """
    run_kwargs.setdefault("progress", _quiet_unless_long(duration_s + warmup_s))
    sampler = StatsSampler(_base(url), every_s=every_s)
    sampler.start()
    try:
        load = run(url, duration_s=duration_s, warmup_s=warmup_s, **run_kwargs)
    finally:
        rows = sampler.stop()
    if sampler.error is not None and rows.shape[0] == 0:
        raise ServiceError(f"could not read {_base(url)}/stats ({sampler.error}): is this a toyshop service "
                           "(labkit.service.start()) and is it still running?")
    start = load.t0_ns  # the measured start, on the clock the samples are stamped with
    t_ns = rows[:, 0]
    keep = (t_ns >= start) & (t_ns < start + round(load.duration_s * 1e9))
    return Observation(result=load, t_s=(t_ns[keep] - start) / 1e9,
                       **{k: rows[keep, 1 + i] for i, k in enumerate(FIELDS)})


def stages_under_load(url: str, probe_paths: list[str], *, rate: float | None = None, duration_s: float = 3.0,
                      warmup_s: float = 0.5, **run_kwargs: Any) -> tuple[Any, LoadResult | None]:
    """Server-Timing of probe requests sent one at a time, alone (``rate=None``) or while an open loop runs.

    Returns ``(frame, load)``: one row per probe and stage (``stage``, ``ms``) -- ``parse``, ``wait`` (for a
    pool thread), ``db``, ``catalog``, ``compute``, ``serialize``, ``other`` (total minus the named stages)
    -- and the background load run (None when alone). The probes are in flight too: they add one request at a
    time to the load, so do not use them where the in-flight count must be exact.
    """
    import pandas as pd

    from labkit.client import Endpoint

    if not probe_paths:
        raise BadInputError("probe_paths is empty: give the paths to probe, e.g. ['/orders/1', '/orders/2']")
    load = None
    if rate is not None:
        run_kwargs.pop("progress", None)
        load = background(url, rate=rate, duration_s=duration_s, warmup_s=warmup_s, **run_kwargs)
        load.warm()
        time.sleep(0.2)  # probe once the load is up to speed
    rows = []
    named = ("parse", "wait", "db", "catalog", "compute", "serialize")
    try:
        with Endpoint(_base(url)) as shop:
            deadline = time.monotonic() + (duration_s - 0.4 if rate is not None else 60.0)
            for i, path in enumerate(probe_paths):
                if time.monotonic() > deadline:
                    break
                r = shop.get(path)
                stages = {s: r.dur_ms(s) or 0.0 for s in named}
                total = r.dur_ms("total") or 0.0
                stages["other"] = max(0.0, total - sum(stages.values()))
                rows += [{"probe": i, "stage": s, "ms": ms, "total_ms": total} for s, ms in stages.items()]
    finally:
        result = load.wait() if load is not None else None
    return pd.DataFrame(rows), result
