"""A service's GC pauses on the load generator's time axis, and GC settings compared across two processes.

    load, pauses = alloc.during_load(svc, "/customers/1/export", rate=40, duration_s=10)
    pauses.to_frame()          # t_s on the same axis as load.to_frame()["t_s"] (the intended send times)
    cmp = alloc.compare_processes(default_svc, tuned_svc, "/customers/1/export", rate=40, rounds=6)
    cmp.p99                    # the P99 comparison, round by round (a labkit Comparison with a verdict)
    a, b = alloc.compare_processes(base, [frozen, flat], path, rate=100, rounds=6)   # one run, each vs base

toyshop records every collection of its process (:mod:`labkit.toyshop.gclog`, ``GET /gc``) on
``time.perf_counter_ns`` — ``CLOCK_MONOTONIC`` on Linux, one clock for every process on the machine — so the
pauses of the service and the send times of :mod:`labkit.load` share a time axis. :func:`service_pauses`
checks that (the service's clock reading must fall between two of ours) and says so when it does not.

A GC setting such as ``gc=tuned`` changes the *process* (its thresholds, what is frozen), so it cannot be
switched per request: :func:`compare_processes` runs the same load against two (or more) service processes in
alternating rounds (A B B A …; with more, each round rotates the order), so that whatever else the machine does
lands on all alike, and compares each candidate's P99 and P90 with the baseline's round by round, with the share
of requests that were in flight during a pause of at least :data:`LONG_PAUSE_MS`. It is a comparison of
processes — their heaps, caches and luck differ too — and is labelled as such.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labkit.alloc.pauses import GCPauses
from labkit.errors import BadInputError, ServiceError
from labkit.inputs import integer, loopback_url, number
from labkit.results import Saveable, TextRepr

__all__ = ["service_pauses", "tracked_objects", "during_load", "compare_processes", "ProcessComparison",
           "overlapping", "LONG_PAUSE_MS"]

#: a pause at least this long counts for :func:`overlapping` (a young collection of a small heap is far shorter).
LONG_PAUSE_MS = 1.0


def overlapping(load: Any, pauses: GCPauses, min_ms: float = LONG_PAUSE_MS) -> Any:
    """Per request of ``load`` (a :class:`labkit.load.LoadResult`), whether it was in flight during one of
    ``pauses`` (on the load's axis, as :func:`during_load` returns them) lasting at least ``min_ms``: a bool
    array in the order of ``load.samples_ns``."""
    start = np.asarray(load.start_ns, dtype=float)
    end = start + np.asarray(load.samples_ns, dtype=float)
    hit = np.zeros(start.size, dtype=bool)
    for t, d in zip(pauses.column("start_ns"), pauses.column("dur_ns"), strict=True):
        if d >= min_ms * 1e6:
            hit |= (start <= t + d) & (end >= t)
    return hit


def _url_of(service: Any) -> str:
    url = service if isinstance(service, str) else getattr(service, "url", None)
    if not isinstance(url, str):
        raise BadInputError(f"service must be a running labkit.service.Service or its base URL "
                            f"(http://127.0.0.1:PORT), got {service!r}")
    loopback_url(url, "labkit.alloc", example="http://127.0.0.1:PORT (the service's Service.url)")
    return url.rstrip("/")


def service_pauses(service: Any, since_ns: int | None = None, *, objects: bool = False,
                   timeout: float = 10.0) -> GCPauses:
    """The GC pauses a toyshop process recorded (``GET /gc``), as a :class:`GCPauses` value.

    Args:
        service: a :class:`labkit.service.Service` (or its base URL).
        since_ns: only pauses that started at or after this ``time.perf_counter_ns()`` reading (take one
            before the work you want to see); default: everything the service kept.
        objects: also count the objects its collector tracks (``notes`` gets the number; slow on a big heap).

    Raises:
        ServiceError: the service does not answer ``/gc`` (stopped, or a toyshop without a GC log).
    """
    url = _url_of(service)
    query = [] if since_ns is None else [f"since_ns={int(since_ns)}"]
    if objects:
        query.append("objects=1")
    before = time.perf_counter_ns()
    body = _gc_log(url, query, timeout)
    after = time.perf_counter_ns()
    notes = []
    if not (before <= body["now_ns"] <= after):
        notes.append("the service's clock is not this process's (its reading fell outside our request): "
                     "pause times cannot be put on this process's time axis")
    if "tracked_objects" in body:
        notes.append(f"{body['tracked_objects']:,} objects tracked by the collector when read")
    pid = getattr(service, "pid", None)
    return GCPauses(tuple(tuple(p) for p in body["pauses"]), body["t0_ns"], body["window_ns"],  # type: ignore[arg-type]
                    tuple(body["threshold"]), body["frozen"], body["python"], body["enabled"], body["dropped"],
                    f"toyshop pid {pid}" if pid else url, tuple(notes))


def tracked_objects(service: Any, timeout: float = 30.0) -> int:
    """How many objects a toyshop process's collector tracks now, frozen ones left out (``GET /gc?objects=1``:
    a ``gc.get_objects()`` walk in the service, slow on a big heap)."""
    return int(_gc_log(_url_of(service), ["objects=1"], timeout)["tracked_objects"])


def _gc_log(url: str, query: list[str], timeout: float) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"{url}/gc" + ("?" + "&".join(query) if query else ""), timeout=timeout) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ServiceError(f"could not read the GC log at {url}/gc ({e}): is the service still running? "
                           "(svc.alive; svc.log_tail() shows why it stopped)") from e


def during_load(service: Any, path: str = "/health", *, name: str = "", cpus: Any = None,
                progress: bool | None = None, **load_kwargs: Any) -> tuple[Any, GCPauses]:
    """Run a :func:`labkit.load.run` against ``service`` and read the pauses it recorded meanwhile.

    Args:
        service: a toyshop :class:`labkit.service.Service` (or its base URL).
        path: the path to load (``paths=[...]`` in ``load_kwargs`` sends several, round-robin).
        name, cpus, progress: as in :func:`labkit.load.run`.
        load_kwargs: every other knob of :func:`labkit.load.run` (``rate=`` or ``concurrency=``,
            ``duration_s``, ``warmup_s`` …).

    Returns:
        ``(load_result, pauses)``: the pauses' ``t_s`` counts from the load's measured start — the axis of
        ``load_result.to_frame()["t_s"]`` — and the window is the measured one (warm-up pauses left out).
    """
    from labkit.load import run

    url = _url_of(service)
    if not path.startswith("/"):
        raise BadInputError(f"path must start with '/', got {path!r}")
    before = time.perf_counter_ns()
    result = run(url + path, name=name, cpus=cpus, progress=progress, **load_kwargs)
    logged = service_pauses(service, since_ns=before)
    start = result.t0_ns - logged.t0_ns
    return result, logged.between(start, start + round(result.duration_s * 1e9))


@dataclass(frozen=True)
class ProcessComparison(TextRepr, Saveable):
    """Two service processes under the same load, in alternating rounds (from :func:`compare_processes`).

    Attributes:
        names: labels of the baseline and candidate processes (``"gc=default"``, ``"gc=tuned"``).
        path, rate, duration_s: the load of every round.
        p50_ns, p99_ns: per round, per side: ``((baseline…), (candidate…))``.
        p90_ns, overlap: per round, per side: the P90, and the share of requests in flight during a pause of
            at least :data:`LONG_PAUSE_MS`.
        requests: per round, per side: requests answered (a P99 of fewer than 300 is close to the maximum).
        max_pause_ns, pauses, gc_ms: per round, per side: the largest GC pause, the number of collections
            and their total time during the round's measured window.
        gen2: per round, per side: full (generation 2) collections.
        errors: per side, failed requests over all rounds.
    """

    KIND = "process-comparison"

    names: tuple[str, str]
    path: str
    rate: float
    duration_s: float
    p50_ns: tuple[tuple[float, ...], tuple[float, ...]]
    p99_ns: tuple[tuple[float, ...], tuple[float, ...]]
    max_pause_ns: tuple[tuple[int, ...], tuple[int, ...]]
    pauses: tuple[tuple[int, ...], tuple[int, ...]]
    gc_ms: tuple[tuple[float, ...], tuple[float, ...]]
    gen2: tuple[tuple[int, ...], tuple[int, ...]]
    errors: tuple[int, int] = (0, 0)
    p90_ns: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
    overlap: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
    requests: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def rounds(self) -> int:
        """Rounds per side."""
        return len(self.p99_ns[0])

    def _cmp(self, which: tuple[tuple[float, ...], tuple[float, ...]], what: str) -> Any:
        from labkit.measure.comparison import Comparison, _signed, verdict_for
        from labkit.measure.stats import ratio_of_medians

        a, b = np.asarray(which[0], dtype=float), np.asarray(which[1], dtype=float)
        est = ratio_of_medians(a, b, paired=True, seed=0)
        verdict = verdict_for(est.ci, est.p_value, 0.05, 0.05)
        return _signed(Comparison(f"{self.names[0]} {what}", f"{self.names[1]} {what}", tuple(a), tuple(b),
                                  est.ratio, est.ci, est.p_value, verdict, True,
                                  warnings=("a comparison of two processes (process-level setting): their heaps "
                                            "and placement differ too; rounds alternated A B B A to share the "
                                            "machine's noise",)))

    @property
    def p99(self) -> Any:
        """Candidate vs baseline P99, paired by round: a :class:`labkit.Comparison` with a verdict."""
        return self._cmp(self.p99_ns, "P99")

    @property
    def p90(self) -> Any:
        """Candidate vs baseline P90, paired by round: the tail a round of a few hundred requests can show."""
        return self._cmp(self.p90_ns, "P90")

    @property
    def p50(self) -> Any:
        """Candidate vs baseline P50, paired by round."""
        return self._cmp(self.p50_ns, "P50")

    def to_frame(self) -> Any:
        """One row per round and side: round, process, requests, p50_ms, p90_ms, p99_ms, overlap (share of
        requests in a long pause), max_pause_ms, pauses, gc_ms, gen2."""
        import pandas as pd

        rows = []
        for side in (0, 1):
            for r in range(self.rounds):
                rows.append({"round": r, "process": self.names[side], "requests": self.requests[side][r],
                             "p50_ms": self.p50_ns[side][r] / 1e6, "p90_ms": self.p90_ns[side][r] / 1e6,
                             "p99_ms": self.p99_ns[side][r] / 1e6, "overlap": self.overlap[side][r], "max_pause_ms": self.max_pause_ns[side][r] / 1e6,
                             "pauses": self.pauses[side][r], "gc_ms": self.gc_ms[side][r], "gen2": self.gen2[side][r]})
        return pd.DataFrame(rows)

    def __str__(self) -> str:
        a, b = self.names
        worst = [max(self.max_pause_ns[s], default=0) / 1e6 for s in (0, 1)]
        return (f"{b} vs {a} — two processes, {self.path} at {self.rate:g} req/s, {self.rounds} rounds of "
                f"{self.duration_s:g} s each, alternating (process-level comparison)\n"
                f"  P99: {self.p99.summary()}\n  P90: {self.p90.summary()}\n  P50: {self.p50.summary()}\n"
                f"  requests per round (median): {int(np.median(self.requests[0]))} vs "
                f"{int(np.median(self.requests[1]))}; in flight during a pause ≥ {LONG_PAUSE_MS:g} ms (median "
                f"share): {np.median(self.overlap[0]):.1%} vs {np.median(self.overlap[1]):.1%}\n"
                f"  largest GC pause: {a} {worst[0]:.2f} ms, {b} {worst[1]:.2f} ms; collections per round "
                f"(median): {int(np.median(self.pauses[0]))} vs {int(np.median(self.pauses[1]))}; failed "
                f"requests: {self.errors[0]} vs {self.errors[1]}")


def compare_processes(baseline: Any, candidate: Any, path: str, *, rate: float, duration_s: float = 3.0,
                      rounds: int = 6, warmup_s: float = 0.5, names: Any = None,
                      progress: bool | None = None, **load_kwargs: Any) -> Any:
    """The same open-loop load against two or more service processes in alternating rounds.

    Args:
        baseline: a running toyshop service (e.g. ``variants={"heap": "objects"}``).
        candidate: another (e.g. ``variants={"heap": "objects", "gc": "frozen"}``), or a list of them: one run
            then measures all, each round in a rotated order (reversed every other round), and each is
            compared with the baseline's rounds.
        path: the request path all get.
        rate: requests per second (open loop, fixed: the comparison is at equal offered load).
        duration_s: measured seconds per round and side; ``warmup_s`` before each, not counted.
        rounds: rounds per side (≥ 3; the paired test needs 6 for a verdict).
        names: labels, baseline first (default: each service's ``gc`` and ``heap`` switches that differ
            from the defaults, e.g. ``"gc=frozen"``).
        progress: a progress bar over the rounds (default: in a notebook).
        load_kwargs: other knobs of :func:`labkit.load.run` (``arrivals``, ``timeout_s`` …).

    Returns:
        a :class:`ProcessComparison` for one candidate; a list of them, one per candidate, for a list.
    """
    integer(rounds, "rounds", low=3, hint="each side's P99 is compared round by round, e.g. rounds=6")
    number(rate, "rate", unit="requests per second")
    several = isinstance(candidate, list | tuple)
    services = (baseline, *candidate) if several else (baseline, candidate)
    if names is None:
        names = [_label(s) for s in services]
        if len(set(names)) < len(names):
            names = [f"{n} ({chr(65 + i)})" for i, n in enumerate(names)]
    names = tuple(names)
    if len(names) != len(services):
        raise BadInputError(f"names: give one label per service, baseline first ({len(services)}), "
                            f"got {len(names)}")
    from labkit.progress import steps_bar

    n = len(services)
    bar = steps_bar(progress, n * rounds, "process rounds", "run")
    keys = ("p50", "p90", "p99", "max", "n", "ms", "g2", "ov", "req")
    cols: dict[str, list[list[Any]]] = {k: [[] for _ in services] for k in keys}
    errors = [0] * n
    try:
        for r in range(rounds):
            order = [(i + r) % n for i in range(n)]
            for side in (order if r % 2 == 0 else order[::-1]):
                load, pauses = during_load(services[side], path, rate=rate, duration_s=duration_s,
                                           warmup_s=warmup_s, progress=False, **load_kwargs)
                if load.responses < 2:
                    raise ServiceError(f"round {r}: {names[side]} answered {load.responses} requests "
                                       f"({load.errors}); is it overloaded at {rate:g} req/s? Lower the rate")
                q = load.percentiles((50.0, 90.0, 99.0))
                for k, v in (("p50", q[50.0]), ("p90", q[90.0]), ("p99", q[99.0]), ("max", pauses.max_ns),
                             ("n", pauses.count), ("ms", pauses.total_ns / 1e6),
                             ("g2", pauses.generation(2).count),
                             ("ov", float(overlapping(load, pauses).mean()) if load.responses else 0.0),
                             ("req", int(load.responses))):
                    cols[k][side].append(v)
                errors[side] += load.error_count
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    from labkit.measure.machine import fingerprint

    fp = fingerprint()

    def one(c: int) -> ProcessComparison:
        def pair(k: str) -> Any:
            return tuple(cols[k][0]), tuple(cols[k][c])

        return ProcessComparison((names[0], names[c]), path, float(rate), float(duration_s), pair("p50"),
                                 pair("p99"), pair("max"), pair("n"), pair("ms"), pair("g2"),
                                 (errors[0], errors[c]), pair("p90"), pair("ov"), pair("req"), fp)

    results = [one(c) for c in range(1, n)]
    return results if several else results[0]


def _label(service: Any) -> str:
    v = getattr(service, "variants", {}) or {}
    parts = [f"{k}={v[k]}" for k in ("gc", "heap") if k in v and v[k] not in ("default", "none")]
    return " ".join(parts) or f"gc={v.get('gc', '?')}"
