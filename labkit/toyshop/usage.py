"""Per-request accounting of the data stages: time and number of SQL queries and catalog calls.

The order service opens a :class:`Usage` per request with :func:`track`; the connection
(:mod:`labkit.toyshop.db`) and the catalog client (:mod:`labkit.toyshop.catalog`) add to whichever usage
is current in their context. Outside :func:`track` nothing is recorded and the cost is one context-variable
lookup. A context variable (not a thread-local) so that worker threads started with a copied context, and
asyncio tasks, add to the request that started them.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Usage", "track", "current"]


class Usage:
    """Mutable counters for one request: ``db_ns``/``db_count``, ``catalog_ns``/``catalog_count``, and
    ``wait_ns`` (time queued for a worker thread before the blocking work started).

    ``catalog_ns`` is wall time of the catalog lookups as the caller saw it (concurrent calls overlap and
    are not summed); ``catalog_count`` counts every HTTP call.
    """

    __slots__ = ("db_ns", "db_count", "catalog_ns", "catalog_count", "wait_ns", "_lock")

    def __init__(self) -> None:
        self.db_ns = self.db_count = self.catalog_ns = self.catalog_count = self.wait_ns = 0
        self._lock = threading.Lock()

    def add_db(self, dur_ns: int, queries: int = 0) -> None:
        """Add SQL time (and queries started) to this request."""
        with self._lock:
            self.db_ns += dur_ns
            self.db_count += queries

    def add_catalog(self, dur_ns: int = 0, calls: int = 0) -> None:
        """Add catalog wall time and/or HTTP calls to this request."""
        with self._lock:
            self.catalog_ns += dur_ns
            self.catalog_count += calls

    def __repr__(self) -> str:
        return (f"Usage(db={self.db_ns / 1e6:.3f} ms × {self.db_count}, "
                f"catalog={self.catalog_ns / 1e6:.3f} ms × {self.catalog_count})")


_current: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("toyshop_usage", default=None)


def current() -> Usage | None:
    """The usage being tracked in this context, or None."""
    return _current.get()


@contextmanager
def track() -> Iterator[Usage]:
    """Track SQL and catalog usage in the current context; yields the :class:`Usage`."""
    usage = Usage()
    token = _current.set(usage)
    try:
        yield usage
    finally:
        _current.reset(token)
