"""The value every probe returns (:class:`Samples`) and the small timing helpers probes share.

A probe measures one thing many times and returns raw per-operation samples, never a single number. When a
probe cannot measure honestly on this machine (a package is missing, the kernel refuses O_DIRECT…) it returns
a :class:`Samples` with *no* samples and a ``note`` saying why and what to do — the table shows "n/a" rather
than a number measuring something else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import random
import threading
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labkit.clock import Clock
from labkit.measure.machine import pinned
from labkit.results import Saveable

__all__ = ["Samples", "unavailable", "time_each", "time_batches", "python_cost", "method_of", "run_pair", "pipe_pair"]


@dataclass(frozen=True)
class Samples(Saveable):
    """Raw per-operation samples of one row of the latency table.

    Attributes:
        key: stable identifier (``mem_l1``, ``syscall`` …), used by the reference CSV's ``probe_key``.
        label: what a reader sees in the table ("L1 cache hit (dependent load)").
        family: ``cpu``, ``python``, ``os``, ``concurrency``, ``io`` or ``work``.
        samples_ns: per-operation time of every counted sample, in ns (empty when unavailable).
        method: how it was measured, and where the probe's own overhead sits (the probe's docstring).
        note: set when the row is degraded, approximate or unavailable; says why and what to do.
        extra: anything else worth keeping (working-set bytes, GB/s, resident pages…).
    """

    KIND = "latency_samples"

    key: str
    label: str
    family: str
    samples_ns: tuple[float, ...]
    method: str = ""
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def available(self) -> bool:
        """True when the row holds measured samples."""
        return len(self.samples_ns) > 0

    @property
    def median_ns(self) -> float:
        """Median per-operation time (ns), NaN when unavailable."""
        return float(np.median(self.samples_ns)) if self.samples_ns else float("nan")

    def percentile_ns(self, q: float) -> float:
        """The ``q``-th percentile (0–100) of the samples in ns, NaN when unavailable."""
        return float(np.percentile(self.samples_ns, q)) if self.samples_ns else float("nan")

    def to_frame(self) -> Any:
        """One row per sample: key, sample index, ns."""
        import pandas as pd

        return pd.DataFrame({"key": self.key, "sample": range(len(self.samples_ns)),
                             "ns": np.asarray(self.samples_ns, dtype=float)})

    def __repr__(self) -> str:
        note = f", note={self.note!r}" if self.note else ""
        return (f"Samples({self.key!r}, median={self.median_ns:.4g} ns, n={len(self.samples_ns)}"
                f"{note})")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Samples:
        """Rebuild from :meth:`to_dict` output (a row saved inside a version-1 table has no header)."""
        if "kind" not in data:
            data = {"kind": cls.KIND, "version": 1, **data}
        out: Samples = super().from_dict(data)
        return dataclasses.replace(out, samples_ns=tuple(float(v) for v in out.samples_ns or ()),
                                   extra=dict(out.extra or {}))


def method_of(fn: Callable[..., Any]) -> str:
    """The docstring of a probe function, cleaned: the probe's method, written once, where the code is."""
    return inspect.cleandoc(fn.__doc__ or "")


def unavailable(key: str, label: str, family: str, note: str, method: str = "", **extra: Any) -> Samples:
    """A row that could not be measured here: no samples, and a note saying why and what to do."""
    return Samples(key, label, family, (), method, note, dict(extra))


def time_each(fn: Callable[[], Any], repeats: int, *, warmup: int = 5,
              clock: Clock = time.perf_counter_ns) -> tuple[float, ...]:
    """Time ``repeats`` single calls of ``fn`` after ``warmup`` uncounted ones; per-call ns.

    Use for operations of a microsecond or more, where the ~100 ns of the clock reads and the Python call
    are small beside the operation and per-call samples show the real distribution (tails included).
    """
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        out.append(float(clock() - t0))
    return tuple(out)


def time_batches(fn: Callable[[], Any], *, batch: int, repeats: int, warmup: int = 1,
                 clock: Clock = time.perf_counter_ns) -> tuple[float, ...]:
    """Time ``repeats`` batches of ``batch`` calls of ``fn``; per-call ns of each batch (a mean per batch)."""
    for _ in range(warmup * batch):
        fn()
    out = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(batch):
            fn()
        out.append((clock() - t0) / batch)
    return tuple(out)


def time_lookups(lookup: Callable[[Any], Any], keys: Sequence[Any], *, seed: int, repeats: int,
                 batch: int = 25) -> tuple[float, ...]:
    """:func:`time_batches` of ``lookup(key)`` over 1,024 keys drawn from *keys* with ``random.Random(seed)``
    and cycled: the point-lookup rows' loop (a random key each call, drawn before timing)."""
    rng = random.Random(seed)
    drawn = [rng.choice(keys) for _ in range(1024)]
    pos = [0]

    def once() -> None:
        pos[0] = (pos[0] + 1) & 1023
        lookup(drawn[pos[0]])

    return time_batches(once, batch=batch, repeats=repeats)


def python_cost(stmt: str, setup: str = "pass", *, number: int, repeats: int,
                namespace: dict[str, Any] | None = None) -> tuple[tuple[float, ...], float]:
    """Per-execution ns of ``stmt`` *net of* timeit's own loop, and that loop's cost per iteration.

    Each repeat runs ``stmt`` ``number`` times in timeit's compiled loop, then an empty statement the same
    number of times. A sample is one repeat's time per execution minus the *median* empty-loop time per
    iteration (the median, so one disturbed empty run does not shift a sample). The subtracted loop cost
    is returned so callers can say how big it was. Samples below zero (noise around a sub-ns statement) are
    kept, not clamped, so the median stays honest.
    """
    timer = timeit.Timer(stmt, setup, globals=namespace)
    empty = timeit.Timer("pass", setup, globals=namespace)
    timer.timeit(max(1, number // 10))  # warm-up: specialise the bytecode, fill caches
    empty.timeit(max(1, number // 10))
    raw, loop = [], []
    for _ in range(repeats):
        raw.append(timer.timeit(number) * 1e9 / number)
        loop.append(empty.timeit(number) * 1e9 / number)
    base = float(np.median(loop))
    return tuple(t - base for t in raw), base


def run_pair(a: Callable[[], None], b: Callable[[], None], cpu_a: int | None, cpu_b: int | None,
              unblock: Callable[[], None]) -> None:
    """Run ``b`` in a helper thread pinned to ``cpu_b`` and ``a`` in this one pinned to ``cpu_a`` (None: not
    pinned), re-raising the helper's error: the frame of every two-thread hand-off probe.

    ``unblock`` is called when ``a`` ends early (an exception, Ctrl-C) so the helper is not left blocked.
    """
    err: list[BaseException] = []

    def helper() -> None:
        try:
            with pinned({cpu_b} if cpu_b is not None else None):
                b()
        except BaseException as e:  # reported by the caller
            err.append(e)

    t = threading.Thread(target=helper, name="labkit-latency-peer", daemon=True)
    t.start()
    try:
        with pinned({cpu_a} if cpu_a is not None else None):
            a()
    except BaseException:
        unblock()
        raise
    finally:
        t.join(timeout=10)
    if err:
        raise err[0]


@contextlib.contextmanager
def pipe_pair() -> Iterator[tuple[int, int, int, int, Callable[[], None]]]:
    """Two pipes for a ping-pong between two threads, ``(r1, w1, r2, w2, unblock)``: ``unblock()`` closes ``w1``,
    so a peer blocked reading ``r1`` reads EOF and returns (:func:`run_pair`'s ``unblock``); every end still open
    is closed on exit."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    fds = {r1, w1, r2, w2}

    def unblock() -> None:
        fds.discard(w1)
        os.close(w1)

    try:
        yield r1, w1, r2, w2, unblock
    finally:
        for fd in fds:
            os.close(fd)
