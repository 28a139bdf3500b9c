"""Lab 08's exercise: take the order endpoint's handler under a latency budget set by the catalog's round trip.

``GET /orders/{id}`` is answered today by :func:`baseline`: one query per line for the item, one per item for
the product's name, one catalog call per item, and stdlib json. The learner writes
``my_order(conn, catalog, order_id) -> bytes`` — the same JSON body — and :func:`check` grades it in process,
like lab 02's grader: their function gets **its own** SQLite connection to the small dataset and **its own**
catalog client (``get``, ``get_many``, ``get_each``: the catalog's read API, nothing behind it), whose every
call sleeps ``catalog_delay_ms`` — an **emulated** round trip. The grader's baseline reads the same products
through a client of its own. In order:

1. **correctness** — the decoded body (exactly ``bytes``, compared by :func:`labkit.grading.exact.difference`) equals the
   baseline's on orders drawn for this run (one item, the most items, several of the timed kind) and the same
   ``NotFoundError`` for an unknown order; products changed in the catalog before anything is graded, so a
   body precomputed from the dataset is stale from the start;
2. **the prediction** — your :class:`labkit.learner.record.Experiment`, planned before the check, is required;
3. **live** — then, **after your function has been handed over and has answered**, the grader changes
   several products (chosen then, with :mod:`secrets`: among those it has already seen and those still to
   come) and asks again: every answer after the change must show it — and so must every later answer, in
   every phase (an answer or a product kept from an earlier call is stale data, not a fix);
4. **the catalog asked** — on a new order, your call must ask the catalog (counted inside your own client,
   where your code cannot unhook it), the answer checked;
5. **the latency budget** — after another round of changes, the floor is one catalog round trip (no handler
   can answer without asking once), measured now, interleaved with your handler on orders of 5+ items: your
   handler may take at most ``limit_x`` times the floor, every answer checked (a run over the budget is measured
   once more, after another round of changes, and the second run decides: the message says so);
6. **speed** — ``labkit.compare`` against the baseline on fresh orders, every answer checked: ``faster`` by
   ``required_speedup``; then your experiment, concluded with the measured ratio (judged against its interval, widened by ±25 %).

Every call of your function goes through one :class:`labkit.grading.kit.Caller`, and the module is sealed at import
(:mod:`labkit.grading.kit`'s threat model).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import statistics
import types
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from labkit.grading import CLOCK as _CLOCK
from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Experiment,
    Item,
    Meter,
    answers,
    band,
    difference,
    failed,
    kind,
    metered,
    passed,
    planned,
    prediction,
    seal,
    timed,
)
from labkit.grading import compare as _compare
from labkit.toyshop.catalog import FakeCatalog as _FakeCatalog
from labkit.toyshop.dataset import ensure as _ensure
from labkit.toyshop.db import NotFoundError
from labkit.toyshop.db import connect as _connect  # the grader's catalog and data: bound at import

__all__ = ["baseline", "check", "hint", "solution", "LIMIT_X", "load_orders"]

LIMIT_X = 2.5  #: the budget: your handler's median time at most this many catalog round trips (one, plus the rest)
_UNKNOWN = 10**9


def baseline(conn: sqlite3.Connection, catalog: Any, order_id: int) -> bytes:
    """The order endpoint as it is: a query per line and per product name, a catalog call per item, stdlib json."""
    head = conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents, customer_id "
                        "FROM orders WHERE id = ?", (order_id,)).fetchone()
    if head is None:
        raise NotFoundError(f"no order with id {order_id}")
    order: dict[str, Any] = dict(zip(("id", "created_at", "status", "currency", "shipping_cents", "total_cents"),
                                     head[:6], strict=True))
    order["items"] = []
    for (line_no,) in conn.execute("SELECT line_no FROM order_items WHERE order_id = ? ORDER BY line_no",
                                   (order_id,)).fetchall():
        pid, qty, unit = conn.execute("SELECT product_id, quantity, unit_price_cents FROM order_items "
                                      "WHERE order_id = ? AND line_no = ?", (order_id, line_no)).fetchone()
        sku, name = conn.execute("SELECT sku, name FROM products WHERE id = ?", (pid,)).fetchone()
        order["items"].append({"line_no": line_no, "product_id": pid, "sku": sku, "name": name, "quantity": qty,
                               "unit_price_cents": unit, "line_total_cents": qty * unit,
                               "product": catalog.get(pid)})
    order["customer_id"] = head[6]
    return json.dumps(order).encode()


def _reference(conn: sqlite3.Connection, catalog: Any, order_id: int) -> bytes:
    """One JOIN for the lines and their names, one batch call for every product, a codec that writes bytes."""
    import orjson

    head = conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents, customer_id "
                        "FROM orders WHERE id = ?", (order_id,)).fetchone()
    if head is None:
        raise NotFoundError(f"no order with id {order_id}")
    rows = conn.execute("SELECT i.line_no, i.product_id, p.sku, p.name, i.quantity, i.unit_price_cents "
                        "FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = ? "
                        "ORDER BY i.line_no", (order_id,)).fetchall()
    details = catalog.get_many([r[1] for r in rows]) if rows else {}
    order = dict(zip(("id", "created_at", "status", "currency", "shipping_cents", "total_cents"), head[:6],
                     strict=True))
    order["items"] = [{"line_no": ln, "product_id": pid, "sku": sku, "name": name, "quantity": qty,
                       "unit_price_cents": unit, "line_total_cents": qty * unit, "product": details.get(pid)}
                      for ln, pid, sku, name, qty, unit in rows]
    order["customer_id"] = head[6]
    return orjson.dumps(order)


EXERCISE = Exercise(
    "Lab 08 — the order endpoint under a latency budget",
    hints=("Open the baseline's source (labkit.exercises.lab08.baseline): count its queries and its catalog "
           "calls for an order of 5 items, and price each with the waterfall of this lab. Which one term is "
           "bigger than the whole budget?",
           "One query can give every line with its product's sku and name (a JOIN on products); "
           "catalog.get_many(ids) asks for every product in one round trip. Keep the ORDER BY line_no.",
           "Build the same dict in one pass over the joined rows and encode it with orjson.dumps — and keep no "
           "answer or product between calls: the grader changes a product and expects to see it."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


@lru_cache(maxsize=1)
def _orders(size: str) -> tuple[Any, Mapping[int, tuple[int, ...]]]:
    """The dataset's connection and every order's product ids, in line order."""
    conn = _connect(_ensure(size, quiet=True), check_same_thread=False)  # graded calls run in a worker
    lines: dict[int, list[int]] = {}
    for oid, pid in conn.execute("SELECT order_id, product_id FROM order_items ORDER BY order_id, line_no"):
        lines.setdefault(oid, []).append(pid)
    return conn, types.MappingProxyType({o: tuple(p) for o, p in lines.items()})  # read-only: graded from it


def load_orders(size: str = "small") -> dict[int, tuple[int, ...]]:
    """Order id -> its product ids in line order (to choose orders to try your handler on)."""
    return dict(_orders(size)[1])


def _differ(want: Any, got: Any) -> str | None:
    """Where your body differs from the baseline's (exactly ``bytes``, decoded by the grader), or None."""
    if type(got) is not bytes:
        return f"return the response body as bytes (JSON, exactly bytes), got {kind(got)}"
    try:
        mine = json.loads(got)
    except ValueError as e:
        return f"cannot read your body as JSON: {type(e).__name__}: {str(e)[:100]}"
    return difference(json.loads(want), mine, "the body")


def _client(fake: Any) -> Any:
    """The learner's catalog client: the catalog's read API over ``fake``, and nothing else to reach."""
    class CatalogClient:
        __slots__ = ()

        def get(self, product_id: int) -> dict[str, Any] | None:
            """One product's details (None if the catalog does not know it): one round trip."""
            return fake.get(product_id)

        def get_many(self, product_ids: Any) -> dict[int, dict[str, Any]]:
            """Details of each distinct id, in one round trip per 50 ids."""
            return fake.get_many(product_ids)

        def get_each(self, product_ids: Any) -> dict[int, dict[str, Any]]:
            """Details of each id, one round trip each."""
            return fake.get_each(product_ids)

        def __repr__(self) -> str:
            return "CatalogClient(get, get_many, get_each)"

    return CatalogClient()


class _CatalogCalls(Meter):
    """Round trips a call made (counted by the catalogs behind the clients, after each round trip): yours on
    your client, the baseline's on the grader's."""

    def __init__(self, *observers: list[Any]) -> None:
        self._observers, self.amount = observers, 0.0

    def __enter__(self) -> _CatalogCalls:
        for o in self._observers:
            o.append(self._count)
        return self

    def _count(self, method: str, url: str, ns: int) -> None:
        self.amount += 1

    def __exit__(self, *exc: Any) -> None:
        for o in self._observers:
            o.remove(self._count)


def _change(catalog: Any, products: list[int], rng: Any) -> None:
    for pid in products:
        catalog.update(pid, {"stock": rng.randrange(10**6), "price_cents": rng.randrange(100, 10**6),
                             "warehouse": f"WH-{rng.randint(1, 60)}"})


def check(my_order: Callable[[sqlite3.Connection, Any, int], bytes], experiment: Experiment | None = None, *,
          rounds: int = 10, limit_x: float = LIMIT_X, required_speedup: float = 2.0, catalog_delay_ms: float = 0.5,
          cases: int = 5, size: str = "small", save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade an order handler against the baseline, then against the latency budget.

    Args:
        my_order: ``my_order(conn, catalog, order_id) -> bytes``, the JSON body of ``/orders/{order_id}``.
        experiment: your :class:`labkit.learner.record.Experiment` (planned before the check, with a predicted ratio:
            required), concluded with the measured speed ratio.
        rounds: interleaved rounds of the budget and of the speed comparison (a few more drawn per grading).
        limit_x: the budget, in catalog round trips (the floor) measured in this run.
        required_speedup: how many times faster than the baseline your handler must be.
        catalog_delay_ms: the in-process catalog's emulated round trip per call.
        cases: about this many fresh orders of 5+ items in the correctness pass, besides the edge cases.
        size: the dataset.
        save: save the concluded experiment record.
        seed: reproduce a grading run (a new seed is drawn each time by default).
    """
    refused, seed, rng = EXERCISE.start(my_order, seed)
    if refused is not None:
        return refused
    conn, orders = _orders(size)
    path = _ensure(size, quiet=True)
    grader = _FakeCatalog.from_db(path, delay_ms=catalog_delay_ms)  # fresh: its writes stay in this grading
    theirs = _FakeCatalog({}, delay_ms=catalog_delay_ms)  # the learner's: the same products, its own observers
    theirs.store, theirs._encoded = grader.store, grader._encoded
    their_conn, their_client = _connect(path, check_same_thread=False), _client(theirs)
    by_items: dict[int, list[int]] = {}
    for oid, pids in orders.items():
        by_items.setdefault(len(pids), []).append(oid)
    many = sorted(o for n, ids in by_items.items() if n >= 5 for o in ids)
    rng.shuffle(many)
    most = max(by_items)
    n_graded = band(rng, cases, 0.4)
    graded = [rng.choice(by_items[1]), rng.choice(by_items[most]), *many[:n_graded]]
    rng.shuffle(graded)
    rest = many[n_graded:]
    metered_order, budgeted, timed_orders = rest[0], rest[1:1 + 4 * rounds], rest[1 + 4 * rounds:]
    # changed before anything is graded: one product of every graded order and thirty more of the orders to come
    _change(grader, sorted({rng.choice(orders[o]) for o in graded} |
                           set(rng.sample(sorted({p for o in rest[:60] for p in orders[o]}), 30))), rng)
    show = lambda c: f"order {c[0]} ({len(orders.get(c[0], ()))} items)"  # noqa: E731

    def yours(order_id: int) -> Any:
        return my_order(their_conn, their_client, order_id)

    def base(order_id: int) -> bytes:
        return baseline(conn, grader, order_id)

    with Caller() as caller:
        def correct() -> Item:
            item = answers(caller, yours, base, [(o,) for o in (*graded, _UNKNOWN)], copy=False, differ=_differ,
                           show=show)
            return item if not item.ok else passed(f"same body as the baseline on {len(graded)} orders drawn for "
                                                   "this run, NotFoundError for an unknown one",
                                                   criterion="correctness")

        def live() -> Item:
            sure = secrets.SystemRandom()  # chosen now, after your function has answered: no seed tells them
            again = sure.sample(graded, min(4, len(graded)))
            ahead = sure.sample(budgeted, 4)
            changed = sorted({sure.choice(orders[o]) for o in (*again, *ahead)})
            _change(grader, changed, sure)
            item = answers(caller, yours, base, [(o,) for o in (*again, *ahead)], copy=False, differ=_differ,
                           show=lambda c: f"order {c[0]} after {len(changed)} of its products changed in the "
                                          "catalog")
            if item.ok:
                return passed(f"live: after {len(changed)} products changed in the catalog, all {len(again) + 4} "
                              "answers show it", criterion="correctness")
            return failed(item.message, "your answer is stale", "ask the catalog on every call; keep nothing "
                          "between calls", criterion="correctness")

        def asked() -> Item:
            return metered(caller, yours, base, lambda: (metered_order,), meter=lambda: _CatalogCalls(grader.observers, theirs.observers),
                           unit="catalog round trips", what=f"order {metered_order}, never asked before",
                           max_fraction=1.0, differ=_differ, hint="ask the catalog on every call (one get_many for all the items)")

        def budget_once() -> tuple[Any, int] | Item:
            """One interleaved run of the floor and your handler, after a round of changes: (comparison, answers
            checked), or the failure that ended it."""
            _change(grader, sorted({secrets.choice(orders[o]) for o in budgeted}), secrets.SystemRandom())
            first = {o: orders[o][0] for o in budgeted}
            got: dict[int, Any] = {}
            current, lost = [0], [0]

            def clock() -> int:
                return _CLOCK() - lost[0]

            def floor(oid: int) -> Any:
                return grader.get_many([first[oid]])  # one round trip: the least any handler must wait for

            def side(fn: Callable[..., Any], keep: bool) -> Callable[..., None]:
                def call(oid: int) -> None:
                    t0 = _CLOCK()
                    out = caller.call(fn, (oid,))
                    lost[0] += (_CLOCK() - t0) - out.ns
                    if out.error is not None:
                        raise RuntimeError(f"on order {oid}: your function raised {type(out.error).__name__}")
                    if keep:
                        got[oid] = out.value
                return call

            def inputs(k: int) -> tuple[int]:
                current[0] = budgeted[k % len(budgeted)]
                return (current[0],)

            n = rounds + rng.randrange(0, max(2, rounds // 2 + 1))
            try:
                c = _compare(side(floor, False), side(yours, True), inputs=inputs, rounds=n, max_rounds=n,
                             names=("one catalog round trip", "yours"), warmup=rng.randint(1, 3), clock=clock)
            except Exception as e:  # the learner's call raised, or its answer broke the comparison
                return failed(f"timing your function against the floor: {type(e).__name__}: {str(e)[:160]}",
                              criterion="budget")
            for oid, body in got.items():
                if (where := _differ(base(oid), body)) is not None:
                    return failed(f"wrong answer on order {oid}, timed against the floor", where,
                                  "every answer counts, timed or not", criterion="budget")
            return c, len(got)

        def within_budget() -> Item:
            # a neighbour's burst (another program, the suite's other worker) stretches your handler's CPU work
            # and not the floor's sleep: a run over the budget is measured once more, after another round of
            # changes, and the second run decides. A handler that waits for more than one round trip is over
            # in both; one that waits for one is over in neither once the machine is quiet.
            run = budget_once()
            if isinstance(run, Item):
                return run
            again = ""
            if run[0].ratio > limit_x:
                over = run[0].ratio
                run = budget_once()
                if isinstance(run, Item):
                    return run
                again = f" (measured twice: the first run read {over:.2f}×, over the budget)"
            c, checked = run
            x = c.ratio
            what = (f"orders of 5+ items: {x:.2f}× one catalog round trip "
                    f"({statistics.median(c.baseline_ns) / 1e3:.0f} µs, measured now), {checked} answers checked"
                    f"{again}")
            if x > limit_x:
                return failed(what, f"over the budget of {limit_x:g}×: {x / limit_x:.1f} times what it allows",
                              "count the round trips and queries per order (hint 1): the budget leaves room for one",
                              detail=c, criterion="budget")
            return passed(f"{what}, within the budget of {limit_x:g}×", detail=c, criterion="budget")

        def fast_then_concluded() -> tuple[Item, ...]:
            item = timed(caller, base, yours, inputs=lambda k: (timed_orders[k % len(timed_orders)],),
                         required_speedup=required_speedup, rounds=rounds, rng=rng, what="fresh orders of 5+ items",
                         differ=_differ)
            return item, prediction(experiment, item.detail, save=save)

        result = EXERCISE.grade(correct, lambda: planned(experiment), live, asked, within_budget,
                                fast_then_concluded, seed=seed)
    their_conn.close()
    return result


_SEALED = seal(globals())
