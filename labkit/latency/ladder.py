"""Run every probe and collect the rows into one value: :class:`LatencyTable`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labkit.latency import concurrency, disk, memory, network, osprobes, pycost, servers, work
from labkit.latency._harness import Samples, unavailable
from labkit.results import Saveable

__all__ = ["LatencyTable", "table", "PROBES", "ladder_frame"]

Probe = Callable[[bool, Any], "Samples | tuple[Samples, ...]"]

# name → (row keys it produces, how to run it). Order is the order of the table (cheap → slow, by family).
PROBES: dict[str, tuple[tuple[str, ...], Probe]] = {
    "cache": (("mem_l1", "mem_l2", "mem_llc", "mem_dram"), lambda q, d: memory.pointer_chase(quick=q)),
    "branch": (("branch_mispredict",), lambda q, d: memory.branch_mispredict(quick=q)),
    "bandwidth": (("mem_seq_read_1mb",), lambda q, d: memory.seq_read_bandwidth(quick=q)),
    "python": (("python_call", "python_attr", "python_dict", "python_alloc"),
               lambda q, d: pycost.python_costs(quick=q)),
    "syscall": (("syscall",), lambda q, d: osprobes.syscall(quick=q)),
    "lock": (("lock_uncontended",), lambda q, d: osprobes.lock_uncontended(quick=q)),
    "context_switch": (("context_switch_pinned", "context_switch_cross"),
                       lambda q, d: osprobes.context_switch(quick=q)),
    "asyncio": (("asyncio_switch",), lambda q, d: concurrency.asyncio_switch(quick=q)),
    "lock_contended": (("lock_contended",), lambda q, d: concurrency.lock_contended(quick=q)),
    "gil": (("gil_handoff",), lambda q, d: concurrency.gil_handoff(quick=q)),
    "thread": (("thread_start",), lambda q, d: concurrency.thread_start(quick=q)),
    "page_fault": (("page_fault",), lambda q, d: osprobes.page_fault(quick=q)),
    "process": (("process_fork", "process_fork_join", "process_spawn", "process_spawn_join"),
                lambda q, d: concurrency.process_start(quick=q)),
    "compress": (("zlib_compress_1k",), lambda q, d: work.compress_1k(quick=q)),
    "json": (("json_encode_1k", "orjson_encode_1k"), lambda q, d: work.json_encode_1k(quick=q)),
    "sqlite": (("sqlite_point_query",), lambda q, d: work.sqlite_point_query(quick=q, dir=d)),
    "tcp": (("tcp_loopback_rtt",), lambda q, d: network.tcp_loopback_rtt(quick=q)),
    "tcp_connect": (("tcp_connect",), lambda q, d: network.tcp_connect(quick=q)),
    "http": (("http_health",), lambda q, d: network.http_health(quick=q)),
    "redis": (("redis_get",), lambda q, d: servers.redis_get(quick=q)),
    "postgres": (("postgres_point_query",), lambda q, d: servers.postgres_point_query(quick=q)),
    "disk": (("disk_random_read_4k", "page_cache_read_4k", "disk_seq_read_1mb"),
             lambda q, d: disk.disk_reads(quick=q, dir=d)),
    "fsync": (("write_fsync",), lambda q, d: disk.write_fsync(quick=q, dir=d)),
}


def _fmt(ns: float) -> str:
    from labkit.measure.stats import format_duration

    return format_duration(ns)


@dataclass(frozen=True)
class LatencyTable(Saveable):
    """The latency ladder as measured on this machine: one :class:`Samples` per row, raw samples kept.

    Attributes:
        rows: the table's rows, in probe order (unavailable rows have no samples and a note).
        curve: the pointer-chase curve, one row per working-set size (the cache rows are picked from it).
        quick: whether the quick (smaller, noisier) settings were used.
        elapsed_s: wall time of the whole run.
        probe_seconds: wall time of each probe, by probe name.
        warnings: what looked wrong with the run as a whole (a busy machine…), each with what to do.
        fingerprint: the machine and its load when measured.
    """

    KIND = "latency_table"

    rows: tuple[Samples, ...]
    curve: tuple[Samples, ...] = ()
    quick: bool = False
    elapsed_s: float = 0.0
    probe_seconds: dict[str, float] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    warnings: tuple[str, ...] = ()

    def row(self, key: str) -> Samples:
        """The row with this key; KeyError naming the keys that exist."""
        for r in self.rows:
            if r.key == key:
                return r
        raise KeyError(f"no row {key!r} in this table; rows: {', '.join(r.key for r in self.rows)}")

    def median_ns(self, key: str) -> float:
        """Median of one row in ns (NaN if the row was unavailable)."""
        return self.row(key).median_ns

    def to_frame(self) -> Any:
        """One line per row: key, label, family, median/p10/p90 in ns, sample count, readable median, note."""
        import pandas as pd

        return pd.DataFrame([_frame_row(r) for r in self.rows])

    def curve_frame(self) -> Any:
        """The pointer-chase curve: working-set bytes, median/p10/p90 ns per dependent load."""
        import pandas as pd

        return pd.DataFrame([{"working_set_bytes": c.extra.get("working_set_bytes"), **_frame_row(c)}
                             for c in self.curve])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict with ``kind`` and ``version``."""
        from labkit.results import jsonable

        return {"kind": self.KIND, "version": self.VERSION, "rows": [r.to_dict() for r in self.rows],
                "curve": [c.to_dict() for c in self.curve], "quick": self.quick, "elapsed_s": self.elapsed_s,
                "probe_seconds": dict(self.probe_seconds), "fingerprint": jsonable(self.fingerprint),
                "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LatencyTable:
        """Rebuild from :meth:`to_dict` output (refuses other kinds and newer versions)."""
        cls.check_header(data)
        return cls(rows=tuple(Samples.from_dict(r) for r in data["rows"]),
                   curve=tuple(Samples.from_dict(c) for c in data.get("curve", ())),
                   quick=bool(data.get("quick", False)), elapsed_s=float(data.get("elapsed_s", 0.0)),
                   probe_seconds=dict(data.get("probe_seconds") or {}),
                   fingerprint=dict(data.get("fingerprint") or {}),
                   warnings=tuple(data.get("warnings") or ()))

    def __str__(self) -> str:
        from labkit.latency.render import format_table

        return format_table(self)

    def __repr__(self) -> str:
        missing = sum(not r.available for r in self.rows)
        return (f"LatencyTable({len(self.rows)} rows ({missing} unavailable), "
                f"{'quick' if self.quick else 'full'}, {self.elapsed_s:.1f} s)")

    def _repr_html_(self) -> str:
        from labkit.latency.render import table_html

        return table_html(self)


def _frame_row(r: Samples) -> dict[str, Any]:
    return {"key": r.key, "label": r.label, "family": r.family, "median_ns": r.median_ns,
            "p10_ns": r.percentile_ns(10), "p90_ns": r.percentile_ns(90), "n": len(r.samples_ns),
            "median": _fmt(r.median_ns), "note": r.note or ""}


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def busy_warning(load_before: float | None, load_after: float | None, ncpu: int) -> str | None:
    """A warning when the 1-minute load average (which counts this run too) exceeded the CPU count."""
    loads = [x for x in (load_before, load_after) if x is not None]
    if not loads or max(loads) <= ncpu:
        return None
    return (f"the machine was busy (load average up to {max(loads):.1f} on {ncpu} CPUs, this run included): "
            "other processes shared the cores and caches, which inflates medians and widens P10–P90. "
            "Close other work and rerun, or compare rows of one run with each other rather than across runs")


def table(quick: bool = False, progress: bool | None = None, *, include: Iterable[str] | None = None,
          exclude: Iterable[str] = (), dir: str | os.PathLike[str] | None = None) -> LatencyTable:
    """Measure the latency table on this machine.

    Args:
        quick: smaller working sets, files and sample counts (faster, noisier).
        progress: show a progress bar (a widget in Jupyter, a text bar in a terminal) and one line per
            probe as it finishes — on stderr, so stdout carries only the result (in a notebook, in the cell's
            output: :func:`labkit.progress.notes`). By default inside a notebook (:mod:`labkit.progress`);
            ``labkit latency`` shows it unless ``--no-progress``.
        include: run only these probes (names of :data:`PROBES`), e.g. ``{"cache", "syscall"}``.
        exclude: skip these probes (e.g. ``{"http"}`` when toyshop is not wanted).
        dir: where the disk and SQLite probes make their temporary files (default: the system temp folder;
            it must be on a real disk for the uncached rows to mean anything).

    Returns:
        A :class:`LatencyTable`. A probe that fails becomes rows with no samples and a note; only
        KeyboardInterrupt stops the run (temporary files are removed on the way out).
    """
    from labkit.errors import BadInputError
    from labkit.measure.machine import fingerprint
    from labkit.progress import new_bar, notes, show_progress

    progress = show_progress(progress)
    names = list(PROBES) if include is None else list(include)
    unknown = [n for n in [*names, *exclude] if n not in PROBES]
    if unknown:
        raise BadInputError(f"unknown probe(s) {unknown}: choose from {', '.join(PROBES)}")
    names = [n for n in names if n not in set(exclude)]
    rows: list[Samples] = []
    curve: tuple[Samples, ...] = ()
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    load_before = _load()
    bar = new_bar(len(names), "latency probes", "probe", disable=not progress)  # text inside a labkit report run
    for name in names:
        bar.set_postfix_str(name)
        keys, run = PROBES[name]
        t0 = time.perf_counter()
        try:
            got = run(quick, dir)
            got = (got,) if isinstance(got, Samples) else tuple(got)
        except Exception as e:  # one broken probe must not take the table down with it
            got = tuple(unavailable(k, k, "?", f"probe {name!r} failed: {type(e).__name__}: {e}")
                        for k in keys)
        if name == "cache":
            curve, got = got, memory.cache_rows(got) or tuple(
                unavailable(k, k, "cpu", got[0].note if got else "no working sets measured") for k in keys)
        rows.extend(got)
        seconds[name] = time.perf_counter() - t0
        if progress:
            summary = ", ".join(f"{r.key} {_fmt(r.median_ns)}" for r in got)
            bar.write(f"{name:<15} {seconds[name]:5.1f} s  {summary}", file=notes())
        bar.update()
    bar.close()
    busy = busy_warning(load_before, _load(), os.cpu_count() or 1)
    if busy and progress:
        print(f"warning: {busy}", file=notes(), flush=True)
    return LatencyTable(tuple(rows), curve, quick, time.perf_counter() - start, seconds, fingerprint(),
                        (busy,) if busy else ())


def ladder_frame(t: LatencyTable) -> Any:
    """Rows with a measured median, sorted fastest first: the data behind the ladder chart."""
    df = t.to_frame()
    df = df[np.isfinite(df["median_ns"])]
    return df.sort_values("median_ns").reset_index(drop=True)
