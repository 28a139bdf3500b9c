"""``watch``: record every query made through some targets during a block, function call, or start/stop span."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

from labkit.clock import Clock
from labkit.errors import BadInputError
from labkit.nplusone.report import DEFAULT_THRESHOLD, Query, Report, shape_of
from labkit.nplusone.sites import expression_of, format_site, is_loop_fetch, skip_cache
from labkit.nplusone.taps import DUR, REC, Sink, Tap
from labkit.nplusone.targets import release, tap_for

__all__ = ["Watch", "watch"]

F = TypeVar("F", bound=Callable[..., Any])


def _params_repr(params: Any) -> str:
    if params is None or params == () or params == []:
        return ""
    text = repr(params)
    return text if len(text) <= 200 else text[:199] + "…"


def _queries(buf: list[Any], durations: list[int], t0: int) -> tuple[Query, ...]:
    """Turn a sink's flat buffer (``labkit.nplusone.taps.REC`` slots per query) into ``Query`` values."""
    out = []
    for i, dur in zip(range(0, REC * len(durations), REC), durations, strict=True):
        (kind, target, timing, one), statement, params, start, _dur, (code, lasti, pcode, plasti) = buf[i:i + REC]
        if one:
            params = (params,)
        elif kind == "http":
            statement, params = f"{params} {statement}", None  # params held the method
        out.append(Query(kind, target, statement, _params_repr(params), shape_of(kind, statement), start - t0,
                         dur, format_site(code, lasti), timing, format_site(pcode, plasti) if pcode else "",
                         is_loop_fetch(code, lasti), expression_of(code, lasti),
                         expression_of(pcode, plasti) if pcode else ""))
    return tuple(out)


class Watch:
    """A query recorder over some targets; use as a context manager, a decorator, or with start()/stop().

    After each block (or decorated call) the result is in ``.report`` (a ``Report``); ``.reports`` keeps
    every report of a decorated function, most recent last, up to ``keep``. See ``watch`` for parameters.
    """

    def __init__(self, targets: tuple[Any, ...], threshold: int = DEFAULT_THRESHOLD, *, label: str = "",
                 skip: tuple[str, ...] = (), clock: Clock = time.perf_counter_ns,
                 keep: int = 100) -> None:
        if not targets:
            raise BadInputError(
                "watch() needs at least one target: a sqlite3.Connection, a SQLAlchemy Engine, Django's "
                "django.db.connection, an HTTP client with an `observers` list, or the http.client module, e.g. "
                "watch(conn, catalog)."
            )
        if not isinstance(threshold, int) or threshold < 0:
            raise BadInputError(f"threshold={threshold!r}: expected an int >= 0 (a shape sent more than "
                                f"`threshold` times from one line is a suspect); the default is {DEFAULT_THRESHOLD}.")
        self.targets = targets
        self.threshold = threshold
        self.label = label
        self.skip = tuple(skip)
        self.clock = clock
        self.keep = keep
        self.report: Report | None = None
        self.reports: list[Report] = []
        self._rules = skip_cache(self.skip)
        self._running: list[tuple[Sink, list[Tap], int]] = []

    # --- start / stop -------------------------------------------------------------------------------
    def start(self) -> Watch:
        """Begin recording (nestable: each start needs its stop)."""
        sink = Sink([], self.clock, self.skip, self._rules)
        taps: list[Tap] = []
        try:
            for target in self.targets:
                taps.append(tap_for(target, sink))
        except BaseException:
            for tap in taps:
                release(tap, sink)
            raise
        self._running.append((sink, taps, self.clock()))
        return self

    def stop(self) -> Report:
        """Stop recording and return the report (also stored in ``.report``).

        The block's raw buffer becomes ``Query`` values when the report's ``queries`` are first read, so that
        ending a block costs little; fetch times are frozen here (a later fetch does not count).
        """
        if not self._running:
            raise BadInputError("Watch.stop() called without a matching start(): call start() first, or "
                                "use `with watch(...)` which pairs them for you.")
        sink, taps, t0 = self._running.pop()
        t1 = self.clock()
        for tap in reversed(taps):
            release(tap, sink)
        buf = sink.buf
        n = len(buf)  # a thread still inside a hook may append after this: not part of the block
        durations = buf[DUR:n:REC]  # frozen now: a cursor's later fetches do not count
        report = Report.deferred(functools.partial(_queries, buf, durations, t0), wall_ns=t1 - t0,
                                 threshold=self.threshold, label=self.label)
        self.report = report
        self.reports.append(report)
        del self.reports[: -self.keep]
        return report

    # --- context manager ----------------------------------------------------------------------------
    def __enter__(self) -> Watch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- decorator ----------------------------------------------------------------------------------
    def __call__(self, func: F) -> F:
        """Record each call of *func*; the latest report is in ``wrapper.watch.report``."""
        if not self.label:
            self.label = getattr(func, "__qualname__", "")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.start()
            try:
                return func(*args, **kwargs)
            finally:
                self.stop()

        wrapper.watch = self  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        state = "recording" if self._running else "idle"
        return f"<Watch {state} targets={len(self.targets)} threshold={self.threshold}>"


def watch(*targets: Any, threshold: int = DEFAULT_THRESHOLD, label: str = "", skip: tuple[str, ...] = (),
          clock: Clock = time.perf_counter_ns) -> Watch:
    """Record every query made through *targets*; a context manager, a decorator, or ``start()/stop()``.

    Args:
        *targets: what to listen on: ``sqlite3.Connection`` (a subclass instance such as
            ``labkit.toyshop.db.connect``'s is timed precisely; a plain one through SQLite's trace callback and
            progress handler — see ``labkit.nplusone.taps``), a SQLAlchemy ``Engine`` (its event hooks), a
            Django connection such as ``django.db.connection`` (an execute wrapper, the cheap way in: pass it
            rather than the ``sqlite3`` connection under it — ``labkit.nplusone.hooks``), and HTTP clients with
            an ``observers`` list such as ``labkit.toyshop.catalog.CatalogClient``, or the ``http.client`` module
            (every request ``urllib``, ``requests`` and ``urllib3`` send, from any thread).
        threshold: a shape sent more than this many times from one calling line in one block, one item at a
            time, is a suspect (default ``DEFAULT_THRESHOLD`` = 1: a loop that ran twice, as django-zeal's
            default; see ``labkit.nplusone.report``). The report still totals each shape over all lines.
        label: a name for the report (the decorator uses the function's name).
        skip: extra path prefixes to skip when looking for the call site (your own data-access layer).
        clock: nanosecond clock; inject a fake one in tests.

    Returns:
        A ``Watch``; its ``.report`` holds the ``Report`` once the block ends.

    What is a suspect (an N+1): a shape sent more than *threshold* times from **one calling line** — the same
    expression of that line, called from the same expression of the same line — one item at a time. The same
    SQL sent from two lines is two places, not one loop, and so is a chain on one line
    (``node.parent.parent``: each relation once, as django-zeal counts it); a load that carries a list of two or more ids (``IN (…)``, ``?ids=…``), or that a ``for`` loop
    sends while fetching its next item (a chunked iterator's prefetch), is a batch, whatever its chunk size.

    Every query made through a target while the block runs is recorded, from any thread (a target shared by
    concurrent requests reports all of them). Nested blocks on the same target each see their own span. The
    call site of a query is the first frame in your code, whatever library stands in between: frames in the
    standard library and in installed packages (by where their files live), in this package, in the toyshop's
    transport modules (``toyshop/db.py``, ``toyshop/catalog.py``), under paths in *skip*, and in functions that
    set ``__tracebackhide__`` are passed over (see ``labkit.nplusone.sites``); for the toyshop export that is
    the loop in ``toyshop/export.py``. A call site found once is reused while the same call expression (the
    same frame, at the same instruction) issues the next query, so a library's frames are walked once per
    loop, not per call. Recording keeps raw slots; the ``Query`` values are built when ``report.queries`` is
    first read. What recording costs — per SQL query, per catalog call, per block, and on the whole toyshop
    export against the 5 % goal — is printed by ``tests/benchmarks/bench_nplusone.py``.

    Example:
        >>> with watch(conn, catalog) as w:      # doctest: +SKIP
        ...     export_naive(conn, catalog, 42)
        >>> w.report.suspects                   # doctest: +SKIP
    """
    return Watch(targets, threshold, label=label, skip=skip, clock=clock)
