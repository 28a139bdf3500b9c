"""Lab 02's grader: a learner's order history without the per-order N+1 passes; the baseline, every cheat of tests/graderkit.py
that applies (the dataset precomputed, the meter unhooked or walked around, the fake's store read, a shared
object mutated…), wrong answers and a missing prediction fail."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import sys
from typing import Any

import pytest
from graderkit import assert_grader, hard_coded, memoised, mutating, standard_cheats
from toolfakes import patching

from labkit.exercises import lab02


def reference_history(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> list[dict[str, Any]]:
    """A learner's order history: the heads in one query, every item of the customer in one JOIN (no IN list),
    the catalog's batch endpoint once for the distinct products."""
    from labkit.toyshop.db import NotFoundError

    if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
        raise NotFoundError(f"no customer with id {customer_id}")
    orders = [{"id": r[0], "created_at": r[1], "status": r[2], "currency": r[3], "shipping_cents": r[4],
               "total_cents": r[5], "customer_id": r[6], "items": []}
              for r in conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents, customer_id "
                                    "FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC",
                                    (customer_id,))]
    by_id = {o["id"]: o for o in orders}
    items = conn.execute("SELECT i.order_id, i.line_no, i.product_id, p.sku, p.name, i.quantity, i.unit_price_cents "
                         "FROM order_items i JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id "
                         "WHERE o.customer_id = ? ORDER BY i.order_id, i.line_no", (customer_id,)).fetchall()
    pids = list(dict.fromkeys(r[2] for r in items))
    details = catalog.get_many(pids) if pids else {}
    for oid, line_no, pid, sku, name, qty, unit in items:
        by_id[oid]["items"].append({"line_no": line_no, "product_id": pid, "sku": sku, "name": name, "quantity": qty,
                                    "unit_price_cents": unit, "line_total_cents": qty * unit,
                                    "product": details.get(pid)})
    return orders


def _wrong(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> list[dict[str, Any]]:
    out = reference_history(conn, catalog, customer_id)
    out.reverse()  # oldest first: the baseline's order is newest first
    return out


def _dataset_customers() -> list[tuple[Any, ...]]:
    # every customer the dataset holds: an answer precomputed for each of them
    from labkit.toyshop import catalog as catalog_mod
    from labkit.toyshop import dataset, db

    path = dataset.ensure("small")
    conn, cat = db.connect(path), catalog_mod.FakeCatalog.from_db(path)
    return [(conn, cat, c) for (c,) in conn.execute("SELECT id FROM customers")]


def _items_of(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> int:
    return conn.execute("SELECT count(*) FROM orders o JOIN order_items i ON i.order_id = o.id "
                        "WHERE o.customer_id = ?", (customer_id,)).fetchone()[0]


def _own_connection(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
    """Walks around the meter: runs the N+1 export on a connection of its own to the dataset's file."""
    from labkit.toyshop import dataset, db

    return lab02.baseline(db.connect(dataset.ensure("small")), catalog, customer_id)


def _reads_the_store(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
    """Skips the catalog's round trips by reading the fake's store behind its API."""
    store = catalog.store  # FakeCatalog.store: the products as the fake holds them

    class Local:
        def get_many(self, ids: Any) -> Any:
            return {i: store.get(i) for i in ids}

    return reference_history(conn, Local(), customer_id)


def _private_copy() -> Any:
    """Reads a private copy of the dataset: the products loaded once from the file the lab reads, then every
    history answered from it — the catalog's round trips skipped."""
    from labkit.toyshop import dataset
    from labkit.toyshop.productstore import load_products

    kept: dict[int, Any] = {}

    class Copy:
        def get_many(self, ids: Any) -> Any:
            return {i: kept[i] for i in ids if i in kept}

    def cheat(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> list[dict[str, Any]]:
        if not kept:
            kept.update(load_products(dataset.ensure("small")))
        return reference_history(conn, Copy(), customer_id)

    cheat.__name__ = "private_copy"
    return cheat


def _items_in_two_halves(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> list[dict[str, Any]]:
    """Within the query budget, but one shape run twice (the even orders' items, then the odd ones'): the shape
    detector's to catch."""
    from labkit.toyshop.db import NotFoundError

    if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
        raise NotFoundError(f"no customer with id {customer_id}")
    orders = [{"id": r[0], "created_at": r[1], "status": r[2], "currency": r[3], "shipping_cents": r[4],
               "total_cents": r[5], "customer_id": r[6], "items": []}
              for r in conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents, customer_id "
                                    "FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC",
                                    (customer_id,))]
    by_id = {o["id"]: o for o in orders}
    items = [r for half in (0, 1) for r in conn.execute(
        "SELECT i.order_id, i.line_no, i.product_id, p.sku, p.name, i.quantity, i.unit_price_cents FROM order_items i "
        "JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id WHERE o.customer_id = ? AND "
        "i.order_id % 2 = ? ORDER BY i.order_id, i.line_no", (customer_id, half))]
    items.sort(key=lambda r: (r[0], r[1]))
    pids = list(dict.fromkeys(r[2] for r in items))
    details = catalog.get_many(pids) if pids else {}
    for oid, line_no, pid, sku, name, qty, unit in items:
        by_id[oid]["items"].append({"line_no": line_no, "product_id": pid, "sku": sku, "name": name, "quantity": qty,
                                    "unit_price_cents": unit, "line_total_cents": qty * unit,
                                    "product": details.get(pid)})
    return orders


def _faked_tools() -> list[tuple[Any, str, Any]]:
    """The grader's tools replaced where they live and where they are re-exported: the shape detector sees every
    statement as a shape of its own (no N+1 to find), and a catalog client made from here on never sleeps."""
    import labkit.nplusone
    from labkit.toyshop import catalog

    shapes = sys.modules["labkit.nplusone.shapes"]
    seen = iter(range(10**9))

    def unique(sql: str) -> str:
        return f"{sql} /* {next(seen)} */"

    class Quick(catalog.FakeCatalog):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "delay_ms": 0.0})

    out = [(shapes, "normalise_sql", unique), (labkit.nplusone, "normalise_sql", unique),
           (catalog, "FakeCatalog", Quick)]
    return out + [(lab02, n, new) for n, new in (("_normalise_sql", unique), ("_FakeCatalog", Quick))
                  if hasattr(lab02, n)]


def _no_delay(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> None:
    for target, attr in ((catalog, "delay_ms"), (catalog, "batch_size")):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(target, attr, 0 if attr == "delay_ms" else 10_000)


def planned() -> Any:
    from labkit.learner.record import Experiment

    return Experiment.plan("order history", "two queries and a catalog call per order (~14 orders: ~44 round trips) "
                           "become 3 queries and 1–2 catalog calls", predicted_ratio=0.2)


_KEY = {"key": lambda conn, catalog, cid: cid}

GRADER_CASES = {
    "grade": lambda fn, experiment: lab02.check(fn, experiment, rounds=4, save=False),
    "experiment": planned,
    "reference": reference_history,
    "baseline": lab02.baseline,
    "wrong": _wrong,
    # customers of ≥ 40 items are what the budget and the timed calls use (and the correctness pass too);
    # twelve honest calls cover the correctness pass
    "cheats": {**standard_cheats(lab02.baseline, lab02, wrong=_wrong, size=_items_of, at_least=40, honest_calls=12),
               "memoised": memoised(lab02.baseline, **_KEY),
               "precomputed for the dataset": hard_coded(lab02.baseline, _dataset_customers(), **_KEY,
                                                         fallback=lab02.baseline),
               "precomputed, no fallback": hard_coded(lab02.baseline, _dataset_customers(), **_KEY),
               "unhooks the query meter": mutating(lab02.baseline, lambda conn, *_: conn.set_trace_callback(None)),
               "queries on its own connection": _own_connection,
               "reads the fake's store": _reads_the_store,
               "mutates the catalog client": mutating(lab02.baseline, _no_delay),
               "reads a private copy of the dataset": _private_copy(),
               "replaces the shape detector and the catalog": patching(_items_in_two_halves, _faked_tools, "fakes_tools")},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers() -> None:
    assert_grader(**GRADER_CASES)


def test_reference_solution_passes_every_criterion() -> None:
    result = lab02.check(reference_history, planned(), save=False)
    assert result.passed, str(result)
    assert [i.criterion for i in result.items] == ["correctness", "prediction", "budget", "speed", "prediction"]
    assert "no shape repeated" in result.items[2].message and "created for this check" in result.items[2].message
    assert lab02.check(lab02._reference, planned(), rounds=4, save=False).passed  # the lab's own reference, too


def test_per_order_baseline_fails_on_budget_naming_the_n_plus_one() -> None:
    result = lab02.check(lab02.baseline, planned(), rounds=4, save=False)
    correct, plan, budget = result.items
    assert correct.ok and plan.ok  # the baseline is right, just slow
    assert not budget.ok and "N+1 suspect" in budget.message and "= ?" in budget.message
    assert "at export.py:" in budget.message  # order_detail's line that runs the repeated query, once per order


def test_a_precomputed_answer_for_every_dataset_customer_fails_on_customers_made_for_the_check() -> None:
    cheat = GRADER_CASES["cheats"]["precomputed, no fallback"]
    result = lab02.check(cheat, planned(), rounds=4, save=False)
    assert not result.passed and result.items[0].criterion == "correctness"
    # it fails on whichever case the shuffled order reaches first that it could not precompute: a customer
    # made for the check (a wrong answer), the unknown id (an answer where NotFoundError belongs), or a dataset
    # customer whose products the catalog changed since (the product's fields differ)
    who = int(re.search(r"on customer (\d+)", result.items[0].message).group(1))
    assert who not in {case[-1] for case in _dataset_customers()} or "['product']" in result.items[0].message, \
        result.items[0].message


def test_the_meter_cannot_be_unhooked_nor_the_store_read() -> None:
    unhooked = lab02.check(GRADER_CASES["cheats"]["unhooks the query meter"], planned(), rounds=4, save=False)
    assert not unhooked.passed and "unhooked" in unhooked.items[-1].message
    store = lab02.check(_reads_the_store, planned(), rounds=4, save=False)
    assert not store.passed and "AttributeError" in store.items[0].message


def test_the_catalog_changes_during_the_check_so_a_private_copy_fails() -> None:
    result = lab02.check(_private_copy(), planned(), rounds=4, save=False)
    assert not result.passed and result.items[0].criterion == "correctness", str(result)
    assert "['product']" in result.items[0].message, str(result)
    passed = lab02.check(reference_history, planned(), rounds=4, save=False)
    assert passed.passed and "products changed in the catalog meanwhile" in passed.items[0].message


def test_a_shape_run_twice_is_an_n_plus_one_suspect() -> None:
    result = lab02.check(_items_in_two_halves, planned(), rounds=4, save=False)
    assert not result.passed and "N+1 suspect: 2×" in result.items[-1].message, str(result)


def test_the_reference_still_passes_with_the_grader_s_tools_replaced() -> None:
    cheat = patching(reference_history, _faked_tools, "reference_behind_fakes")
    try:
        result = lab02.check(cheat, planned(), rounds=4, save=False)
    finally:
        cheat.undo()
    assert result.passed, str(result)
    from labkit.nplusone.shapes import normalise_sql

    assert sys.modules["labkit.nplusone.shapes"].normalise_sql is normalise_sql


def test_a_connection_or_catalog_passed_in_is_ignored_and_said_so() -> None:
    result = lab02.check(reference_history, planned(), conn=object(), catalog=object(), rounds=4, save=False)
    assert result.passed and "ignored: catalog=, conn=" in result.items[-1].message


def test_wrong_answer_stops_grading_with_where_it_differs() -> None:
    result = lab02.check(_wrong, planned(), save=False)
    assert not result.passed and len(result.items) == 1
    assert "[0]['id']" in result.items[0].message


def test_unknown_customer_must_raise_not_found() -> None:
    def lenient(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> list[dict[str, Any]]:
        from labkit.toyshop.db import NotFoundError

        try:
            return reference_history(conn, catalog, customer_id)
        except NotFoundError:
            return []

    result = lab02.check(lenient, planned(), save=False)
    assert not result.passed and "NotFoundError" in result.items[0].message


@pytest.mark.parametrize("bad", [None, 42])
def test_not_a_function(bad: Any) -> None:
    result = lab02.check(bad)
    assert not result.passed and "pass your function" in result.items[0].message
