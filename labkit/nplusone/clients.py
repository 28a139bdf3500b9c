"""Taps on client libraries with no instrumentation hook of their own: psycopg 3 (PostgreSQL) and redis-py.

- ``watch(psycopg)`` or ``watch(conn)`` (a ``psycopg.Connection``): every statement a ``psycopg.Cursor`` runs —
  ``conn.execute`` goes through one — with its parameters, timed from the call to its return (timing
  ``"call"``; a client-side cursor has fetched every row by then). ``executemany`` is one record: one batch,
  however many parameter sets it carries. Given a connection, only that connection's statements are recorded.
- ``watch(redis)`` or ``watch(client)`` (a ``redis.Redis``): every command a client sends (kind ``"redis"``,
  the statement ``"GET product:17"``), and each pipeline as one record, ``"PIPELINE GET product:1; GET …"``:
  one round trip. A multi-key command (``MGET``, ``DEL`` …) and a pipeline count as batches of their keys or
  commands (:func:`labkit.nplusone.shapes.batch_size`), so a loop of ``MGET`` over chunks is a batched load, not
  an N+1.

The methods are patched on the class while a tap is on (every thread's connections are seen) and put back when
the last watch on that target ends. The asyncio clients (``psycopg.AsyncCursor``, ``redis.asyncio``) are not
tapped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from labkit.nplusone.taps import Tap

__all__ = ["client_tap", "command_text"]

_SHOWN_KEYS = 8  # a multi-key command's text names this many keys, then how many more


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _listed(items: list[Any], sep: str, text: Callable[[Any], str]) -> str:
    """The first :data:`_SHOWN_KEYS` *items* as ``text`` writes them, joined, and how many more there were."""
    shown = sep.join(text(i) for i in items[:_SHOWN_KEYS])
    return shown + f" (+{len(items) - _SHOWN_KEYS} more)" if len(items) > _SHOWN_KEYS else shown


def command_text(args: tuple[Any, ...]) -> str:
    """A Redis command as the report shows it: the name and its keys or arguments (``"GET product:17"``); past
    :data:`_SHOWN_KEYS` arguments, how many more (``"MGET p:1 … p:8 (+492 more)"``, whose shape and batch size
    still count them all: see :func:`labkit.nplusone.shapes.batch_size`)."""
    name = _text(args[0]).upper() if args else ""
    return f"{name} {_listed(list(args[1:]), ' ', _text)}" if len(args) > 1 else name


class _PsycopgTap(Tap):
    """psycopg 3's ``Cursor``: ``execute`` and ``executemany`` wrapped on the class."""

    timing = "call"

    def install(self) -> None:
        import psycopg

        tap, clock, cls = self, self.clock, psycopg.Cursor
        only = None if self.target is psycopg else self.target
        execute, many = cls.execute, cls.executemany

        def text(cur: Any, query: Any) -> str:
            if isinstance(query, str):
                return query
            if isinstance(query, bytes):
                return query.decode("utf-8", "replace")
            return query.as_string(cur.connection)  # psycopg.sql.Composed

        def run(fn: Any) -> Any:
            def wrapped(cur: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
                if only is not None and cur.connection is not only:
                    return fn(cur, query, params, *args, **kwargs)
                t0 = clock()
                try:
                    return fn(cur, query, params, *args, **kwargs)
                finally:
                    shown = params if fn is execute else f"{len(params)} parameter sets" \
                        if hasattr(params, "__len__") else None
                    tap.note(text(cur, query), tuple(shown) if isinstance(shown, list) else shown, t0, clock() - t0)
            return wrapped

        self._saved = (execute, many)
        cls.execute, cls.executemany = run(execute), run(many)

    def uninstall(self) -> None:
        import psycopg

        psycopg.Cursor.execute, psycopg.Cursor.executemany = self._saved


class _RedisTap(Tap):
    """redis-py: ``Redis.execute_command`` (one command, one round trip) and ``Pipeline.execute`` (one pipeline,
    one round trip) wrapped on their classes."""

    kind = "redis"
    timing = "call"

    def install(self) -> None:
        import redis
        from redis.client import Pipeline

        tap, clock = self, self.clock
        only = None if self.target is redis else self.target
        command, flush = redis.Redis.execute_command, Pipeline.execute

        def execute_command(client: Any, *args: Any, **options: Any) -> Any:
            if only is not None and client is not only:
                return command(client, *args, **options)
            t0 = clock()
            try:
                return command(client, *args, **options)
            finally:
                tap.note(command_text(args), None, t0, clock() - t0)

        def execute(pipe: Any, *args: Any, **kwargs: Any) -> Any:
            stack = list(pipe.command_stack)
            if (only is not None and pipe.connection_pool is not only.connection_pool) or not stack:
                return flush(pipe, *args, **kwargs)
            t0 = clock()
            try:
                return flush(pipe, *args, **kwargs)
            finally:
                tap.note("PIPELINE " + _listed(stack, "; ", lambda c: command_text(c[0])), f"{len(stack)} commands",
                         t0, clock() - t0)

        self._saved = (command, flush)
        redis.Redis.execute_command, Pipeline.execute = execute_command, execute

    def uninstall(self) -> None:
        import redis
        from redis.client import Pipeline

        redis.Redis.execute_command, Pipeline.execute = self._saved


def client_tap(target: Any) -> Tap | None:
    """A tap for the psycopg module or a psycopg connection, the redis module or a redis-py client; None for
    anything else (neither library is imported here: only one already loaded can have made *target*)."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and (target is psycopg or isinstance(target, psycopg.Connection)):
        return _PsycopgTap(target, "psycopg")
    redis = sys.modules.get("redis")
    if redis is not None and (target is redis or isinstance(target, redis.Redis)):
        from redis.client import Pipeline

        if not isinstance(target, Pipeline):
            return _RedisTap(target, "redis")
    return None
