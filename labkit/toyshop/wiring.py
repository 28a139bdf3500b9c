"""The service's calls into the performance core: encoding, field trimming, quote pricing, config cache.

One thin seam, so the HTTP layer (:mod:`labkit.toyshop.app`) stays the same whichever kernel a switch picks,
and so every switch value is reachable from a request. Everything comes from :mod:`labkit.toyshop.core`:
codecs and field sets, pricing kernels, and the config cache (:class:`labkit.toyshop.core.ConfigCache` in
``local`` mode; ``cache=none`` skips it and queries SQLite every time).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from labkit import trace
from labkit.toyshop.core import (
    MEDIA_TYPES,
    TRIMMED_FIELDS,
    BufferPool,
    ConfigCache,
    OrderLines,
    compress,
    encode,
    make_order_lines,
    quote,
    select_fields,
)
from labkit.toyshop.negotiate import SCHEMA_FORMATS, SERVED_FORMATS, NotAcceptable, choose, media_type

__all__ = ["encode", "MEDIA_TYPES", "trim_export", "TRIMMED_FIELDS", "quote_payload", "ConfigCache", "negotiate",
           "serialize", "NotAcceptable", "BufferPool"]
_PLAIN = tuple(f for f in SERVED_FORMATS if f not in SCHEMA_FORMATS)


def negotiate(accept: str | None, codec: str | None, schema: str | None, default_codec: str) -> tuple[str, str]:
    """``(codec, format)`` for a response: ``Accept`` picks the format among those the endpoint offers
    (schema-bound ones only with a ``schema``), ``codec`` (the query parameter, or None) the implementation.
    Raises :class:`NotAcceptable` (406) or BadInputError (a codec this endpoint cannot use: 400)."""
    return choose(accept, SERVED_FORMATS if schema else _PLAIN, codec, default_codec)


def serialize(payload: Any, codec: str, fmt: str, schema: str | None, coding: str,
              headers: dict[str, str]) -> tuple[bytes, str]:
    """The serialize stage (and ``compress``, when switched on): the body and its Content-Type. Adds the
    body's size to Server-Timing (``size;count=<bytes sent>``) and Content-Encoding to ``headers``."""
    with trace.span("serialize"):
        body = encode(payload, codec, format=fmt, schema=schema)
    raw = len(body)
    if coding != "none":
        with trace.span("compress"):
            body = compress(body, coding)
        headers["Content-Encoding"] = coding
    trace.add("size", count=len(body), desc=f"from {raw} bytes" if coding != "none" else None)
    return body, media_type(fmt)


def trim_export(payload: dict[str, Any], fields: str) -> dict[str, Any]:
    """Apply ``fields`` to an export/order payload: ``full`` returns it unchanged, ``trimmed`` keeps the
    core's :data:`TRIMMED_FIELDS` of each item's product (in place)."""
    if fields != "trimmed":
        return payload
    orders = payload.get("orders", [payload])
    for order in orders:
        for item in order["items"]:
            if item["product"] is not None:
                item["product"] = select_fields(item["product"], "trimmed")
    return payload


@lru_cache(maxsize=16)
def _synthetic_lines(n: int, seed: int) -> Any:
    return make_order_lines(n, seed=seed)


_TAX = {"zero": 0, "reduced": 1, "standard": 3}


def quote_payload(rows: list[tuple] | None, n_lines: int | None, seed: int, layout: str,
                  buffers: str) -> dict[str, Any]:
    """Price either SQL rows ``(product_id, qty, unit_price, discount_pct, tax_class_name)`` or ``n_lines``
    synthetic lines with the core kernel chosen by ``layout``/``buffers``; returns JSON-ready data."""
    if rows is not None:
        lines = OrderLines.from_rows([(pid, qty, unit, pct * 100, _TAX[tax]) for pid, qty, unit, pct, tax in rows])
    else:
        lines = _synthetic_lines(n_lines or 0, seed)
    return quote(lines, layout=layout, buffers=buffers).to_dict()
