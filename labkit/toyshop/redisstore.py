"""The catalog's products kept in a Redis server (``store=redis``): the remote store seed 001's export read one
``GET`` at a time, in place of the catalog process.

    load(redis_client, load_products(db_path))      # every product, in one transaction (what start() does)
    catalog = RedisCatalog(socket_path)             # a RemoteCatalog: the order service's client of the store
    catalog.get_each([3, 17])                       # one GET per id: the N+1 shape
    catalog.get_many(range(1, 201))                 # one MGET per batch_size ids

**The keys.** One string per product, ``catalog:product:{id}`` (its JSON, as the catalog process serves it), the
store's version ``catalog:version`` (bumped by every write) and the change feed ``catalog:changes`` (a sorted set:
each written id, scored by the version of its last write). The version key is written last by :func:`load`, in
the same transaction as the products, so a store that has it is a whole store: :class:`RedisCatalog` refuses a
Redis without it rather than answer "no such product" for everything.

**The same contract as the catalog process** (:class:`labkit.toyshop.catalog.CatalogClient`): reads by id and by
batch (unknown ids left out), the write path (:meth:`RedisCatalog.update`, checked like the catalog's
``PATCH``) and the change feed the local product cache follows (:meth:`RedisCatalog.changes`). A read is
``catalog;count=…`` in Server-Timing and notifies the client's ``observers`` with the catalog's own paths
(``/products/17``, ``/products?ids=…``), so the N+1 detector reports the same shapes over either store; tap
``.client`` (a redis-py client) to see the Redis commands themselves.

**When Redis is out of reach**, a read raises :class:`labkit.errors.ServiceError` (the service answers 502, as
for a catalog that does not answer) and ``.reach`` counts it; the next read after the server is back succeeds.
The store's server keeps an append-only file (:data:`SERVER_SETTINGS`), so a Redis that was killed and started
again finds every product and every write it had acknowledged.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson

from labkit import trace as _trace
from labkit.errors import BadInputError, ServiceError
from labkit.toyshop.catalog import Observer, Reach, _Base, _clock
from labkit.toyshop.productstore import check_fields

__all__ = ["RedisCatalog", "load", "KEY", "VERSION", "CHANGES", "SERVER_SETTINGS"]

KEY = "catalog:product:{}"  #: one product's JSON
VERSION = "catalog:version"  #: the store's version: written last by load(), bumped by every update
CHANGES = "catalog:changes"  #: sorted set: product id -> the version of its last write
#: the Redis settings of a store: an append-only file, written before each reply and synced to disk every second,
#: so a server killed and started again loses no acknowledged write (the cache's Redis keeps nothing: a cache may
#: start empty)
SERVER_SETTINGS = {"appendonly": "yes", "appendfsync": "everysec"}
_WRITE_TRIES = 20
T = TypeVar("T")

# compare-and-set: the product is replaced only if it is still what the caller read; the version is bumped and the
# change recorded in the same atomic step. Returns the new version, or false if another write came first.
_WRITE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
local version = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], version, ARGV[3])
return version
"""


def load(client: Any, products: Mapping[int, Mapping[str, Any]]) -> int:
    """Replace everything in the Redis of ``client`` (a redis-py client) with ``products`` (``{id: details}``,
    :func:`labkit.toyshop.productstore.load_products`), at version 0, in one transaction: a load that fails part
    way leaves nothing behind. Returns the number of products. Raises ServiceError when the server does not take
    the load (stopped, out of memory), with its answer."""
    import redis

    with client.pipeline(transaction=True) as pipe:
        pipe.flushdb()
        for pid, product in products.items():
            pipe.set(KEY.format(int(pid)), orjson.dumps(dict(product)))
        pipe.set(VERSION, 0)
        try:
            pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise ServiceError(f"loading {len(products):,} products into the Redis failed, and nothing of the load "
                               f"was kept: {type(exc).__name__}: {exc}. Is the server running, with memory for "
                               "them (its maxmemory)?") from exc
    return len(products)


class RedisCatalog(_Base):
    """The catalog's client, reading and writing a store in the Redis on ``socket_path`` (see the module).

    Args:
        socket_path: the server's Unix socket (:attr:`labkit.toyshop.backends.Redis.socket`), loaded by
            :func:`load`.
        observers: callables notified after every read with ``(method, path, duration_ns)``.
        batch_size: ids per ``MGET`` (at most :data:`labkit.toyshop.catalog.MAX_BATCH`, as the catalog's).
        concurrency: how many reads :meth:`get_many`/:meth:`get_each` run at once (1 = serial).
        timeout: seconds one command may take.

    Raises BadInputError when that Redis holds no loaded store, ServiceError when it does not answer.
    """

    def __init__(self, socket_path: Path | str, *, observers: list[Observer] | None = None, batch_size: int = 50,
                 concurrency: int = 1, timeout: float = 5.0) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        super().__init__(observers, batch_size, concurrency)
        self.socket_path = str(socket_path)
        self.base_url = f"redis+unix://{self.socket_path}"
        self.reach = Reach(self.base_url)
        self._errors = (redis.RedisError, OSError)
        # thread-safe (a connection per command from its pool); one retry, as the HTTP client reconnects once
        self.client = redis.Redis(unix_socket_path=self.socket_path, socket_timeout=timeout,
                                  socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 1))
        self._write = self.client.register_script(_WRITE)
        if self._redis("check the store", lambda: self.client.exists(VERSION)) == 0:
            self.client.close()
            raise BadInputError(f"the Redis at {self.socket_path} holds no loaded catalog (no {VERSION!r} key): "
                                "load it first with labkit.toyshop.redisstore.load(client, products), or start "
                                "the service with labkit.service.start(variants={'store': 'redis'}), which does")

    def _redis(self, what: str, fn: Callable[[], T]) -> T:
        try:
            answer = fn()
        except self._errors as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.reach.failed(error)
            raise ServiceError(f"the product store (Redis at {self.socket_path}) did not answer ({what}): {error}. "
                               "A Redis labkit started is started again if it dies: retry in a moment") from exc
        self.reach.answered()
        return answer

    def _read(self, path: str, fn: Callable[[], T]) -> T:
        t0 = _clock()
        answer = self._redis(f"GET {path}", fn)
        dur = _clock() - t0
        _trace.add("catalog", count=1)
        for obs in self.observers:
            obs("GET", path, dur)
        return answer

    def _one(self, product_id: int) -> dict[str, Any] | None:
        pid = int(product_id)
        body = self._read(f"/products/{pid}", lambda: self.client.get(KEY.format(pid)))
        return None if body is None else orjson.loads(body)

    def _chunk(self, ids: list[int]) -> list[dict[str, Any]]:
        bodies = self._read("/products?ids=" + ",".join(map(str, ids)),
                            lambda: self.client.mget([KEY.format(i) for i in ids]))
        return [orjson.loads(b) for b in bodies if b is not None]

    def update(self, product_id: int, fields: Mapping[str, Any]) -> dict[str, Any] | None:
        """The write path: change ``fields`` of one product, bumping the store's version; the product as it is
        now, or None for an unknown id. Raises BadInputError for a field that does not exist or has the wrong
        type (as the catalog's ``PATCH`` does)."""
        pid = int(product_id)
        key = KEY.format(pid)
        for attempt in range(_WRITE_TRIES):
            if attempt:  # another write won the race: back off a random while, longer each time, so that the
                # writers spread out instead of colliding again (a thread can otherwise lose every round on a busy CPU)
                time.sleep(random.uniform(0, 0.0005 * 2 ** min(attempt, 6)))
            old = self._redis(f"read product {pid}", lambda: self.client.get(key))
            if old is None:
                return None
            current = orjson.loads(old)
            try:
                new = {**current, **check_fields(current, fields)}
            except BadInputError as exc:
                raise BadInputError(f"the store refused the update of product {pid}: {exc}") from None
            done = self._redis(f"write product {pid}", functools.partial(
                self._write, keys=[key, VERSION, CHANGES], args=[old, orjson.dumps(new), pid]))
            if done is not None:
                return new
        raise ServiceError(f"product {pid} was written by others {_WRITE_TRIES} times while this update tried: "
                           "try again")

    def changes(self, since: int) -> tuple[int, list[int]]:
        """The change feed: ``(store version now, ids written after version since)``, read in one transaction."""
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise BadInputError(f"since must be a version number >= 0, got {since!r}")

        def read() -> list[Any]:
            with self.client.pipeline(transaction=True) as pipe:
                return pipe.get(VERSION).zrangebyscore(CHANGES, f"({since}", "+inf").execute()

        version, changed = self._redis("the change feed", read)
        if version is None:
            raise ServiceError(f"the Redis at {self.socket_path} lost its store (no {VERSION!r} key): was it "
                               "flushed? Start the service again to load it")
        return int(version), sorted(int(i) for i in changed)

    def close(self) -> None:
        """Release the thread pools and the connections."""
        super().close()
        self.client.close()

    def __repr__(self) -> str:
        return f"RedisCatalog({self.socket_path!r}, batch_size={self.batch_size}, concurrency={self.concurrency})"

