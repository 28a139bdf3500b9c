"""The catalog process: a Starlette app serving product details over loopback HTTP (its clients:
:mod:`labkit.toyshop.catalog`).

The order service asks the catalog for product details over loopback HTTP, so that an N+1 loop pays a
real round trip per item. Endpoints (JSON):

- ``GET /health``
- ``GET /products/{id}``: one product (32 fields); 404 if unknown.
- ``GET /products?ids=1,2,3``: a batch of at most ``max_batch`` ids (400 beyond):
  ``{"products": [...], "missing": [...]}`` in the order asked.
- ``PATCH /products/{id}`` with a JSON object of fields: the write path (changes those fields, bumps the
  catalog's version; 400 naming a bad field, 404 if unknown); answers the product, version in ``X-Catalog-Version``.
- ``GET /products/changes?since=V``: the change feed, ``{"version": now, "changed": [ids written after V]}``.
  Writes are kept in memory (:class:`labkit.toyshop.productstore.ProductStore`).

``delay_ms`` adds a sleep to every call: an **emulation of a farther network** (another host, another
zone), labelled as such in the ``X-Emulated-Delay-Ms`` response header. A delayed call costs the delay plus a
thread hand-off (see :func:`_delay`); ``tests/benchmarks/bench_nplusone.py`` (part 2) prints what one call
costs at loopback and at each emulated distance.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from labkit.errors import BadInputError
from labkit.toyshop.catalog import MAX_BATCH
from labkit.toyshop.productstore import ProductStore, load_products

__all__ = ["create_app"]


def _json_error(status: int, parameter: str | None, message: str) -> Any:
    from starlette.responses import Response

    body = {"error": "bad_parameter" if status == 400 else "not_found", "message": message}
    if parameter:
        body["parameter"] = parameter
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


_delay_pool: ThreadPoolExecutor | None = None


async def _delay(seconds: float) -> None:
    """Sleep ``seconds`` precisely without blocking the event loop.

    ``asyncio.sleep`` is only as fine as the loop's timer: libuv (uvloop) counts whole milliseconds, so a
    0.3 ms sleep rounds down to none and 1 ms comes out longer. ``time.sleep`` on a worker thread
    (clock_nanosleep) is precise; the hand-off to the thread and back (longer on a busy machine) becomes part
    of the emulated wire time. Up to 256 delays overlap, like requests in flight on a real link.
    """
    global _delay_pool
    if _delay_pool is None:
        _delay_pool = ThreadPoolExecutor(256, "emulated-delay")
    await asyncio.get_running_loop().run_in_executor(_delay_pool, time.sleep, seconds)


def create_app(db_path: Path | str, *, delay_ms: float = 0.0, max_batch: int = MAX_BATCH) -> Any:
    """The catalog as a Starlette app over the products of ``db_path``.

    Args:
        db_path: a toyshop SQLite file; products are loaded (and pre-encoded) once, at creation.
        delay_ms: sleep added to every product call — an emulation of a farther network.
        max_batch: the largest batch ``GET /products?ids=`` accepts.
    """
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    if delay_ms < 0 or max_batch < 1:
        raise BadInputError(f"catalog needs delay_ms >= 0 and max_batch >= 1 (got {delay_ms}, {max_batch})")
    store = ProductStore(load_products(db_path))
    encoded = store.encoded  # writes replace entries of this very dict
    delay_s = delay_ms / 1000.0
    headers = {"X-Emulated-Delay-Ms": f"{delay_ms:g}"} if delay_ms else {}

    async def health(request: Any) -> Any:
        return Response(b'{"status":"ok","role":"catalog"}', media_type="application/json")

    async def one(request: Any) -> Any:
        raw = request.path_params["product_id"]
        if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            return _json_error(400, "product_id", f"product_id must be a positive integer, got {raw!r}")
        if delay_s:
            await _delay(delay_s)
        body = encoded.get(int(raw))
        if body is None:
            return _json_error(404, "product_id", f"no product with id {int(raw)}")
        return Response(body, media_type="application/json", headers=headers)

    async def batch(request: Any) -> Any:
        extra = set(request.query_params) - {"ids"}
        if extra:
            return _json_error(400, sorted(extra)[0], f"unknown parameter {sorted(extra)[0]!r}; use ids=1,2,3")
        raw = request.query_params.get("ids")
        if not raw:
            return _json_error(400, "ids", "ids is required: a comma-separated list of product ids, e.g. ids=1,2,3")
        parts = raw.split(",")
        if len(parts) > max_batch:
            return _json_error(400, "ids", f"at most {max_batch} ids per batch (got {len(parts)}); "
                                           "split the request into chunks")
        if not all(p.isascii() and p.isdigit() and len(p) <= 18 for p in parts):
            return _json_error(400, "ids", f"ids must be comma-separated positive integers, got {raw[:80]!r}")
        if delay_s:
            await _delay(delay_s)
        found, missing = store.batch([int(p) for p in parts])
        content = b'{"products":[' + b",".join(found) + b'],"missing":' + orjson.dumps(missing) + b"}"
        return Response(content, media_type="application/json", headers=headers)

    async def one_or_write(request: Any) -> Any:
        if request.method != "PATCH":
            return await one(request)
        raw = request.path_params["product_id"]
        if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            return _json_error(400, "product_id", f"product_id must be a positive integer, got {raw[:40]!r}")
        body = await request.body()
        if len(body) > 65_536:
            return _json_error(400, "body", "an update is at most 64 KiB of JSON")
        try:
            fields = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return _json_error(400, "body", f"the body is not JSON ({exc}); send an object of fields to change")
        if delay_s:
            await _delay(delay_s)
        try:
            done = store.update(int(raw), fields)
        except BadInputError as exc:
            return _json_error(400, "body", str(exc))
        if done is None:
            return _json_error(404, "product_id", f"no product with id {int(raw)}")
        version, product = done
        return Response(orjson.dumps(product), media_type="application/json",
                        headers={**headers, "X-Catalog-Version": str(version)})

    async def changes(request: Any) -> Any:
        raw = request.query_params.get("since", "")
        if set(request.query_params) - {"since"} or not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            return _json_error(400, "since", f"use /products/changes?since=<version>, a number >= 0 (got {raw[:40]!r})")
        if delay_s:
            await _delay(delay_s)
        version, changed = store.changes(int(raw))
        return Response(orjson.dumps({"version": version, "changed": changed}), media_type="application/json",
                        headers=headers)

    return Starlette(routes=[Route("/health", health), Route("/products/changes", changes),
                             Route("/products/{product_id}", one_or_write, methods=["GET", "PATCH"]),
                             Route("/products", batch)])
