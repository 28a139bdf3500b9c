"""Lab 03's exercise: an inventory simulation that grows its output — make it preallocate (and reuse).

The learner rewrites :func:`baseline` — ``simulate(demand, start, reorder_at, batch) -> history`` — which
appends each day's stock to its history with ``np.vstack``, copying the whole history every day (quadratic
in the number of days), and computes each day with expressions that allocate fresh arrays. :func:`check`
grades, in order:

1. **correctness** — the same ``history`` (values, shape and dtype) as the baseline on edge cases (no days,
   one day, one product, no products, stock starting below the reorder point), on inputs of several sizes
   in a row (a buffer reused without care hands one call's data to the next), on fresh random inputs, and
   the same exception type for mismatched shapes; a wrong answer stops the grading there;
2. **allocation budget** — on an input the correctness pass never saw (after a warm-up call on another
   one), at most ``max_fraction`` of the baseline's allocator calls (a memray census,
   :class:`labkit.alloc.Census`), the answer checked, and at least :data:`MIN_FRACTION` of them: a call that
   allocates (almost) nothing on a new input is answering from a cache;
3. **speed** — :func:`labkit.compare` interleaving baseline and solution on a fresh input for every timed
   call: verdict ``faster`` by at least ``required_speedup``;
4. **the prediction** — the learner's :class:`labkit.learner.record.Experiment` is required (planned with a predicted
   ratio: checked right after correctness), concluded with the measured comparison and saved.

Inputs come from a new seed per grading run (printed in the result; ``seed=`` reproduces a run); the budgeted
and timed size is drawn per grading around :data:`TIMED_DAYS` × :data:`TIMED_PRODUCTS` and the correctness
pass includes it; every call goes through one :class:`labkit.grading.kit.Caller` and every answer is checked
(:mod:`labkit.grading.kit` states the threat model).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from labkit.alloc.census import Census as _Census  # the meter, bound at import: see labkit.grading.kit
from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Item,
    Meter,
    answers,
    band,
    difference,
    failed,
    metered,
    passed,
    planned,
    prediction,
    seal,
    timed,
)

__all__ = ["baseline", "check", "hint", "solution", "make_input", "MAX_FRACTION", "MIN_FRACTION", "TIMED_DAYS",
           "TIMED_PRODUCTS"]

#: the budget: at most this fraction of the baseline's allocator calls on an unseen input.
MAX_FRACTION = 0.5
#: and at least this fraction: a loop over the days allocates at least a row view a day (~4 % of the
#: baseline's calls); a call allocating less than this on an input generated just now answers from a cache.
MIN_FRACTION = 0.005
#: the nominal size of the budgeted and timed inputs, days × products; each grading draws both from ±25 %.
TIMED_DAYS, TIMED_PRODUCTS = 1_000, 40

Simulation = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def baseline(demand: np.ndarray, start: np.ndarray, reorder_at: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """Stock of every product at the end of each day, with reorders: the version to improve.

    Args:
        demand: ``(days, products)`` int64, units asked for per day; a day sells at most what is in stock.
        start: ``(products,)`` int64, stock before the first day.
        reorder_at: ``(products,)`` int64; a product that ends a day below it gets ``batch`` units overnight.
        batch: ``(products,)`` int64, units per reorder.

    Returns:
        ``(days, products)`` int64: each day's closing stock, deliveries included.
    """
    stock = start.copy()
    history = np.empty((0, len(start)), dtype=np.int64)
    for today in demand:
        sold = np.minimum(today, stock)
        stock = stock - sold
        stock = stock + (stock < reorder_at) * batch
        history = np.vstack([history, stock])
    return history


def _reference(demand: np.ndarray, start: np.ndarray, reorder_at: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """The reference: the history preallocated once, each day computed with ``out=`` into reused arrays."""
    days, products = demand.shape
    if start.shape != (products,):
        raise ValueError(f"start has shape {start.shape}, demand has {products} products")
    history = np.empty((days, products), dtype=np.int64)
    stock = start.astype(np.int64)  # a copy: the caller's array is never written
    sold = np.empty(products, dtype=np.int64)
    low = np.empty(products, dtype=bool)
    delivered = np.empty(products, dtype=np.int64)
    for d in range(days):
        np.minimum(demand[d], stock, out=sold)
        np.subtract(stock, sold, out=stock)
        np.less(stock, reorder_at, out=low)
        np.multiply(low, batch, out=delivered)
        np.add(stock, delivered, out=stock)
        history[d] = stock
    return history


def make_input(seed: int, days: int = TIMED_DAYS, products: int = TIMED_PRODUCTS) -> tuple[np.ndarray, ...]:
    """A random simulation input: ``(demand, start, reorder_at, batch)``, all int64, from ``seed``."""
    rng = np.random.default_rng(seed)
    demand = rng.integers(0, 25, size=(days, products), dtype=np.int64)
    start = rng.integers(0, 200, size=products, dtype=np.int64)
    reorder_at = rng.integers(10, 80, size=products, dtype=np.int64)
    batch = rng.integers(30, 160, size=products, dtype=np.int64)
    return demand, start, reorder_at, batch


def _differ(want: np.ndarray, got: Any) -> str | None:
    """Exactly the baseline's history (:func:`labkit.grading.kit.difference`: an ``numpy.ndarray``, not a subclass,
    of its shape and dtype), described in days and products."""
    where = difference(want, got)
    if where is None or type(got) is not np.ndarray or got.shape != want.shape or got.dtype != want.dtype:
        return None if where is None else where.replace("expected shape", "expected shape (days, products)")
    day, product = (int(i) for i in np.argwhere(got != want)[0])
    return (f"day {day}, product {product}: expected stock {int(want[day, product])}, got "
            f"{int(got[day, product])}")


def _show(case: tuple[np.ndarray, ...]) -> str:
    demand, start = case[0], case[1]
    return f"{demand.shape[0]} days × {start.shape[0]} products"


def _cases(rng: random.Random, days: int, products: int) -> list[tuple[np.ndarray, ...]]:
    seeds = [rng.randrange(2**31) for _ in range(8)]
    edge = [make_input(seeds[0], 0, 5), make_input(seeds[1], 1, 1), make_input(seeds[2], 6, 0)]
    below = make_input(seeds[3], 10, 4)
    below = (below[0], np.zeros(4, dtype=np.int64), below[2], below[3])  # every product starts below its point
    # sizes up and down in a row: a buffer reused between calls must not hand one call's days to the next
    sizes = [make_input(seeds[4], 120, 30), make_input(seeds[5], 7, 30), make_input(seeds[6], 60, 12)]
    mismatched = make_input(seeds[7], 5, 6)
    mismatched = (mismatched[0], mismatched[1][:4], mismatched[2], mismatched[3])  # start: 4 products, not 6
    fresh = [make_input(rng.randrange(2**31), rng.randrange(100, 400), rng.randrange(5, 30))
             for _ in range(rng.randint(1, 3))]
    # the timed size too: nothing tells a checked call from a timed one by its size
    big = [make_input(rng.randrange(2**31), days, products) for _ in range(rng.randint(1, 2))]
    tail = [below, *fresh, *big, mismatched]
    rng.shuffle(tail)
    return [*edge, *sizes, *tail]


def _answers_stay(caller: Caller, solution: Simulation, rng: random.Random) -> Item:
    """An answer must stay what it was after the next call: a reused result array handed out twice fails."""
    first_in, second_in = make_input(rng.randrange(2**31), 40, 8), make_input(rng.randrange(2**31), 40, 8)
    first = caller.call(solution, first_in)
    if first.error is None:
        kept = np.array(first.value, copy=True) if type(first.value) is np.ndarray else None
        second = caller.call(solution, second_in)
    if first.error is not None or second.error is not None:
        e = first.error if first.error is not None else second.error
        return failed(f"on two calls in a row: your function raised {type(e).__name__}", criterion="correctness")
    if kept is None or not np.array_equal(first.value, kept):
        return failed("an answer changed after the next call", "the array your function returned first was "
                      "overwritten by the second call", "return a new array (or a copy) each call: reuse "
                      "scratch space inside, never the answer you hand out", criterion="correctness")
    return passed("same answers as the baseline on every input, edge cases, sizes up and down and the timed size "
                  "included; an answer stays unchanged after the next call", criterion="correctness")


class _Allocations(Meter):
    """The budget's meter: allocator calls of one call (a memray census, :class:`labkit.alloc.Census`, which
    counts every thread of the process)."""

    def __enter__(self) -> _Allocations:
        self._census = _Census()
        self._census.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._census.__exit__(None, None, None)
        self.amount = float(self._census.allocations or 0)


EXERCISE = Exercise(
    "Lab 03 — preallocate the inventory history",
    hints=("Count what one call allocates with labkit.alloc.count(baseline, *lab03.make_input(1)): how do the "
           "bytes allocated compare with the size of the answer? Which line copies the whole history?",
           "The answer's shape is known before the loop: (days, products). Create it once with np.empty and "
           "write day d into history[d] instead of stacking.",
           "Each day still builds several fresh arrays (np.minimum(...), stock - sold, the comparison, the "
           "product): create them once before the loop and pass out= to each ufunc, e.g. "
           "np.subtract(stock, sold, out=stock). Copy `start` first: never write into the caller's arrays."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def check(solution: Simulation, experiment: Any = None, *, rounds: int = 10, seed: int | None = None,
          max_fraction: float = MAX_FRACTION, required_speedup: float = 2.0, save: bool = True) -> CheckResult:
    """Grade a faster, preallocating ``simulate(demand, start, reorder_at, batch)`` against the baseline.

    Args:
        solution: same signature and answer as :func:`baseline` (an int64 ``numpy.ndarray``, exactly).
        experiment: your :class:`labkit.learner.record.Experiment`, planned before the check with a predicted ratio:
            required (a prediction is part of passing); concluded with the measured comparison and saved.
        rounds: interleaved A/B rounds for the speed check (a few more are drawn per grading).
        seed: reproduces a grading run (a new one is drawn each time by default).
        max_fraction: allocator calls allowed, as a fraction of the baseline's on the same unseen input (and
            at least :data:`MIN_FRACTION` of them).
        required_speedup: how many times faster than the baseline the solution must be.
        save: save the concluded record.

    The budgeted and timed inputs are about :data:`TIMED_DAYS` × :data:`TIMED_PRODUCTS`, the size drawn for
    each grading; the correctness pass includes that size; every metered and timed answer is checked.

    Returns:
        A :class:`labkit.grading.kit.CheckResult`: correctness, the prediction planned, the allocation budget, the
        speed-up, the prediction concluded.
    """
    refused, seed, rng = EXERCISE.start(solution, seed)
    if refused is not None:
        return refused
    days, products = band(rng, TIMED_DAYS), band(rng, TIMED_PRODUCTS)
    cases = _cases(rng, days, products)
    unseen, warm, timed_base = (rng.randrange(2**31) for _ in range(3))
    size = f"{days:,} days × {products} products"

    with Caller() as caller:
        def correct() -> Item:
            item = answers(caller, solution, baseline, cases, differ=_differ, show=_show)
            return item if not item.ok else _answers_stay(caller, solution, rng)

        def within_budget() -> Item:
            return metered(caller, solution, baseline, lambda: make_input(unseen, days, products),
                           warm=lambda: make_input(warm, days, products), meter=_Allocations,
                           unit="allocator calls", what=f"an unseen {size}", max_fraction=max_fraction,
                           floor=MIN_FRACTION, differ=_differ,
                           hint="preallocate the history once and reuse the per-day arrays (out=); "
                                "labkit.alloc.count shows what is left")

        def fast() -> tuple[Item, ...]:
            item = timed(caller, baseline, solution, inputs=lambda k: make_input(timed_base + k, days, products),
                         rounds=rounds, rng=rng, required_speedup=required_speedup, differ=_differ,
                         what=f"{size}, a new input for every timed call")
            return item, prediction(experiment, item.detail, save=save)

        result = EXERCISE.grade(correct, lambda: planned(experiment), within_budget, fast, seed=seed)
    return result


_SEALED = seal(globals())
