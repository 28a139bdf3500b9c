"""Lab 08's exercise: take the order endpoint's handler under a latency budget set by the catalog's round trip.

``GET /orders/{id}`` is answered today by :func:`baseline`: one query per line for the item, one per item for
the product's name, one catalog call per item, and stdlib json. The learner writes
``my_order(conn, catalog, order_id) -> bytes`` — the same JSON body — and :func:`check` grades it in process,
like lab 02's grader: their function, the small dataset, and an in-process catalog
(:class:`labkit.toyshop.catalog.FakeCatalog`) whose every call sleeps ``catalog_delay_ms`` — an **emulated**
round trip. In order:

1. **correctness** — the decoded body equals the baseline's on orders drawn fresh for this run (one item, the
   most items, several others) and raises the same ``NotFoundError`` for an unknown order; and the answer is
   *live*: after the grader changes a product in the catalog, the next answer shows the change (an answer
   or a product kept from an earlier call is stale data, not a fix);
2. **the latency budget** — the floor is one catalog round trip (no handler can answer without asking the
   catalog once), measured now, interleaved with your handler on orders it never saw: your handler may take
   at most ``limit_x`` times the floor; and it must ask the catalog at least once (no work is not a fix);
3. **speed** — ``labkit.compare`` against the baseline on fresh orders: ``faster`` by ``required_speedup``;
4. **the prediction** — your experiment record, concluded with the measured ratio.
"""

from __future__ import annotations

import json
import random
import sqlite3
import statistics
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from labkit.check import (
    CheckResult,
    Exercise,
    Item,
    concluded,
    failed,
    fresh_seed,
    not_callable,
    passed,
    same_answers,
    speed,
)
from labkit.record import Experiment
from labkit.toyshop.db import NotFoundError

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
def _orders(size: str) -> tuple[Any, dict[int, tuple[int, ...]]]:
    """The dataset's connection and every order's product ids, in line order."""
    from labkit.toyshop import dataset, db

    conn = db.connect(dataset.ensure(size, quiet=True))
    lines: dict[int, list[int]] = {}
    for oid, pid in conn.execute("SELECT order_id, product_id FROM order_items ORDER BY order_id, line_no"):
        lines.setdefault(oid, []).append(pid)
    return conn, {o: tuple(p) for o, p in lines.items()}


def load_orders(size: str = "small") -> dict[int, tuple[int, ...]]:
    """Order id -> its product ids in line order (to choose orders to try your handler on)."""
    return dict(_orders(size)[1])


def _decoded(body: Any) -> Any:
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"return the response body as bytes (JSON), got a {type(body).__name__}")
    return json.loads(bytes(body))


def _diff(want: Any, got: Any) -> str:
    try:
        mine = _decoded(got)
    except (TypeError, ValueError) as e:
        return f"cannot read your body as JSON: {type(e).__name__}: {str(e)[:100]}"
    need = _decoded(want)
    if not isinstance(mine, dict) or set(mine) != set(need):
        return f"keys {sorted(mine) if isinstance(mine, dict) else type(mine).__name__}, expected {sorted(need)}"
    for key in need:
        if key != "items" and need[key] != mine[key]:
            return f"[{key!r}]: expected {need[key]!r}, got {mine[key]!r}"
    if len(need["items"]) != len(mine["items"]):
        return f"expected {len(need['items'])} items, got {len(mine['items'])}"
    for n, (a, b) in enumerate(zip(need["items"], mine["items"], strict=True)):
        if a != b:
            where = next((k for k in a if a[k] != (b or {}).get(k)), "?")
            return f"['items'][{n}][{where!r}]: expected {str(a.get(where))[:80]}, got {str((b or {}).get(where))[:80]}"
    return "the bodies differ"


def check(my_order: Callable[[sqlite3.Connection, Any, int], bytes], experiment: Experiment | None = None, *,
          rounds: int = 10, limit_x: float = LIMIT_X, required_speedup: float = 2.0, catalog_delay_ms: float = 0.5,
          cases: int = 5, size: str = "small", save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade an order handler against the baseline, then against the latency budget.

    Args:
        my_order: ``my_order(conn, catalog, order_id) -> bytes``, the JSON body of ``/orders/{order_id}``.
        experiment: your :class:`labkit.record.Experiment` (with a predicted ratio), concluded with the measured
            speed ratio.
        rounds: interleaved rounds of the budget and of the speed comparison.
        limit_x: the budget, in catalog round trips (the floor) measured in this run.
        required_speedup: how many times faster than the baseline your handler must be.
        catalog_delay_ms: the in-process catalog's emulated round trip per call.
        cases: fresh orders in the correctness pass, besides the edge cases.
        size: the dataset.
        save: save the concluded experiment record.
        seed: reproduce a grading run (a new seed is drawn each time by default).
    """
    from labkit.comparison import compare
    from labkit.toyshop.catalog import FakeCatalog
    from labkit.toyshop.dataset import ensure

    refused = not_callable(EXERCISE, my_order)
    if refused is not None:
        return refused
    if experiment is not None and (not isinstance(experiment, Experiment) or experiment.predicted_ratio is None):
        return EXERCISE.refuse("experiment= takes the Experiment.plan(...) you wrote, with a predicted_ratio")
    seed = fresh_seed() if seed is None else seed
    rng = random.Random(seed)
    conn, orders = _orders(size)
    catalog = FakeCatalog.from_db(ensure(size, quiet=True), delay_ms=catalog_delay_ms)  # fresh: its writes stay here
    by_items: dict[int, list[int]] = {}
    for oid, pids in orders.items():
        by_items.setdefault(len(pids), []).append(oid)
    many = sorted(o for n, ids in by_items.items() if n >= 5 for o in ids)
    rng.shuffle(many)
    most = max(by_items)
    graded = [rng.choice(by_items[1]), rng.choice(by_items[most]), *many[:cases]]
    live, budgeted, timed = many[cases], many[cases + 1:cases + 1 + 4 * rounds], many[cases + 1 + 4 * rounds:]
    show = lambda c: f"order {c[2]} ({len(orders.get(c[2], ()))} items)"  # noqa: E731

    def correct() -> Item:
        item = same_answers(my_order, baseline, [(conn, catalog, o) for o in (*graded, _UNKNOWN)], copy=False,
                            same=lambda a, b: _decoded(a) == _decoded(b), describe=_diff, show=show)
        return item if not item.ok else passed(f"same body as the baseline on {len(graded)} orders drawn for this "
                                               "run, NotFoundError for an unknown one")

    def current() -> Item:
        try:
            my_order(conn, catalog, live)  # whatever it may keep, it has now seen this order
        except Exception as e:  # the learner's code: reported, not raised
            return failed(f"on order {live}: your function raised {type(e).__name__}: {e}")
        pid = orders[live][0]
        catalog.update(pid, {"stock": 1_000_000 + rng.randrange(10**6)})
        item = same_answers(my_order, baseline, [(conn, catalog, live)], copy=False,
                            same=lambda a, b: _decoded(a) == _decoded(b), describe=_diff,
                            show=lambda c: f"order {live} after product {pid}'s stock changed in the catalog")
        if item.ok:
            return passed(f"live: after product {pid} changed in the catalog, order {live}'s answer shows it")
        return failed(item.message, "your answer is stale", "ask the catalog on every call; keep nothing between calls")

    def within_budget() -> Item:
        first = {o: orders[o][0] for o in budgeted}
        calls: list[str] = []
        catalog.observers.append(lambda m, url, d: calls.append(url))
        try:
            my_order(conn, catalog, budgeted[0])
        except Exception as e:
            return failed(f"on order {budgeted[0]}: your function raised {type(e).__name__}: {e}")
        finally:
            catalog.observers.clear()
        if not calls:
            return failed(f"order {budgeted[0]}, never seen before: answered without asking the catalog",
                          "that answer came from something kept, not from the catalog",
                          "ask the catalog on every call (one get_many for all the items)")

        def floor(conn: Any, cat: Any, oid: int) -> Any:
            return cat.get_many([first[oid]])  # one round trip: the least any handler must wait for
        floor.__name__ = "one catalog round trip"
        try:
            c = compare(floor, my_order, inputs=lambda k: (conn, catalog, budgeted[k % len(budgeted)]),
                        rounds=rounds, max_rounds=rounds, names=("one catalog round trip", "yours"))
        except Exception as e:
            return failed(f"timing your function: it raised {type(e).__name__}: {e}")
        x = c.ratio
        what = (f"orders of 5+ items never graded before: {x:.2f}× one catalog round trip "
                f"({statistics.median(c.baseline_ns) / 1e3:.0f} µs, measured now)")
        if x > limit_x:
            return failed(what, f"over the budget of {limit_x:g}×: {x / limit_x:.1f} times what it allows",
                          "count the round trips and queries per order (hint 1): the budget leaves room for one",
                          detail=c)
        return passed(f"{what}, within the budget of {limit_x:g}×", detail=c)

    def fast_then_concluded() -> tuple[Item, ...]:
        item = speed(baseline, my_order, inputs=lambda k: (conn, catalog, timed[k % len(timed)]),
                     required_speedup=required_speedup, rounds=rounds, what="fresh orders of 5+ items")
        return item, *concluded(experiment, item.detail, save=save)

    result = EXERCISE.grade(correct, current, within_budget, fast_then_concluded)
    return CheckResult(f"{result.title} (seed {seed})", result.items)
