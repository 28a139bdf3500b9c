"""Lab 02's exercise: a customer's order history without the N+1 hidden behind a function that is fine alone.

The lab's walkthrough fixes the export's per-item loop. The exercise is another endpoint's defect: the order
history, every order of a customer (newest first) exactly as ``GET /orders/{id}`` shows it. Its baseline
(:func:`baseline`) calls :func:`labkit.toyshop.export.order_detail` — itself one JOIN and one catalog batch —
once per order, so the history makes two queries and a catalog call *per order*: an N+1 of batches, the shape an
ORM's lazy relationship takes in a loop. The learner writes ``my_history(conn, catalog, customer_id) -> list``
with the same signature (STYLE 15), plans an experiment predicting its gain, and passes both to :func:`check`,
which grades, in order:

1. **correctness** — exactly the baseline's list (:func:`labkit.grading.kit.difference`) for a range of customers
   (no orders, one order, many; the dataset's and customers created for this grading, of the timed size too),
   and the same ``NotFoundError`` for an unknown customer; a wrong answer stops the grading there;
2. **the prediction planned** — an :class:`~labkit.learner.record.Experiment` with a predicted ratio is required;
3. **query budget** — on a customer created for this grading (40 items or more: it exists nowhere before the
   call), the answer checked, at most ``max_queries`` queries and catalog calls in total, no SQL shape repeated
   more than ``threshold`` times (the detector's default, 1), and at least :data:`MIN_FRACTION` of the
   baseline's: a history that makes (almost) no query for a customer nobody has seen is answering from a
   precomputed table — and at least one catalog call: the products' details come from the catalog;
4. **speed** — ``labkit.compare`` interleaving baseline and solution on customers created for each timed
   call, every answer checked: verdict ``faster`` by at least ``required_speedup``;
5. **the prediction concluded** with the measured comparison and saved.

What the learner's function receives is its own: a private in-memory copy of the dataset (no other
connection can open it, so no query escapes the meter) with the grading's customers added, metered by
SQLite's own trace callback (a canary query after each metered call proves it was not unhooked), and a
catalog client that exposes only ``get``, ``get_many`` and ``get_each`` — an in-process fake sleeping
``catalog_delay_ms`` per call (an *emulated* round trip about as long as a loopback HTTP call) whose store,
delay and call counter live where the learner's code cannot set them. The baseline runs on another copy and
another client. The catalog's data changes while the check runs — before each graded customer, a few of its
products get a new stock and price in both clients' stores alike — so an answer read from a copy of the
dataset's products (or an earlier call's) is not the catalog's answer. The grader's own tools (the dataset,
the connections, the catalog clients, the shape detector) are bound at import. :mod:`labkit.grading.kit`
states the threat model.
"""

from __future__ import annotations

import functools
import random
import secrets
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Experiment,
    Item,
    Meter,
    answers,
    difference,
    failed,
    metered,
    passed,
    planned,
    prediction,
    seal,
    timed,
)
from labkit.nplusone.shapes import normalise_sql as _normalise_sql
from labkit.toyshop.catalog import FakeCatalog as _FakeCatalog
from labkit.toyshop.dataset import ensure as _ensure
from labkit.toyshop.db import NotFoundError as _NotFound
from labkit.toyshop.db import ToyshopConnection as _ToyshopConnection
from labkit.toyshop.db import connect as _connect
from labkit.toyshop.export import order_detail as _order_detail  # bound at import: see labkit.grading.kit

__all__ = ["baseline", "check", "hint", "solution", "CUSTOMERS", "MIN_FRACTION"]

#: dataset customers graded for correctness: 0, 1, 2, 10 and 50 orders of 4 items, plus one skewed customer.
CUSTOMERS = (9, 2, 3, 5, 1, 42)
_UNKNOWN = 10**9
#: the least an export of a customer created just now may make, as a fraction of the baseline's queries and
#: catalog calls: one query for the customer and one catalog batch are already more.
MIN_FRACTION = 0.01


_HISTORY = "SELECT id FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC"


def baseline(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> list[dict[str, Any]]:
    """The order history the learner improves on: every order of the customer, newest first, each exactly as
    ``GET /orders/{id}`` answers it (:func:`labkit.toyshop.export.order_detail`, called once per order).

    Raises :class:`labkit.toyshop.db.NotFoundError` for an unknown customer."""
    if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
        raise _NotFound(f"no customer with id {customer_id}")
    return [_order_detail(conn, catalog, oid) for (oid,) in conn.execute(_HISTORY, (customer_id,)).fetchall()]


def _copy_of(path: Any) -> sqlite3.Connection:
    """A private in-memory copy of the dataset: another connection cannot open it, the file stays untouched."""
    src = _connect(path)
    mem = sqlite3.connect(":memory:", factory=_ToyshopConnection, check_same_thread=False, cached_statements=256)
    src.backup(mem)
    src.close()
    return mem


class _Customers:
    """Customers created for one grading, in both copies of the database: they exist nowhere before the call."""

    def __init__(self, conns: tuple[sqlite3.Connection, ...], rng: random.Random) -> None:
        self.conns, self.rng = conns, rng
        conn = conns[0]
        self.products = [(int(p), int(c)) for p, c in conn.execute("SELECT id, price_cents FROM products")]
        self.next_order = int(conn.execute("SELECT max(id) FROM orders").fetchone()[0]) + 1
        self.next_item = int(conn.execute("SELECT max(id) FROM order_items").fetchone()[0]) + 1
        self.made: dict[Any, int] = {}

    def new(self, items: int, key: Any = None) -> int:
        """A new customer with ``items`` order lines (the same customer again for the same ``key``)."""
        if key is not None and key in self.made:
            return self.made[key]
        rng = self.rng
        cid = rng.randrange(10**6, 10**8)
        while self.conns[0].execute("SELECT 1 FROM customers WHERE id = ?", (cid,)).fetchone():
            cid = rng.randrange(10**6, 10**8)
        customer = (cid, f"Fresh {cid}", f"c{cid}@example.test", rng.choice(["DE", "FR", "SE", "US"]),
                    rng.choice(["free", "pro", "gold"]), "2025-01-01T00:00:00")
        orders, lines, left = [], [], items
        while left > 0:
            n = min(left, rng.randint(1, 8))
            oid, left = self.next_order, left - n
            self.next_order += 1
            total = 0
            for line_no in range(1, n + 1):
                pid, price = self.products[rng.randrange(len(self.products))]
                qty = rng.randint(1, 5)
                total += qty * price
                lines.append((self.next_item, oid, line_no, pid, qty, price))
                self.next_item += 1
            orders.append((oid, cid, f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00",
                           rng.choice(["paid", "shipped", "delivered"]), "EUR", 499, total + 499))
        for conn in self.conns:
            conn.execute("INSERT INTO customers (id, name, email, country, tier, created_at) VALUES (?,?,?,?,?,?)",
                         customer)
            conn.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?,?)", orders)
            conn.executemany("INSERT INTO order_items VALUES (?,?,?,?,?,?)", lines)
            conn.commit()
        if key is not None:
            self.made[key] = cid
        return cid


def _catalog(path: Any, delay_ms: float, calls: list[int], stores: list[Any]) -> Any:
    """A catalog client with only the public API (``get``, ``get_many``, ``get_each``): the fake behind it,
    its store, its delay and the count of its calls are out of the caller's reach (closures, not attributes).
    The fake's store is appended to ``stores``: the grader changes its data while the check runs."""
    fake = _FakeCatalog.from_db(path, delay_ms=delay_ms)
    stores.append(fake.store)
    fake.observers.append(lambda *_: calls.__setitem__(0, calls[0] + 1))

    class Catalog:
        __slots__ = ()
        batch_size = fake.batch_size

        def get(self, product_id: int) -> Any:
            """One product's details (one call), or None."""
            return fake.get(product_id)

        def get_many(self, product_ids: Any) -> Any:
            """Details of each distinct id, in batches of ``batch_size`` per call."""
            return fake.get_many(product_ids)

        def get_each(self, product_ids: Any) -> Any:
            """Details of each distinct id, one call per id."""
            return fake.get_each(product_ids)

        def __repr__(self) -> str:
            return "Catalog(the exercise's catalog client: get, get_many, get_each)"

    return Catalog()


class _Changes:
    """The catalog's data changing while the check runs: before a graded customer's calls (once per ``key``, so
    the baseline and the solution see the same data for it), a few of the customer's products get a new stock
    and price, in every store alike. A copy of the products read before (from the dataset's file, or kept from
    an earlier call) is then not what the catalog answers."""

    def __init__(self, stores: list[Any], conn: sqlite3.Connection, rng: random.Random) -> None:
        self.stores, self.conn, self.rng, self.done = stores, conn, rng, set()
        self.count = 0

    def at(self, key: Any, customer_id: int) -> tuple[int]:
        """Change some of ``customer_id``'s products, the first time ``key`` is asked for; the arguments to grade."""
        if key not in self.done:
            self.done.add(key)
            pids = [p for (p,) in self.conn.execute(
                "SELECT DISTINCT i.product_id FROM order_items i JOIN orders o ON o.id = i.order_id "
                "WHERE o.customer_id = ? ORDER BY i.product_id", (customer_id,))]
            for pid in self.rng.sample(pids, min(len(pids), self.rng.randint(1, 3))):
                fields = {"stock": self.rng.randrange(0, 10_000), "price_cents": self.rng.randrange(100, 100_000)}
                for store in self.stores:
                    store.update(pid, fields)
                self.count += 1
        return (customer_id,)


class _Queries(Meter):
    """SQL statements (SQLite's own trace callback on the connection) and catalog calls of one call; a canary
    query afterwards proves the callback was still attached."""

    def __init__(self, conn: sqlite3.Connection, calls: list[int]) -> None:
        self.conn, self.calls, self.statements, self.sites = conn, calls, [], []

    def __enter__(self) -> _Queries:
        self.canary = f"SELECT 1 /* labkit-canary-{secrets.token_hex(8)} */"
        self.before = self.calls[0]
        statements, sites = self.statements, self.sites

        def seen(sql: str) -> None:
            statements.append(sql)
            sites.append(_site())
        self.conn.set_trace_callback(seen)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.execute(self.canary).fetchall()
        self.conn.set_trace_callback(None)
        self.catalog = catalog = self.calls[0] - self.before
        if not self.statements or self.statements[-1] != self.canary:
            raise RuntimeError("the query meter was unhooked during the call (set_trace_callback): every query "
                               "your export makes is counted")
        self.statements.pop()
        self.sites.pop()
        self.amount = float(len(self.statements) + catalog)


def _site() -> str:
    """The line that ran the statement: the first frame outside sqlite3's wrappers and this module."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.endswith(("toyshop/db.py", "exercises/lab02.py"))):
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_lineno}"


def _diff(want: Any, got: Any) -> str | None:
    return difference(want, got)


def _reference(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> list[dict[str, Any]]:
    """The reference: the orders' heads in one query, all their items (with the products' names) in one
    ``IN (…)`` over the order ids, the catalog once for every distinct product (its bounded batches), then the
    same answer assembled in one pass."""
    if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
        raise _NotFound(f"no customer with id {customer_id}")
    heads = conn.execute("SELECT id, created_at, status, currency, shipping_cents, total_cents, customer_id "
                         "FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC",
                         (customer_id,)).fetchall()
    by_id: dict[int, list[tuple]] = {h[0]: [] for h in heads}
    for i in range(0, len(heads), 500):  # well under SQLite's bound-variable limit
        ids = [h[0] for h in heads[i:i + 500]]
        for r in conn.execute("SELECT i.order_id, i.line_no, i.product_id, p.sku, p.name, i.quantity, "
                              "i.unit_price_cents FROM order_items i JOIN products p ON p.id = i.product_id "
                              f"WHERE i.order_id IN ({','.join('?' * len(ids))}) ORDER BY i.order_id, i.line_no",
                              ids):
            by_id[r[0]].append(r[1:])
    pids = list(dict.fromkeys(r[1] for rows in by_id.values() for r in rows))
    details = catalog.get_many(pids) if pids else {}
    history = []
    for oid, created, status, currency, shipping, total, cid in heads:
        history.append({"id": oid, "created_at": created, "status": status, "currency": currency,
                        "shipping_cents": shipping, "total_cents": total, "customer_id": cid,
                        "items": [{"line_no": line_no, "product_id": pid, "sku": sku, "name": name,
                                   "quantity": qty, "unit_price_cents": unit, "line_total_cents": qty * unit,
                                   "product": details.get(pid)}
                                  for line_no, pid, sku, name, qty, unit in by_id[oid]]})
    return history


EXERCISE = Exercise(
    "Lab 02 — the order history without its N+1",
    hints=("Count the queries for one customer with labkit.nplusone.watch: which shapes repeat, and once per "
           "what? A function that is fine for one order can still be the body of the loop.",
           "Read order_detail: what does it ask the database and the catalog for one order? Ask each of those "
           "questions once for all the customer's orders instead of once per order.",
           "Compare your answer with the baseline's for a customer with a few orders, key by key: the order of the "
           "orders, of the items inside each, and every field of an order must be the same."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def _suspects(statements: list[str], sites: list[str], threshold: int) -> list[tuple[int, str, str]]:
    """Shapes repeated more than ``threshold`` times: (count, shape, the line that ran it first), most first."""
    shapes: dict[str, list[Any]] = {}
    for sql, site in zip(statements, sites, strict=True):
        seen = shapes.setdefault(_normalise_sql(sql), [0, site])
        seen[0] += 1
    return sorted(((n, shape, site) for shape, (n, site) in shapes.items() if n > threshold), reverse=True)


def check(solution: Callable[[sqlite3.Connection, Any, int], list[dict[str, Any]]],
          experiment: Experiment | None = None, *, size: str = "small", customers: tuple[int, ...] = CUSTOMERS,
          max_queries: int = 8, threshold: int = 1,
          rounds: int = 10, required_speedup: float = 1.5, catalog_delay_ms: float = 0.05, save: bool = True,
          seed: int | None = None, **ignored: Any) -> CheckResult:
    """Grade an order history against the per-order baseline.

    Args:
        solution: ``solution(conn, catalog, customer_id) -> list``, same signature and answer as the baseline.
        experiment: your ``Experiment.plan(...)`` with a predicted ratio: required (a prediction is part of
            passing); concluded with the measured comparison and saved.
        size: the dataset the grading's private copies are made from.
        customers: dataset customers whose answers must match the baseline's (more are created per grading).
        max_queries: SQL queries + catalog calls allowed for one history of a customer with 40 items or more.
        threshold: a shape repeated more than this is an N+1 suspect and fails the budget.
        rounds: interleaved A/B rounds for the speed check (a few more are drawn per grading).
        required_speedup: how many times faster than the baseline the solution must be.
        catalog_delay_ms: the fake catalog's emulated round trip per call.
        save: save the concluded record.
        seed: reproduces a grading run (a new one is drawn each time by default).

    ``conn=`` and ``catalog=`` are no longer taken — a connection or client shared with the grader is what a
    solution could change under it: they are ignored, and the result says so.

    Returns:
        A :class:`labkit.grading.kit.CheckResult`: correctness, the plan, the query budget, the speed-up, the
        prediction concluded.
    """
    refused, seed, rng = EXERCISE.start(solution, seed)
    if refused is not None:
        return refused
    path = _ensure(size)
    mine, theirs = _copy_of(path), _copy_of(path)  # the learner's copy, the baseline's copy
    my_calls, their_calls, stores = [0], [0], []
    yours = functools.partial(solution, mine, _catalog(path, catalog_delay_ms, my_calls, stores))
    base = functools.partial(baseline, theirs, _catalog(path, catalog_delay_ms, their_calls, stores))
    fresh = _Customers((mine, theirs), rng)
    changes = _Changes(stores, theirs, random.Random(rng.getrandbits(64)))  # the baseline's copy: unchanged by yours
    made = [fresh.new(n) for n in (0, 1, rng.randint(2, 12), rng.randint(40, 80), rng.randint(40, 80))
            [: rng.randint(4, 5)]]
    who = [*customers, *made, _UNKNOWN]
    rng.shuffle(who)
    cases = [functools.partial(changes.at, ("case", k), c) for k, c in enumerate(who)]
    unseen = fresh.new(rng.randint(40, 80))
    seen: dict[str, Any] = {}

    class Yours(_Queries):
        def __exit__(self, *exc: object) -> None:
            super().__exit__(*exc)
            seen.update(statements=self.statements, sites=self.sites, catalog=self.catalog)

    with Caller() as caller:
        def correct() -> Item:
            item = answers(caller, yours, base, cases, show=lambda case: f"customer {case[0]}", differ=_diff,
                           copy=False)
            return item if not item.ok else passed(
                f"same answer as the baseline for {len(cases) - 1} customers (the dataset's and {len(made)} created "
                f"for this check; {changes.count} products changed in the catalog meanwhile), and NotFoundError for "
                "an unknown one", criterion="correctness")

        def within_budget() -> Item:
            sides = iter((_Queries(theirs, their_calls), Yours(mine, my_calls)))
            item = metered(caller, yours, base, lambda: changes.at("budget", unseen), meter=lambda: next(sides),
                           unit="queries and catalog calls", what=f"customer {unseen} (created for this check)",
                           limit=max_queries, floor=MIN_FRACTION, differ=_diff,
                           hint="ask for every order's items and products at once, not once per order "
                                "(labkit.nplusone.watch shows the repeated shapes)")
            suspects = _suspects(seen.get("statements", []), seen.get("sites", []), threshold)
            if suspects and (item.ok or "over the budget" in item.message):
                n, shape, site = suspects[0]
                return failed(f"customer {unseen}: {item.detail:,.0f} queries and catalog calls (budget "
                              f"{max_queries})", f"N+1 suspect: {n}× {shape!r} at {site}",
                              "one query or call for all the orders, not one per order", criterion="budget")
            if item.ok and not seen.get("catalog"):
                return failed(f"customer {unseen}: no catalog call for the products of its orders",
                              "their details are the catalog's, and its data changes while the check runs: a copy "
                              "read earlier (the dataset's file, an earlier answer) is not what it answers now",
                              "ask the catalog once for every distinct product of the history "
                              "(catalog.get_many)", criterion="budget")
            return item if not item.ok else passed(item.message + ", no shape repeated", item.detail,
                                                   criterion="budget")

        def fast() -> tuple[Item, ...]:
            item = timed(caller, base, yours,
                         inputs=lambda k: changes.at(("timed", k), fresh.new(rng.randint(40, 80), key=k)),
                         required_speedup=required_speedup, rounds=rounds, rng=rng, differ=_diff,
                         what="customers of 40+ items created for each timed call")
            return item, prediction(experiment, item.detail, save=save)

        result = EXERCISE.grade(correct, lambda: planned(experiment), within_budget, fast, seed=seed)
    mine.close()
    theirs.close()
    note = () if not ignored else (passed(f"(ignored: {', '.join(f'{k}=' for k in sorted(ignored))} — the check builds its own)"),)
    return CheckResult(result.title, result.items + note)


_SEALED = seal(globals())
