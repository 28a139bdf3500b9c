"""Lab 08's grader: the order endpoint under a latency budget. The reference passes; the baseline, a memo of its
answers, answers hard-coded for the orders a learner could see, a product cache that never refreshes and a
wrong answer all fail."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
from graderkit import assert_grader, hard_coded, memoised

from labkit.exercises import lab08
from labkit.record import Experiment
from labkit.toyshop.db import NotFoundError


def reference(conn: sqlite3.Connection, catalog: Any, order_id: int) -> bytes:
    """A learner's fix: one JOIN for the lines and names, one batch call to the catalog, orjson."""
    head = conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents, customer_id "
                        "FROM orders WHERE id = ?", (order_id,)).fetchone()
    if head is None:
        raise NotFoundError(f"no order {order_id}")
    rows = conn.execute("SELECT i.line_no, i.product_id, p.sku, p.name, i.quantity, i.unit_price_cents FROM "
                        "order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = ? ORDER BY i.line_no",
                        (order_id,)).fetchall()
    details = catalog.get_many([r[1] for r in rows])
    items = [{"line_no": r[0], "product_id": r[1], "sku": r[2], "name": r[3], "quantity": r[4],
              "unit_price_cents": r[5], "line_total_cents": r[4] * r[5], "product": details.get(r[1])} for r in rows]
    return orjson.dumps({"id": head[0], "created_at": head[1], "status": head[2], "currency": head[3],
                         "shipping_cents": head[4], "total_cents": head[5], "items": items, "customer_id": head[6]})


def wrong(conn: sqlite3.Connection, catalog: Any, order_id: int) -> bytes:
    """Fast, and forgets the line totals."""
    body = orjson.loads(reference(conn, catalog, order_id))
    for item in body["items"]:
        del item["line_total_cents"]
    return orjson.dumps(body)


_kept: dict[int, Any] = {}


def kept_products(conn: sqlite3.Connection, catalog: Any, order_id: int) -> bytes:
    """A product cache with no refresh at all: fast after the first call, and stale once a product changes."""
    class Keeper:
        def get_many(self, ids: list[int]) -> dict[int, Any]:
            missing = [i for i in ids if i not in _kept]
            _kept.update(catalog.get_many(missing) if missing else {})
            return {i: _kept[i] for i in ids if _kept.get(i) is not None}
    return reference(conn, Keeper(), order_id)


def _seen() -> list[tuple[Any, ...]]:
    # the orders a learner could try in the notebook: the first ones of each size
    from labkit.toyshop.catalog import FakeCatalog
    from labkit.toyshop.dataset import ensure
    from labkit.toyshop.db import connect

    path = ensure("small", quiet=True)
    conn, cat = connect(path), FakeCatalog.from_db(path)
    return [(conn, cat, o) for o in list(lab08.load_orders())[:40]]


GRADER_CASES = {
    "grade": lambda fn: lab08.check(fn, rounds=6, save=False),
    "reference": reference,
    "baseline": lab08.baseline,
    "wrong": wrong,
    "cheats": {"memoised": memoised(lab08.baseline, key=lambda conn, cat, oid: oid),
               "hard-coded": hard_coded(reference, _seen(), key=lambda conn, cat, oid: oid, fallback=lab08.baseline),
               "kept products": kept_products},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_the_baseline_is_right_and_fails_the_budget_in_round_trips():
    grade = lab08.check(lab08.baseline, rounds=6, save=False, seed=3)
    assert [i.ok for i in grade.items] == [True, True, False]
    assert "one catalog round trip" in grade.items[2].message and "over the budget of 2.5×" in grade.items[2].message


def test_a_memo_of_answers_and_a_product_cache_without_refresh_are_stale():
    for fn in (memoised(lab08.baseline, key=lambda conn, cat, oid: oid), kept_products):
        grade = lab08.check(fn, rounds=6, save=False)
        assert [i.ok for i in grade.items] == [True, False] and "stale" in grade.items[1].message


def test_an_answer_that_never_asks_the_catalog_fails_the_budget():
    class Silent:  # a catalog that answers without a call the grader can see
        def __init__(self, inner):
            self.inner = inner

        def get_many(self, ids):
            return {i: orjson.loads(self.inner._encoded[i]) for i in ids if i in self.inner._encoded}

    grade = lab08.check(lambda conn, cat, oid: reference(conn, Silent(cat), oid), rounds=6, save=False)
    assert not grade.passed and "without asking the catalog" in grade.items[-1].message


def test_wrong_answers_name_where_they_differ_and_refusals_say_what_to_pass():
    grade = lab08.check(wrong, rounds=6, save=False)
    assert len(grade.items) == 1 and "['line_total_cents']" in grade.items[0].message
    as_dict = lab08.check(lambda conn, cat, oid: orjson.loads(reference(conn, cat, oid)), rounds=6, save=False)
    assert "as bytes" in as_dict.items[0].message or "cannot read your body" in as_dict.items[0].message
    assert "pass your function itself" in str(lab08.check(None))
    assert "predicted_ratio" in str(lab08.check(reference, Experiment.plan("x", "a hypothesis here")))


def test_the_prediction_is_concluded_with_the_measured_ratio():
    exp = Experiment.plan("order handler", "Five round trips become one and json becomes orjson: about a fifth "
                          "of the time.", predicted_ratio=0.2)
    grade = lab08.check(reference, exp, rounds=6, save=False, seed=5)
    assert grade.passed, str(grade)
    assert "seed 5" in grade.title and "your prediction (0.2)" in grade.items[-1].message
