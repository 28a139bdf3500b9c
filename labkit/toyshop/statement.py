"""Statements for ``/statement``: a customer's rows from SQLite, or synthetic ones; the CSV body from the core.

    customer, rows = statement_rows(conn, customer_id)     # one query for the customer, one JOIN for the lines
    customer, rows = synthetic_statement(n, seed)          # n made-up lines for a made-up customer (cached)
    body = render_statement(customer, rows, buffers="grow", pool=None)

A customer's statement holds every order line, oldest order first, with the product's name and description
(see :mod:`labkit.toyshop.core.statement` for the body and the three ``buffers`` variants). The ladder
customers of :data:`labkit.toyshop.dataset.LADDER` give statements of known sizes (4 lines per order, up to
800); synthetic statements (``/statement?lines=N``, as ``/quote?lines=N``) go beyond, for scaling curves.
An unknown customer raises :class:`labkit.toyshop.db.NotFoundError`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from labkit.toyshop.core.statement import (
    STATEMENT_KERNELS,
    BufferPool,
    Customer,
    Row,
    make_statement_rows,
    statement_pooled,
)
from labkit.toyshop.core.variants import check_variant
from labkit.toyshop.db import NotFoundError

__all__ = ["statement_rows", "synthetic_statement", "render_statement", "MEDIA_TYPE", "SAMPLE_CUSTOMER",
           "MAX_STATEMENT_LINES"]

#: the statement's media type.
MEDIA_TYPE = "text/csv; charset=utf-8"
#: the made-up customer of synthetic statements.
SAMPLE_CUSTOMER: Customer = (0, "Sample Customer", "sample@example.invalid")
#: the longest synthetic statement served.
MAX_STATEMENT_LINES = 20_000
_LINES = ("SELECT o.id, o.created_at, o.status, o.currency, i.line_no, p.sku, p.name, p.description, i.quantity, "
          "i.unit_price_cents FROM orders o JOIN order_items i ON i.order_id = o.id "
          "JOIN products p ON p.id = i.product_id WHERE o.customer_id = ? ORDER BY o.created_at, o.id, i.line_no")


def statement_rows(conn: sqlite3.Connection, customer_id: int) -> tuple[Customer, list[Row]]:
    """The customer ``(id, name, email)`` and their statement rows, in statement order."""
    head = conn.execute("SELECT id, name, email FROM customers WHERE id = ?", (customer_id,)).fetchone()
    if head is None:
        raise NotFoundError(f"no customer with id {customer_id}")
    return (head[0], head[1], head[2]), conn.execute(_LINES, (customer_id,)).fetchall()


@lru_cache(maxsize=16)
def _synthetic_rows(n: int, seed: int) -> tuple[Row, ...]:
    return tuple(make_statement_rows(n, seed))


def synthetic_statement(n: int, seed: int = 0) -> tuple[Customer, tuple[Row, ...]]:
    """:data:`SAMPLE_CUSTOMER` and ``n`` synthetic rows (cached, immutable: repeated requests do not pay to
    make them)."""
    return SAMPLE_CUSTOMER, _synthetic_rows(n, seed)


def render_statement(customer: Customer, rows: Sequence[Row], buffers: str = "grow",
                     pool: BufferPool | None = None) -> bytes:
    """The CSV body, built by the ``buffers`` variant's kernel (``pool`` is used by ``pooled`` only)."""
    kernel: Any = STATEMENT_KERNELS[check_variant("buffers", buffers)]
    if kernel is statement_pooled:
        return statement_pooled(customer, rows, pool)
    return kernel(customer, rows)
