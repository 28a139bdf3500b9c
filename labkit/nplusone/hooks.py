"""Taps through a library's own instrumentation hooks (timing ``"hook"``): SQLAlchemy and Django.

- a SQLAlchemy ``Engine`` (or ``AsyncEngine``): its ``before/after_cursor_execute`` events;
- a Django database connection (``django.db.connection``, or ``django.db.connections[alias]``): an *execute
  wrapper*, Django's documented hook around every SQL statement its cursors send ("Database instrumentation"
  in Django's docs). It costs one Python call per statement, where the plain-``sqlite3`` tap under Django's
  connection would run a trace callback per statement and a progress handler every few SQLite instructions.
  ``tests/benchmarks/bench_nplusone.py`` (part 3) prints both against django-zeal on zeal's own workload.

Both time the DBAPI ``execute`` only, not the fetch of rows (the ORM fetches right after). Django keeps one
connection per thread: the wrapper is installed on the calling thread's, so queries sent from other threads
are not recorded.
"""

from __future__ import annotations

import sys
from typing import Any

from labkit.nplusone.taps import Tap

__all__ = ["hook_tap", "hooked"]


class _EngineTap(Tap):
    """A SQLAlchemy Engine: cursor-execute events."""

    timing = "hook"

    def install(self) -> None:
        from sqlalchemy import event

        clock = self.clock

        def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            conn.info.setdefault("_labkit_t0", []).append(clock())

        def after(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            stack = conn.info.get("_labkit_t0")
            if stack:
                t0 = stack.pop()
                self.note(statement, parameters, t0, clock() - t0)

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


class _DjangoTap(Tap):
    """A Django ``BaseDatabaseWrapper``: an execute wrapper in its ``execute_wrappers`` list.

    The wrapper is built for the tap's sinks of the moment (``resink`` swaps it): with one sink, the usual
    case, it appends the query to that sink's buffer itself, holding the buffer and the call-site locator
    (``labkit.nplusone.sites.locator``) as its own variables, so that a query costs one Python call besides
    the locator's look at the frames; otherwise it goes through ``Tap.note``.
    """

    timing = "hook"
    _wrapper: Any = None

    def _build(self) -> Any:
        clock, one = self.clock, self.one
        if one is None:
            note = self.note

            def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
                t0 = clock()
                try:
                    return execute(sql, params, many, context)
                finally:
                    note(sql, params, t0, clock() - t0)

            return wrapper
        extend, here = one[0].extend, one[1]
        meta, meta1 = self.meta, self.meta1

        def wrapper_one(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            t0 = clock()
            try:
                return execute(sql, params, many, context)
            finally:
                t1 = clock()
                if params.__class__ is tuple and len(params) == 1:
                    extend((meta1, sql, params[0], t0, t1 - t0, here()))
                else:
                    extend((meta, sql, params, t0, t1 - t0, here()))

        return wrapper_one

    def install(self) -> None:
        self._wrapper = self._build()
        self.target.execute_wrappers.append(self._wrapper)

    def resink(self) -> None:
        super().resink()
        old = self._wrapper
        if old is None or not self.sinks:
            return  # not installed yet, or about to be uninstalled
        self._wrapper = self._build()
        wrappers = self.target.execute_wrappers
        for i in range(len(wrappers) - 1, -1, -1):  # by identity: another wrapper may compare equal
            if wrappers[i] is old:
                wrappers[i] = self._wrapper
                break

    def uninstall(self) -> None:
        wrappers = self.target.execute_wrappers
        for i in range(len(wrappers) - 1, -1, -1):
            if wrappers[i] is self._wrapper:
                del wrappers[i]
                break
        self._wrapper = None


def hooked(target: Any) -> Any:
    """The object a tap attaches to: an AsyncEngine's sync engine, the calling thread's Django connection
    behind ``django.db.connection`` (a proxy), the psycopg connection inside toyshop's
    :class:`labkit.toyshop.db.PgConnection` (its ``raw``); *target* itself otherwise."""
    if "psycopg" in sys.modules and isinstance(getattr(target, "raw", None), sys.modules["psycopg"].Connection):
        return target.raw
    if "django" in sys.modules and type(target).__name__ == "ConnectionProxy":
        from django.db import connections

        return connections[target.alias]
    return getattr(target, "sync_engine", target)


def hook_tap(target: Any) -> Tap | None:
    """A tap for a SQLAlchemy Engine or a Django connection, or None for anything else (neither library is
    imported here: only one already loaded can have made *target*)."""
    if "sqlalchemy" in sys.modules:
        from sqlalchemy.engine import Engine

        if isinstance(target, Engine):
            return _EngineTap(target, f"sqlalchemy:{target.url.get_backend_name()}")
    if "django" in sys.modules:
        from django.db.backends.base.base import BaseDatabaseWrapper

        if isinstance(target, BaseDatabaseWrapper):
            return _DjangoTap(target, f"django:{target.vendor}")
    return None
