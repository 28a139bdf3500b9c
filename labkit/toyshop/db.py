"""Connections to the toyshop database: read-only, and a :class:`sqlite3.Connection` subclass.

    conn = connect()                 # the small dataset, built on first use
    conn = connect(path)             # any toyshop file

The subclass exists so that an instance can be instrumented (``conn.execute = recorder(conn.execute)``
works on it, not on a plain ``sqlite3.Connection``), and so that SQL time and query counts land in the
current request's ``db`` metric (:func:`labkit.trace.add`) while a trace is collecting — fetching included,
since SQLite does most of its work while rows are stepped through.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from labkit import trace as _trace
from labkit.errors import LabkitError, ResultsError

__all__ = ["ToyshopConnection", "NotFoundError", "connect"]

_clock = time.perf_counter_ns


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
            Safe because datasets are replaced by rename, never modified in place.
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
                           cached_statements=256)
    return conn  # type: ignore[return-value]
