"""Everyday work a request does: compress 1 KiB, encode a 1 KiB record as JSON, run an SQLite point query."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import zlib
from typing import Any

from labkit.latency._harness import Samples, method_of, time_batches, time_lookups, unavailable
from labkit.latency.disk import _scratch

__all__ = ["compress_1k", "json_encode_1k", "sqlite_point_query", "record_1k"]

_WORDS = ("order customer product price quantity shipped pending total discount warehouse invoice "
          "express standard refund basket coupon").split()


def _text_1k(seed: int = 4) -> bytes:
    rng = random.Random(seed)
    out = b""
    while len(out) < 1024:
        out += (rng.choice(_WORDS) + " ").encode()
    return out[:1024]


def record_1k(seed: int = 5) -> dict[str, Any]:
    """A JSON-able order-like record whose compact JSON encoding is about 1 KiB."""
    rng = random.Random(seed)
    items = [{"sku": f"SKU-{rng.randrange(10**6):06d}", "qty": rng.randrange(1, 5),
              "price": round(rng.uniform(1, 200), 2), "name": " ".join(rng.choices(_WORDS, k=3))}
             for _ in range(8)]
    rec = {"id": 123456, "customer_id": 4242, "status": "shipped", "created": "2026-11-30T05:30:00Z",
           "currency": "EUR", "items": items, "notes": ""}
    size = len(json.dumps(rec, separators=(",", ":")))
    rec["notes"] = "x" * max(0, 1024 - size)
    return rec


def compress_1k(*, quick: bool = False, repeats: int | None = None) -> Samples:
    """``zlib.compress`` of 1 KiB of English-like text at the default level (6).

    Method: the same 1 KiB buffer is compressed in batches of 25 calls after a warm-up batch; a sample
    is a batch's time per call. Overhead: one Python call per compression (~50 ns of several µs).
    Dean's row (his talks, 2009) used Zippy (now Snappy), which trades ratio for speed: zlib is expected to be slower.
    """
    data = _text_1k()
    repeats = repeats or (25 if quick else 61)
    samples = time_batches(lambda: zlib.compress(data), batch=25, repeats=repeats)
    return Samples("zlib_compress_1k", "compress 1 KiB (zlib, level 6)", "work", samples,
                   method_of(compress_1k), None, {"ratio": len(data) / len(zlib.compress(data))})


def json_encode_1k(*, quick: bool = False, repeats: int | None = None) -> tuple[Samples, ...]:
    """Encode a ~1 KiB nested record (an order with 8 items) with ``json.dumps`` and with ``orjson.dumps``.

    Method: batches of 25 encodes of the same dict after a warm-up batch; a sample is a batch's time
    per call. ``json.dumps`` returns ``str`` and ``orjson.dumps`` returns ``bytes`` (the HTTP body needs
    bytes, so the json row understates its real cost by one ``.encode()``). One Python call per encode.
    """
    method = method_of(json_encode_1k)
    rec = record_1k()
    size = len(json.dumps(rec))  # default separators, as timed (a little over 1 KiB; compact is 1 KiB)
    repeats = repeats or (25 if quick else 61)
    out = [Samples("json_encode_1k", "JSON-encode a 1 KiB record (json)", "work",
                   time_batches(lambda: json.dumps(rec), batch=25, repeats=repeats), method, None,
                   {"bytes": size})]
    try:
        import orjson
    except ImportError as e:
        out.append(unavailable("orjson_encode_1k", "JSON-encode a 1 KiB record (orjson)", "work",
                               f"orjson is not importable ({e}); pip install orjson", method))
    else:
        out.append(Samples("orjson_encode_1k", "JSON-encode a 1 KiB record (orjson)", "work",
                           time_batches(lambda: orjson.dumps(rec), batch=25, repeats=repeats), method,
                           None, {"bytes": len(orjson.dumps(rec))}))
    return tuple(out)


def sqlite_point_query(*, quick: bool = False, rows: int = 10_000, repeats: int | None = None,
                       dir: str | os.PathLike[str] | None = None) -> Samples:
    """One SQLite primary-key lookup from Python: ``execute(...).fetchone()`` on a warm file database.

    Method: a temporary file database with ``rows`` rows (an integer primary key, a name, a price) is
    created and read once so its pages are in SQLite's cache; each call looks up a random id with a
    prepared-statement-cached ``SELECT``. Batches of 25 lookups; a sample is a batch's time per lookup.
    Overhead: the ``sqlite3`` module's Python-level work (binding, building the row tuple, ~1 µs) is
    included on purpose: it is what every query from Python pays.
    """
    repeats = repeats or (25 if quick else 61)
    with _scratch(dir) as d:
        conn = sqlite3.connect(os.path.join(d, "probe.sqlite"))
        try:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
            conn.executemany("INSERT INTO t VALUES (?, ?, ?)",
                             ((i, f"product {i}", i * 0.5) for i in range(rows)))
            conn.commit()
            conn.execute("SELECT count(*), sum(price) FROM t").fetchone()
            sql = "SELECT id, name, price FROM t WHERE id = ?"
            samples = time_lookups(lambda i: conn.execute(sql, (i,)).fetchone(), range(rows), seed=6,
                                   repeats=repeats)
        finally:
            conn.close()
    return Samples("sqlite_point_query", "SQLite point query (primary key, warm)", "work", samples,
                   method_of(sqlite_point_query), None, {"rows": rows})
