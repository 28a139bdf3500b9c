"""Export a customer's orders with product names and prices: three ways, one signature, one answer.

    export_naive(conn, catalog, customer_id) -> dict     # N+1: a query and a catalog call per item
    export_batched(conn, catalog, customer_id) -> dict   # a handful of IN (...) queries, batch catalog calls
    export_join(conn, catalog, customer_id) -> dict      # one JOIN, batch catalog calls

``conn`` comes from :func:`labkit.toyshop.db.connect`; ``catalog`` is any :class:`labkit.toyshop.catalog.Catalog`
(the HTTP client, the fake, or the product cache's view). All three return the same dict for the same
customer (tested), so a harness can run them side by side. For the ladder customer 1 (50 orders × 4 items),
naive makes 2 + 50 + 200 = 252 queries and 200 catalog calls; batched 4 queries and 4 catalog calls;
join 2 queries and 4 catalog calls. An unknown customer raises :class:`labkit.toyshop.db.NotFoundError`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from labkit.toyshop.catalog import Catalog
from labkit.toyshop.db import NotFoundError

__all__ = ["export_naive", "export_batched", "export_join", "order_detail", "EXPORTS", "Export"]

Export = Callable[[sqlite3.Connection, Catalog, int], dict[str, Any]]
_CUSTOMER = "SELECT id, name, email, country, tier FROM customers WHERE id = ?"
_ORDERS = ("SELECT id, created_at, status, currency, shipping_cents, total_cents FROM orders "
           "WHERE customer_id = ? ORDER BY created_at, id")
_CHUNK = 500  # ids per IN (...) list, well under SQLite's bound-variable limit


def _customer(conn: sqlite3.Connection, customer_id: int) -> dict[str, Any]:
    row = conn.execute(_CUSTOMER, (customer_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no customer with id {customer_id}")
    return dict(zip(("id", "name", "email", "country", "tier"), row, strict=True))


def _order(row: tuple) -> dict[str, Any]:
    oid, created, status, currency, shipping, total = row
    return {"id": oid, "created_at": created, "status": status, "currency": currency,
            "shipping_cents": shipping, "total_cents": total, "items": []}


def _item(line_no: int, product_id: int, sku: str, name: str, qty: int, unit: int,
          details: dict[str, Any] | None) -> dict[str, Any]:
    return {"line_no": line_no, "product_id": product_id, "sku": sku, "name": name, "quantity": qty,
            "unit_price_cents": unit, "line_total_cents": qty * unit, "product": details}


def _result(customer: dict[str, Any], orders: list[dict[str, Any]]) -> dict[str, Any]:
    return {"customer": customer, "order_count": len(orders),
            "item_count": sum(len(o["items"]) for o in orders), "orders": orders}


def export_naive(conn: sqlite3.Connection, catalog: Catalog, customer_id: int) -> dict[str, Any]:
    """The N+1 way: per order a query for its items; per item a product query and a catalog call."""
    customer = _customer(conn, customer_id)
    orders = [_order(r) for r in conn.execute(_ORDERS, (customer_id,)).fetchall()]
    for order in orders:
        rows = conn.execute("SELECT line_no, product_id, quantity, unit_price_cents FROM order_items "
                            "WHERE order_id = ? ORDER BY line_no", (order["id"],)).fetchall()
        for line_no, pid, qty, unit in rows:
            sku, name = conn.execute("SELECT sku, name FROM products WHERE id = ?", (pid,)).fetchone()
            order["items"].append(_item(line_no, pid, sku, name, qty, unit, catalog.get(pid)))
    return _result(customer, orders)


def _in_chunks(conn: sqlite3.Connection, sql: str, ids: list[int]) -> list[tuple]:
    rows: list[tuple] = []
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i:i + _CHUNK]
        rows += conn.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall()
    return rows


def export_batched(conn: sqlite3.Connection, catalog: Catalog, customer_id: int) -> dict[str, Any]:
    """Batched: orders, then all their items in one ``IN (...)``, all products in one, catalog in batches."""
    customer = _customer(conn, customer_id)
    orders = [_order(r) for r in conn.execute(_ORDERS, (customer_id,)).fetchall()]
    by_id = {o["id"]: o for o in orders}
    items = _in_chunks(conn, "SELECT order_id, line_no, product_id, quantity, unit_price_cents FROM order_items "
                             "WHERE order_id IN ({}) ORDER BY order_id, line_no", list(by_id))
    pids = list(dict.fromkeys(r[2] for r in items))
    names = {r[0]: (r[1], r[2]) for r in _in_chunks(conn, "SELECT id, sku, name FROM products WHERE id IN ({})",
                                                       pids)}
    details = catalog.get_many(pids) if pids else {}
    for oid, line_no, pid, qty, unit in items:
        sku, name = names[pid]
        by_id[oid]["items"].append(_item(line_no, pid, sku, name, qty, unit, details.get(pid)))
    return _result(customer, orders)


def export_join(conn: sqlite3.Connection, catalog: Catalog, customer_id: int) -> dict[str, Any]:
    """One query: orders JOIN items JOIN products, then the catalog in batches."""
    customer = _customer(conn, customer_id)
    rows = conn.execute(
        "SELECT o.id, o.created_at, o.status, o.currency, o.shipping_cents, o.total_cents, "
        "i.line_no, i.product_id, p.sku, p.name, i.quantity, i.unit_price_cents "
        "FROM orders o LEFT JOIN order_items i ON i.order_id = o.id LEFT JOIN products p ON p.id = i.product_id "
        "WHERE o.customer_id = ? ORDER BY o.created_at, o.id, i.line_no", (customer_id,)).fetchall()
    pids = list(dict.fromkeys(r[7] for r in rows if r[7] is not None))
    details = catalog.get_many(pids) if pids else {}
    orders: list[dict[str, Any]] = []
    for r in rows:
        if not orders or orders[-1]["id"] != r[0]:
            orders.append(_order(r[:6]))
        if r[6] is not None:
            orders[-1]["items"].append(_item(*r[6:12], details.get(r[7])))
    return _result(customer, orders)


#: variant name -> export function, the slow baseline first.
EXPORTS: dict[str, Export] = {"naive": export_naive, "batched": export_batched, "join": export_join}


def order_detail(conn: sqlite3.Connection, catalog: Catalog, order_id: int) -> dict[str, Any]:
    """One order with its items (one JOIN) and their catalog details (batch calls).

    Raises :class:`labkit.toyshop.db.NotFoundError` for an unknown order id.
    """
    head = conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents, customer_id "
                        "FROM orders WHERE id = ?", (order_id,)).fetchone()
    if head is None:
        raise NotFoundError(f"no order with id {order_id}")
    rows = conn.execute("SELECT i.line_no, i.product_id, p.sku, p.name, i.quantity, i.unit_price_cents "
                        "FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = ? "
                        "ORDER BY i.line_no", (order_id,)).fetchall()
    details = catalog.get_many([r[1] for r in rows]) if rows else {}
    order = _order(head[:6])
    order["customer_id"] = head[6]
    order["items"] = [_item(*r, details.get(r[1])) for r in rows]
    return order
