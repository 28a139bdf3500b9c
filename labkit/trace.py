"""Nanosecond spans, collected per request, and the W3C ``Server-Timing`` header.

A *trace* is the set of spans recorded for one request (or one notebook cell). It lives in a
:class:`contextvars.ContextVar`, so each asyncio task and each thread started with a copied context
records into the trace that was current where it was started, and two concurrent requests never mix.

    with collect() as trace:
        with span("parse"):
            ...
        add("db", dur_ns, count=1)          # wherever the work happens: one call per query, say
    trace.server_timing()   # 'parse;dur=0.051, db;dur=0.412;count=12'

:func:`add` is how a request's accounting is done: any code the request runs — on the event loop, in a worker
thread started with a copied context, in an asyncio task — adds time and counts to a named metric of the
request's trace, and every metric lands in its ``Server-Timing`` header. Adding a stage or a count (queries,
allocations, cache hits, bytes) is one call at the place where it happens. Spans and :func:`add` called while no
trace is collecting cost one context-variable lookup and are dropped.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from threading import RLock, get_ident
from typing import Any, NamedTuple, TypeVar

from labkit.clock import Clock
from labkit.errors import BadInputError

__all__ = [
    "Span",
    "Trace",
    "ServerTimingMetric",
    "span",
    "add",
    "collect",
    "current",
    "format_server_timing",
    "parse_server_timing",
]

F = TypeVar("F", bound=Callable[..., Any])

_current: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("labkit_trace", default=None)


class Span(NamedTuple):
    """One timed stage: its name, start and end on the monotonic clock (ns), and the thread it ran on.

    A NamedTuple rather than a dataclass because a span is created on every exit and must stay cheap.
    """

    name: str
    start_ns: int
    end_ns: int
    thread_id: int

    @property
    def dur_ns(self) -> int:
        """The span's duration in nanoseconds."""
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class ServerTimingMetric:
    """One metric of a ``Server-Timing`` header: ``name;dur=1.5;desc="…";count=3``."""

    name: str
    dur_ms: float | None = None
    desc: str | None = None
    params: dict[str, str] = field(default_factory=dict)

    @property
    def count(self) -> int | None:
        """The ``count`` extension parameter (queries or calls made), if present."""
        value = self.params.get("count")
        return int(value) if value is not None else None


class Trace:
    """The spans and metrics of one request. Safe to add to from several threads at once."""

    def __init__(self, clock: Clock = time.perf_counter_ns) -> None:
        self.clock = clock
        self._spans: list[tuple[str, int, int, int]] = []  # plain tuples: cheap to make on every exit (atomic append)
        self._metrics: dict[str, dict[str, Any]] = {}
        # re-entrant: a garbage collection can start inside add() (any allocation may trigger one) and its
        # callback may add to the same trace from the same thread
        self._lock = RLock()

    @property
    def spans(self) -> tuple[Span, ...]:
        """Every span recorded so far, in the order they ended."""
        return tuple(Span(*s) for s in self._spans)

    def totals_ns(self) -> dict[str, int]:
        """Total time per span name, in first-seen order (a stage entered twice is summed)."""
        totals: dict[str, int] = {}
        for name, start, end, _ in self._spans:
            totals[name] = totals.get(name, 0) + end - start
        return totals

    def add(self, name: str, dur_ns: int | None = None, count: int | None = None, desc: str | None = None) -> None:
        """Add time and/or a count to the metric ``name`` (both accumulate); ``desc`` sets its description.

        A metric that was only ever given a count shows ``count=`` without a duration; ``add("db", 0, count=0)``
        declares a metric up front so the header shows it even when nothing happened.
        """
        if name not in _VALID_NAMES:
            _check_name(name)
        with self._lock:
            entry = self._metrics.get(name)
            if entry is None:
                entry = self._metrics[name] = {}
            if dur_ns is not None:
                entry["dur_ns"] = entry.get("dur_ns", 0) + dur_ns
            if count is not None:
                entry["count"] = entry.get("count", 0) + count
            if desc is not None:
                entry["desc"] = desc

    def _merged(self) -> dict[str, dict[str, Any]]:
        # the added metrics, in the order first added, with every span's time added to the metric of its name
        with self._lock:
            merged: dict[str, dict[str, Any]] = {n: dict(m) for n, m in self._metrics.items()}
        for name, start, end, _ in self._spans:
            entry = merged.setdefault(name, {})
            entry["dur_ns"] = entry.get("dur_ns", 0) + end - start
        return merged

    def metrics(self) -> list[ServerTimingMetric]:
        """Added metrics (in the order first added) merged with span totals (a span's time adds to a metric of
        the same name), ready to encode."""
        return [ServerTimingMetric(name, m["dur_ns"] / 1e6 if "dur_ns" in m else None, m.get("desc"),
                                   {"count": str(m["count"])} if "count" in m else {})
                for name, m in self._merged().items()]

    def server_timing(self) -> str:
        """This trace as a ``Server-Timing`` header value: what ``format_server_timing(self.metrics())`` gives,
        made without the intermediate objects (it runs on every response)."""
        return ", ".join(_metric_text(name, m["dur_ns"] / 1e6 if "dur_ns" in m else None, m.get("desc"),
                                      {"count": m["count"]} if "count" in m else {})
                         for name, m in self._merged().items())

    def __repr__(self) -> str:
        return f"Trace({len(self._spans)} spans: {self.server_timing()!r})"


class span:  # noqa: N801 - used like a function: ``with span("db")`` and ``@span("db")``
    """Time a block or a function into the current trace.

    Args:
        name: the stage name (a Server-Timing token: letters, digits, ``-``, ``_``, ``.``).

    Works as a context manager (``with span("db"): …``) and as a decorator (``@span("db")``) on plain
    and ``async`` functions. The clock is the current trace's clock, so tests can inject a fake one.
    """

    __slots__ = ("name", "_trace", "_start")

    def __init__(self, name: str) -> None:
        if name not in _VALID_NAMES:
            _check_name(name)
        self.name = name

    def __enter__(self) -> span:
        self._trace = trace = _current.get()
        if trace is not None:
            self._start = trace.clock()
        return self

    def __exit__(self, *exc: object) -> None:
        trace = self._trace
        if trace is not None:
            trace._spans.append((self.name, self._start, trace.clock(), get_ident()))

    def __call__(self, fn: F) -> F:
        name = self.name
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                with span(name):
                    return await fn(*args, **kwargs)
            return awrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with span(name):
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]


_VALID_NAMES: set[str] = set()


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise BadInputError(
            f"span name {name!r} is not a valid Server-Timing token: use letters, digits, '-', '_' or '.' "
            "(for example span('db') or span('catalog.batch'))")
    if len(_VALID_NAMES) < 10_000:  # remember valid names so the hot path skips the regex
        _VALID_NAMES.add(name)


@contextmanager
def collect(clock: Clock = time.perf_counter_ns, *, into: Trace | None = None) -> Iterator[Trace]:
    """Open a new trace for the current context (a request, a cell) and yield it.

    Nested ``collect()`` blocks each get their own trace; the outer one is restored on exit. ``into``: collect
    into this trace instead (one whose metrics were declared before it became current, so they keep their
    order whatever a callback — a garbage collection's, say — adds while the request starts).
    """
    trace = into if into is not None else Trace(clock)
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)


def current() -> Trace | None:
    """The trace collecting in this context, or None."""
    return _current.get()


def add(name: str, dur_ns: int | None = None, count: int | None = None, desc: str | None = None) -> None:
    """Add time (ns) and/or a count to the metric ``name`` of the trace collecting in this context.

    The per-request accounting call: ``add("db", elapsed, count=1)`` after a query, ``add("alloc", count=n)``.
    Without a collecting trace it does nothing (one context-variable lookup). See :meth:`Trace.add`.
    """
    trace = _current.get()
    if trace is not None:
        trace.add(name, dur_ns, count, desc)


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _quote(value: str) -> str:
    if _TOKEN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_server_timing(metrics: Iterable[ServerTimingMetric]) -> str:
    """Encode metrics as a W3C Server-Timing header value (durations in ms, 3 decimals)."""
    return ", ".join(_metric_text(m.name, m.dur_ms, m.desc, m.params) for m in metrics)


def _metric_text(name: str, dur_ms: float | None, desc: str | None, params: dict[str, Any]) -> str:
    item = name
    if dur_ms is not None:
        item += f";dur={dur_ms:.3f}"
    if desc is not None:
        item += ";desc=" + _quote(desc)
    for k, v in params.items():
        item += f";{k}={_quote(str(v))}"
    return item


_LEXER = re.compile(r'\s*(?:(?P<tok>[!#$%&\'*+\-.^_`|~0-9A-Za-z]+)|"(?P<q>(?:[^"\\]|\\.)*)"|(?P<sep>[;,=]))')


def parse_server_timing(header: str) -> dict[str, ServerTimingMetric]:
    """Decode a Server-Timing header value into metrics keyed by name.

    Follows the W3C grammar (tokens, quoted strings with backslash escapes, ``;`` params, ``,`` between
    metrics). Unparseable fragments are skipped, as browsers do; a repeated metric name keeps the first.
    """
    if not isinstance(header, str):
        raise BadInputError(f"parse_server_timing expects the header's text (str), got {type(header).__name__}")
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(header):
        m = _LEXER.match(header, pos)
        if not m:
            pos += 1  # skip a stray character
            continue
        pos = m.end()
        if m.group("tok") is not None:
            tokens.append(("tok", m.group("tok")))
        elif m.group("q") is not None:
            tokens.append(("val", re.sub(r"\\(.)", r"\1", m.group("q"))))
        elif m.group("sep"):
            tokens.append(("sep", m.group("sep")))
    out: dict[str, ServerTimingMetric] = {}
    metrics: list[list[tuple[str, str]]] = [[]]
    for t in tokens:
        if t == ("sep", ","):
            metrics.append([])
        else:
            metrics[-1].append(t)
    for toks in metrics:
        if not toks or toks[0][0] != "tok":
            continue
        name, params = toks[0][1], {}
        i = 1
        while i < len(toks):
            if toks[i] == ("sep", ";") and i + 1 < len(toks) and toks[i + 1][0] == "tok":
                key = toks[i + 1][1].lower()
                if i + 3 < len(toks) + 1 and i + 2 < len(toks) and toks[i + 2] == ("sep", "="):
                    value = toks[i + 3][1] if i + 3 < len(toks) and toks[i + 3][0] != "sep" else ""
                    params.setdefault(key, value)
                    i += 4
                    continue
                params.setdefault(key, "")
                i += 2
                continue
            i += 1
        dur = params.pop("dur", None)
        try:
            dur_ms = float(dur) if dur not in (None, "") else None
        except ValueError:
            dur_ms = None
        desc = params.pop("desc", None)
        if name not in out:
            out[name] = ServerTimingMetric(name, dur_ms, desc, params)
    return out
