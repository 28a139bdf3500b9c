"""Lab 07's exercise: a service you have not seen — predict its capacity, then size its pool for a target.

Each check draws **two deployments** of toyshop's ``GET /orders/{id}`` from a seeded range (a new seed per
check, printed in the title): the catalog the endpoint calls from its pool thread sits farther away (an
*emulated* network delay, unknown to you), the service runs with ``pool`` threads, the database accepts at
most ``max_pool`` connections (one per pool thread), and the target is ``rate`` req/s with P99 within
``p99_ms``. One deployment has a near catalog and few connections to spare, the other a far catalog and many:
bands far enough apart that no single capacity or pool size answers both, so an answer copied from an earlier
draw fails.

Your function gets each deployment running, as a :class:`Scenario`, and returns ``(capacity, pool)``: the
capacity (req/s) you predict for the service *as it runs now* — from a measurement of single requests and the
pool and core counts: napkin math, not a load test — and the pool size you choose for the target. The check
grades, in order, stopping at the first failure:

1. **your capacity**, deployment 1 then 2: the grader measures it (closed loop, flat out, more requests in
   flight than threads) and your prediction must lie within ``factor`` of it (default 1.5×);
2. **your pool**, deployment 1 then 2: it must fit ``max_pool``; the grader restarts the service with it and
   offers ``rate`` with Poisson arrivals for a few seconds: P99 must be within ``p99_ms`` and no request may fail
   (a run that missed while other programs kept the machine busy is measured once more, and says so).

The target's rate and P99 are set from the grader's own single-request time at the draw, so a slow machine
moves them together. A busy machine can still fail the objective: the message says when it was busy.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from labkit.check import CheckResult, Exercise, Item, failed, fresh_seed, not_callable, passed

__all__ = ["Scenario", "Deployment", "draw", "example", "baseline", "check", "hint", "solution"]

#: the two bands every check draws one deployment from: (catalog delay ms range, pool it runs with,
#: connection limit, threads busy at the target rate (rate × W) range)
BANDS: dict[str, tuple[tuple[float, float], int, int, tuple[float, float]]] = {
    "far catalog, connections to spare": ((40.0, 60.0), 5, 24, (5.5, 7.0)),
    "near catalog, few connections": ((8.0, 12.0), 4, 5, (1.2, 1.8)),
}
#: the objective: P99 within this many single-request times (W). On a busy 2-core machine a pool with headroom
#: still sees a P99 of several W, whatever its size (the machine, not the pool); a pool without headroom queues
#: far beyond this. bench_graders.py prints the reference's verdicts over ten gradings.
P99_OVER_W = 10.0


@dataclass(frozen=True)
class Deployment:
    """What a check draws (before anything runs): the band, the emulated catalog delay, the pool the service runs
    with, the connection limit, and how many threads the target keeps busy (rate × W)."""

    band: str
    catalog_delay_ms: float
    pool: int
    max_pool: int
    busy: float


@dataclass(frozen=True)
class Scenario:
    """A running deployment, as your function sees it.

    Attributes:
        url: the service, ``http://127.0.0.1:PORT``.
        paths: the requests to send (``i -> "/orders/…"``): pass it as ``paths=`` to ``labkit.load.run``.
        pool: the threads the service runs with *now* (what your capacity prediction is for).
        cores: CPUs on this machine.
        max_pool: the most threads (database connections) you may choose.
        rate: the target rate, req/s.
        p99_ms: the target P99 at that rate, ms.
    """

    url: str
    paths: Callable[[int], str]
    pool: int
    cores: int
    max_pool: int
    rate: float
    p99_ms: float

    def __str__(self) -> str:
        return (f"service at {self.url} with pool={self.pool} on {self.cores} cores; database allows "
                f"{self.max_pool} connections; target: {self.rate:,.0f} req/s with P99 ≤ {self.p99_ms:,.0f} ms")


def draw(seed: int) -> tuple[Deployment, Deployment]:
    """The two deployments of grading run ``seed``, in the order they are graded."""
    rng = random.Random(seed)
    out = []
    for band, ((lo, hi), pool, max_pool, (b_lo, b_hi)) in BANDS.items():
        out.append(Deployment(band, round(rng.uniform(lo, hi), 1), pool, max_pool, round(rng.uniform(b_lo, b_hi), 2)))
    rng.shuffle(out)
    return out[0], out[1]


def _single_request_s(url: str, paths: Callable[[int], str], seconds: float) -> float:
    from labkit.load import run

    one = run(url, concurrency=1, duration_s=seconds, warmup_s=0.2, paths=paths, progress=False)
    if one.responses == 0 or one.error_count:
        raise RuntimeError(f"the deployment did not answer cleanly ({one.error_count} errors): {one.summary()}")
    return float(one.service_ns.mean()) / 1e9


@contextmanager
def _running(d: Deployment, pool: int) -> Iterator[tuple[Any, Scenario]]:
    """Start deployment ``d`` with ``pool`` threads; yield the service and the scenario its target implies
    (the target's rate and P99 follow from the grader's own single-request time, measured now)."""
    from labkit.queueing.pools import order_paths
    from labkit.service import start

    paths = order_paths()
    with start(variants={"pool": pool}, catalog_delay_ms=d.catalog_delay_ms) as svc:
        w = _single_request_s(svc.url, paths, 1.0)
        yield svc, Scenario(url=svc.url, paths=paths, pool=pool, cores=os.cpu_count() or 1, max_pool=d.max_pool,
                            rate=round(d.busy / w, 1), p99_ms=round(P99_OVER_W * w * 1e3, 1))


@contextmanager
def example(seed: int = 7) -> Iterator[Scenario]:
    """A deployment to try your function on before the check (a fixed draw; the check draws fresh ones).

        with lab07.example() as s:
            print(s)
            print(my_plan(s))
    """
    d = draw(seed)[0]
    with _running(d, d.pool) as (_, scenario):
        yield scenario


def baseline(s: Scenario) -> tuple[float, int]:
    """The service as shipped, taken at its word: Starlette's 40 threads, each assumed to add a request's worth
    of throughput, and 40 kept as the pool."""
    from labkit.load import run

    w = float(run(s.url, concurrency=1, duration_s=1.0, paths=s.paths, progress=False).service_ns.mean()) / 1e9
    return 40 / w, 40


def _reference(s: Scenario) -> tuple[float, int]:
    from labkit.load import run

    # W: a single request's time, alone (no queue). Its time is mostly the wait on the farther catalog, which
    # blocks only its own thread: with the pool busy, each thread finishes one request per W.
    one = run(s.url, concurrency=1, duration_s=1.0, warmup_s=0.2, paths=s.paths, progress=False)
    w = float(one.service_ns.mean()) / 1e9
    capacity = s.pool / w  # the CPU is far from the limit here: the waits overlap, the work does not
    # Little's law: at the target rate, rate × W threads are busy on average; keep them ~60 % busy so the
    # queue for a thread stays short at P99, within what the database allows
    pool = min(s.max_pool, math.ceil(s.rate * w / 0.6))
    return capacity, pool


EXERCISE = Exercise(
    "Lab 07 — capacity and pool size for a deployment you have not seen",
    hints=("Measure one thing first: a single request's time W at concurrency 1 (labkit.load.run with "
           "concurrency=1, paths=s.paths). Where does that time go — computing, or waiting on something?",
           "A thread that waits on the catalog holds its place in the pool but not the CPU. With the pool full, "
           "each of its threads completes one request every W: capacity ≈ pool / W (the cores matter only when "
           "the work itself, not the wait, fills them). For the target: Little's law says rate × W threads are "
           "busy on average.",
           "capacity = s.pool / W; pool = ceil(s.rate × W / 0.6), at most s.max_pool — threads about 60 % busy "
           "keep the wait for a thread short at P99."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def _answer(got: Any) -> tuple[float, int] | str:
    """The (capacity, pool) your function returned, or what is wrong with it."""
    if not isinstance(got, tuple | list) or len(got) != 2:
        return f"return a pair (capacity in req/s, pool size), got {type(got).__name__}: {str(got)[:60]}"
    cap, pool = got
    if isinstance(cap, bool) or not isinstance(cap, int | float) or not math.isfinite(cap) or cap <= 0:
        return f"the capacity must be a positive number of req/s, got {cap!r}"
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
        return f"the pool size must be an integer >= 1 (a number of threads), got {pool!r}"
    return float(cap), int(pool)


def check(plan: Callable[[Scenario], tuple[float, int]], *, factor: float = 1.5, seed: int | None = None,
          capacity_s: float = 2.0, objective_s: float = 4.0) -> CheckResult:
    """Grade ``plan(scenario) -> (capacity, pool)`` on two freshly drawn deployments (see the module docstring).

    Args:
        plan: your function.
        factor: how far your capacity may be from the measured one (1.5: between 2/3 and 1.5 times it).
        seed: reproduce a grading run (a new seed is drawn each time by default).
        capacity_s, objective_s: seconds of the grader's capacity run and of its run at the target rate.
    """
    refused = not_callable(EXERCISE, plan)
    if refused is not None:
        return refused
    if not factor > 1:
        return EXERCISE.refuse(f"factor must be > 1 (1.5 allows 2/3× to 1.5×), got {factor!r}")
    seed = fresh_seed() if seed is None else seed
    deployments = draw(seed)
    answers: dict[int, tuple[Deployment, Scenario, float, int]] = {}

    def capacity(k: int) -> Item:
        from labkit.load import run

        d = deployments[k]
        where = f"deployment {k + 1} ({d.band}: catalog {d.catalog_delay_ms:g} ms away, pool={d.pool})"
        with _running(d, d.pool) as (svc, s):
            try:
                got = _answer(plan(s))
            except Exception as e:  # the learner's code: reported, never raised
                return failed(f"{where}: your function raised {type(e).__name__}: {e}",
                              hint="run it on lab07.example() and read the traceback")
            if isinstance(got, str):
                return failed(f"{where}: {got}")
            flat = run(svc.url, concurrency=3 * d.pool, duration_s=capacity_s, warmup_s=0.3, paths=s.paths,
                       progress=False)
        answers[k] = (d, s, *got)
        cap, measured = got[0], flat.achieved_rate
        ratio = cap / measured if measured else float("inf")
        said = f"{where}: you predicted {cap:,.0f} req/s, the grader measured {measured:,.0f} req/s flat out"
        if 1 / factor <= ratio <= factor:
            return passed(f"{said} — within {factor:g}×")
        return failed(said, f"{ratio:.2f}× {'over' if ratio > 1 else 'under'}, outside {factor:g}×",
                      "lab07.hint(2): what limits how many requests the pool finishes per second?")

    def objective(k: int) -> Item:
        from labkit.load import busy_note, run

        d, s, _, pool = answers[k]
        where = f"deployment {k + 1} ({d.band})"
        if pool > d.max_pool:
            return failed(f"{where}: pool={pool} needs {pool} database connections", f"the database allows "
                          f"{d.max_pool}", "choose at most s.max_pool threads")
        from labkit.service import start

        def met(r: Any) -> bool:
            return r.error_count == 0 and r.percentiles((99,))[99] / 1e6 <= s.p99_ms

        again = ""
        with start(variants={"pool": pool}, catalog_delay_ms=d.catalog_delay_ms) as svc:
            r = run(svc.url, rate=s.rate, arrivals="poisson", duration_s=objective_s, warmup_s=0.5, paths=s.paths,
                    connections=64, progress=False, seed=seed)
            if not met(r) and busy_note(r):  # the neighbours' load, not the pool: measured once more
                r = run(svc.url, rate=s.rate, arrivals="poisson", duration_s=objective_s, warmup_s=0.5,
                        paths=s.paths, connections=64, progress=False, seed=seed + 1)
                again = " (measured twice: the machine was busy during the first run)"
        p99_ms = r.percentiles((99,))[99] / 1e6
        said = (f"{where} with pool={pool} at {s.rate:,.0f} req/s: P99 {p99_ms:,.1f} ms, {r.error_count} failed"
                f"{again}")
        if met(r):
            return passed(f"{said} — within the objective of {s.p99_ms:,.0f} ms")
        busy = busy_note(r)
        return failed(said, f"the objective is P99 ≤ {s.p99_ms:,.0f} ms with nothing failed" +
                      (f" ({busy})" if busy else ""),
                      "lab07.hint(2): how many threads are busy at this rate, on average and at a peak?")

    result = EXERCISE.grade(lambda: capacity(0), lambda: capacity(1), lambda: objective(0), lambda: objective(1))
    return CheckResult(f"{result.title} (seed {seed})", result.items)

