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
   :class:`labkit.alloc.Census`), and more than none: a call that allocates nothing on a new input is
   answering from a cache;
3. **speed** — :func:`labkit.compare` interleaving baseline and solution on a fresh input for every timed
   call: verdict ``faster`` by at least ``required_speedup``;
4. **the prediction** — with ``experiment=``, the learner's :class:`labkit.record.Experiment` is concluded
   with the measured comparison and saved.

Inputs come from a new seed per grading run (printed in the result; ``seed=`` reproduces a run).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from labkit.check import (
    CheckResult,
    Exercise,
    Item,
    budget,
    concluded,
    failed,
    fresh_seed,
    not_callable,
    passed,
    same_answers,
    speed,
)

__all__ = ["baseline", "check", "hint", "solution", "make_input", "MAX_FRACTION", "TIMED_DAYS", "TIMED_PRODUCTS"]

#: the budget: at most this fraction of the baseline's allocator calls on an unseen input.
MAX_FRACTION = 0.5
#: the size of the budgeted and timed inputs: days × products.
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


def _same(want: Any, got: Any) -> bool:
    return (isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
            and bool(np.array_equal(got, want)))


def _describe(want: np.ndarray, got: Any) -> str:
    if not isinstance(got, np.ndarray):
        return f"expected a NumPy array of shape {want.shape}, got a {type(got).__name__}"
    if got.shape != want.shape:
        return f"expected shape {want.shape} (days, products), got {got.shape}"
    if got.dtype != want.dtype:
        return f"expected dtype {want.dtype}, got {got.dtype}"
    day, product = (int(i) for i in np.argwhere(got != want)[0])
    return (f"day {day}, product {product}: expected stock {int(want[day, product])}, got "
            f"{int(got[day, product])}")


def _show(case: tuple[np.ndarray, ...]) -> str:
    demand, start = case[0], case[1]
    return f"{demand.shape[0]} days × {start.shape[0]} products"


def _cases(rng: random.Random) -> list[tuple[np.ndarray, ...]]:
    seeds = [rng.randrange(2**31) for _ in range(8)]
    edge = [make_input(seeds[0], 0, 5), make_input(seeds[1], 1, 1), make_input(seeds[2], 6, 0)]
    below = make_input(seeds[3], 10, 4)
    below = (below[0], np.zeros(4, dtype=np.int64), below[2], below[3])  # every product starts below its point
    # sizes up and down in a row: a buffer reused between calls must not hand one call's days to the next
    sizes = [make_input(seeds[4], 120, 30), make_input(seeds[5], 7, 30), make_input(seeds[6], 60, 12)]
    mismatched = make_input(seeds[7], 5, 6)
    mismatched = (mismatched[0], mismatched[1][:4], mismatched[2], mismatched[3])  # start: 4 products, not 6
    return [*edge, below, *sizes, make_input(rng.randrange(2**31), 365, 25), mismatched]


def _answers_stay(solution: Simulation, rng: random.Random) -> Item:
    """An answer must stay what it was after the next call: a reused result array handed out twice fails."""
    first_in, second_in = make_input(rng.randrange(2**31), 40, 8), make_input(rng.randrange(2**31), 40, 8)
    try:
        first = solution(*first_in)
        kept = np.array(first, copy=True)
        solution(*second_in)
    except Exception as e:  # the learner's code: report, never raise
        return failed(f"on two calls in a row: your function raised {type(e).__name__}: {e}")
    if not (isinstance(first, np.ndarray) and np.array_equal(first, kept)):
        return failed("an answer changed after the next call", "the array your function returned first was "
                      "overwritten by the second call", "return a new array (or a copy) each call: reuse "
                      "scratch space inside, never the answer you hand out")
    return passed("same answers as the baseline on every input, edge cases and sizes up and down included; "
                  "an answer stays unchanged after the next call")


def _allocations(warm: tuple[np.ndarray, ...]) -> Callable[..., float]:
    """The budget's meter: allocator calls of one call (a memray census, :class:`labkit.alloc.Census`) on its
    input, after a warm-up call on ``warm`` (same shape, other values) so that buffers a solution keeps
    between calls are already there — and a cache keyed on the input has never seen it."""
    from labkit.alloc import Census

    def meter(fn: Callable[..., Any], *args: Any) -> float:
        fn(*warm)
        with Census() as census:
            fn(*args)
        return float(census.allocations or 0)
    return meter


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
          max_fraction: float = MAX_FRACTION, required_speedup: float = 2.0) -> CheckResult:
    """Grade a faster, preallocating ``simulate(demand, start, reorder_at, batch)`` against the baseline.

    Args:
        solution: same signature and answer as :func:`baseline`.
        experiment: your :class:`labkit.record.Experiment` (planned before the check); concluded with the
            measured comparison and saved when the check gets that far.
        rounds: interleaved A/B rounds for the speed check.
        seed: reproduces a grading run (a new one is drawn each time by default).
        max_fraction: allocator calls allowed, as a fraction of the baseline's on the same unseen input.
        required_speedup: how many times faster than the baseline the solution must be.

    Returns:
        A :class:`labkit.check.CheckResult`: correctness, the allocation budget, the speed-up, the prediction.
    """
    refused = not_callable(EXERCISE, solution)
    if refused is not None:
        return refused
    seed = fresh_seed() if seed is None else seed
    rng = random.Random(seed)
    cases = _cases(rng)
    unseen, warm = make_input(rng.randrange(2**31)), make_input(rng.randrange(2**31))
    timed_base = rng.randrange(2**31)

    def correct() -> Item:
        item = same_answers(solution, baseline, cases, same=_same, show=_show, describe=_describe)
        return item if not item.ok else _answers_stay(solution, rng)

    def within_budget() -> Item:
        meter = _allocations(warm)
        base = meter(baseline, *unseen)
        return budget(solution, unseen, meter=meter, limit=int(max_fraction * base), unit="allocator calls",
                      what=f"an unseen {TIMED_DAYS} days × {TIMED_PRODUCTS} products", baseline_amount=base,
                      hint="preallocate the history once and reuse the per-day arrays (out=); "
                           "labkit.alloc.count shows what is left")

    def fast() -> tuple[Item, ...]:
        item = speed(baseline, solution, inputs=lambda k: make_input(timed_base + k), rounds=rounds,
                     required_speedup=required_speedup,
                     what=f"{TIMED_DAYS} days × {TIMED_PRODUCTS} products, a new input for every timed call")
        return item, *concluded(experiment, item.detail)

    result = EXERCISE.grade(correct, within_budget, fast)
    return CheckResult(f"{result.title} (seed {seed})", result.items)
