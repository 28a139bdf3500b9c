"""The toyshop order service: a Starlette app (served by uvicorn on 127.0.0.1, see :mod:`labkit.service`).

This module holds the service's endpoints, over its state (:class:`labkit.toyshop.state.Service`: connections,
pool, caches); every endpoint answers through :mod:`labkit.toyshop.pipeline` (format, trace, errors), ``/stats`` reads
:mod:`labkit.toyshop.inflight`, and ``/quote`` and ``/statement`` read and render with
:mod:`labkit.toyshop.quote` and :mod:`labkit.toyshop.statement`.

Endpoints (all GET; see ``/openapi.json``):

- ``/health``: liveness, the process's switches, and whether the catalog answers (``catalog``: up or down,
  outages, failed calls; read from the calls made, no probe)
- ``/customers/{customer_id}/export``: a customer's orders with product details (the N+1 candidate)
- ``/orders/{order_id}``: one order
- ``/quote?customer_id=ID`` or ``/quote?lines=N&seed=S``: pricing by the performance core
- ``/statement?customer_id=ID`` or ``/statement?lines=N&seed=S``: every order line of a customer (or N synthetic
  lines) as CSV; the ``buffers`` switch picks how the body is built
- ``/config/{key}``: one config value
- ``/cache``: the product cache's and the config cache's totals (hits, misses, size, snapshot age…)
- ``/recommendations?customer_id=ID``: popular products the customer has not bought (an ``async`` endpoint with
  a deliberate blocking call: the ``loop`` switch; :mod:`labkit.toyshop.recommend`)
- ``/tally``: the per-request statistics of the ``stats`` switch (:mod:`labkit.toyshop.tally`); ``/loop``: the
  event loop's lag (:mod:`labkit.toyshop.readouts`)
- ``/stats``: requests in flight now (every request inside the app, whatever it is waiting for), the peak,
  how many were served, their summed time inside the app, and the count's integral over time (with the
  server's clock) — for Little's law in the tail-latency lab; this request itself is not counted
- ``/openapi.json``

Every response carries ``Server-Timing: parse;dur=…, db;dur=…;count=<queries>, catalog;dur=…;count=<calls>,
compute;dur=…, serialize;dur=…, wait;dur=…, total;dur=…`` (ms), then any other metric the request's code
added with :func:`labkit.trace.add` (one call where the work happens adds a stage or a count). ``wait`` is the
time a request queued for a thread of the pool that runs the blocking SQLite work (the pool-sizing lesson).
``faults;count=<minor page faults>`` is what the request's work cost the kernel in fresh pages, counted per
thread on the loop and on its pool thread (:mod:`labkit.toyshop.faults`: exact at concurrency 1; Linux only).
Every request switch (``docs/switches.md``, from :data:`labkit.toyshop.switches.TABLE`) may ride as a query
parameter; the ``X-Variant`` header echoes the switches a response was made with. Bad input → 400
``{"error": "bad_parameter", "parameter": …, "message": …}``; unknown id → 404; a catalog that does not answer → 502; with ``queue=N`` (not ``unbounded``), requests beyond
``pool + N`` in flight → 503 at once (load shedding); a database given as ``db_path`` that another connection
keeps locked while writing → 503 ``database_busy`` after a bounded wait (:mod:`labkit.toyshop.db`). Never 500
on any input (fuzz-tested).

Started with the process switch ``alloc=census``, the service counts every allocator call a request makes
(:class:`labkit.alloc.Census`, memray) into the Server-Timing metrics ``alloc`` and ``alloc_bytes``. The count
is process-wide, so that service serves one request at a time (and one pool thread): its times are not
comparable with an uncounted service's.

The process switches ``gc`` and ``heap`` change the process: ``gc=threshold|tuned`` is applied at start
(:func:`labkit.toyshop.state.apply_gc`), the freeze of ``gc=frozen|tuned`` after
:data:`~labkit.toyshop.state.FREEZE_AFTER` answered requests, and ``heap=objects|flat`` keeps a snapshot
reloaded in the background (:mod:`labkit.toyshop.heap`); ``/health`` reports both.

Where each switch acts — which modules read it — is its row's ``acts_in`` in :mod:`labkit.toyshop.switches`
(shown in ``docs/switches.md``; a test holds it to the code).
"""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from labkit.alloc.census import census_unavailable
from labkit.errors import BadInputError
from labkit.toyshop import gclog
from labkit.toyshop.catalog import Catalog, RemoteCatalog
from labkit.toyshop.db import NotFoundError
from labkit.toyshop.export import EXPORTS, order_detail
from labkit.toyshop.inflight import InFlight
from labkit.toyshop.openapi import openapi_schema
from labkit.toyshop.pipeline import (
    BadParam,
    Raw,
    customer_or_lines,
    http_error,
    int_param,
)
from labkit.toyshop.quote import MAX_QUOTE_LINES, quote_payload, quote_rows
from labkit.toyshop.readouts import loop_endpoint, tally_endpoint
from labkit.toyshop.recommend import bought, recommend
from labkit.toyshop.state import Service
from labkit.toyshop.statement import (
    MAX_STATEMENT_LINES,
    render_statement,
    statement_rows,
    synthetic_statement,
)
from labkit.toyshop.statement import MEDIA_TYPE as _CSV
from labkit.toyshop.switches import resolve
from labkit.toyshop.wiring import trim_export
from labkit.trace import span

__all__ = ["create_app"]

_KEY = re.compile(r"[A-Za-z0-9._-]{1,128}")


def _reach(catalog: Catalog) -> dict[str, Any]:
    """``/health``'s ``catalog``: whether it answers (:class:`labkit.toyshop.catalog.Reach`); a catalog
    without one (the in-process fake) always does."""
    reach = getattr(catalog, "reach", None)
    return reach.as_dict() if reach is not None else {"state": "up", "outages": 0, "failed_calls": 0,
                                                       "since_s": 0.0, "last_error": None}


def create_app(db_path: Path | str, catalog: RemoteCatalog, *, variants: Mapping[str, Any] | None = None,
               io_threads: int = 4, request_log: Path | str | None = None, immutable: bool = True,
               postgres: Mapping[str, Any] | None = None, redis: str | None = None) -> Starlette:
    """The order service as a Starlette app.

    Args:
        db_path: a toyshop SQLite file (see :func:`labkit.toyshop.dataset.ensure`).
        catalog: the :class:`labkit.toyshop.catalog.RemoteCatalog` to ask for product details: a
            :class:`~labkit.toyshop.catalog.CatalogClient` (or ``FakeCatalog`` in tests).
        variants: the process's switches (``docs/switches.md``); ``gc``'s threshold is applied by the launcher
            (:func:`labkit.toyshop.state.apply_gc`), its freeze after warm-up here; ``heap`` starts its reloader here.
        io_threads: how many catalog calls ``io=concurrent`` runs at once.
        request_log: the access-log file for ``log=sync|queued`` (default: a temporary file).
        immutable: the file is never written while the service reads it (a dataset labkit built); False for a
            file that may be: then a writer's lock is waited for briefly, and beyond that the request answers 503
            ``database_busy`` (:func:`labkit.toyshop.db.connect`).
        postgres: with ``db=postgres``, psycopg's keywords for the PostgreSQL database holding the same data
            (:meth:`labkit.toyshop.backends.Postgres.conninfo`); the SQLite file still names the dataset.
        redis: the Unix socket of a Redis for ``cache=redis`` (:attr:`labkit.toyshop.backends.Redis.socket`).

    Call ``app.state.service.close()`` when done: it writes the queued log lines and stops the cache.
    """
    settings = resolve(variants)
    if settings["alloc"] == "census" and census_unavailable():
        raise BadInputError(f"variant alloc=census cannot count allocations: {census_unavailable()}")
    svc = Service(Path(db_path), catalog, settings, io_threads, request_log, immutable,
                  dict(postgres) if postgres is not None else None, redis)

    async def health(request: Request) -> Response:
        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                ctx["sw"], _ = svc.switches(request)
            return {"status": "ok", "role": "toyshop", "variants": svc.settings, "dataset": str(svc.db_path),
                    "gc": {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                           "freeze_after": svc.freeze_after, "served": svc.served},
                    "heap": svc.heap.stats(),
                    "threads": threading.active_count(), "catalog": _reach(svc.catalog)}
        return await svc.respond(request, h)

    async def by_id(request: Request, param: str, pick: Callable[[dict[str, Any]], Any], schema: str,
                    endpoint: str) -> Response:
        """One id from the path, the switches, a data-access call on the DB thread, trimmed fields."""
        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                ident = int_param(request.path_params[param], param)
                sw = ctx["sw"] = svc.switches(request)[0]
            fn = pick(sw)
            data = await svc.with_catalog(sw, lambda conn, cat: fn(conn, cat, ident), endpoint)
            with span("compute"):
                return trim_export(data, sw["fields"])
        return await svc.respond(request, h, schema)

    async def export(request: Request) -> Response:
        return await by_id(request, "customer_id", lambda sw: EXPORTS[sw["n1"]], "export", "export")

    async def order(request: Request) -> Response:
        return await by_id(request, "order_id", lambda sw: order_detail, "order", "orders")

    def lines_request(request: Request, ctx: dict[str, Any], most: int, for_customer: str, for_lines: str,
                      check: Callable[[Mapping[str, str]], None] | None = None) -> tuple[Any, ...]:
        """The head of an endpoint that takes a customer's lines or n synthetic ones: the switches (kept in ``ctx``)
        and ``(customer_id, lines, seed)``, parsed inside the ``parse`` span, with the endpoint's own ``check``."""
        with span("parse"):
            sw, params = svc.switches(request, ("customer_id", "lines", "seed"))
            ctx["sw"] = sw
            cid, n, seed = customer_or_lines(params, most, for_customer, for_lines)
            if check is not None:
                check(sw)
        return sw, cid, n, seed

    def quote_buffers(sw: Mapping[str, str]) -> None:
        if sw["buffers"] == "pooled":
            raise BadParam("buffers", "buffers=pooled is the statement's (/customers/{id}/statement); "
                                      "the quote kernels take grow or prealloc")

    async def quote(request: Request) -> Response:
        async def h(ctx: dict[str, Any]) -> Any:
            sw, cid, n, seed = lines_request(request, ctx, MAX_QUOTE_LINES, "price that customer's order history",
                                             "price n synthetic lines", quote_buffers)
            rows = None
            if cid is not None:
                rows = await svc.on_db(sw, lambda conn: quote_rows(conn, cid), "quote")
            with span("compute"):
                return quote_payload(rows, n, seed, sw["layout"], sw["buffers"])
        return await svc.respond(request, h)

    async def statement(request: Request) -> Response:
        async def h(ctx: dict[str, Any]) -> Any:
            sw, cid, n, seed = lines_request(request, ctx, MAX_STATEMENT_LINES, "that customer's order lines",
                                             "a statement of n synthetic lines")
            if cid is not None:
                customer, rows = await svc.on_db(sw, lambda conn: statement_rows(conn, cid), "statement")
            else:
                customer, rows = synthetic_statement(n or 0, seed)
            with span("compute"):
                return Raw(render_statement(customer, rows, sw["buffers"], svc.pool), _CSV)
        return await svc.respond(request, h, raw=True)

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
                    value = await svc.on_db(sw, lambda conn: svc.config_cache.get(key), "config")
            else:
                value = await svc.on_db(sw, lambda conn: svc._load_config(key), "config")
            if value is None:
                raise NotFoundError(f"no config key {key!r}")
            return {"key": key, "value": value}
        return await svc.respond(request, h)

    async def recommendations(request: Request) -> Response:
        svc.lag()

        async def h(ctx: dict[str, Any]) -> Any:
            with span("parse"):
                sw, params = svc.switches(request, ("customer_id",))
                ctx["sw"] = sw
                cid = int_param(params.get("customer_id"), "customer_id")
            owned = await svc.blocking(lambda conn: bought(conn, cid), sw=sw, endpoint="recommendations")
            with span("recommender"):
                if sw["loop"] == "thread":
                    picks = await anyio.to_thread.run_sync(recommend, owned, svc.hot)
                else:  # the mistake lab 09 measures: a blocking call on the event loop
                    picks = recommend(owned, svc.hot)
            return {"customer_id": cid, "products": picks}
        return await svc.respond(request, h)

    async def stats(request: Request) -> Response:
        return Response(orjson.dumps(svc.counts.as_dict()), media_type="application/json")

    async def caches(request: Request) -> Response:
        products = svc.product_cache.stats()
        config = svc.config_cache.stats()
        body = {"products": {**products._asdict(), "hit_ratio": products.hit_ratio},
                "config": {**config._asdict(), "hit_ratio": config.hit_ratio}}
        if svc.redis_cache is not None:
            remote = svc.redis_cache.stats()
            body["redis"] = {**remote._asdict(), "hit_ratio": remote.hit_ratio}
        return Response(orjson.dumps(body), media_type="application/json")

    schema = orjson.dumps(openapi_schema())

    async def openapi(request: Request) -> Response:
        return Response(schema, media_type="application/json")

    routes = [Route("/health", health), Route("/customers/{customer_id}/export", export),
              Route("/orders/{order_id}", order), Route("/quote", quote), Route("/config/{key}", config),
              Route("/statement", statement), Route("/recommendations", recommendations),
              Route("/tally", tally_endpoint(svc.tally)), Route("/loop", loop_endpoint(svc.lag)),
              Route("/stats", stats), Route("/cache", caches), Route("/openapi.json", openapi)]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error},
                    middleware=[Middleware(InFlight, counter=svc.counts)])
    app.state.service = svc
    gclog.install(app)  # GET /gc: the process's GC pauses; the gc metric of Server-Timing
    return app
