"""Taps: how the recorder sees queries on each kind of target.

One tap per target object, shared by every active recorder (``labkit.nplusone.targets`` keeps them); the
``sqlite3`` and HTTP-client kinds are here (:func:`plain_tap`), the library hooks in ``labkit.nplusone.hooks``.
Each query becomes one record appended to every active sink; the recorder freezes records into ``Query``
values when its report is read.

How each target is timed (the report's ``timing`` column says which applied):

- ``"call"`` — a ``sqlite3.Connection`` *subclass* instance (such as ``labkit.toyshop.db.connect``'s): its
  ``execute``/``executemany``/``executescript``/``cursor`` are wrapped on the instance (the connection's own
  methods still run underneath), so a query's duration is the time spent in ``execute`` plus in every later
  ``fetch*``/iteration step of the cursor it returned. The cursor handed back is a thin proxy (it is not an
  ``isinstance`` of ``sqlite3.Cursor``); everything else is delegated to the real cursor.

Every tap records through ``Tap.record`` or ``Tap.note``, which find the call site with
``labkit.nplusone.sites`` (while a tap has one sink, a ``sites.locator`` of its own saves most walks).
- ``"vm"`` — a plain ``sqlite3.Connection`` (a C type: its methods cannot be wrapped). Statements come from
  ``set_trace_callback`` (SQLite calls it when a statement starts running, with parameters expanded), and the
  end comes from a progress handler ticking every ``PROGRESS_OPS`` virtual-machine instructions: duration =
  last tick − start. It excludes statement preparation, is short by up to ``PROGRESS_OPS`` instructions (a
  statement shorter than that reads 0), and includes Python time spent between fetches of the same statement.
  Both callbacks are SQLite's single slots: a trace callback or progress handler you set yourself is replaced
  during the block and cleared after it.
- ``"hook"`` — a SQLAlchemy ``Engine`` (its ``before/after_cursor_execute`` events) or a Django database
  connection (``django.db.connection``: an execute wrapper, Django's own instrumentation hook): the DBAPI
  ``execute`` only, not the fetch of rows (the ORM fetches right after). See ``labkit.nplusone.hooks``.
- ``"observer"`` — an HTTP client with an ``observers`` list (``labkit.toyshop.catalog.CatalogClient``): the
  client's own measured duration of each call.
- ``"client"`` — the standard library's ``http.client`` module itself (``watch(http.client)``): every request
  an ``HTTPConnection`` sends, from ``putrequest`` to the end of its ``getresponse`` (the response's headers;
  reading the body is not in it). ``urllib.request``, ``requests`` and ``urllib3`` send through it; ``httpx``
  (over ``httpcore``) and ``aiohttp`` do not, and are not seen. The two methods are patched on the class
  while the tap is on, so every connection of the process is watched, in every thread.
"""

from __future__ import annotations

import contextlib
import http.client
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from labkit.clock import Clock
from labkit.nplusone.sites import Decide, Known, Site, locator, site_of, skip_cache

__all__ = ["PROGRESS_OPS", "REC", "Sink", "Tap", "plain_tap"]

PROGRESS_OPS = 4  # SQLite VM instructions per progress tick on plain connections (resolution vs overhead)

# A sink is one watch block's buffer: a flat list, REC slots per recorded query (no per-query container, so
# recording allocates nothing the garbage collector has to track, and the report is built only when read):
#   meta (kind, target label, timing, one), statement, params, start_ns, duration_ns, site (the tuple
#   ``(code, f_lasti, caller code, caller f_lasti)`` of sites.site_of, shared by the queries sent from there)
# ``one``: params was a 1-tuple and the slot holds its only value (the usual ``(id,)``): a tuple kept alive
# per query would count towards the garbage collector's gen-0 threshold, an int does not.
# For ``"call"`` and ``"vm"`` timing the duration is completed in place later (a cursor's fetches, or for
# "vm" the next statement): whoever recorded it keeps the slot's position (``_slot``). Nothing per query is
# kept alive beyond the buffer's slots, so a watched block does not push the garbage collector into extra
# collections. For ``"observer"`` the params slot holds the HTTP method and the statement slot the URL.
REC = 6
DUR = 4  # index of the duration within a record
Marks = list[tuple[list[Any], int]]  # (buffer, position of a duration slot), one per sink


def _slot(buf: list[Any], statement: Any, start_ns: int) -> int:
    """Position of the duration slot of the record (*statement*, …, *start_ns*, …) just appended to *buf*.

    ``buf += record`` is atomic, but another thread may append between it and ``len(buf)``: then the record
    is found by looking back from the end (a short way: only what was appended meanwhile)."""
    pos = len(buf) - REC + DUR
    if buf[pos - 1] == start_ns and buf[pos - 3] is statement:
        return pos
    for earlier in range(pos - REC, DUR - 1, -REC):
        if buf[earlier - 1] == start_ns and buf[earlier - 3] is statement:
            return earlier
    return -1  # not there (cannot happen): the caller drops the fetch time


class Sink:
    """One recorder's buffer on a tap, with its clock and call-site skip rules."""

    __slots__ = ("buf", "clock", "skip", "known", "decide")

    def __init__(self, buf: list[Any], clock: Clock, skip: tuple[str, ...],
                 rules: tuple[Known, Decide] | None = None) -> None:
        self.buf = buf
        self.clock = clock
        self.skip = skip
        self.known, self.decide = rules or skip_cache(skip)


class Tap:
    """Base: records every observed query into the active sinks. Subclasses install/uninstall hooks.

    A tap reads the clock of its first sink (the outermost watch); nested watches with another clock see
    that one's readings.
    """

    kind = "sql"
    timing = ""

    def __init__(self, target: Any, label: str) -> None:
        self.target = target
        self.label = label
        self.meta = (self.kind, label, self.timing, False)
        self.meta1 = (self.kind, label, self.timing, True)
        self.sinks: list[Sink] = []  # mutated in place: installed hooks hold this list
        # with exactly one sink (the usual case): its buffer and a call-site locator for its skip rules
        # (sites.locator), so that a query is recorded without looking at the list of sinks; set by resink(),
        # as one attribute so that a thread never sees one sink's buffer with another's locator
        self.one: tuple[list[Any], Callable[[], Site]] | None = None

    def resink(self) -> None:
        """Called (under the taps' lock) whenever ``sinks`` changed: set the one-sink fast path, or clear it."""
        if len(self.sinks) == 1:
            sink = self.sinks[0]
            self.one = (sink.buf, locator(sink.known, sink.decide))
        else:
            self.one = None

    @property
    def clock(self) -> Clock:
        return self.sinks[0].clock

    def record(self, statement: str, params: Any, start_ns: int, duration_ns: int) -> Marks:
        """Append one query to every sink, its call site found from the hook's caller outwards; return where
        each sink's duration slot is (for time added later: a cursor's fetches, the end of a VM statement)."""
        meta = self.meta
        if params.__class__ is tuple and len(params) == 1:
            params, meta = params[0], self.meta1
        one = self.one
        if one is not None:  # one sink, the usual case: kept short
            buf, here = one
            buf += (meta, statement, params, start_ns, duration_ns, here())
            pos = len(buf) - REC + DUR
            if buf[pos - 1] != start_ns or buf[pos - 3] is not statement:  # another thread appended meanwhile
                pos = _slot(buf, statement, start_ns)
            return [(buf, pos)] if pos >= 0 else []
        marks = []
        site: Site = (None, 0, None, 0)
        skip: Any = None  # the skip rules *site* was found with: sinks with the same rules share it
        for sink in self.sinks:  # nested watches: walked, no locator (it holds for one set of skip rules)
            if sink.skip != skip:
                site, skip = site_of(sink.known, sink.decide), sink.skip
            buf = sink.buf
            buf += (meta, statement, params, start_ns, duration_ns, site)
            pos = _slot(buf, statement, start_ns)
            if pos >= 0:
                marks.append((buf, pos))
        return marks

    def note(self, statement: str, params: Any, start_ns: int, duration_ns: int) -> None:
        """``record`` for a query whose duration is already known (hooks, observers): nothing comes back to its
        slot, so the usual case skips finding it (this runs once per query)."""
        one = self.one
        if one is None:
            self.record(statement, params, start_ns, duration_ns)
            return
        buf, here = one
        if params.__class__ is tuple and len(params) == 1:
            buf += (self.meta1, statement, params[0], start_ns, duration_ns, here())
        else:
            buf += (self.meta, statement, params, start_ns, duration_ns, here())

    def flush(self) -> None:
        """Complete what is still open when a recorder stops (a statement still running); most taps hold none."""

    def install(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def uninstall(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class _CursorProxy:
    """Wraps a cursor: times execute* and every later fetch/iteration step, adding both to one query.

    A proxy rather than a cursor subclass so that the connection's own ``execute`` (and whatever cursor
    class it chooses) keeps working underneath.
    """

    __slots__ = ("_cur", "_tap", "_clock", "_marks")

    def __init__(self, cur: Any, tap: _WrappedSqliteTap, clock: Clock, marks: Marks) -> None:
        self._cur = cur
        self._tap = tap
        self._clock = clock
        self._marks = marks  # where fetch time goes: buf[pos] for each sink

    def _exec(self, fn: Any, sql: str, args: tuple[Any, ...]) -> _CursorProxy:
        clock = self._clock
        t0 = clock()
        try:
            fn(sql, *args)
        finally:
            self._marks = self._tap.record(sql, args[0] if args else None, t0, clock() - t0)
        return self

    def execute(self, sql: str, *args: Any) -> _CursorProxy:
        return self._exec(self._cur.execute, sql, args)

    def executemany(self, sql: str, *args: Any) -> _CursorProxy:
        return self._exec(self._cur.executemany, sql, args)

    def executescript(self, script: str) -> _CursorProxy:
        return self._exec(self._cur.executescript, script, ())

    def _fetch(self, fn: Callable[..., Any], *args: Any) -> Any:
        clock = self._clock
        t0 = clock()
        try:
            return fn(*args)
        finally:
            ns = clock() - t0
            for buf, pos in self._marks:
                buf[pos] += ns

    def fetchone(self) -> Any:
        return self._fetch(self._cur.fetchone)

    def fetchall(self) -> list[Any]:
        return self._fetch(self._cur.fetchall)

    def fetchmany(self, *args: Any) -> list[Any]:
        return self._fetch(self._cur.fetchmany, *args)

    def __iter__(self) -> _CursorProxy:
        return self

    def __next__(self) -> Any:
        return self._fetch(self._cur.__next__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)

    def __enter__(self) -> _CursorProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cur.close()


class _WrappedSqliteTap(Tap):
    """A sqlite3.Connection subclass instance: methods wrapped on the instance (timing ``"call"``)."""

    timing = "call"
    _NAMES = ("cursor", "execute", "executemany", "executescript")

    def install(self) -> None:
        conn = self.target
        clock = self.clock
        orig = {n: getattr(conn, n) for n in self._NAMES}  # bound: class methods or earlier wrappers
        tap = self
        # The connection's own execute may call self.cursor() (sqlite3's C execute does, through the instance
        # attribute): that cursor must not be proxied again, or each statement would be recorded twice.
        inside = threading.local()
        orig_cursor = orig["cursor"]

        def cursor(*args: Any, **kwargs: Any) -> Any:
            cur = orig_cursor(*args, **kwargs)
            return cur if getattr(inside, "active", False) else _CursorProxy(cur, tap, clock, [])

        def wrap(name: str) -> Callable[..., Any]:
            fn = orig[name]

            def run(sql: str, *args: Any) -> Any:
                t0 = clock()
                inside.active = True
                try:
                    cur = fn(sql, *args)
                finally:
                    inside.active = False
                    marks = tap.record(sql, args[0] if args else None, t0, clock() - t0)
                return _CursorProxy(cur, tap, clock, marks)

            return run

        self._saved = {n: conn.__dict__[n] for n in self._NAMES if n in conn.__dict__}
        conn.cursor = cursor
        for name in self._NAMES[1:]:
            setattr(conn, name, wrap(name))

    def uninstall(self) -> None:
        for name in self._NAMES:
            self.target.__dict__.pop(name, None)
        self.target.__dict__.update(self._saved)


class _TraceSqliteTap(Tap):
    """A plain sqlite3.Connection: trace callback + progress handler (timing ``"vm"``)."""

    timing = "vm"

    def install(self) -> None:
        clock = self.clock
        self._open: Marks = []  # duration slots of the statement still running
        self._start = 0
        self._last = 0

        def on_trace(statement: str) -> None:
            now = clock()
            self._close()
            self._last = self._start = now
            self._open = self.record(statement, None, now, 0)

        def on_tick() -> int:
            self._last = clock()
            return 0

        self.target.set_trace_callback(on_trace)
        self.target.set_progress_handler(on_tick, PROGRESS_OPS)

    def _close(self) -> None:
        for buf, pos in self._open:
            buf[pos] = max(0, self._last - self._start)
        self._open = []

    def flush(self) -> None:
        """Close the statement still open (called when a recorder stops)."""
        self._close()

    def uninstall(self) -> None:
        self._close()
        self.target.set_trace_callback(None)
        self.target.set_progress_handler(None, PROGRESS_OPS)


class _ObserverTap(Tap):
    """A client with an ``observers`` list of ``observer(method, url, duration_ns)`` (timing ``"observer"``)."""

    kind = "http"
    timing = "observer"

    def install(self) -> None:
        tap, clock = self, self.clock

        def observer(method: str, url: str, duration_ns: int) -> None:
            # once per HTTP call; the statement ("GET url") is built when the report is read
            tap.note(url, method, clock() - duration_ns, duration_ns)

        self._observer = observer
        self.target.observers.append(observer)

    def uninstall(self) -> None:
        with contextlib.suppress(ValueError):  # already gone: the client was reset meanwhile
            self.target.observers.remove(self._observer)


class _HttpClientTap(Tap):
    """The ``http.client`` module: every request its ``HTTPConnection`` class sends (timing ``"client"``)."""

    kind = "http"
    timing = "client"

    def install(self) -> None:
        tap, clock, cls = self, self.clock, self.target.HTTPConnection
        https = getattr(self.target, "HTTPSConnection", ())
        put, get = cls.putrequest, cls.getresponse

        def putrequest(conn: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            full = url
            if "://" not in url:  # the usual case: a path, sent to the connection's host
                scheme = "https" if https and isinstance(conn, https) else "http"
                full = f"{scheme}://{conn.host}:{conn.port}{url}"
            t0 = clock()
            conn._labkit_sent = (t0, tap.record(full, method, t0, 0))
            return put(conn, method, url, *args, **kwargs)

        def getresponse(conn: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return get(conn, *args, **kwargs)
            finally:
                sent = conn.__dict__.pop("_labkit_sent", None)
                if sent is not None:
                    ns = clock() - sent[0]
                    for buf, pos in sent[1]:
                        buf[pos] += ns

        self._saved = (put, get)
        cls.putrequest, cls.getresponse = putrequest, getresponse

    def uninstall(self) -> None:
        cls = self.target.HTTPConnection
        cls.putrequest, cls.getresponse = self._saved


def plain_tap(target: Any) -> Tap | None:
    """A tap for a ``sqlite3.Connection`` (its subclass instances wrapped, a plain one traced), an HTTP client
    with an ``observers`` list, or the ``http.client`` module; None for anything else."""
    if target is http.client:
        return _HttpClientTap(target, "http.client")
    if isinstance(target, sqlite3.Connection):
        if hasattr(target, "__dict__"):
            return _WrappedSqliteTap(target, "sqlite")
        return _TraceSqliteTap(target, "sqlite")
    if isinstance(getattr(target, "observers", None), list):
        return _ObserverTap(target, f"http:{type(target).__name__}")
    return None
