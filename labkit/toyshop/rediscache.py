"""Product details cached in a Redis server (``cache=redis``): the remote cache seed 000 tried before it kept them
in the process (:mod:`labkit.toyshop.productcache`, ``cache=local``).

    cache = RedisProductCache(socket_path)      # a Redis (Valkey) on a Unix socket: labkit.toyshop.backends.Redis
    cache.view(catalog).get_many([3, 17, 17])   # one MGET; the misses from the catalog, then written back

**How it works.** A lookup of some products sends one ``MGET product:{id} …`` — one round trip whatever the count —
and decodes the JSON of each hit; the misses are fetched from the catalog in one batch and written back in one
pipelined round trip (``SET … EX``). An unknown product is cached too (as ``null``), as the local cache does. So
a request that hits every product still pays a round trip and a decode per product, where ``cache=local`` pays a
dict lookup: that difference is the lesson.

**The staleness bound.** Every entry expires ``ttl_s`` seconds after it was written (default
:data:`labkit.toyshop.productcache.MAX_STALE_S`, the local cache's bound): a change written to the catalog is seen
by every lookup that starts ``ttl_s`` after the entry was filled. No change feed is polled.

**When Redis is out of reach** (stopped, restarting, a timeout), the lookup goes to the catalog for every product
and counts the failure (``cache_error`` in Server-Timing, ``errors`` in ``GET /cache``): the request is slower,
never failed. A restarted Redis starts empty and fills again from the misses.

**Visible.** Each request's ``Server-Timing`` carries ``redis;dur=…;count=…`` (its round trips to Redis),
``cache_hit;count=…`` and ``cache_miss;count=…``; :meth:`RedisProductCache.stats` has the totals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from labkit import trace
from labkit.toyshop.catalog import Catalog, Observer
from labkit.toyshop.productcache import MAX_STALE_S

__all__ = ["RedisProductCache", "RedisTotals", "KEY"]

KEY = "product:{}"  #: the key of one product's details
_clock = time.perf_counter_ns


class RedisTotals(NamedTuple):
    """Counts since the cache was made: products found in Redis (hits), fetched from the catalog (misses), and
    lookups that could not reach Redis (errors: their products were all fetched from the catalog)."""

    hits: int
    misses: int
    errors: int

    @property
    def hit_ratio(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class RedisProductCache:
    """Product details in the Redis server listening on ``socket_path`` (see the module).

    Args:
        socket_path: the server's Unix socket (:attr:`labkit.toyshop.backends.Redis.socket`).
        ttl_s: how long an entry lives (the staleness bound).
        timeout_s: how long one command may take before the lookup gives up on Redis and asks the catalog.
    """

    def __init__(self, socket_path: Path | str, *, ttl_s: float = MAX_STALE_S, timeout_s: float = 1.0) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.socket_path, self.ttl_ms = str(socket_path), max(1, round(ttl_s * 1000))
        self._errors_caught = (redis.RedisError, OSError)
        # thread-safe: each command takes a connection of the pool (one per pool thread in use, at most); no retry
        # (redis-py's default retries three times with back-off): a cache out of reach is skipped at once
        self.client = redis.Redis(unix_socket_path=self.socket_path, socket_timeout=timeout_s,
                                  socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0))
        self._lock = threading.Lock()
        self._totals = [0, 0, 0]

    def _count(self, hits: int, misses: int, errors: int) -> None:
        with self._lock:
            self._totals[0] += hits
            self._totals[1] += misses
            self._totals[2] += errors
        trace.add("cache_hit", count=hits)
        trace.add("cache_miss", count=misses, desc="Redis out of reach: from the catalog" if errors else None)
        if errors:
            trace.add("cache_error", count=errors)

    def get_many(self, ids: Iterable[int], catalog: Catalog) -> dict[int, dict[str, Any]]:
        """Details of each distinct id, like ``catalog.get_many``: hits from Redis (one ``MGET``), misses from
        ``catalog`` in one batch, written back (one pipelined round trip). Unknown ids are left out."""
        wanted = list(dict.fromkeys(int(i) for i in ids))
        if not wanted:
            return {}
        keys = [KEY.format(pid) for pid in wanted]
        t0 = _clock()
        try:
            raw = self.client.mget(keys)
        except self._errors_caught:
            self._count(0, len(wanted), 1)
            return catalog.get_many(wanted)
        finally:
            trace.add("redis", _clock() - t0, 1)
        found: dict[int, dict[str, Any]] = {}
        missing: list[int] = []
        for pid, value in zip(wanted, raw, strict=True):
            if value is None:
                missing.append(pid)
                continue
            product = orjson.loads(value)
            if product is not None:
                found[pid] = product
        errors = 0
        if missing:
            fetched = catalog.get_many(missing)
            found.update(fetched)
            t0 = _clock()
            try:
                with self.client.pipeline(transaction=False) as pipe:
                    for pid in missing:
                        pipe.set(KEY.format(pid), orjson.dumps(fetched.get(pid)), px=self.ttl_ms)
                    pipe.execute()
            except self._errors_caught:
                errors = 1  # the answer stands (it came from the catalog); the next lookup misses again
            trace.add("redis", _clock() - t0, 1)
        self._count(len(wanted) - len(missing), len(missing), errors)
        return found

    def view(self, catalog: Catalog) -> RedisCachedCatalog:
        """A catalog client for one request: ``get``/``get_many``/``get_each`` answer through Redis, misses go to
        ``catalog``."""
        return RedisCachedCatalog(self, catalog)

    def stats(self) -> RedisTotals:
        """Totals since the cache was made."""
        with self._lock:
            return RedisTotals(*self._totals)

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        s = self.stats()
        return f"RedisProductCache({self.socket_path!r}, hits={s.hits}, misses={s.misses}, errors={s.errors})"


class RedisCachedCatalog:
    """A catalog client that answers through a :class:`RedisProductCache` (:meth:`RedisProductCache.view`)."""

    def __init__(self, cache: RedisProductCache, catalog: Catalog) -> None:
        self.cache, self.catalog = cache, catalog

    @property
    def observers(self) -> list[Observer]:
        """The underlying client's observers (misses are real calls and notify them)."""
        return self.catalog.observers

    def get_many(self, product_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Like the catalog's ``get_many``, through Redis."""
        return self.cache.get_many(product_ids, self.catalog)

    get_each = get_many

    def get(self, product_id: int) -> dict[str, Any] | None:
        """Like the catalog's ``get``, through Redis."""
        return self.cache.get_many((int(product_id),), self.catalog).get(int(product_id))
