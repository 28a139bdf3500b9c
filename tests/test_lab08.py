"""Lab 08's grader: the order endpoint under a latency budget. The reference passes; the baseline, every generic
cheat, a memo of its answers, bodies precomputed for the dataset, a product cache that never refreshes (or
refreshes one product), reading the catalog's store behind its API, and a wrong answer all fail."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

import orjson
from graderkit import assert_grader, hard_coded, memoised, mutating, standard_cheats

from labkit.exercises import lab08
from labkit.learner.record import Experiment
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


_first: dict[int, Any] = {}


def refreshes_one_product(conn: sqlite3.Connection, catalog: Any, order_id: int) -> bytes:
    """A product cache that asks the catalog again for the order's first product only (what a liveness check that
    changes one product, the first of an order, would let through)."""
    class Keeper:
        def get_many(self, ids: list[int]) -> dict[int, Any]:
            ids = list(ids)
            fresh = [ids[0], *(i for i in ids[1:] if i not in _first)]
            _first.update(catalog.get_many(fresh))
            return {i: _first[i] for i in ids if _first.get(i) is not None}
    return reference(conn, Keeper(), order_id)


def reads_the_store(conn: sqlite3.Connection, catalog: Any, order_id: int) -> bytes:
    """Answers from the fake catalog's store behind its API: no round trip at all."""
    class Silent:
        def get_many(self, ids):
            return {i: orjson.loads(catalog._encoded[i]) for i in ids if i in catalog._encoded}
    return reference(conn, Silent(), order_id)


def _unhooks(conn: sqlite3.Connection, catalog: Any, order_id: int) -> None:
    for name, value in (("delay_ms", 0.0), ("observers", [])):  # a catalog with no delay, and nobody counting
        with contextlib.suppress(AttributeError):
            setattr(catalog, name, value)


def _every_order() -> list[tuple[Any, ...]]:
    # the bodies of the dataset's orders as the dataset holds them: what a learner could precompute
    from labkit.toyshop.catalog import FakeCatalog
    from labkit.toyshop.dataset import ensure
    from labkit.toyshop.db import connect

    path = ensure("small", quiet=True)
    conn, cat = connect(path), FakeCatalog.from_db(path)
    return [(conn, cat, o) for o in lab08.load_orders()]


def _experiment() -> Experiment:
    return Experiment.plan("order handler", "Five round trips become one and json becomes orjson: about a fifth "
                           "of the time.", predicted_ratio=0.2)


GRADER_CASES = {
    "grade": lambda fn, experiment: lab08.check(fn, experiment, rounds=6, save=False),
    "experiment": _experiment,
    "reference": reference,
    "baseline": lab08.baseline,
    "wrong": wrong,
    "cheats": {**standard_cheats(lab08.baseline, lab08, wrong=wrong,
                                 size=lambda conn, cat, oid: len(lab08.load_orders().get(oid, ())), at_least=5),
               "memoised by order id": memoised(lab08.baseline, key=lambda conn, cat, oid: oid),
               "precomputed for the dataset": hard_coded(reference, _every_order(), key=lambda conn, cat, oid: oid,
                                                         fallback=reference),
               "kept products": kept_products,
               "refreshes one product": refreshes_one_product,
               "reads the fake's store": reads_the_store,
               "mutates its client": mutating(lab08.baseline, _unhooks)},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_the_baseline_is_right_and_fails_the_budget_in_round_trips():
    grade = lab08.check(lab08.baseline, _experiment(), rounds=6, save=False, seed=3)
    assert [i.ok for i in grade.items] == [True, True, True, True, False]
    assert "one catalog round trip" in grade.items[4].message and "over the budget of 2.5×" in grade.items[4].message
    # over in the first run, so measured once more (a neighbour's burst cannot fail a handler alone): over again
    assert "measured twice: the first run read" in grade.items[4].message


def test_a_memo_of_answers_and_product_caches_are_stale_once_products_change():
    for fn in (kept_products, refreshes_one_product):
        _kept.clear()
        _first.clear()
        grade = lab08.check(fn, _experiment(), rounds=6, save=False)
        assert [i.ok for i in grade.items] == [True, True, False] and "stale" in grade.items[2].message
    memo = lab08.check(memoised(lab08.baseline, key=lambda conn, cat, oid: oid), _experiment(), rounds=6, save=False)
    assert not memo.passed and "stale" in memo.items[-1].message


def test_the_learners_client_has_the_catalogs_read_api_and_nothing_behind_it():
    seen = []

    def probe(conn, catalog, order_id):
        seen.append(sorted(n for n in dir(catalog) if not n.startswith("__")))
        return reference(conn, catalog, order_id)

    lab08.check(probe, _experiment(), rounds=6, save=False)
    assert seen and seen[0] == ["get", "get_each", "get_many"]
    grade = lab08.check(reads_the_store, _experiment(), rounds=6, save=False)
    assert not grade.passed and "_encoded" in grade.items[0].message


def test_wrong_answers_name_where_they_differ_and_refusals_say_what_to_pass():
    grade = lab08.check(wrong, _experiment(), rounds=6, save=False)
    assert len(grade.items) == 1 and "missing key 'line_total_cents'" in grade.items[0].message
    as_dict = lab08.check(lambda conn, cat, oid: orjson.loads(reference(conn, cat, oid)), _experiment(), rounds=6,
                          save=False)
    assert "as bytes" in as_dict.items[0].message
    assert "pass your function itself" in str(lab08.check(None))
    no_ratio = lab08.check(reference, Experiment.plan("x", "a hypothesis here"), rounds=6, save=False)
    assert not no_ratio.passed and "no predicted ratio" in str(no_ratio)


def test_the_prediction_is_concluded_with_the_measured_ratio():
    grade = lab08.check(reference, _experiment(), rounds=6, save=False, seed=5)
    assert grade.passed, str(grade)
    assert "seed 5" in grade.title and "your prediction (0.2)" in grade.items[-1].message
    assert "timed answers checked" in grade.items[-2].message and "answers checked" in grade.items[4].message
