"""A database someone else writes while the service reads it (issue 26, "faults with clear errors"): a request
that meets a writer's lock waits a bounded time in SQLite's busy handler, then answers 503 ``database_busy``
with ``Retry-After`` (never a hang, never a 500); once the writer commits, the service answers again and sees
what was written. A dataset labkit built is read immutable (no locks), so only a ``db_path`` is read this way."""

from __future__ import annotations

import shutil
import sqlite3
import time

import pytest

from labkit.client import Endpoint
from labkit.service import start
from labkit.toyshop import db
from labkit.toyshop.dataset import ensure


def test_is_busy_names_only_lock_errors(tmp_path):
    path = tmp_path / "shop.sqlite"
    shutil.copy(ensure("small"), path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        reader = db.connect(path, immutable=False)
        t0 = time.monotonic()
        with pytest.raises(sqlite3.OperationalError) as caught:
            reader.execute("SELECT count(*) FROM orders").fetchone()
        waited = time.monotonic() - t0
    finally:
        writer.execute("ROLLBACK")
    assert db.is_busy(caught.value)
    assert waited >= db.BUSY_TIMEOUT_S * 0.5  # it retried before giving up, not at once …
    assert waited < 5.0  # … and not for Python's default five seconds
    assert reader.execute("SELECT count(*) FROM orders").fetchone()[0] > 0  # the lock gone, it reads again
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM no_such_table")
    except sqlite3.OperationalError as exc:
        assert not db.is_busy(exc)  # a bug stays a bug (500), not a 503
    assert not db.is_busy(ValueError("database is locked"))


@pytest.mark.slow
def test_a_locked_database_answers_503_then_serves_what_was_committed(tmp_path):
    path = tmp_path / "shop.sqlite"
    shutil.copy(ensure("small"), path)
    writer = sqlite3.connect(path, isolation_level=None)
    new_id = writer.execute("SELECT max(id) + 1 FROM orders").fetchone()[0]
    with start(db_path=path) as svc:
        shop = Endpoint(svc.url, timeout=10)
        assert shop.get("/orders/1").status == 200
        assert shop.get(f"/orders/{new_id}").status == 404
        writer.execute("BEGIN EXCLUSIVE")  # WHEN another connection writes and holds its lock
        writer.execute("INSERT INTO orders SELECT ?, customer_id, created_at, status, currency, shipping_cents, "
                       "total_cents FROM orders WHERE id = 1", (new_id,))
        writer.execute("INSERT INTO order_items (order_id, line_no, product_id, quantity, unit_price_cents) "
                       "SELECT ?, line_no, product_id, quantity, unit_price_cents FROM order_items "
                       "WHERE order_id = 1",
                       (new_id,))
        t0 = time.monotonic()
        busy = shop.get("/orders/1")
        waited = time.monotonic() - t0
        assert busy.status == 503, busy.body
        assert busy.json()["error"] == "database_busy"
        assert "locked by another connection" in busy.json()["message"]
        assert busy.headers["retry-after"] == "1"
        assert waited < 5.0  # bounded: SQLite's busy handler gave up, the request did not hang
        writer.execute("COMMIT")
        after = shop.get(f"/orders/{new_id}")
        assert after.status == 200, after.body  # what was committed is seen: not an immutable snapshot
        assert shop.get("/orders/1").status == 200
        assert "toyshop request failed" not in (svc.log_dir / "app.log").read_text()  # no 500 logged
