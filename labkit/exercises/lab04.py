"""Lab 04's exercise: turn a report that loops over record dicts into one that works on columns.

The report: revenue (net of discount, in cents) per product category over the order lines of a date range —
the kind of aggregate a dashboard asks for on every page view. The data lives in both layouts, as a service
that keeps columns would hold it: :class:`Sales` has ``.rows`` (one dict per order line), ``.columns`` (one
NumPy array per field, categories as integer codes) and ``.frame`` (the same columns as a pandas DataFrame).
The baseline, :func:`revenue_by_category`, loops over ``.rows``; the learner writes the same report over
``.columns`` (or ``.frame``) and passes it to :func:`check`, which grades, in order:

1. **correctness** — exactly the baseline's answer (a ``dict``, the same categories in the same order, the
   same Python ``int`` values: :func:`labkit.grading.kit.difference`) on edge cases, on fresh tables drawn from the
   run's seed and on tables of the timed size, and the same error for an inverted date range;
2. **the prediction planned** — the learner's experiment record, with a predicted ratio, is required;
3. **the budget** — interpreted Python lines executed per order line, on a table generated for the grading,
   the answer checked: a report that still visits every record from Python (a loop, a comprehension that
   converts rows to columns) is over it; a call that executes no Python at all on that table is answering
   from a cache; a call that unhooks the line tracer fails;
4. **speed** — ``labkit.compare`` against the baseline, a fresh table for every timed call, every answer
   checked: ``faster`` by at least ``required_speedup`` at about ``n`` order lines (100,000 by default; the
   size is drawn per grading);
5. the experiment concluded with the measured ratio (a refuted prediction is reported, and passes).

Every call goes through one :class:`labkit.grading.kit.Caller`; :mod:`labkit.grading.kit` states the threat model.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.errors import BadInputError
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
    metered,
    planned,
    prediction,
    seal,
    timed,
)

__all__ = ["Sales", "make_sales", "revenue_by_category", "check", "hint", "solution", "CATEGORIES",
           "python_lines", "DAYS"]

#: product categories, sorted (toyshop's catalog): code k in ``Sales.columns["category"]`` is CATEGORIES[k]
CATEGORIES: tuple[str, ...] = ("backpack", "chair", "clock", "drum", "jacket", "kettle", "kite", "lamp", "mug",
                               "puzzle", "robot", "scarf", "speaker", "train")
#: days in the year the order lines fall in (``day`` is 0 … DAYS − 1, days since 1 January 2024)
DAYS = 366
FIELDS = ("day", "category", "qty", "unit_price", "discount_bp")
_MAX_N = 2_000_000
# bound at import: a learner replacing sys.settrace (or threading.settrace) changes nothing the meter does
_SETTRACE, _GETTRACE, _THREAD_SETTRACE = sys.settrace, sys.gettrace, threading.settrace


@dataclass(frozen=True, eq=False)
class Sales:
    """Order lines of one year, held in both layouts (built once, up front, as a service would keep them).

    Attributes:
        rows: one dict per line: ``day`` (0–365), ``category`` (a name), ``qty``, ``unit_price`` (cents),
            ``discount_bp`` (basis points: 1,000 = 10 %).
        columns: the same lines as read-only NumPy int64 arrays, one per field; ``category`` holds codes,
            ``categories[code]`` is the name (the codes sort as the names do).
        frame: the same columns as a pandas DataFrame.
        categories: the category names, sorted.
    """

    rows: list[dict[str, Any]]
    columns: dict[str, np.ndarray]
    frame: Any
    categories: tuple[str, ...] = CATEGORIES

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"Sales({len(self):,} order lines, {len(self.categories)} categories)"


def make_sales(n: int, seed: int = 0, *, categories: int = len(CATEGORIES)) -> Sales:
    """``n`` order lines over a year (sorted by day), reproducible from ``seed``; both layouts built now.

    ``categories`` limits the lines to the first few categories (the others then have no line at all).
    """
    import pandas as pd

    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _MAX_N:
        raise BadInputError(f"n={n!r}: the number of order lines must be an integer 0–{_MAX_N:,}")
    if isinstance(categories, bool) or not isinstance(categories, int) or not 1 <= categories <= len(CATEGORIES):
        raise BadInputError(f"categories={categories!r}: use 1–{len(CATEGORIES)}")
    rng = np.random.default_rng(seed)
    cols = {"day": np.sort(rng.integers(0, DAYS, n)), "category": rng.integers(0, categories, n),
            "qty": np.minimum(rng.geometric(0.5, n), 50),
            "unit_price": np.clip(rng.lognormal(7.6, 1.0, n), 1, 10_000_000).astype(np.int64),
            "discount_bp": np.where(rng.random(n) < 0.3, rng.choice([500, 1000, 1500, 2500], n), 0)}
    cols = {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in cols.items()}
    names = [CATEGORIES[k] for k in cols["category"].tolist()]
    rows = [{"day": d, "category": c, "qty": q, "unit_price": p, "discount_bp": b}
            for d, c, q, p, b in zip(cols["day"].tolist(), names, cols["qty"].tolist(), cols["unit_price"].tolist(),
                                     cols["discount_bp"].tolist(), strict=True)]
    frame = pd.DataFrame(cols)
    for v in cols.values():
        v.flags.writeable = False  # shared by every report run on this table: nobody may change it
    return Sales(rows, cols, frame)


def revenue_by_category(sales: Sales, start_day: int, end_day: int) -> dict[str, int]:
    """The baseline: net revenue in cents per category over lines with ``start_day <= day < end_day``.

    Per line: gross = qty × unit_price; net = gross − round-half-up(gross × discount_bp / 10,000). Returns
    ``{category: net}`` for the categories that have lines in the range, sorted by name.

    Raises:
        BadInputError: ``end_day`` before ``start_day``.
    """
    if end_day < start_day:
        raise BadInputError(f"end_day={end_day} is before start_day={start_day}: the range is start_day <= day < "
                            "end_day")
    totals: dict[str, int] = {}
    for r in sales.rows:
        if start_day <= r["day"] < end_day:
            gross = r["qty"] * r["unit_price"]
            net = gross - (gross * r["discount_bp"] + 5_000) // 10_000
            totals[r["category"]] = totals.get(r["category"], 0) + net
    return dict(sorted(totals.items()))


def _reference(sales: Sales, start_day: int, end_day: int) -> dict[str, int]:
    """The columnar report: one mask for the range, whole-column arithmetic, one bincount per total."""
    if end_day < start_day:
        raise BadInputError(f"end_day={end_day} is before start_day={start_day}: the range is start_day <= day < "
                            "end_day")
    c = sales.columns
    in_range = (c["day"] >= start_day) & (c["day"] < end_day)
    qty, price, disc, cat = (c[f][in_range] for f in ("qty", "unit_price", "discount_bp", "category"))
    gross = qty * price
    net = gross - (gross * disc + 5_000) // 10_000
    k = len(sales.categories)
    lines = np.bincount(cat, minlength=k)
    # float64 adds integers exactly while every partial sum stays below 2**53 (here: below 2**45)
    totals = np.bincount(cat, weights=net, minlength=k)
    return {sales.categories[i]: int(totals[i]) for i in range(k) if lines[i]}


def python_lines(fn: Callable[..., Any], *args: Any) -> int:
    """Interpreted Python lines executed by one call ``fn(*args)`` (``sys.settrace`` line events, in this
    thread and in threads it starts; compiled code — NumPy, pandas' C parts, numba — counts nothing)."""
    with _Lines() as lines:
        fn(*args)
    return int(lines.amount)


class _Lines(Meter):
    """The budget's meter: line events of the call, in the thread that runs it and in threads it starts. A
    call that unhooks the tracer (``sys.settrace(None)``, another tracer) fails: it walked around the meter."""

    def __init__(self, per: float = 1.0) -> None:
        self.per = per  # the amount is lines × per (lines per 1,000 order lines, say)

    def __enter__(self) -> _Lines:
        self.amount, self._before = 0.0, _GETTRACE()
        own = _Lines.__exit__.__code__  # the meter's own exit is not the call's work

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                self.amount += self.per
            return local

        def start(frame: Any, event: str, arg: Any) -> Any:
            return None if frame.f_code is own else local

        self._start = start
        _THREAD_SETTRACE(start)  # before sys.settrace: it is Python code, which would be counted
        _SETTRACE(start)
        return self

    def __exit__(self, *exc: object) -> None:
        unhooked = _GETTRACE() is not self._start
        _SETTRACE(self._before)
        _THREAD_SETTRACE(None)  # type: ignore[arg-type]
        if unhooked:
            raise RuntimeError("the line meter was unhooked during the call (sys.settrace was replaced): "
                               "the budget counts every line your report runs")


EXERCISE = Exercise(
    "Lab 04 — the revenue report, on columns",
    hints=("Where does the baseline's time go? One trip through the interpreter per order line: a dict lookup "
           "per field, a boxed int per product. `sales.columns` holds each field as one NumPy array.",
           "Select the range with one boolean mask, `(day >= start_day) & (day < end_day)`, and do the line "
           "arithmetic on whole (masked) columns; `//` rounds like the baseline does. Per-category totals: "
           "`np.bincount(codes, weights=...)` (or pandas `groupby` on `sales.frame`).",
           "Match the answer exactly: only categories that have lines in the range, sorted by name (the codes "
           "sort like the names), values as Python ints (`int(...)`), and the same BadInputError as the "
           "baseline for an inverted range."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def _differ(want: dict[str, int], got: Any) -> str | None:
    """Exactly the baseline's dict (:func:`labkit.grading.kit.difference`, keys in its order), with what to do."""
    where = difference(want, got, ordered=True)
    if where is None:
        return None
    if "got type numpy" in where:
        return where + " — a NumPy scalar is not a Python int (and does not serialise to JSON); wrap it in int(...)"
    if "keys must come in the baseline's order" in where:
        return where + ": the categories must come sorted by name"
    if "unexpected key" in where:
        return where + " (it has no lines in the range: leave it out)"
    if "missing key" in where:
        return where + " (it has lines in the range)"
    return where


def _cases(rng: random.Random, n: int) -> list[Any]:
    def seed() -> int:
        return rng.randrange(2**31)

    one = make_sales(1, seed())
    day = one.rows[0]["day"]
    table = make_sales(rng.randrange(2_000, 4_000), seed())
    few = make_sales(rng.randrange(200, 400), seed(), categories=rng.randrange(3, 6))
    a = rng.randrange(0, DAYS - 60)
    b = rng.randrange(a + 1, DAYS)
    cases: list[Any] = [(make_sales(0), 0, DAYS), (one, day, day + 1), (one, day + 1, DAYS + 1), (table, 0, DAYS),
                        (table, a, b), (table, a, a), (few, 0, DAYS), (few, b, a)]
    for _ in range(rng.randint(1, 2)):  # the timed size too, built afresh for each side
        s, lo = seed(), rng.randrange(0, 120)
        cases.insert(rng.randrange(3, len(cases)), lambda s=s, lo=lo: (make_sales(n, s), lo, lo + 200))
    return cases


def _show(case: tuple[Any, ...]) -> str:
    sales, start, end = case
    return f"{sales!r}, days {start}–{end}"


def check(solution: Callable[[Sales, int, int], dict[str, int]], experiment: Experiment | None = None, *,
          n: int = 100_000, rounds: int = 10, required_speedup: float = 3.0, max_lines_per_record: float = 0.2,
          save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade a columnar ``revenue_by_category``.

    Args:
        solution: ``solution(sales, start_day, end_day) -> {category: cents}``, the baseline's signature.
        experiment: your ``Experiment.plan(...)`` record with a predicted ratio: required (a prediction is part
            of passing); concluded with the measured ratio (and saved when ``save``); whether your prediction
            held is reported, not graded.
        n: about how many order lines per timed table (the size is drawn per grading from ±25 %; the budget's
            table is about half of it).
        rounds: interleaved A/B rounds for the speed check (a few more are drawn per grading).
        required_speedup: how many times faster than the baseline at ``n`` lines.
        max_lines_per_record: the budget, interpreted Python lines per order line (the baseline runs a few
            per line; a columnar report a fixed number, whatever the size).
        seed: reproduces a grading run (a new one is drawn each time by default).

    Returns:
        A :class:`labkit.grading.kit.CheckResult`: correctness, the prediction planned, the budget, the speed-up,
        the prediction concluded.
    """
    refused, seed, rng = EXERCISE.start(solution, seed)
    if refused is not None:
        return refused
    size = band(rng, n)
    cases = _cases(rng, size)
    budget_size, budget_seed, budget_start = band(rng, n // 2), rng.randrange(2**31), rng.randrange(0, 100)
    base_seed = rng.randrange(2**31)
    per = 1_000 / budget_size

    def inputs(k: int) -> tuple[Any, ...]:
        r = random.Random(base_seed + k)
        start = r.randrange(0, 120)
        return make_sales(size, base_seed + k), start, start + r.randrange(120, DAYS - start)

    with Caller() as caller:
        def within_budget() -> Item:
            return metered(caller, solution, revenue_by_category,
                           lambda: (make_sales(budget_size, budget_seed), budget_start, budget_start + 200),
                           meter=lambda: _Lines(per), unit="interpreted Python lines per 1,000 order lines",
                           what=f"a fresh table of {budget_size:,} lines", limit=max_lines_per_record * 1_000,
                           floor=0, differ=_differ,
                           hint="work on whole columns (sales.columns or sales.frame): no Python loop or "
                                "comprehension over the lines — not even to convert them")

        def fast_then_concluded() -> tuple[Item, ...]:
            item = timed(caller, revenue_by_category, solution, inputs=inputs, required_speedup=required_speedup,
                         rounds=rounds, rng=rng, differ=_differ,
                         what=f"fresh tables of {size:,} lines, a new one for every call")
            return item, prediction(experiment, item.detail, save=save)

        result = EXERCISE.grade(
            lambda: answers(caller, solution, revenue_by_category, cases, differ=_differ, show=_show),
            lambda: planned(experiment), within_budget, fast_then_concluded, seed=seed)
    return result


_SEALED = seal(globals())
