"""Lab 02's grader, tested both ways: a reference batched export passes, the naive baseline does not."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from graderkit import assert_grader, hard_coded, memoised

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


def _wrong(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
    out = reference_export(conn, catalog, customer_id)
    for order in out["orders"]:
        order["items"].reverse()
    return out


def _seen_customers() -> list[tuple[Any, ...]]:
    # every customer a learner could have tried in the lab: the ladder and the grader's fixed ones
    from labkit.toyshop import catalog as catalog_mod
    from labkit.toyshop import dataset, db

    path = dataset.ensure("small")
    conn, cat = db.connect(path), catalog_mod.FakeCatalog.from_db(path)
    return [(conn, cat, c) for c in sorted({*dataset.LADDER, *lab02.CUSTOMERS})]


GRADER_CASES = {
    "grade": lambda fn: lab02.check(fn, rounds=4),
    "reference": reference_export,
    "baseline": lab02.baseline,
    "wrong": _wrong,
    "cheats": {"memoised": memoised(lab02.baseline, key=lambda conn, catalog, cid: cid),
               "hard-coded": hard_coded(lab02.baseline, _seen_customers(), key=lambda conn, catalog, cid: cid,
                                        fallback=lab02.baseline)},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers() -> None:
    assert_grader(**GRADER_CASES)


def test_reference_solution_passes_every_criterion() -> None:
    result = lab02.check(reference_export)
    assert result.passed, str(result)
    assert [i.ok for i in result.items] == [True, True, True]
    assert "no shape repeated per item" in result.items[1].message


def test_naive_baseline_fails_on_budget_naming_the_n_plus_one() -> None:
    result = lab02.check(lab02.baseline, rounds=4)
    correct, budget = result.items
    assert correct.ok  # the baseline is right, just slow
    assert not budget.ok and "N+1 suspect" in budget.message and "export.py" in budget.message


def test_a_memo_that_answers_without_querying_fails_the_budget() -> None:
    # a cache that holds every customer's answer (warmed on all of them) makes no query at all: not a fix
    from labkit.toyshop import catalog as catalog_mod
    from labkit.toyshop import dataset, db

    path = dataset.ensure("small")
    conn, cat = db.connect(path), catalog_mod.FakeCatalog.from_db(path)
    answers = {cid: reference_export(conn, cat, cid) for (cid,) in conn.execute("SELECT id FROM customers")}

    def cached(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
        if customer_id not in answers:
            return reference_export(conn, catalog, customer_id)
        return answers[customer_id]

    result = lab02.check(cached, conn=conn, catalog=cat, rounds=4)
    assert not result.passed and "no queries and catalog calls at all" in result.items[-1].message


def test_wrong_answer_stops_grading_with_where_it_differs() -> None:
    result = lab02.check(_wrong)
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
