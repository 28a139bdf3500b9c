"""Lab 02's grader, tested both ways: a reference batched export passes, the naive baseline does not."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from labkit.exercises import lab02


def reference_export(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
    """A learner's batched export: one query per table, the catalog's batch endpoint in bounded chunks."""
    from labkit.toyshop.db import NotFoundError

    row = conn.execute("SELECT id, name, email, country, tier FROM customers WHERE id = ?", (customer_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no customer with id {customer_id}")
    customer = dict(zip(("id", "name", "email", "country", "tier"), row, strict=True))
    orders = [
        {"id": r[0], "created_at": r[1], "status": r[2], "currency": r[3], "shipping_cents": r[4],
         "total_cents": r[5], "items": []}
        for r in conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents FROM orders "
                              "WHERE customer_id = ? ORDER BY created_at, id", (customer_id,))
    ]
    by_id = {o["id"]: o for o in orders}
    items: list[tuple] = []
    if by_id:
        marks = ",".join("?" * len(by_id))
        items = conn.execute("SELECT order_id, line_no, product_id, quantity, unit_price_cents FROM order_items "
                             f"WHERE order_id IN ({marks}) ORDER BY order_id, line_no", list(by_id)).fetchall()
    pids = list(dict.fromkeys(r[2] for r in items))
    names: dict[int, tuple[str, str]] = {}
    if pids:
        marks = ",".join("?" * len(pids))
        names = {r[0]: (r[1], r[2]) for r in conn.execute(f"SELECT id, sku, name FROM products WHERE id IN ({marks})",
                                                         pids)}
    details = catalog.get_many(pids) if pids else {}
    for oid, line_no, pid, qty, unit in items:
        sku, name = names[pid]
        by_id[oid]["items"].append({"line_no": line_no, "product_id": pid, "sku": sku, "name": name, "quantity": qty,
                                    "unit_price_cents": unit, "line_total_cents": qty * unit,
                                    "product": details.get(pid)})
    return {"customer": customer, "order_count": len(orders), "item_count": len(items), "orders": orders}


def test_reference_solution_passes() -> None:
    result = lab02.check(reference_export)
    assert result.passed, str(result)
    assert [i.ok for i in result.items] == [True, True, True]
    assert "no shape repeated per item" in result.items[1].message


def test_naive_baseline_fails_on_budget_and_speed() -> None:
    result = lab02.check(lab02.baseline, rounds=4)
    assert not result.passed
    correct, budget, speed = result.items
    assert correct.ok  # the baseline is right, just slow
    assert not budget.ok and "N+1 suspect" in budget.message and "export.py" in budget.message
    assert not speed.ok


def test_wrong_answer_stops_grading_with_where_it_differs() -> None:
    def wrong(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
        out = reference_export(conn, catalog, customer_id)
        for order in out["orders"]:
            order["items"].reverse()
        return out

    result = lab02.check(wrong)
    assert not result.passed and len(result.items) == 1
    assert "['items'][0]['line_no']" in result.items[0].message


def test_unknown_customer_must_raise_not_found() -> None:
    def lenient(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
        from labkit.toyshop.db import NotFoundError

        try:
            return reference_export(conn, catalog, customer_id)
        except NotFoundError:
            return {}

    result = lab02.check(lenient)
    assert not result.passed and "NotFoundError" in result.items[0].message


@pytest.mark.parametrize("bad", [None, 42])
def test_not_a_function(bad: Any) -> None:
    result = lab02.check(bad)
    assert not result.passed and "pass your function" in result.items[0].message
