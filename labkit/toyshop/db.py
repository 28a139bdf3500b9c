"""Connections to the toyshop database: read-only, and a :class:`sqlite3.Connection` subclass.

    conn = connect()                         # the small dataset, built on first use
    conn = connect(path)                     # any toyshop file, immutable (no locks taken)
    conn = connect_pg(pg.conninfo())         # the same queries on PostgreSQL (the ``db=postgres`` switch)
    conn = connect(path, immutable=False)    # a file someone may write while we read: locks, a bounded wait
    is_busy(exc)                             # True for "database is locked" (another connection is writing)

A file labkit built (``labkit.toyshop.dataset``) is replaced by rename, never written in place, so it is
opened *immutable*: SQLite takes no locks and checks for no changes. A file someone else may write while it is
read (a database given to ``labkit.service.start(db_path=...)``) is opened with locking: a reader that meets a
writer's lock waits in SQLite's busy handler — which retries with back-off — for at most :data:`BUSY_TIMEOUT_S`,
then fails with ``sqlite3.OperationalError: database is locked`` (:func:`is_busy`), which the service answers
with 503 and ``Retry-After`` instead of hanging (Python's default wait is five seconds).

The subclass exists so that an instance can be instrumented (``conn.execute = recorder(conn.execute)``
works on it, not on a plain ``sqlite3.Connection``), and so that SQL time and query counts land in the
current request's ``db`` metric (:func:`labkit.trace.add`) while a trace is collecting — fetching included,
since SQLite does most of its work while rows are stepped through.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from labkit import trace as _trace
from labkit.errors import LabkitError, ResultsError

__all__ = ["ToyshopConnection", "PgConnection", "NotFoundError", "connect", "connect_pg", "is_busy",
           "is_unreachable", "BUSY_TIMEOUT_S"]

_clock = time.perf_counter_ns
#: how long a locking reader retries against a writer's lock before "database is locked" (SQLite's busy
#: handler sleeps and retries within it)
BUSY_TIMEOUT_S = 0.25


class NotFoundError(LabkitError, LookupError):
    """No row with that id (the service answers 404)."""


class _TimedCursor(sqlite3.Cursor):
    """A cursor that adds its execute and fetch time (and one query per execute) to the request's ``db``."""

    def execute(self, sql: str, parameters: Any = (), /) -> _TimedCursor:  # type: ignore[override]
        t0 = _clock()
        try:
            return super().execute(sql, parameters)  # type: ignore[return-value]
        finally:
            _trace.add("db", _clock() - t0, 1)

    def _timed(self, fn: Any, *args: Any) -> Any:
        t0 = _clock()
        try:
            return fn(*args)
        finally:
            _trace.add("db", _clock() - t0)

    def fetchone(self) -> Any:
        return self._timed(super().fetchone)

    def fetchall(self) -> list[Any]:
        return self._timed(super().fetchall)

    def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._timed(super().fetchmany, size if size is not None else self.arraysize)

    def __next__(self) -> Any:
        return self._timed(super().__next__)


class ToyshopConnection(sqlite3.Connection):
    """A read-only connection to a toyshop database (made by :func:`connect`)."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        """Run one statement; timed into the current request's ``db`` metric while a trace is collecting."""
        if _trace.current() is None:
            return super().execute(sql, parameters)
        return self.cursor(_TimedCursor).execute(sql, parameters)


def connect(path: Path | str | None = None, *, size: str = "small", immutable: bool = True,
            check_same_thread: bool = True) -> ToyshopConnection:
    """Open a toyshop database read-only.

    Args:
        path: the SQLite file; None means the dataset of ``size``, built first if needed.
        size: which dataset to use when ``path`` is None.
        immutable: tell SQLite the file never changes while open (no locking, no change checks: faster).
            Safe for the datasets labkit builds, which are replaced by rename, never modified in place; give
            False for a file that may be written while it is read (then a writer's lock is waited for up to
            :data:`BUSY_TIMEOUT_S`, and what it committed is seen).
        check_same_thread: keep SQLite's guard against using the connection from another thread.

    Returns:
        a :class:`ToyshopConnection` (a :class:`sqlite3.Connection` subclass).
    """
    if path is None:
        from labkit.toyshop.dataset import ensure

        path = ensure(size)
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"no toyshop database at {path}: build one with `labkit data build` or call "
                           "labkit.toyshop.dataset.ensure(size)")
    uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, factory=ToyshopConnection, check_same_thread=check_same_thread,
                           cached_statements=256, timeout=BUSY_TIMEOUT_S)
    return conn  # type: ignore[return-value]


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database is locked" / "database table is locked": another connection holds
    a lock this one waited :data:`BUSY_TIMEOUT_S` for (``SQLITE_BUSY`` / ``SQLITE_LOCKED`` and their extended
    codes; see https://www.sqlite.org/rescode.html)."""
    return isinstance(exc, sqlite3.OperationalError) \
        and exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class PgConnection:
    """A psycopg 3 connection that takes toyshop's queries as written for SQLite — ``?`` placeholders, rewritten
    to psycopg's ``%s`` once per statement text — and times them into the request's ``db`` metric as
    :class:`ToyshopConnection` does (psycopg fetches a result's rows while executing, so the execute is the whole
    query). Autocommit: every statement is its own transaction, as SQLite's reads are here."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn
        self._sql: dict[str, str] = {}

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        """Run one statement; timed into the current request's ``db`` metric while a trace is collecting."""
        query = self._sql.get(sql)
        if query is None:
            query = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
        if _trace.current() is None:
            return self.raw.execute(query, parameters)
        t0 = _clock()
        try:
            return self.raw.execute(query, parameters)
        finally:
            _trace.add("db", _clock() - t0, 1)

    @property
    def closed(self) -> bool:
        """The connection is closed or was lost (the server stopped): make a new one."""
        return bool(self.raw.closed or self.raw.broken)

    def close(self) -> None:
        self.raw.close()


def connect_pg(conninfo: dict[str, Any]) -> PgConnection:
    """A :class:`PgConnection` to the PostgreSQL that ``conninfo`` names (``Postgres.conninfo()``'s keywords)."""
    import psycopg

    return PgConnection(psycopg.connect(**conninfo, autocommit=True, connect_timeout=5))


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL out of reach: the server stopped, restarting, or refusing connections
    (psycopg's ``OperationalError``; the service answers 503 and the next request connects again)."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.OperationalError)
