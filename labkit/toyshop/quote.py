"""Quotes for ``/quote``: a customer's order lines from SQLite, or synthetic ones, priced by the performance core.

    rows = quote_rows(conn, customer_id)                      # one query for the customer, one JOIN for the lines
    payload = quote_payload(rows, None, 0, layout="aos", buffers="grow")    # or (None, n, seed, ...): n lines

The kernel is the one the ``layout`` and ``buffers`` switches pick (:func:`labkit.toyshop.core.quote`);
synthetic lines (``/quote?lines=N&seed=S``, up to :data:`MAX_QUOTE_LINES`) are cached, so repeated requests
measure the pricing, not the making of the lines. An unknown customer raises
:class:`labkit.toyshop.db.NotFoundError`.
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from typing import Any

from labkit.toyshop.core import OrderLines, make_order_lines, quote
from labkit.toyshop.db import NotFoundError

__all__ = ["quote_rows", "quote_payload", "MAX_QUOTE_LINES"]

#: the most synthetic lines a quote prices.
MAX_QUOTE_LINES = 200_000
_QUOTE_SQL = ("SELECT i.product_id, i.quantity, i.unit_price_cents, p.discount_pct, p.tax_class "
              "FROM orders o JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
              "WHERE o.customer_id = ? ORDER BY i.id")
_TAX = {"zero": 0, "reduced": 1, "standard": 3}


def quote_rows(conn: sqlite3.Connection, customer_id: int) -> list[tuple]:
    """Every order line of the customer as ``(product_id, qty, unit_price, discount_pct, tax_class_name)``."""
    if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
        raise NotFoundError(f"no customer with id {customer_id}")
    return conn.execute(_QUOTE_SQL, (customer_id,)).fetchall()


@lru_cache(maxsize=16)
def _synthetic_lines(n: int, seed: int) -> Any:
    return make_order_lines(n, seed=seed)


def quote_payload(rows: list[tuple] | None, n_lines: int | None, seed: int, layout: str,
                  buffers: str) -> dict[str, Any]:
    """Price either SQL rows ``(product_id, qty, unit_price, discount_pct, tax_class_name)`` or ``n_lines``
    synthetic lines with the core kernel chosen by ``layout``/``buffers``; returns JSON-ready data."""
    if rows is not None:
        lines = OrderLines.from_rows([(pid, qty, unit, pct * 100, _TAX[tax]) for pid, qty, unit, pct, tax in rows])
    else:
        lines = _synthetic_lines(n_lines or 0, seed)
    return quote(lines, layout=layout, buffers=buffers).to_dict()
