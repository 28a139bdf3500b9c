"""Lab 02's exercise: write the batched export — the same answer as the N+1 baseline, a handful of queries, faster.

The learner writes ``my_export(conn, catalog, customer_id) -> dict`` with the signature of
:func:`labkit.toyshop.export.export_naive` (STYLE 15) and passes it to :func:`check`, which grades, in order:

1. **correctness** — the same dict as the baseline for a range of customers (no orders, one order, many), and
   the same ``NotFoundError`` for an unknown customer; a wrong answer stops the grading there;
2. **query budget** — on a customer the correctness pass never saw (40 items or more), at most ``max_queries``
   queries and catalog calls in total, no shape repeated more than ``threshold`` times
   (``labkit.nplusone.watch`` decides), and at least one: an export that makes no query is a cached answer;
3. **speed** — ``labkit.compare`` interleaving baseline and solution on fresh customers (a different one
   each round): verdict ``faster`` by at least ``required_speedup``.

By default the grader runs in process: the small dataset and a :class:`labkit.toyshop.catalog.FakeCatalog`
that sleeps ``catalog_delay_ms`` per call — an *emulated* round trip about as long as a loopback HTTP call,
so the check is quick and needs no service. Pass ``catalog=`` a real ``CatalogClient`` to grade against the
catalog process instead.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from typing import Any

from labkit.check import (
    CheckResult,
    Exercise,
    Item,
    budget,
    failed,
    fresh_seed,
    not_callable,
    passed,
    same_answers,
    speed,
)
from labkit.toyshop.dataset import LADDER

__all__ = ["baseline", "check", "hint", "solution", "CUSTOMERS"]

#: ladder customers graded for correctness: 0, 1, 2, 10 and 50 orders of 4 items, plus one skewed customer.
CUSTOMERS = (9, 2, 3, 5, 1, 42)
_UNKNOWN = 10**9


def baseline(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
    """The N+1 export the learner improves on (:func:`labkit.toyshop.export.export_naive`)."""
    from labkit.toyshop.export import export_naive

    return export_naive(conn, catalog, customer_id)


def _context(conn: sqlite3.Connection | None, catalog: Any, size: str,
             delay_ms: float) -> tuple[sqlite3.Connection, Any]:
    from labkit.toyshop import catalog as _catalog
    from labkit.toyshop import dataset, db

    path = dataset.ensure(size)
    return (conn if conn is not None else db.connect(path),
            catalog if catalog is not None else _catalog.FakeCatalog.from_db(path, delay_ms=delay_ms))


def _diff(want: Any, got: Any, where: str = "") -> str:
    """A short description of the first difference between two export answers."""
    if type(want) is not type(got):
        return f"{where or 'answer'}: expected a {type(want).__name__}, got a {type(got).__name__}"
    if isinstance(want, dict):
        for key in want:
            if key not in got:
                return f"{where or 'answer'}: missing key {key!r}"
            if want[key] != got[key]:
                return _diff(want[key], got[key], f"{where}[{key!r}]")
        extra = sorted(set(got) - set(want), key=str)
        return f"{where or 'answer'}: unexpected key {extra[0]!r}" if extra else f"{where}: differs"
    if isinstance(want, list):
        if len(want) != len(got):
            return f"{where}: expected {len(want)} entries, got {len(got)}"
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            if a != b:
                return _diff(a, b, f"{where}[{i}]")
    return f"{where}: expected {want!r:.80}, got {got!r:.80}"


def _item_counts(conn: sqlite3.Connection) -> dict[int, int]:
    rows = conn.execute("SELECT o.customer_id, COUNT(*) FROM orders o JOIN order_items i ON i.order_id = o.id "
                        "GROUP BY o.customer_id").fetchall()
    return {int(c): int(n) for c, n in rows}


def _queries(conn: sqlite3.Connection, catalog: Any, threshold: int) -> Callable[..., float]:
    """The budget's meter: SQL queries + catalog calls of one call, N+1 suspects kept for the message."""
    from labkit.nplusone import watch

    def meter(fn: Callable[..., Any], *args: Any) -> float:
        with watch(conn, catalog, threshold=threshold) as w:
            fn(*args)
        meter.report = w.report  # type: ignore[attr-defined]
        return float(w.report.count)
    return meter


def _reference(conn: sqlite3.Connection, catalog: Any, customer_id: int) -> dict[str, Any]:
    """The reference: labkit.toyshop.export.export_batched (IN-list batches, bounded catalog batches)."""
    from labkit.toyshop.export import export_batched

    return export_batched(conn, catalog, customer_id)


EXERCISE = Exercise(
    "Lab 02 — a batched export",
    hints=("Count the queries per customer with labkit.nplusone.watch: which shapes repeat once per order, "
           "once per item?",
           "Fetch all the orders' items in one query with WHERE order_id IN (?, ?, …), and all product names in "
           "another; ask the catalog for many products in one call (catalog.get_many).",
           "Build dicts keyed by id from the batched rows, then assemble the same nested answer in one pass; "
           "keep the ORDER BY of the baseline so the items come out in the same order."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def check(solution: Callable[[sqlite3.Connection, Any, int], dict[str, Any]], *,
          conn: sqlite3.Connection | None = None, catalog: Any = None, size: str = "small",
          customers: tuple[int, ...] = CUSTOMERS, max_queries: int = 12, threshold: int = 5, rounds: int = 10,
          required_speedup: float = 1.5, catalog_delay_ms: float = 0.05, seed: int | None = None) -> CheckResult:
    """Grade a batched export against the N+1 baseline.

    Args:
        solution: ``solution(conn, catalog, customer_id) -> dict``, same signature and answer as the baseline.
        conn: a toyshop connection (default: a new one on the ``size`` dataset).
        catalog: a catalog client (default: an in-process ``FakeCatalog`` over the same dataset, sleeping
            ``catalog_delay_ms`` per call).
        size: dataset size when ``conn``/``catalog`` are not given.
        customers: customers whose answers must match the baseline's (three more are drawn at random).
        max_queries: SQL queries + catalog calls allowed for one export of a customer with 40 items or more.
        threshold: a shape repeated more than this is an N+1 suspect and fails the budget.
        rounds: interleaved A/B rounds for the speed check.
        required_speedup: how many times faster than the baseline the solution must be.
        catalog_delay_ms: the default fake catalog's emulated round trip per call (ignored with ``catalog=``).
        seed: reproduces a grading run (a new one is drawn each time by default).

    The budget and the speed are measured on customers the correctness pass never saw (40 items or more,
    drawn from the run's seed; every timed call gets another one), so an answer cached or hard-coded for the
    customers you tried cannot pass, and an export that makes no query at all fails the budget.

    Returns:
        A :class:`labkit.check.CheckResult`: correctness, then the query budget, then the speed-up.
    """
    refused = not_callable(EXERCISE, solution)
    if refused is not None:
        return refused
    seed = fresh_seed() if seed is None else seed
    rng = random.Random(seed)
    conn, catalog = _context(conn, catalog, size, catalog_delay_ms)
    counts = _item_counts(conn)
    fixed = tuple(customers)
    unseen = [c for c in sorted(counts) if c not in fixed and c not in LADDER]
    rng.shuffle(unseen)
    extra, unseen = unseen[:3], unseen[3:]
    big = [c for c in unseen if counts[c] >= 40] or unseen
    budget_customer, timed = big[0], big[1:] or big
    cases = [(conn, catalog, c) for c in (*fixed, *extra, _UNKNOWN)]
    meter = _queries(conn, catalog, threshold)

    def correct() -> Item:
        item = same_answers(solution, baseline, cases, show=lambda case: f"customer {case[2]}",
                            describe=_diff, copy=False)
        return item if not item.ok else passed(
            f"same answer as the baseline for customers {', '.join(map(str, (*fixed, *extra)))}, and "
            "NotFoundError for an unknown one")

    def within_budget() -> Item:
        item = budget(solution, (conn, catalog, budget_customer), meter=meter, limit=max_queries,
                      unit="queries and catalog calls", what=f"customer {budget_customer} ({counts[budget_customer]} "
                      "items)", hint="batch the per-order and per-item lookups (labkit.nplusone.watch shows them)")
        report = getattr(meter, "report", None)
        if report is not None and report.suspects and item.detail:
            worst = report.suspects[0]
            return failed(f"customer {budget_customer}: {item.detail:,.0f} queries and catalog calls (budget "
                          f"{max_queries})", f"N+1 suspect: {worst.count}× {worst.shape!r} at {worst.site}",
                          "one query or call for all the items, not one per item")
        return item if not item.ok else passed(item.message + ", no shape repeated per item", item.detail)

    def fast() -> Item:
        return speed(baseline, solution, inputs=lambda k: (conn, catalog, timed[k % len(timed)]),
                     required_speedup=required_speedup, rounds=rounds,
                     what="customers of 40+ items, a new one for every timed call")

    result = EXERCISE.grade(correct, within_budget, fast)
    return CheckResult(f"{result.title} (seed {seed})", result.items)
