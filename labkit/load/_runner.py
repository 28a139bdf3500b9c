"""run() and run_async(): check the knobs, drive an Engine (in its own uvloop thread), build the LoadResult."""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from labkit.errors import BadInputError
from labkit.load._engine import Engine, RawRun
from labkit.load._options import PathPicker, Settings, make_picker, make_settings, parse_target
from labkit.load.result import LoadResult
from labkit.measure.machine import CpuWatch, can_pin
from labkit.progress import new_bar, show_progress

__all__ = ["run", "run_async", "prepare", "build_result"]


def prepare(
    url: str,
    *,
    rate: float | None = None,
    concurrency: int | None = None,
    duration_s: float = 10.0,
    max_requests: int = 1_000_000,
    paths: Sequence[str] | PathPicker | None = None,
    timeout_s: float = 5.0,
    connections: int | None = None,
    warmup_s: float = 0.0,
    arrivals: str = "constant",
    seed: int = 0,
    **engine_kwargs: Any,
) -> Engine:
    """Check every argument (BadInputError says how to fix) and build the Engine for one run."""
    target = parse_target(url)
    picker, picker_name = make_picker(target, paths)
    settings = make_settings(
        url, rate=rate, concurrency=concurrency, arrivals=arrivals, duration_s=duration_s,
        max_requests=max_requests, timeout_s=timeout_s, connections=connections, warmup_s=warmup_s, seed=seed,
        paths=None if paths is None or callable(paths) else paths, picker=picker_name,
    )
    return Engine(settings, target, picker, **engine_kwargs)


def build_result(settings: Settings, raw: RawRun, *, fingerprint: dict[str, Any] | None = None,
                 name: str = "") -> LoadResult:
    """Turn what the engine recorded into a LoadResult value."""
    intended = np.frombuffer(raw.intended, dtype=np.int64).copy() if raw.intended else np.zeros(0, np.int64)
    sent = np.frombuffer(raw.sent, dtype=np.int64) if raw.sent else np.zeros(0, np.int64)
    done = np.frombuffer(raw.done, dtype=np.int64) if raw.done else np.zeros(0, np.int64)
    statuses = np.frombuffer(raw.status, dtype=np.int16).copy() if raw.status else np.zeros(0, np.int16)
    path_ids = np.frombuffer(raw.path_id, dtype=np.int32).copy() if raw.path_id else np.zeros(0, np.int32)
    service = done - sent
    samples = done - intended if settings.mode == "open" else service.copy()
    duration_s = max(raw.elapsed_ns, 1) / 1e9
    codes, counts = np.unique(statuses, return_counts=True)
    if fingerprint is None:
        from labkit.measure.machine import fingerprint as _fingerprint

        fingerprint = _fingerprint()
    return LoadResult(
        settings=settings,
        samples_ns=samples,
        service_ns=service,
        start_ns=intended,
        statuses=statuses,
        path_ids=path_ids,
        paths=tuple(raw.paths),
        status_counts={int(c): int(n) for c, n in zip(codes, counts, strict=True)},
        errors=dict(sorted(raw.errors.items())),
        error_examples=dict(raw.error_examples),
        offered_rate=settings.rate,
        achieved_rate=samples.size / duration_s,
        duration_s=duration_s,
        warmup_requests=raw.warmup_requests,
        connections_opened=raw.connections_opened,
        fingerprint=fingerprint,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        name=name,
        t0_ns=raw.t0_ns,
    )


def _drive(engine: Engine, cpus: Iterable[int] | None, progress: bool, desc: str) -> RawRun:
    """Run the engine on a fresh uvloop loop in its own thread; show progress from this thread."""
    import uvloop

    box: dict[str, Any] = {}
    ready = threading.Event()

    def target() -> None:
        try:
            if cpus is not None:
                os.sched_setaffinity(0, cpus)  # 0 = this thread only, on Linux
            loop = uvloop.new_event_loop()
            box["loop"] = loop
        except BaseException as exc:  # handed to the caller below
            box["exc"] = exc
            ready.set()
            return
        ready.set()
        try:
            box["raw"] = loop.run_until_complete(engine.run())
        except BaseException as exc:  # handed to the caller below
            box["exc"] = exc
        finally:
            loop.close()

    thread = threading.Thread(target=target, name="labkit.load", daemon=True)
    thread.start()
    ready.wait()
    bar = _progress_bar(engine, progress, desc)
    try:
        while thread.is_alive():
            thread.join(0.2)
            if bar is not None:
                bar.tick()
    except KeyboardInterrupt:
        loop = box.get("loop")
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(engine.stop)
        thread.join()
        raise
    finally:
        if bar is not None:
            bar.close()
    if "exc" in box:
        raise box["exc"]
    return box["raw"]


class _Bar:
    """A bar over the run's seconds (:func:`labkit.progress.new_bar`: on the terminal in a ``labkit report`` run),
    with the achieved rate and error count as postfix."""

    def __init__(self, engine: Engine, desc: str) -> None:
        self.engine = engine
        s = engine.s
        self.total = round(s.warmup_s + s.duration_s, 1)
        self.bar = new_bar(self.total, desc, "s", bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} s{postfix}")
        self.t0 = time.perf_counter()

    def tick(self) -> None:
        e = self.engine
        if not e.start_ns:
            return
        now = time.perf_counter_ns()
        elapsed = min(self.total, max(0.0, (now - e.start_ns) / 1e9))
        self.bar.n = round(elapsed, 1)
        measured = (now - e.measure_ns) / 1e9
        rate = e.completed / measured if measured > 0.2 else 0.0
        self.bar.set_postfix_str(f"{rate:,.0f} req/s, {e.failed:,} errors", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def _progress_bar(engine: Engine, progress: bool, desc: str) -> _Bar | None:
    return _Bar(engine, desc) if progress else None


def run(
    url: str,
    *,
    rate: float | None = None,
    concurrency: int | None = None,
    duration_s: float = 10.0,
    max_requests: int = 1_000_000,
    paths: Sequence[str] | Callable[[int], str] | None = None,
    timeout_s: float = 5.0,
    connections: int | None = None,
    warmup_s: float = 0.0,
    arrivals: str = "constant",
    seed: int = 0,
    progress: bool | None = None,
    cpus: Iterable[int] | None = None,
    name: str = "",
) -> LoadResult:
    """Send HTTP load to a loopback URL and return a :class:`LoadResult`. Works in scripts and notebooks.

    Give exactly one of:
        rate: **open loop** -- requests per second on a schedule (``arrivals="constant"`` or ``"poisson"``);
            latency is timed from each request's *intended* send time, so a stall shows up in every request
            that queued behind it (coordinated omission corrected, as wrk2 does).
        concurrency: **closed loop** -- that many requests in flight, each sent when the previous returned.

    Args:
        url: ``http://127.0.0.1:PORT/path?query`` -- loopback only (127.0.0.0/8, ::1, localhost).
        duration_s: measured seconds (after the warm-up). Every run is bounded by this and ``max_requests``.
        max_requests: cap on measured requests.
        paths: a list of paths (sent round-robin, e.g. A/B variants interleaved) or a function
            ``i -> path``; default: the URL's own path. Split the result with ``result.select(path)``.
        timeout_s: a sent request without a full response this long after its send counts as a ``timeout``
            error; an open-loop request that waited this long for a free connection is never sent and counts
            as ``unsent``. A latency sample is thus at most 2 × timeout_s; the end of a run drains within that.
        connections: keep-alive connections in an open loop (default ``clamp(ceil(rate/50), 8, 128)``).
        warmup_s: seconds of the same load before measuring; its requests are not counted.
        seed: seeds the Poisson arrivals.
        progress: a progress bar over the run's seconds (:mod:`labkit.progress`: by default inside a notebook).
        cpus: pin the generator's thread to these CPUs (``os.sched_setaffinity``), e.g. ``{1}`` with the
            service on ``{0}``: tightens tails above ~3k req/s on a 2-vCPU machine.
        name: a label for the result (charts, compare); default e.g. ``"open 2,000/s"``.

    The generator runs on its own uvloop event loop in a separate thread, so ``run()`` works from a notebook
    cell even though Jupyter already runs a loop. Ctrl-C / interrupt stops it cleanly.

    Raises:
        BadInputError: a non-loopback URL or a bad knob, saying how to fix it.
    """
    engine = prepare(url, rate=rate, concurrency=concurrency, duration_s=duration_s, max_requests=max_requests,
                     paths=paths, timeout_s=timeout_s, connections=connections, warmup_s=warmup_s,
                     arrivals=arrivals, seed=seed)
    if cpus is not None:
        cpus = set(cpus)
        if not can_pin():
            raise BadInputError(f"cpus={sorted(cpus)} pins the generator's thread with os.sched_setaffinity, which "
                                "this platform does not have (macOS, Windows): leave cpus out")
        if not cpus or not cpus <= os.sched_getaffinity(0):
            raise BadInputError(f"cpus={sorted(cpus)} must be a non-empty subset of the usable CPUs "
                                f"{sorted(os.sched_getaffinity(0))}")
    s = engine.s
    desc = f"{s.rate:,.0f} req/s" if s.mode == "open" else f"c={s.concurrency}"
    watch = CpuWatch()
    raw = _drive(engine, cpus, show_progress(progress), desc)
    return build_result(engine.s, raw, name=name, fingerprint=_with_cpu(watch))


async def run_async(url: str, *, name: str = "", **kwargs: Any) -> LoadResult:
    """Like :func:`run` (same arguments except ``progress``/``cpus``) but on the caller's running event loop.

    Use it from async code that owns its loop; from a notebook cell prefer :func:`run`, which runs in its own
    thread so the kernel's loop does not disturb the timing.
    """
    engine = prepare(url, **kwargs)
    watch = CpuWatch()
    raw = await engine.run()
    return build_result(engine.s, raw, name=name, fingerprint=_with_cpu(watch))


def _with_cpu(watch: CpuWatch) -> dict[str, Any]:
    """The fingerprint, plus the CPU this process tree and the rest of the machine used during the run
    (``fingerprint["cpu"]``, see :class:`labkit.measure.machine.CpuWatch`): what the busy-machine warning reads."""
    from labkit.measure.machine import fingerprint

    fp = fingerprint()
    fp["cpu"] = watch.stop()
    return fp

