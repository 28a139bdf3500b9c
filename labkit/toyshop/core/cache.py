"""A config lookup with and without an in-process cache, counting hits and misses exactly.

* ``mode="none"`` (baseline): every :meth:`ConfigCache.get` calls ``load(key)`` (in the service, one
  SQLite point query; in the seed, a remote store at ~2.9 ms). Every lookup counts as a miss.
* ``mode="local"``: lookups read a plain dict *snapshot* held in one attribute. A hit is one attribute
  load plus one dict lookup (well under a microsecond) and takes no lock. A miss calls ``load(key)`` and
  back-fills the current snapshot (a single dict store is atomic under the GIL, and two threads racing on
  the same key store the same value). :meth:`ConfigCache.refresh` builds a complete new dict off to the
  side and swaps it in with one assignment (copy-on-write): a reader sees the old table or the new one,
  never a half-built one, and never waits. Preload the hot keys (``preload=``) so the first requests hit.

Counters are ``itertools.count`` objects: ``next()`` on one is a single C call, so concurrent readers
never lose an increment (``self.hits += 1`` is a read-modify-write that a thread switch could split).
For an 80/20 access pattern use :func:`labkit.toyshop.dataset.skewed_config_keys`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Generic, NamedTuple, TypeVar

from labkit.errors import BadInputError
from labkit.toyshop.core.variants import check_variant

__all__ = ["ConfigCache", "CacheStats"]

V = TypeVar("V")


class CacheStats(NamedTuple):
    """Counts since construction (or :meth:`ConfigCache.reset_stats`): exact, also under threads."""

    hits: int
    misses: int
    refreshes: int
    size: int

    @property
    def hit_ratio(self) -> float:
        """hits / (hits + misses), or 0.0 before any lookup."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


def _value(counter: itertools.count) -> int:
    # itertools.count exposes its next value only through repr, e.g. "count(42)"
    return int(repr(counter)[6:-1])


class ConfigCache(Generic[V]):
    """Config lookups through ``load(key) -> value | None`` with ``mode`` ``"none"`` or ``"local"``.

    Args:
        load: fetches one key from the source of truth; ``None`` means "no such key" (cached too, so an
            absent key costs one load, not one per lookup).
        mode: ``"none"`` (every lookup loads) or ``"local"`` (in-process snapshot, copy-on-write refresh).
        preload: initial snapshot for ``"local"`` (e.g. the hot 20 % of keys); ignored by ``"none"``.

    Raises :class:`labkit.errors.BadInputError` for a bad ``mode``.
    """

    def __init__(
        self, load: Callable[[str], V | None], *, mode: str = "none", preload: Mapping[str, V | None] | None = None
    ) -> None:
        self.mode = check_variant("cache", mode)
        if mode == "redis":
            raise BadInputError("the config cache is mode 'none' or 'local'; cache=redis caches product details "
                                "only (labkit.toyshop.rediscache), and config lookups go to the database")
        self._load = load
        self._snapshot: dict[str, V | None] = dict(preload or {}) if mode == "local" else {}
        self.reset_stats()

    def get(self, key: str) -> V | None:
        """The value of ``key`` (``None`` if the source has no such key)."""
        if self.mode == "none":
            next(self._misses)
            return self._load(key)
        snapshot = self._snapshot  # one read: a concurrent refresh swaps the attribute, not this dict
        try:
            value = snapshot[key]
        except KeyError:
            next(self._misses)
            value = snapshot[key] = self._load(key)
            return value
        next(self._hits)
        return value

    def lookup(self, key: str) -> tuple[bool, V | None]:
        """``(True, value)`` if ``key`` is in the snapshot (counts a hit), else ``(False, None)`` without
        loading or counting: an async caller answers hits on the event loop and sends misses to a thread
        (where :meth:`get` loads and counts the miss). Always ``(False, None)`` in mode ``"none"``."""
        try:
            value = self._snapshot[key]
        except KeyError:
            return False, None
        next(self._hits)
        return True, value

    def refresh(self, source: Mapping[str, V | None] | Callable[[], Mapping[str, V | None]] | None = None) -> None:
        """Replace the snapshot with a new dict built from ``source`` (a mapping or a callable returning
        one; default: reload every key currently cached), swapped in by one assignment.

        Readers keep using whichever snapshot they already hold; none ever waits or sees a partial table.
        A no-op (apart from the counter) in mode ``"none"``.
        """
        next(self._refreshes)
        if self.mode == "none":
            return
        if source is None:
            fresh = {k: self._load(k) for k in list(self._snapshot)}
        else:
            fresh = dict(source() if callable(source) else source)
        self._snapshot = fresh  # the copy-on-write swap: a single atomic reference store

    def stats(self) -> CacheStats:
        """Hits, misses and refreshes so far, and the number of cached keys."""
        return CacheStats(_value(self._hits), _value(self._misses), _value(self._refreshes), len(self._snapshot))

    @property
    def hits(self) -> int:
        """Lookups answered from the snapshot."""
        return _value(self._hits)

    @property
    def misses(self) -> int:
        """Lookups that called ``load`` (all of them in mode ``"none"``)."""
        return _value(self._misses)

    def reset_stats(self) -> None:
        """Zero the counters (the snapshot is kept)."""
        self._hits = itertools.count()
        self._misses = itertools.count()
        self._refreshes = itertools.count()

    def __repr__(self) -> str:
        s = self.stats()
        return f"ConfigCache(mode={self.mode!r}, size={s.size}, hits={s.hits}, misses={s.misses})"
