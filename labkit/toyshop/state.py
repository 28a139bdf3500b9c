"""The order service's state and how its work runs: settings, per-thread database connections, the pool that
runs the blocking work (its ``wait``, the ``queue`` limit, ``hop=inline``), the catalog the switches pick, the
caches, the heap snapshot and the collector's switches. The endpoints that use it are :mod:`labkit.toyshop.app`.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from labkit import trace as _trace
from labkit.errors import BadInputError
from labkit.looplag import LagMonitor
from labkit.toyshop import faults
from labkit.toyshop.catalog import Catalog, RemoteCatalog
from labkit.toyshop.db import ToyshopConnection, connect, connect_pg
from labkit.toyshop.heap import StockHeap
from labkit.toyshop.inflight import Counts
from labkit.toyshop.pipeline import BadParam, Overloaded, Pipeline
from labkit.toyshop.productcache import OFFLINE, ProductCache, WouldBlock
from labkit.toyshop.rediscache import RedisProductCache
from labkit.toyshop.reqlog import RequestLog
from labkit.toyshop.switches import REQUEST_SWITCHES, check, with_preset
from labkit.toyshop.tally import Tally
from labkit.toyshop.wiring import BufferPool, ConfigCache

__all__ = ["FREEZE_AFTER", "GEN0_THRESHOLD", "Service", "apply_gc"]

_clock = time.perf_counter_ns


#: ``gc=frozen`` / ``gc=tuned`` freeze once the service has answered this many requests (its warm-up).
FREEZE_AFTER = 100
#: ``gc=threshold`` / ``gc=tuned``: the young generation's threshold (CPython's default is printed by
#: ``gc.get_threshold()``: 700 up to 3.13, 2000 on 3.14).
GEN0_THRESHOLD = 50_000


def apply_gc(mode: str) -> None:
    """Process switch ``gc``, the part applied at start: ``threshold`` and ``tuned`` raise only the young
    generation's threshold to :data:`GEN0_THRESHOLD` (the older generations' stay as they are); ``default`` and
    ``frozen`` change nothing here. The freeze of ``frozen`` and ``tuned`` comes after warm-up, not at start:
    :meth:`Service.answered`."""
    if mode in ("threshold", "tuned"):
        gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])


class Service:
    """The app's state: settings, per-thread SQLite connections, the catalog client, caches."""

    def __init__(self, db_path: Path, catalog: RemoteCatalog, settings: dict[str, Any], io_threads: int,
                 request_log: Path | str | None = None, immutable: bool = True,
                 postgres: dict[str, Any] | None = None, redis: str | None = None) -> None:
        self.db_path, self.catalog, self.settings, self.immutable = db_path, catalog, settings, immutable
        if (settings["db"] == "postgres") != (postgres is not None):
            raise BadInputError("db=postgres needs the PostgreSQL to query (postgres=conninfo), and only it does: "
                                "start the service with labkit.service.start(variants={'db': 'postgres'})")
        self.postgres = postgres  # db=postgres: psycopg's keywords for the loaded database
        #: cache=redis: product details in the Redis on this socket (None: the service was started without one)
        self.redis_cache = RedisProductCache(redis) if redis is not None else None
        self.concurrent_catalog = catalog.with_concurrency(io_threads)
        self._local = threading.local()
        self._limiter: anyio.CapacityLimiter | None = None
        self._in_flight = 0  # touched only on the event loop thread
        queue = settings["queue"]
        self._max_in_flight = None if queue == "unbounded" else settings["pool"] + int(queue)
        self.config_cache = ConfigCache(self._load_config, mode="local")
        self.counts = Counts()  # GET /stats (in-flight accounting: labkit.toyshop.inflight)
        self.pool = BufferPool(scribble=settings["scribble"] == "on")  # the statement's buffers=pooled
        self.hot = _hot_products(db_path)  # the dataset's popular products (the cache's preload, /recommendations)
        self.product_cache = ProductCache(catalog, preload=self.hot)  # started by its first lookup
        self.tally = Tally()  # the stats switch's per-request statistics (GET /tally)
        self._lag: LagMonitor | None = None  # GET /loop's monitor, started on the loop when first asked for
        self.request_log = RequestLog(request_log)
        self.heap = StockHeap(settings["heap"]).start()  # heap=objects|flat: the reloaded long-lived snapshot
        self.served = 0  # requests answered, for the freeze after warm-up (gc=frozen|tuned)
        self.freeze_after = FREEZE_AFTER if settings["gc"] in ("frozen", "tuned") else None
        self._respond = Pipeline(settings, self.request_log).respond

    async def respond(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """How every endpoint answers (:class:`labkit.toyshop.pipeline.Pipeline`), counted for the warm-up."""
        response = await self._respond(request, *args, **kwargs)
        self.answered()
        return response

    def answered(self) -> None:
        """One more request answered; with ``gc=frozen|tuned``, the :data:`FREEZE_AFTER`-th is the end of the
        warm-up: collect, then ``gc.freeze()`` everything alive (modules, framework, caches, the heap's snapshot
        of the moment) into the permanent generation that collections no longer traverse."""
        self.served += 1
        if self.served == self.freeze_after:
            gc.collect()
            gc.freeze()

    def close(self) -> None:
        """Stop the product cache's refresher and write every queued access-log line (process shutdown)."""
        self.product_cache.stop()
        if self.redis_cache is not None:
            self.redis_cache.close()
        self.heap.stop()
        self.request_log.close()
        self.tally.close()
        if self._lag is not None:
            self._lag.stop()

    def lag(self) -> LagMonitor:
        """The loop's lag monitor, started on the running loop the first time (``/loop``, ``/recommendations``):
        a service that never serves them never runs the timer."""
        if self._lag is None:
            self._lag = LagMonitor().start()
        return self._lag

    def conn(self) -> ToyshopConnection:
        """This thread's connection: to the SQLite file, or with ``db=postgres`` to PostgreSQL — one per pool
        thread, so the ``pool`` switch sizes PostgreSQL's connections too; one lost with its server is replaced
        by the next request."""
        conn = getattr(self._local, "conn", None)
        if conn is None or (self.postgres is not None and conn.closed):
            conn = self._local.conn = connect(self.db_path, immutable=self.immutable) if self.postgres is None \
                else connect_pg(self.postgres)
        return conn

    def _load_config(self, key: str) -> str | None:
        row = self.conn().execute("SELECT value FROM config WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def catalog_for(self, sw: Mapping[str, str]) -> Catalog:
        cat = self.concurrent_catalog if sw["io"] == "concurrent" else self.catalog
        if sw["cache"] == "redis":
            if self.settings["store"] == "redis":
                raise BadParam("cache", "cache=redis copies product details into a Redis, and with store=redis "
                                        "they already live in one: ask for cache=local (in the process) or "
                                        "cache=none (the store every time)")
            if self.redis_cache is None:
                raise BadParam("cache", "cache=redis needs a Redis, and this service was started without one: "
                                        "start it with labkit.service.start(variants={'cache': 'redis'}) (any "
                                        "request may then ask for cache=local or none)")
            return self.redis_cache.view(cat)
        return self.product_cache.view(cat) if sw["cache"] == "local" else cat

    def switches(self, request: Request, extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, str]]:
        """The request's switches (process defaults overridden by query parameters) and its other params."""
        given: dict[str, str] = {}
        params: dict[str, str] = {}
        for key in request.query_params:
            values = request.query_params.getlist(key)
            if len(values) > 1:
                raise BadParam(key, f"parameter {key!r} given {len(values)} times; give it once")
            if key in REQUEST_SWITCHES:
                try:
                    given[key] = check(key, values[0])
                except BadInputError as exc:
                    raise BadParam(key, str(exc)) from None
            elif key in extra:
                params[key] = values[0]
            else:
                known = ", ".join((*extra, *REQUEST_SWITCHES))
                raise BadParam(key, f"unknown parameter {key[:40]!r}; this endpoint takes {known}")
        return with_preset({k: self.settings[k] for k in REQUEST_SWITCHES}, given), params

    async def on_db(self, sw: Mapping[str, str], fn: Callable[[ToyshopConnection], Any], endpoint: str) -> Any:
        """An endpoint's SQLite work, the request's ``hop`` switch deciding where it runs (:meth:`blocking`)."""
        return await self.blocking(fn, inline=sw["hop"] == "inline", sw=sw, endpoint=endpoint)

    async def blocking(self, fn: Callable[[ToyshopConnection], Any], inline: bool = False, *,
                       sw: Mapping[str, str] | None = None, endpoint: str = "") -> Any:
        """Run SQLite work on the pool (size: the ``pool`` switch), timing the queueing as ``wait`` — or, with
        ``inline`` (the ``hop=inline`` switch), right here on the event loop: no hand-off to a thread and back,
        at the price of holding the loop while the query runs (fine for short queries on a local file). With
        ``sw``, the work's result is tallied for ``endpoint`` the ``stats`` switch's way, on the same thread."""
        t_call = _clock()

        def tallied(result: Any) -> Any:
            if sw is not None and sw["stats"] != "off":
                self.tally.record(sw["stats"], endpoint, result, _clock() - t_call)
            return result
        if inline:
            return tallied(fn(self.conn()))
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.settings["pool"])
        if self._max_in_flight is not None and self._in_flight >= self._max_in_flight:
            raise Overloaded(f"{self._in_flight} requests already in flight (pool {self.settings['pool']} + "
                             f"queue {self.settings['queue']}); retry later")

        def job() -> Any:
            _trace.add("wait", _clock() - t_call)
            with faults.counted():  # this pool thread's faults, for this request's work
                return tallied(fn(self.conn()))
        self._in_flight += 1
        try:
            return await anyio.to_thread.run_sync(job, limiter=self._limiter)
        finally:
            self._in_flight -= 1

    async def with_catalog(self, sw: Mapping[str, str], work: Callable[[ToyshopConnection, Catalog], Any],
                           endpoint: str = "") -> Any:
        """``work(conn, catalog)`` with the catalog the switches pick, on the pool — or, with ``hop=inline`` and
        the product cache, on the event loop as long as every product is a cache hit: a miss needs the catalog
        (a blocking call), so the work starts again on a pool thread (``hop_retry`` in Server-Timing). Without
        the cache every product is a catalog call, so ``hop=inline`` changes nothing there."""
        cat = self.catalog_for(sw)
        if sw["hop"] != "inline" or sw["cache"] != "local":
            return await self.blocking(lambda conn: work(conn, cat), sw=sw, endpoint=endpoint)
        view = self.product_cache.view(OFFLINE)
        try:
            return await self.blocking(lambda conn: work(conn, view), inline=True, sw=sw, endpoint=endpoint)
        except WouldBlock:
            _trace.add("hop_retry", count=1, desc="a cache miss: the work ran again on the pool")
            view.catalog = cat.catalog  # the same view: the snapshot's age is reported once
            return await self.blocking(lambda conn: work(conn, view), sw=sw, endpoint=endpoint)


def _hot_products(db_path: Path) -> list[int]:
    """The dataset's hot products (the product cache preloads them); none for a file without a size."""
    from labkit.toyshop.dataset import SIZES, hot_products

    conn = connect(db_path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'size'").fetchone()
    except Exception:  # a database without toyshop's meta table: nothing to preload
        row = None
    finally:
        conn.close()
    return hot_products(row[0]) if row and row[0] in SIZES else []
