"""Lab 06's exercise: a sales report that is slow for a reason its code does not announce — profile it.

The learner gets :func:`baseline` — ``top_sellers(orders) -> [(customer, sku, units, revenue_cents), …]`` —
and is told only that it is too slow and allocates too much. Where the cost is, a profile says (the lab's
CPU flame graph and allocation profile). :func:`check` grades, in order:

1. **correctness** — exactly the baseline's list (a ``list`` of ``tuple`` of ``str, str, int, int``, compared
   by :func:`labkit.grading.exact.difference`: no subclass, no float for an int) on edge cases (no orders, an order
   without lines, the same customer spelled with other spaces and capitals, ties in revenue, lines with and
   without a discount), on fresh random batches **of the size that is timed** (drawn per grading around
   :data:`TIMED_ORDERS`), the same exception type for an order without ``lines``, and the caller's orders left
   exactly as they were (the baseline never changes its input);
2. **the prediction** — your :class:`labkit.learner.record.Experiment`, planned before the check, is required;
3. **allocation budget** — on a batch generated for this call (after a warm-up call on another one), at most
   ``max_fraction`` of the baseline's allocator calls (a memray census, :class:`labkit.alloc.Census`), at
   least 1 % of them (a call doing less is answering from a cache), the answer checked;
4. **speed** — :func:`labkit.compare` interleaving baseline and solution on a fresh batch for every timed
   call, **every timed answer checked**: verdict ``faster`` by at least ``required_speedup``; then your
   experiment is concluded with the measured comparison (judged against its interval, widened by ±25 %) and saved.

Inputs come from a new seed per grading run (printed in the result; ``seed=`` reproduces a run). Every call of
your function goes through one :class:`labkit.grading.kit.Caller`, and the module is sealed at import
(:mod:`labkit.grading.kit`'s threat model).
"""

from __future__ import annotations

import copy
import random
import types
from collections.abc import Callable
from typing import Any

from labkit.alloc.census import Census as _Census  # the meter, bound at import: see labkit.grading.kit
from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Item,
    Meter,
    answers,
    band,
    failed,
    metered,
    passed,
    planned,
    prediction,
    seal,
    timed,
)

__all__ = ["baseline", "check", "hint", "solution", "make_orders", "MAX_FRACTION", "TIMED_ORDERS"]

#: the budget: at most this fraction of the baseline's allocator calls on an unseen input.
MAX_FRACTION = 0.25
#: orders in the budgeted and timed inputs, about: each grading draws its size within ±25 % of this.
TIMED_ORDERS = 300

Report = list[tuple[str, str, int, int]]
_DEFAULTS = types.MappingProxyType({"discount_pct": 0, "gift_wrap": False, "note": ""})  # read-only: the
# baseline reads it, so a learner who grew it in place would slow the baseline down


def baseline(orders: list[dict[str, Any]]) -> Report:
    """Units and revenue per customer and product, best sellers first: the version to improve.

    Args:
        orders: dicts with ``customer`` (a name, spaces and capitals as typed), ``lines`` (dicts with
            ``sku``, ``qty``, ``unit_cents`` and sometimes ``discount_pct``) and whatever else an order
            carries (address, status history…). They are not changed.

    Returns:
        ``(customer, sku, units, revenue_cents)`` per customer (trimmed, lower case) and SKU (upper case),
        sorted by revenue (highest first), then customer, then SKU. A line's revenue is ``qty × unit_cents``
        less its discount (whole percent, rounded down to the cent).
    """
    totals: dict[tuple[str, str], tuple[int, int]] = {}
    for order in orders:
        clean = _normalised(order)
        for line in clean["lines"]:
            key = (clean["customer"], line["sku"])
            units, cents = totals.get(key, (0, 0))
            totals[key] = (units + line["qty"], cents + _revenue(line))
    rows = [(c, s, u, v) for (c, s), (u, v) in totals.items()]
    rows.sort(key=lambda r: (-r[3], r[0], r[1]))
    return rows


def _normalised(order: dict[str, Any]) -> dict[str, Any]:
    """A cleaned copy of an order (the caller's is never changed): names and SKUs in one spelling, every
    line with every field."""
    clean = copy.deepcopy(order)
    clean["customer"] = clean["customer"].strip().lower()
    clean["lines"] = [{**_DEFAULTS, **line, "sku": line["sku"].strip().upper()} for line in clean["lines"]]
    return clean


def _revenue(line: dict[str, Any]) -> int:
    gross = line["qty"] * line["unit_cents"]
    return gross - gross * line["discount_pct"] // 100


def _reference(orders: list[dict[str, Any]]) -> Report:
    """The reference: read the few fields the report needs, copy nothing."""
    totals: dict[tuple[str, str], list[int]] = {}
    for order in orders:
        customer = order["customer"].strip().lower()
        for line in order["lines"]:
            qty = line["qty"]
            gross = qty * line["unit_cents"]
            cell = totals.get(key := (customer, line["sku"].strip().upper()))
            if cell is None:
                cell = totals[key] = [0, 0]
            cell[0] += qty
            cell[1] += gross - gross * line.get("discount_pct", 0) // 100
    rows = [(c, s, u, v) for (c, s), (u, v) in totals.items()]
    rows.sort(key=lambda r: (-r[3], r[0], r[1]))
    return rows


_NAMES = ("Ana Silva", "Bo Chen", "Chidi Okafor", "Dana Weiss", "Eun-ji Park", "Farid Haddad", "Greta Lind",
          "Hiro Sato", "Ines Duarte", "Jonas Berg", "Kofi Mensah", "Lena Novak")
_STATUSES = ("placed", "paid", "packed", "shipped", "delivered")


def _spelling(rng: random.Random, name: str) -> str:
    name = name.upper() if rng.random() < 0.2 else name.lower() if rng.random() < 0.3 else name
    return " " * rng.randrange(3) + name + " " * rng.randrange(3)


def make_orders(seed: int, n: int = TIMED_ORDERS, *, lines: tuple[int, int] = (1, 6),
                skus: int = 40) -> list[dict[str, Any]]:
    """``n`` random orders like a shop's export (with the address and status history a report never
    reads), from ``seed``."""
    rng = random.Random(seed)
    orders = []
    for i in range(n):
        name = rng.choice(_NAMES)
        order_lines = []
        for _ in range(rng.randint(*lines)):
            line: dict[str, Any] = {"sku": f"{'abc'[rng.randrange(3)]}-{rng.randrange(skus):03d}",
                                    "qty": rng.randint(1, 9), "unit_cents": rng.randint(99, 25_000)}
            if rng.random() < 0.3:
                line["discount_pct"] = rng.choice((5, 10, 15, 25))
            if rng.random() < 0.2:
                line["sku"] = line["sku"].upper() if rng.random() < 0.5 else f" {line['sku']} "
            order_lines.append(line)
        history = [{"status": s, "at": f"2026-0{1 + rng.randrange(9)}-{10 + rng.randrange(18)}T{h:02d}:00:00Z",
                    "by": rng.choice(("web", "app", "warehouse", "carrier")),
                    "meta": {"ip": f"10.0.{rng.randrange(256)}.{rng.randrange(256)}", "tries": [1, 2][: rng.randint(1, 2)]}}
                   for h, s in enumerate(_STATUSES[: rng.randint(1, len(_STATUSES))])]
        orders.append({"id": 10_000 + i, "customer": _spelling(rng, name), "currency": "EUR", "lines": order_lines,
                       "address": {"street": f"{rng.randint(1, 200)} Harbour Road", "city": "Porto",
                                   "zip": f"{rng.randint(1000, 9999)}-{rng.randint(100, 999)}", "geo": [41.15, -8.61]},
                       "history": history, "tags": ["web", "priority"][: rng.randint(0, 2)]})
    return orders


def _show(case: tuple[Any, ...]) -> str:
    orders = case[0]
    lines = sum(len(o.get("lines", ())) for o in orders)
    return f"{len(orders)} orders, {lines} lines"


def _cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    seeds = [rng.randrange(2**31) for _ in range(8)]
    one = make_orders(seeds[0], 1, lines=(1, 1))
    no_lines = make_orders(seeds[1], 3)
    no_lines[1]["lines"] = []
    same_person = make_orders(seeds[2], 12, lines=(2, 3), skus=3)  # few SKUs: keys repeat, spellings merge
    for o in same_person:
        o["customer"] = _spelling(rng, "Ana Silva")
    ties = [{"customer": c, "lines": [{"sku": s, "qty": 1, "unit_cents": 500}]}
            for c in ("bo", "ana") for s in ("b-1", "a-1")]  # equal revenue: the order is customer, then SKU
    missing = make_orders(seeds[3], 2)
    del missing[1]["lines"]  # KeyError, as the baseline raises
    cases = [([],), (one,), (no_lines,), (same_person,), (ties,), (make_orders(seeds[4], rng.randint(40, 120)),),
             (make_orders(seeds[5], band(rng, 200), skus=8),), (missing,),
             *((make_orders(seeds[6 + i], band(rng, n, 0.1)),) for i in range(2))]  # the timed size, too
    rng.shuffle(cases)
    return cases


def _input_kept(caller: Caller, solution: Callable[..., Any], rng: random.Random, n: int) -> Item:
    """The caller's orders must be left exactly as they were (the baseline copies before it cleans)."""
    orders = make_orders(rng.randrange(2**31), n)
    kept = copy.deepcopy(orders)
    got = caller.call(solution, (orders,))
    if got.error is not None:
        return failed(f"your function raised {type(got.error).__name__}", criterion="correctness")
    if orders != kept:
        return failed("your function changed the orders it was given", "the caller's data is not yours to "
                      "clean in place", "compute the cleaned name and SKU into local variables instead of "
                      "writing them back into the orders", criterion="correctness")
    return passed("same answers as the baseline on every input, edge cases and the timed size included; the "
                  "caller's orders left unchanged", criterion="correctness")


class _Allocations(Meter):
    """The budget's meter: allocator calls of one call (a memray census), in the thread that runs it."""

    def __enter__(self) -> _Allocations:
        self._census = _Census().start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._census.stop()
        self.amount = float(self._census.allocations or 0)


EXERCISE = Exercise(
    "Lab 06 — find and remove the hidden cost in the sales report",
    hints=("Do not guess: profile it. labkit.profile.call(lab06.baseline, lab06.make_orders(1)) and "
           "profile.icicle_chart(...) show where the samples go; profile.memory(...) and .top('count') show who "
           "allocates. Which function is wide in both, and what does it do for every order?",
           "_normalised() deep-copies every order — address, status history and all — to clean two fields. "
           "The report reads only the customer's name and each line's sku, qty, unit_cents and discount.",
           "Copy nothing: customer = order['customer'].strip().lower(); for each line read "
           "line['sku'].strip().upper(), line['qty'], line['unit_cents'] and line.get('discount_pct', 0) into "
           "locals, and add into the totals. Never write into the orders: the caller still needs them."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def check(solution: Callable[[list[dict[str, Any]]], Report], experiment: Any = None, *, rounds: int = 10,
          seed: int | None = None, max_fraction: float = MAX_FRACTION, required_speedup: float = 2.0,
          save: bool = True) -> CheckResult:
    """Grade a faster, leaner ``top_sellers(orders)`` against the baseline.

    Args:
        solution: same signature and answer as :func:`baseline`.
        experiment: your :class:`labkit.learner.record.Experiment` (planned before the check, required); concluded with
            the measured comparison and saved.
        rounds: interleaved A/B rounds for the speed check (a few more are drawn per grading).
        seed: reproduces a grading run (a new one is drawn each time by default).
        max_fraction: allocator calls allowed, as a fraction of the baseline's on the same new batch.
        required_speedup: how many times faster than the baseline the solution must be.
        save: save the concluded experiment record.

    Returns:
        A :class:`labkit.grading.kit.CheckResult`: correctness, the prediction, the allocation budget, the speed-up
        and the concluded prediction.
    """
    refused, seed, rng = EXERCISE.start(solution, seed)
    if refused is not None:
        return refused
    n = band(rng, TIMED_ORDERS)
    cases = _cases(rng, n)
    unseen, warm, timed_base = rng.randrange(2**31), rng.randrange(2**31), rng.randrange(2**31)

    with Caller() as caller:
        def correct() -> Item:
            item = answers(caller, solution, baseline, cases, show=_show)
            return item if not item.ok else _input_kept(caller, solution, rng, n)

        def within_budget() -> Item:
            return metered(caller, solution, baseline, lambda: (make_orders(unseen, n),), meter=_Allocations,
                           unit="allocator calls", what=f"a batch of {n} orders generated for this call",
                           max_fraction=max_fraction, warm=lambda: (make_orders(warm, n),),
                           hint="profile.memory(your_function, orders).top('count') shows which lines still "
                                "allocate; copy nothing the report does not need")

        def fast() -> tuple[Item, ...]:
            item = timed(caller, baseline, solution, inputs=lambda k: (make_orders(timed_base + k, n),),
                         required_speedup=required_speedup, rounds=rounds, rng=rng,
                         what=f"{n} orders, a new batch for every timed call")
            return item, prediction(experiment, item.detail, save=save)

        result = EXERCISE.grade(correct, lambda: planned(experiment), within_budget, fast, seed=seed)
    return result


_SEALED = seal(globals())
