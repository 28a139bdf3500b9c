"""The toyshop order service: a Starlette app (served by uvicorn on 127.0.0.1, see :mod:`labkit.service`).

Endpoints (all GET; see ``/openapi.json``):

- ``/health``
- ``/customers/{customer_id}/export``: a customer's orders with product details (the N+1 candidate)
- ``/orders/{order_id}``: one order
- ``/quote?customer_id=ID`` or ``/quote?lines=N&seed=S``: pricing by the performance core
- ``/statement?customer_id=ID`` or ``/statement?lines=N&seed=S``: every order line of a customer (or N synthetic
  lines) as CSV; the ``buffers`` switch picks how the body is built
- ``/config/{key}``: one config value
- ``/cache``: the product cache's and the config cache's totals (hits, misses, size, snapshot age…)
- ``/stats``: requests in flight now (every request inside the app, whatever it is waiting for), the peak,
  how many were served, their summed time inside the app, and the count's integral over time (with the
  server's clock) — for Little's law in the tail-latency lab; this request itself is not counted
- ``/openapi.json``

Every response carries ``Server-Timing: parse;dur=…, db;dur=…;count=<queries>, catalog;dur=…;count=<calls>,
compute;dur=…, serialize;dur=…, wait;dur=…, total;dur=…`` (ms), then any other metric the request's code
added with :func:`labkit.trace.add` (one call where the work happens adds a stage or a count). ``wait`` is the
time a request queued for a thread of the pool that runs the blocking SQLite work (the pool-sizing lesson).
Every request switch (``docs/switches.md``, from :data:`labkit.toyshop.switches.TABLE`) may ride as a query
parameter; the ``X-Variant`` header echoes the switches a response was made with. Bad input → 400
``{"error": "bad_parameter", "parameter": …, "message": …}``; unknown id → 404; a catalog that does not answer → 502; with the ``queue`` switch set, requests beyond
``pool + queue`` in flight → 503 at once (load shedding). Never 500 on any input (fuzz-tested).

Started with the process switch ``alloc=census``, the service counts every allocator call a request makes
(:class:`labkit.alloc.Census`, memray) into the Server-Timing metrics ``alloc`` and ``alloc_bytes``. The count
is process-wide, so that service serves one request at a time (and one pool thread): its times are not
comparable with an uncounted service's.

How each switch changes a request: ``cache=local`` answers product details from
:class:`labkit.toyshop.productcache.ProductCache`, ``log=sync|queued`` writes through
:mod:`labkit.toyshop.reqlog`, ``hop=inline`` is :meth:`_Service.with_catalog`; the rest pick a kernel of
:mod:`labkit.toyshop.export` or :mod:`labkit.toyshop.core`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.to_thread
import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from labkit import trace as _trace
from labkit.alloc.census import census_unavailable
from labkit.errors import BadInputError, ServiceError
from labkit.toyshop import gclog
from labkit.toyshop.db import NotFoundError, ToyshopConnection, connect
from labkit.toyshop.export import EXPORTS, order_detail
from labkit.toyshop.openapi import openapi_schema
from labkit.toyshop.productcache import OFFLINE, ProductCache, WouldBlock
from labkit.toyshop.reqlog import RequestLog
from labkit.toyshop.statement import (
    MAX_STATEMENT_LINES,
    render_statement,
    statement_rows,
    synthetic_statement,
)
from labkit.toyshop.statement import MEDIA_TYPE as _CSV
from labkit.toyshop.switches import PRESETS, REQUEST_SWITCHES, check, resolve, with_preset
from labkit.toyshop.wiring import (
    BufferPool,
    ConfigCache,
    NotAcceptable,
    negotiate,
    quote_payload,
    serialize,
    trim_export,
)
from labkit.trace import collect, span

__all__ = ["create_app", "apply_gc", "MAX_QUOTE_LINES"]

log = logging.getLogger("labkit.toyshop")
_clock = time.perf_counter_ns
MAX_QUOTE_LINES = 200_000
_KEY = re.compile(r"[A-Za-z0-9._-]{1,128}")
_QUOTE_SQL = ("SELECT i.product_id, i.quantity, i.unit_price_cents, p.discount_pct, p.tax_class "
              "FROM orders o JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
              "WHERE o.customer_id = ? ORDER BY i.id")


class Overloaded(Exception):
    """More requests in flight than the ``pool`` + ``queue`` switches allow (→ 503)."""


class BadParam(Exception):
    """A request parameter is missing or invalid (→ 400 naming it)."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def _int(raw: str | None, name: str, lo: int = 1, hi: int = 2**31 - 1) -> int:
    if raw is None or raw == "":
        raise BadParam(name, f"{name} is required: an integer {lo}–{hi}")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12 or not lo <= int(raw) <= hi:
        raise BadParam(name, f"{name} must be an integer {lo}–{hi}, got {raw[:40]!r}")
    return int(raw)


def _customer_or_lines(params: Mapping[str, str], max_lines: int, customer_does: str,
                       lines_does: str) -> tuple[int | None, int | None, int]:
    """``(customer_id, lines, seed)`` from a request that takes exactly one of ``customer_id=`` or ``lines=``."""
    if ("customer_id" in params) == ("lines" in params):
        raise BadParam("customer_id", f"give exactly one of customer_id=<id> ({customer_does}) or lines=<n> "
                                      f"({lines_does})")
    seed = _int(params.get("seed", "0"), "seed", 0)
    cid = _int(params["customer_id"], "customer_id") if "customer_id" in params else None
    n = _int(params["lines"], "lines", 0, max_lines) if "lines" in params else None
    return cid, n, seed


def apply_gc(mode: str) -> None:
    """Process switch ``gc``: ``tuned`` freezes every object alive now (startup state is never scanned
    again) and raises the gen-0 threshold from 700 to 50,000 allocations; ``default`` leaves CPython's GC."""
    if mode == "tuned":
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)


class _InFlight:
    """Counts the HTTP requests inside the app right now (parsing, queued for a pool thread, waiting on the
    catalog, encoding: all of them), the peak, how many were served, the time they spent inside the app
    (``time_in_app_ns``, summed: with ``served``, the app's own mean time in system), and the running integral
    of the count over time (``in_flight_ns``: between two reads, its change over the change of ``now_ns`` is the
    exact mean number in flight — no sampling). Pure ASGI middleware on the event loop's thread, so plain
    integers suffice. ``/stats``, which reports the counts, is not counted itself."""

    def __init__(self, app: Any, counter: _Counts) -> None:
        self.app, self.counts = app, counter

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == "/stats":
            return await self.app(scope, receive, send)
        c = self.counts
        t0 = c.step(+1)
        c.peak_in_flight = max(c.peak_in_flight, c.in_flight)
        try:
            await self.app(scope, receive, send)
        finally:
            c.time_in_app_ns += c.step(-1) - t0
            c.served += 1


class _Counts:
    __slots__ = ("in_flight", "peak_in_flight", "served", "time_in_app_ns", "in_flight_ns", "_since")

    def __init__(self) -> None:
        self.in_flight = self.peak_in_flight = self.served = self.time_in_app_ns = self.in_flight_ns = 0
        self._since = _clock()

    def step(self, by: int) -> int:
        """Change the count by ``by`` now, first adding (count × time since the last change) to the integral."""
        now = _clock()
        self.in_flight_ns += self.in_flight * (now - self._since)
        self._since = now
        self.in_flight += by
        return now

    def as_dict(self) -> dict[str, int]:
        self.step(0)
        out = {name: getattr(self, name) for name in self.__slots__[:-1]}
        out["now_ns"] = self._since
        return out


class _Service:
    """The app's state: settings, per-thread SQLite connections, the catalog client, caches."""

    def __init__(self, db_path: Path, catalog: Any, settings: dict[str, Any], io_threads: int,
                 request_log: Path | str | None = None) -> None:
        self.db_path, self.catalog, self.settings = db_path, catalog, settings
        self.concurrent_catalog = catalog.with_concurrency(io_threads)
        self._local = threading.local()
        self._limiter: anyio.CapacityLimiter | None = None
        self._in_flight = 0  # touched only on the event loop thread
        self._max_in_flight = settings["pool"] + settings["queue"] if settings["queue"] else None
        self.config_cache = ConfigCache(self._load_config, mode="local")
        self.counts = _Counts()
        self.pool = BufferPool(scribble=settings["scribble"] == "on")  # the statement's buffers=pooled
        self.one_at_a_time: asyncio.Lock | None = None  # alloc=census serves one request at a time
        self.product_cache = ProductCache(catalog, preload=_hot_products(db_path))  # started by its first lookup
        self.request_log = RequestLog(request_log)

    def close(self) -> None:
        """Stop the product cache's refresher and write every queued access-log line (process shutdown)."""
        self.product_cache.stop()
        self.request_log.close()

    def conn(self) -> ToyshopConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self.db_path)
        return conn

    def _load_config(self, key: str) -> str | None:
        row = self.conn().execute("SELECT value FROM config WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def catalog_for(self, sw: Mapping[str, str]) -> Any:
        cat = self.concurrent_catalog if sw["io"] == "concurrent" else self.catalog
        return self.product_cache.view(cat) if sw["cache"] == "local" else cat

    def default_codec(self, request: Request) -> str:
        """The codec when the request names none: its preset's, else the process default."""
        preset = request.query_params.get("preset") or self.settings["preset"]
        return PRESETS.get(preset, {}).get("codec", self.settings["codec"])

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

    async def blocking(self, fn: Callable[[ToyshopConnection], Any], inline: bool = False) -> Any:
        """Run SQLite work on the pool (size: the ``pool`` switch), timing the queueing as ``wait`` — or, with
        ``inline`` (the ``hop=inline`` switch), right here on the event loop: no hand-off to a thread and back,
        at the price of holding the loop while the query runs (fine for short queries on a local file)."""
        if inline:
            return fn(self.conn())
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.settings["pool"])
        if self._max_in_flight is not None and self._in_flight >= self._max_in_flight:
            raise Overloaded(f"{self._in_flight} requests already in flight (pool {self.settings['pool']} + "
                             f"queue {self.settings['queue']}); retry later")
        t_call = _clock()

        def job() -> Any:
            _trace.add("wait", _clock() - t_call)
            return fn(self.conn())
        self._in_flight += 1
        try:
            return await anyio.to_thread.run_sync(job, limiter=self._limiter)
        finally:
            self._in_flight -= 1

    async def with_catalog(self, sw: Mapping[str, str], work: Callable[[ToyshopConnection, Any], Any]) -> Any:
        """``work(conn, catalog)`` with the catalog the switches pick, on the pool — or, with ``hop=inline`` and
        the product cache, on the event loop as long as every product is a cache hit: a miss needs the catalog
        (a blocking call), so the work starts again on a pool thread (``hop_retry`` in Server-Timing). Without
        the cache every product is a catalog call, so ``hop=inline`` changes nothing there."""
        cat = self.catalog_for(sw)
        if sw["hop"] != "inline" or sw["cache"] != "local":
            return await self.blocking(lambda conn: work(conn, cat))
        view = self.product_cache.view(OFFLINE)
        try:
            return await self.blocking(lambda conn: work(conn, view), inline=True)
        except WouldBlock:
            _trace.add("hop_retry", count=1, desc="a cache miss: the work ran again on the pool")
            view.catalog = cat.catalog  # the same view: the snapshot's age is reported once
            return await self.blocking(lambda conn: work(conn, view))


#: the stages every response reports, in this order, even when a request never reached them; db and catalog
#: carry their counts (queries, HTTP calls). Anything else a request adds follows them.
_STAGES = (("parse", None), ("db", 0), ("catalog", 0), ("compute", None), ("serialize", None), ("wait", None))


def _error(status: int, error: str, message: str, parameter: str | None = None) -> bytes:
    body: dict[str, Any] = {"error": error, "message": message}
    if parameter is not None:
        body["parameter"] = parameter
    return orjson.dumps(body)


Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Raw(NamedTuple):
    """A handler's answer that is already bytes (a CSV statement): sent as is, whatever the codec or Accept."""

    body: bytes
    media: str


async def _counted(svc: _Service, run: Callable[[], Awaitable[tuple[bytes, str]]]) -> tuple[bytes, str]:
    """``run()`` (the handler and its serialization) under an allocation census (process switch
    ``alloc=census``), one request at a time: the counts go to Server-Timing ``alloc`` / ``alloc_bytes``."""
    from labkit.alloc import Census
    from labkit.errors import ProbeUnavailable

    if svc.one_at_a_time is None:
        svc.one_at_a_time = asyncio.Lock()
    async with svc.one_at_a_time:
        try:
            census: Census | None = Census().start()
        except ProbeUnavailable as exc:  # another memray tracker in this process: serve, say why not counted
            census, reason = None, str(exc)
        try:
            return await run()
        finally:
            if census is not None:
                census.stop()
                _trace.add("alloc", count=census.allocations, desc="allocator calls (memray census; one "
                                                                   "request at a time: times not comparable)")
                _trace.add("alloc_bytes", count=census.bytes_allocated, desc="bytes those calls asked for")
            else:
                _trace.add("alloc", desc=f"not counted: {reason}"[:200])


async def _respond(svc: _Service, request: Request, handler: Handler, schema: str | None = None, *,
                   raw: bool = False) -> Response:
    """Negotiate the format (Accept, ``codec=``; protobuf only with a ``schema``), run ``handler`` inside the
    request's trace, serialize its payload, and map errors to 4xx/502. ``raw``: the handler answers
    :class:`Raw` bytes, sent as they are (no negotiation, no codec, no compression)."""
    t0 = _clock()
    ctx: dict[str, Any] = {"sw": {k: svc.settings[k] for k in REQUEST_SWITCHES}}
    headers: dict[str, str] = {"Vary": "Accept"}
    trace = _trace.Trace()  # declared before it is current: a collection starting now cannot put gc first
    for name, count in _STAGES:
        trace.add(name, 0, count)
    gclog.declare(trace)  # gc;dur;count: collections this request triggered (see toyshop.gclog)
    with collect(into=trace):
        try:
            codec, fmt = svc.settings["codec"], None
            if not raw:
                try:
                    codec, fmt = negotiate(request.headers.get("accept"), request.query_params.get("codec"), schema,
                                           svc.default_codec(request))
                except NotAcceptable:
                    raise
                except BadInputError as exc:
                    raise BadParam("codec", str(exc)) from None

            async def run() -> tuple[bytes, str]:
                payload = await handler(ctx)
                if isinstance(payload, Raw):
                    return payload.body, payload.media
                ctx["sw"]["codec"] = codec
                return serialize(payload, codec, fmt, schema, ctx["sw"]["compress"], headers)
            body, media = await (_counted(svc, run) if svc.settings["alloc"] == "census" else run())
            status = 200
        except NotAcceptable as exc:
            status, media = 406, "application/json"
            body = orjson.dumps({"error": "not_acceptable", "message": str(exc), "supported": exc.supported})
        except BadParam as exc:
            status, media, body = 400, "application/json", _error(400, "bad_parameter", str(exc), exc.parameter)
        except NotFoundError as exc:
            status, media, body = 404, "application/json", _error(404, "not_found", str(exc))
        except Overloaded as exc:
            status, media, body = 503, "application/json", _error(503, "overloaded", str(exc))
            headers["Retry-After"] = "1"
        except ServiceError as exc:
            status, media, body = 502, "application/json", _error(502, "catalog_unavailable", str(exc))
        except Exception as exc:  # a bug: answer 500 (the fuzz test looks for these) and log the traceback
            log.exception("toyshop request failed")
            status, media, body = 500, "application/json", _error(500, "internal", repr(exc))
        if ctx["sw"]["log"] != "off":
            with span("log"):
                query = request.scope["query_string"].decode("latin-1")
                svc.request_log.write(ctx["sw"]["log"], request.method, request.scope["path"] + (
                    "?" + query if query else ""), status, _clock() - t0)
        trace.add("total", _clock() - t0)
        headers["Server-Timing"] = trace.server_timing()
    headers["X-Variant"] = ",".join(f"{k}={v}" for k, v in ctx["sw"].items())
    return Response(body, status_code=status, media_type=media, headers=headers)


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


def create_app(db_path: Path | str, catalog: Any, *, variants: Mapping[str, Any] | None = None,
               io_threads: int = 4, request_log: Path | str | None = None) -> Starlette:
    """The order service as a Starlette app.

    Args:
        db_path: a toyshop SQLite file (see :func:`labkit.toyshop.dataset.ensure`).
        catalog: a :class:`labkit.toyshop.catalog.CatalogClient` (or ``FakeCatalog`` in tests).
        variants: the process's switches (``docs/switches.md``); ``gc`` is applied by the launcher
            (:func:`apply_gc`), not here.
        io_threads: how many catalog calls ``io=concurrent`` runs at once.
        request_log: the access-log file for ``log=sync|queued`` (default: a temporary file).

    Call ``app.state.service.close()`` when done: it writes the queued log lines and stops the cache.
    """
    settings = resolve(variants)
    if settings["alloc"] == "census" and census_unavailable():
        raise BadInputError(f"variant alloc=census cannot count allocations: {census_unavailable()}")
    svc = _Service(Path(db_path), catalog, settings, io_threads, request_log)

    async def health(request: Request) -> Response:
        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                ctx["sw"], _ = svc.switches(request)
            return {"status": "ok", "role": "toyshop", "variants": svc.settings, "dataset": str(svc.db_path),
                    "gc": {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()},
                    "threads": threading.active_count()}
        return await _respond(svc, request, h)

    async def by_id(request: Request, param: str, pick: Callable[[dict[str, Any]], Any], schema: str) -> Response:
        """One id from the path, the switches, a data-access call on the DB thread, trimmed fields."""
        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                ident = _int(request.path_params[param], param)
                sw = ctx["sw"] = svc.switches(request)[0]
            fn = pick(sw)
            data = await svc.with_catalog(sw, lambda conn, cat: fn(conn, cat, ident))
            with span("compute"):
                return trim_export(data, sw["fields"])
        return await _respond(svc, request, h, schema)

    async def export(request: Request) -> Response:
        return await by_id(request, "customer_id", lambda sw: EXPORTS[sw["n1"]], "export")

    async def order(request: Request) -> Response:
        return await by_id(request, "order_id", lambda sw: order_detail, "order")

    async def quote(request: Request) -> Response:
        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                sw, params = svc.switches(request, ("customer_id", "lines", "seed"))
                ctx["sw"] = sw
                cid, n, seed = _customer_or_lines(params, MAX_QUOTE_LINES, "price that customer's order history",
                                                  "price n synthetic lines")
                if sw["buffers"] == "pooled":
                    raise BadParam("buffers", "buffers=pooled is the statement's (/customers/{id}/statement); "
                                              "the quote kernels take grow or prealloc")
            rows = None
            if cid is not None:
                def load(conn: ToyshopConnection) -> list[tuple]:
                    if conn.execute("SELECT 1 FROM customers WHERE id = ?", (cid,)).fetchone() is None:
                        raise NotFoundError(f"no customer with id {cid}")
                    return conn.execute(_QUOTE_SQL, (cid,)).fetchall()
                rows = await svc.blocking(load, inline=sw["hop"] == "inline")
            with span("compute"):
                return quote_payload(rows, n, seed, sw["layout"], sw["buffers"])
        return await _respond(svc, request, h)

    async def statement(request: Request) -> Response:
        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                sw, params = svc.switches(request, ("customer_id", "lines", "seed"))
                ctx["sw"] = sw
                cid, n, seed = _customer_or_lines(params, MAX_STATEMENT_LINES, "that customer's order lines",
                                                  "a statement of n synthetic lines")
            if cid is not None:
                customer, rows = await svc.blocking(lambda conn: statement_rows(conn, cid),
                                                    inline=sw["hop"] == "inline")
            else:
                customer, rows = synthetic_statement(n or 0, seed)
            with span("compute"):
                return Raw(render_statement(customer, rows, sw["buffers"], svc.pool), _CSV)
        return await _respond(svc, request, h, raw=True)

    async def config(request: Request) -> Response:
        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                key = request.path_params["key"]
                sw = ctx["sw"] = svc.switches(request)[0]
                if not _KEY.fullmatch(key):
                    raise BadParam("key", f"key must be 1–128 of A-Z a-z 0-9 . _ -, got {key[:40]!r}")
            if sw["cache"] == "local":
                hit, value = svc.config_cache.lookup(key)  # a hit costs no query and no thread hop
                if not hit:
                    value = await svc.blocking(lambda conn: svc.config_cache.get(key), inline=sw["hop"] == "inline")
            else:
                value = await svc.blocking(lambda conn: svc._load_config(key), inline=sw["hop"] == "inline")
            if value is None:
                raise NotFoundError(f"no config key {key!r}")
            return {"key": key, "value": value}
        return await _respond(svc, request, h)

    async def stats(request: Request) -> Response:
        return Response(orjson.dumps(svc.counts.as_dict()), media_type="application/json")

    async def caches(request: Request) -> Response:
        products = svc.product_cache.stats()
        config = svc.config_cache.stats()
        body = {"products": {**products._asdict(), "hit_ratio": products.hit_ratio},
                "config": {**config._asdict(), "hit_ratio": config.hit_ratio}}
        return Response(orjson.dumps(body), media_type="application/json")

    schema = orjson.dumps(openapi_schema())

    async def openapi(request: Request) -> Response:
        return Response(schema, media_type="application/json")

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        kind = {404: "not_found", 405: "method_not_allowed"}.get(code, "http_error")
        msg = f"{request.method} {request.url.path}: {kind.replace('_', ' ')}; see /openapi.json for the endpoints"
        return Response(_error(code, kind, msg), status_code=code, media_type="application/json",
                        headers={"Server-Timing": "total;dur=0.000"})

    routes = [Route("/health", health), Route("/customers/{customer_id}/export", export),
              Route("/orders/{order_id}", order), Route("/quote", quote), Route("/config/{key}", config),
              Route("/statement", statement),
              Route("/stats", stats), Route("/cache", caches), Route("/openapi.json", openapi)]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error},
                    middleware=[Middleware(_InFlight, counter=svc.counts)])
    app.state.service = svc
    gclog.install(app)  # GET /gc: the process's GC pauses; the gc metric of Server-Timing
    return app
