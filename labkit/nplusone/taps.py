"""Taps: how the recorder sees queries on each kind of target.

One tap per target object, shared by every active recorder (nested ``watch`` blocks, or one per thread), and
removed when the last recorder leaves. Each query becomes one mutable *entry* list appended to every active
sink; the recorder freezes entries into ``Query`` values when its block ends.

How each target is timed (the report's ``timing`` column says which applied):

- ``"call"`` — a ``sqlite3.Connection`` *subclass* instance (such as ``labkit.toyshop.db.connect``'s): its
  ``execute``/``executemany``/``executescript``/``cursor`` are wrapped on the instance (the connection's own
  methods still run underneath), so a query's duration is the time spent in ``execute`` plus in every later
  ``fetch*``/iteration step of the cursor it returned. The cursor handed back is a thin proxy (it is not an
  ``isinstance`` of ``sqlite3.Cursor``); everything else is delegated to the real cursor.
- ``"vm"`` — a plain ``sqlite3.Connection`` (a C type: its methods cannot be wrapped). Statements come from
  ``set_trace_callback`` (SQLite calls it when a statement starts running, with parameters expanded), and the
  end comes from a progress handler ticking every ``PROGRESS_OPS`` virtual-machine instructions: duration =
  last tick − start. It excludes statement preparation, is short by up to ``PROGRESS_OPS`` instructions (a
  statement shorter than that reads 0), and includes Python time spent between fetches of the same statement.
  Both callbacks are SQLite's single slots: a trace callback or progress handler you set yourself is replaced
  during the block and cleared after it.
- ``"hook"`` — a SQLAlchemy ``Engine``: ``before/after_cursor_execute`` events; the DBAPI ``execute`` only,
  not the fetch of rows (the ORM fetches right after).
- ``"observer"`` — an HTTP client with an ``observers`` list (``labkit.toyshop.catalog.CatalogClient``): the
  client's own measured duration of each call.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Callable
from typing import Any

from labkit.errors import BadInputError
from labkit.nplusone.sites import call_site, raw_site

__all__ = ["PROGRESS_OPS", "Tap", "tap_for", "release", "call_site", "raw_site"]

PROGRESS_OPS = 4  # SQLite VM instructions per progress tick on plain connections (resolution vs overhead)

Entry = list  # [kind, target, statement, params, start_ns, duration_ns, site, timing]
Clock = Callable[[], int]

class Tap:
    """Base: fans every observed query out to the active sinks. Subclasses install/uninstall hooks."""

    timing = ""

    def __init__(self, target: Any, label: str) -> None:
        self.target = target
        self.label = label
        self.sinks: list[tuple[list[Entry], Clock, tuple[str, ...]]] = []

    def emit(self, kind: str, statement: str, params: Any, start_ns: int | None, duration_ns: int,
             timing: str | None = None) -> Entry | None:
        """Append one entry to every sink (start defaults to each sink's clock now − duration)."""
        entry: Entry | None = None
        for entries, clock, skip in self.sinks:
            s = clock() - duration_ns if start_ns is None else start_ns
            entry = [kind, self.label, statement, params, s, duration_ns, raw_site(skip), timing or self.timing]
            entries.append(entry)
        return entry

    def install(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def uninstall(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class _CursorProxy:
    """Wraps a cursor: times execute* and every later fetch/iteration step, adding both to one entry.

    A proxy rather than a cursor subclass so that the connection's own ``execute`` (and whatever cursor
    class it chooses, such as the toyshop's usage-accounting one) keeps working underneath.
    """

    __slots__ = ("_cur", "_tap", "_entries")

    def __init__(self, cur: Any, tap: _WrappedSqliteTap, entries: list[Entry]) -> None:
        self._cur = cur
        self._tap = tap
        self._entries = entries

    def _exec(self, fn: Any, sql: str, args: tuple[Any, ...]) -> _CursorProxy:
        clock = self._tap.clock
        t0 = clock()
        try:
            fn(sql, *args)
        finally:
            self._entries = self._tap.emit_all(sql, args[0] if args else None, t0, clock() - t0)
        return self

    def execute(self, sql: str, *args: Any) -> _CursorProxy:
        return self._exec(self._cur.execute, sql, args)

    def executemany(self, sql: str, *args: Any) -> _CursorProxy:
        return self._exec(self._cur.executemany, sql, args)

    def executescript(self, script: str) -> _CursorProxy:
        return self._exec(self._cur.executescript, script, ())

    def _fetch(self, fn: Any, *args: Any) -> Any:
        clock = self._tap.clock
        t0 = clock()
        try:
            return fn(*args)
        finally:
            dur = clock() - t0
            for entry in self._entries:
                entry[5] += dur

    def fetchone(self) -> Any:
        return self._fetch(self._cur.fetchone)

    def fetchmany(self, *args: Any) -> list[Any]:
        return self._fetch(self._cur.fetchmany, *args)

    def fetchall(self) -> list[Any]:
        return self._fetch(self._cur.fetchall)

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
        self.clock: Clock = self.sinks[0][1]
        orig = {n: getattr(conn, n) for n in self._NAMES}  # bound: class methods or earlier wrappers
        tap = self
        # The connection's own execute may call self.cursor() (the toyshop's does): that cursor must not be
        # proxied again, or each statement would be recorded twice.
        inside = threading.local()

        def cursor(*args: Any, **kwargs: Any) -> Any:
            cur = orig["cursor"](*args, **kwargs)
            return cur if getattr(inside, "active", False) else _CursorProxy(cur, tap, [])

        def wrap(name: str) -> Callable[..., Any]:
            fn = orig[name]

            def run(sql: str, *args: Any) -> Any:
                t0 = tap.clock()
                inside.active = True
                try:
                    cur = fn(sql, *args)
                finally:
                    inside.active = False
                    entries = tap.emit_all(sql, args[0] if args else None, t0, tap.clock() - t0)
                return _CursorProxy(cur, tap, entries)

            return run

        self._saved = {n: conn.__dict__[n] for n in self._NAMES if n in conn.__dict__}
        conn.cursor = cursor
        for name in self._NAMES[1:]:
            setattr(conn, name, wrap(name))

    def emit_all(self, sql: str, params: Any, t0: int, dur: int) -> list[Entry]:
        """Record one statement in every sink; return the entries so fetch time can be added later."""
        if len(self.sinks) == 1:  # the common case, kept short: this runs once per query
            entries, _clock, skip = self.sinks[0]
            entry = ["sql", self.label, sql, params, t0, dur, raw_site(skip), self.timing]
            entries.append(entry)
            return [entry]
        out = []
        for entries, _clock, skip in self.sinks:
            entry = ["sql", self.label, sql, params, t0, dur, raw_site(skip), self.timing]
            entries.append(entry)
            out.append(entry)
        return out

    def uninstall(self) -> None:
        for name in self._NAMES:
            self.target.__dict__.pop(name, None)
        self.target.__dict__.update(self._saved)


class _TraceSqliteTap(Tap):
    """A plain sqlite3.Connection: trace callback + progress handler (timing ``"vm"``)."""

    timing = "vm"

    def install(self) -> None:
        clock = self.sinks[0][1]
        self._open: list[Entry] = []
        self._last = 0

        def on_trace(statement: str) -> None:
            now = clock()
            self._close()
            self._last = now
            self._open = []
            for entries, _c, skip in self.sinks:
                entry = ["sql", self.label, statement, None, now, 0, raw_site(skip), self.timing]
                entries.append(entry)
                self._open.append(entry)

        def on_tick() -> int:
            self._last = clock()
            return 0

        self.target.set_trace_callback(on_trace)
        self.target.set_progress_handler(on_tick, PROGRESS_OPS)

    def _close(self) -> None:
        for entry in self._open:
            entry[5] = max(0, self._last - entry[4])
        self._open = []

    def flush(self) -> None:
        """Close the statement still open (called when a recorder stops)."""
        self._close()

    def uninstall(self) -> None:
        self._close()
        self.target.set_trace_callback(None)
        self.target.set_progress_handler(None, PROGRESS_OPS)


class _EngineTap(Tap):
    """A SQLAlchemy Engine: cursor-execute events (timing ``"hook"``)."""

    timing = "hook"

    def install(self) -> None:
        from sqlalchemy import event

        clock = self.sinks[0][1]

        def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            conn.info.setdefault("_labkit_t0", []).append(clock())

        def after(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            stack = conn.info.get("_labkit_t0")
            if stack:
                t0 = stack.pop()
                self.emit("sql", statement, parameters, t0, clock() - t0)

        def on_error(ctx: Any) -> None:
            conn = getattr(ctx, "connection", None)
            if conn is not None and conn.info.get("_labkit_t0"):
                conn.info["_labkit_t0"].pop()

        self._hooks = (("before_cursor_execute", before), ("after_cursor_execute", after), ("handle_error", on_error))
        for name, fn in self._hooks:
            event.listen(self.target, name, fn)

    def uninstall(self) -> None:
        from sqlalchemy import event

        for name, fn in self._hooks:
            event.remove(self.target, name, fn)


class _ObserverTap(Tap):
    """A client with an ``observers`` list of ``observer(method, url, duration_ns)`` (timing ``"observer"``)."""

    timing = "observer"

    def install(self) -> None:
        sinks, label = self.sinks, self.label

        def observer(method: str, url: str, duration_ns: int) -> None:
            # runs once per HTTP call: kept flat (no emit() indirection), the site found from here
            for entries, clock, skip in sinks:
                entries.append(["http", label, f"{method} {url}", None, clock() - duration_ns, duration_ns,
                                raw_site(skip), "observer"])

        self._observer = observer
        self.target.observers.append(observer)

    def uninstall(self) -> None:
        try:
            self.target.observers.remove(self._observer)
        except ValueError:
            pass


_TAPS: dict[int, Tap] = {}
_LOCK = threading.Lock()


def _make_tap(target: Any) -> Tap:
    if isinstance(target, sqlite3.Connection):
        if hasattr(target, "__dict__"):
            return _WrappedSqliteTap(target, "sqlite")
        return _TraceSqliteTap(target, "sqlite")
    if "sqlalchemy" in sys.modules:
        from sqlalchemy.engine import Engine

        engine = getattr(target, "sync_engine", target)  # AsyncEngine wraps a sync one
        if isinstance(engine, Engine):
            return _EngineTap(engine, f"sqlalchemy:{engine.url.get_backend_name()}")
    if isinstance(getattr(target, "observers", None), list):
        return _ObserverTap(target, f"http:{type(target).__name__}")
    raise BadInputError(
        f"watch() cannot record queries made through a {type(target).__module__}.{type(target).__name__}: "
        "it knows sqlite3.Connection, SQLAlchemy Engine, and HTTP clients with an `observers` list "
        "(observer(method, url, duration_ns)). Pass one of those, e.g. the connection your code queries."
    )


def tap_for(target: Any, sink: list[Entry], clock: Clock, skip: tuple[str, ...]) -> Tap:
    """Attach *sink* to *target*'s tap, creating and installing the tap on first use."""
    with _LOCK:
        key = id(getattr(target, "sync_engine", target))
        tap = _TAPS.get(key)
        if tap is None:
            tap = _make_tap(target)
            tap.sinks.append((sink, clock, skip))
            tap.install()
            _TAPS[key] = tap
        else:
            tap.sinks.append((sink, clock, skip))
        return tap


def release(tap: Tap, sink: list[Entry]) -> None:
    """Detach *sink*; uninstall the tap when no sink is left."""
    with _LOCK:
        if isinstance(tap, _TraceSqliteTap):
            tap.flush()
        tap.sinks[:] = [s for s in tap.sinks if s[0] is not sink]
        if not tap.sinks:
            tap.uninstall()
            _TAPS.pop(id(tap.target), None)
