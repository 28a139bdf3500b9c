"""Lab 02's exercise: write the batched export — the same answer as the N+1 baseline, a handful of queries, faster.

The learner writes ``my_export(conn, catalog, customer_id) -> dict`` with the signature of
:func:`labkit.toyshop.export.export_naive` (STYLE 15) and passes it to :func:`check`, which grades, in order:

1. **correctness** — the same dict as the baseline for a range of customers (no orders, one order, many), and
   the same ``NotFoundError`` for an unknown customer; a wrong answer stops the grading there;
2. **query budget** — on the customer with the most items, at most ``max_queries`` queries and catalog calls in
   total, and no shape repeated more than ``threshold`` times (``labkit.nplusone.watch`` decides);
3. **speed** — ``labkit.compare`` interleaving baseline and solution: verdict ``faster`` by at least
   ``required_speedup``.

By default the grader runs in process: the small dataset and a :class:`labkit.toyshop.catalog.FakeCatalog`
that sleeps ``catalog_delay_ms`` per call — an *emulated* round trip about as long as a loopback HTTP call,
so the check is quick and needs no service. Pass ``catalog=`` a real ``CatalogClient`` to grade against the
catalog process instead.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from labkit.check import CheckResult, Item

__all__ = ["baseline", "check", "CUSTOMERS", "TIMED_CUSTOMER"]

#: ladder customers graded for correctness: 0, 1, 2, 10 and 50 orders of 4 items, plus one skewed customer.
CUSTOMERS = (9, 2, 3, 5, 1, 42)
#: the customer timed and budgeted: 50 orders × 4 items.
TIMED_CUSTOMER = 1
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


def _correct(solution: Callable[..., Any], conn: sqlite3.Connection, catalog: Any,
             customers: tuple[int, ...]) -> Item:
    from labkit.toyshop.db import NotFoundError

    for cid in customers:
        want = baseline(conn, catalog, cid)
        try:
            got = solution(conn, catalog, cid)
        except Exception as e:  # the learner's code may raise anything: report it, don't crash the grader
            return Item(False, f"customer {cid}: your export raised {type(e).__name__}: {e}")
        if got != want:
            return Item(False, f"customer {cid}: not the baseline's answer — {_diff(want, got)}")
    try:
        solution(conn, catalog, _UNKNOWN)
    except NotFoundError:
        pass
    except Exception as e:
        return Item(False, f"unknown customer: expected NotFoundError (as the baseline raises), got "
                           f"{type(e).__name__}: {e}")
    else:
        return Item(False, "unknown customer: expected NotFoundError (as the baseline raises), got an answer")
    return Item(True, f"same answer as the baseline for customers {', '.join(map(str, customers))}, and "
                      "NotFoundError for an unknown one")


def _budget(solution: Callable[..., Any], conn: sqlite3.Connection, catalog: Any, customer: int,
            max_queries: int, threshold: int) -> tuple[Item, Any]:
    from labkit.nplusone import watch

    with watch(conn, catalog, threshold=threshold) as w:
        solution(conn, catalog, customer)
    report = w.report
    sql = sum(1 for q in report.queries if q.kind == "sql")
    http = report.count - sql
    ok = report.count <= max_queries and report.clean
    msg = f"customer {customer}: {sql} SQL queries + {http} catalog calls = {report.count} (budget {max_queries})"
    if report.suspects:
        worst = report.suspects[0]
        msg += f"; N+1 suspect: {worst.count}× {worst.shape!r} at {worst.site}"
    elif ok:
        msg += ", no shape repeated per item"
    return Item(ok, msg), report


def check(solution: Callable[[sqlite3.Connection, Any, int], dict[str, Any]], *,
          conn: sqlite3.Connection | None = None, catalog: Any = None, size: str = "small",
          customers: tuple[int, ...] = CUSTOMERS, timed_customer: int = TIMED_CUSTOMER, max_queries: int = 12,
          threshold: int = 5, rounds: int = 10, required_speedup: float = 1.5,
          catalog_delay_ms: float = 0.05) -> CheckResult:
    """Grade a batched export against the N+1 baseline.

    Args:
        solution: ``solution(conn, catalog, customer_id) -> dict``, same signature and answer as the baseline.
        conn: a toyshop connection (default: a new one on the ``size`` dataset).
        catalog: a catalog client (default: an in-process ``FakeCatalog`` over the same dataset, sleeping
            ``catalog_delay_ms`` per call).
        size: dataset size when ``conn``/``catalog`` are not given.
        customers: customers whose answers must match the baseline's.
        timed_customer: the customer budgeted and timed (the ladder's 50 orders × 4 items by default).
        max_queries: SQL queries + catalog calls allowed for ``timed_customer``.
        threshold: a shape repeated more than this is an N+1 suspect and fails the budget.
        rounds: interleaved A/B rounds for the speed check.
        required_speedup: how many times faster than the baseline the solution must be.
        catalog_delay_ms: the default fake catalog's emulated round trip per call (ignored with ``catalog=``).

    Returns:
        A :class:`labkit.check.CheckResult`: correctness, then the query budget, then the speed-up.
    """
    from labkit.compare import compare

    title = "Lab 02 — a batched export"
    if not callable(solution):
        return CheckResult(title, (Item(False, f"pass your function itself, not {type(solution).__name__}"),))
    conn, catalog = _context(conn, catalog, size, catalog_delay_ms)
    first = _correct(solution, conn, catalog, tuple(customers))
    if not first.ok:
        return CheckResult(title, (first,))
    budget, _report = _budget(solution, conn, catalog, timed_customer, max_queries, threshold)
    c = compare(baseline, solution, conn, catalog, timed_customer, rounds=rounds, names=("baseline", "yours"))
    fast = c.verdict == "faster" and c.speedup >= required_speedup
    speed = Item(fast, f"customer {timed_customer}: {c.summary()}"
                 + ("" if fast else f" — need 'faster' by at least {required_speedup:g}×"))
    return CheckResult(title, (first, budget, speed))
