"""The catalog's products in memory: encoded once, with a write path and a change feed.

The catalog process (:func:`labkit.toyshop.catalog_server.create_app`) and the in-process
:class:`~labkit.toyshop.catalog.FakeCatalog` both serve from a :class:`ProductStore`. Products are loaded from
the dataset once and kept as JSON bytes, so a read costs a dict lookup. A write (``PATCH /products/{id}``)
changes some fields of one product and bumps the store's **version**; the change feed
(``GET /products/changes?since=V``) answers which products changed after version ``V`` — what a cache in the
order service polls to stay within its staleness bound (:mod:`labkit.toyshop.productcache`).

Writes live in memory only: a restarted catalog serves the dataset's products again, at version 0.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from labkit.errors import BadInputError

__all__ = ["ProductStore", "check_fields", "load_products"]

_MAX_STR = 10_000
_INT64 = 2**63


def check_fields(product: Mapping[str, Any], fields: Any) -> dict[str, Any]:
    """The update ``fields`` checked against ``product``: a non-empty JSON object of existing fields other
    than ``id``, each value of the field's type (an integer is accepted for a real). Raises BadInputError
    naming the field and what it takes."""
    if not isinstance(fields, dict) or not fields:
        raise BadInputError("the body must be a JSON object of the fields to change, e.g. {\"price_cents\": 1299}")
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if name == "id":
            raise BadInputError("field 'id' cannot change: it names the product")
        if name not in product:
            raise BadInputError(f"unknown field {str(name)[:40]!r}; a product has {', '.join(sorted(product))}")
        old = product[name]
        if isinstance(value, bool) or value is None:
            raise BadInputError(f"field {name!r} takes a {type(old).__name__}, got {value!r}")
        if isinstance(old, float) and isinstance(value, int):
            value = float(value)
        if type(value) is not type(old):
            raise BadInputError(f"field {name!r} takes a {type(old).__name__}, got a {type(value).__name__}")
        if isinstance(value, int) and not -_INT64 <= value < _INT64:
            raise BadInputError(f"field {name!r} must fit in 64 bits, got {value}")
        if isinstance(value, str) and len(value) > _MAX_STR:
            raise BadInputError(f"field {name!r} is at most {_MAX_STR:,} characters, got {len(value):,}")
        out[name] = value
    return out


class ProductStore:
    """Products by id, as dicts and as encoded JSON, with a version that every write bumps.

    Args:
        products: ``{id: {field: value}}`` (see :func:`load_products`).

    Reads (:attr:`encoded`) take no lock: a write replaces one dict entry, a single store. Writes and the
    change feed share a lock, so a version and its set of changed ids always agree.
    """

    def __init__(self, products: Mapping[int, Mapping[str, Any]]) -> None:
        self._products = {int(pid): dict(p) for pid, p in products.items()}
        #: id -> the product as JSON bytes: what a read serves
        self.encoded: dict[int, bytes] = {pid: orjson.dumps(p) for pid, p in self._products.items()}
        self.version = 0
        self._changed: dict[int, int] = {}  # id -> the version of its last write
        self._lock = threading.Lock()

    def update(self, product_id: int, fields: Any) -> tuple[int, dict[str, Any]] | None:
        """Change some fields of one product; returns ``(new version, the product)``, or None for an unknown
        id. Raises BadInputError for fields that do not exist or have the wrong type."""
        pid = int(product_id)
        with self._lock:
            current = self._products.get(pid)
            if current is None:
                return None
            new = {**current, **check_fields(current, fields)}
            self.version += 1
            self._products[pid] = new
            self.encoded[pid] = orjson.dumps(new)
            self._changed[pid] = self.version
            return self.version, dict(new)

    def changes(self, since: int) -> tuple[int, list[int]]:
        """``(version now, ids written after version since)``, ids sorted."""
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise BadInputError(f"since must be a version number >= 0, got {since!r}")
        with self._lock:
            return self.version, sorted(pid for pid, v in self._changed.items() if v > since)

    def batch(self, ids: list[int]) -> tuple[list[bytes], list[int]]:
        """The encoded products of ``ids`` that exist, in order, and the ids that do not."""
        found, missing = [], []
        for pid in ids:
            body = self.encoded.get(pid)
            if body is None:
                missing.append(pid)
            else:
                found.append(body)
        return found, missing

    def __len__(self) -> int:
        return len(self.encoded)


def load_products(db_path: Path | str) -> dict[int, dict[str, Any]]:
    """Every product of a toyshop database as ``{id: {field: value}}``."""
    from labkit.toyshop.db import connect

    conn = connect(db_path)
    try:
        cur = conn.execute("SELECT * FROM products ORDER BY id")
        names = [d[0] for d in cur.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cur}
    finally:
        conn.close()
