"""The service's calls into the performance core: encoding, field trimming, the config cache.

One thin seam, so the HTTP layer (:mod:`labkit.toyshop.app`) stays the same whichever kernel a switch picks,
and so every switch value is reachable from a request. Everything comes from :mod:`labkit.toyshop.core`:
codecs and field sets, and the config cache (:class:`labkit.toyshop.core.ConfigCache` in
``local`` mode; ``cache=none`` skips it and queries SQLite every time).
"""

from __future__ import annotations

from typing import Any

from labkit import trace
from labkit.toyshop.core import (
    MEDIA_TYPES,
    TRIMMED_FIELDS,
    BufferPool,
    ConfigCache,
    compress,
    encode,
    select_fields,
)
from labkit.toyshop.negotiate import SCHEMA_FORMATS, SERVED_FORMATS, NotAcceptable, choose, media_type

__all__ = ["encode", "MEDIA_TYPES", "trim_export", "TRIMMED_FIELDS", "ConfigCache", "negotiate", "serialize",
           "NotAcceptable", "BufferPool"]
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
