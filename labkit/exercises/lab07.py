"""Lab 07's exercise: a service you have not seen — predict its capacity, then size its pool for a target.

Each check draws **two deployments** of toyshop's ``GET /orders/{id}`` from the grading's generator (a new seed
per check, printed in the title): the catalog the endpoint calls from its pool thread sits farther away (an
*emulated* network delay, unknown to you), the service runs with ``pool`` threads, and the target is ``rate``
req/s with a P99 within ``p99_over_w`` single-request times. Each deployment's catalog sits in one of three
bands (near, middle, far), the two of a check in two different bands drawn per check, in either order — bands
far enough apart that no single capacity answers two of them — but everything your function is told is drawn
from the same ranges in all: the pool (one per check), the connection limit, the rate and the objective name
neither the band nor the single-request time. Only a measurement tells them apart.

Your function gets each deployment running, as a :class:`Scenario`, and returns ``(capacity, pool)``: the
capacity (req/s) you predict for the service *as it runs now* — from single requests and a model, not a load
test — and the pool size you choose for the target. The check grades, in order, stopping at the first failure:

0. **your prediction is planned** — the :class:`labkit.learner.record.Experiment` you wrote before the check, with a
   predicted ratio (see 4.); without it nothing is started;
1. **your plan's requests**, counted by the service itself (its ``/stats``, not by your function): at most
   :data:`MAX_REQUESTS` requests, at most :data:`MAX_IN_FLIGHT` in flight at once — single requests, so the
   capacity is predicted, not load-tested;
2. **your capacity**, deployment 1 then 2: the grader measures it (closed loop, flat out, more requests in
   flight than threads) and your prediction must lie within ``factor`` of it (default 1.5×);
3. **your pool**: it must fit ``max_pool`` and not be **over-provisioned** — a thread is not free (a database
   connection, a stack, one more thread handing the interpreter lock around), so a pool larger than
   ``OVER_PROVISIONED × rate × W`` (threads busy less than a third of the time on average at the target,
   W the grader's own single-request time) fails; then the grader restarts the service with it and offers
   ``rate`` with Poisson arrivals for a few seconds: P99 within ``p99_over_w × W`` and no request failed (a run
   that missed while other programs kept the machine busy is measured once more, and says so);
4. **your prediction concluded** — its ratio is the time a request takes at the target rate with your pools,
   over its time alone (both in units of its deployment's W, both deployments pooled), measured by the
   grader's runs of 2. and 3.; judged against its interval (widened by ±25 %) and saved (a refuted prediction is a result, and passes).

The plan runs in the grader's process, through a :class:`labkit.grading.kit.Caller`, and the module is sealed at
import: what that withstands and what not is :mod:`labkit.grading.kit`'s threat model (code that reads the grader's
frames or the service's process arguments can learn the emulated delay).
"""

from __future__ import annotations

import json
import math
import os
import random
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Experiment,
    Item,
    Watch,
    failed,
    kind,
    passed,
    planned,
    prediction,
    quiet,
    seal,
)
from labkit.grading import compare as _compare

# the measuring and driving tools, bound at import (a learner's fake labkit.load.run changes nothing here)
from labkit.load import busy_note as _busy_note
from labkit.load import run as _run
from labkit.queueing.pools import order_paths as _order_paths
from labkit.service import start as _start

__all__ = ["Scenario", "Deployment", "draw", "example", "baseline", "check", "hint", "solution",
           "MAX_REQUESTS", "MAX_IN_FLIGHT", "OVER_PROVISIONED", "P99_OVER_W"]

#: the catalog delay bands (ms): a check draws its two deployments from two of them, chosen per check; nothing
#: else differs by band. A request's time is its delay plus its own work (a millisecond or two): adjacent bands
#: stay more than 1.5² apart in it, so with the pool both are told no capacity lies within 1.5× of both
BANDS: dict[str, tuple[float, float]] = {"near catalog": (8.0, 12.0), "middle catalog": (32.0, 35.0),
                                         "far catalog": (86.0, 95.0)}
#: drawn from the same ranges in every band: the pool the service runs with (one per check), the target rate
POOLS = (3, 4)
RATES = (90.0, 130.0)
#: the database's connection limit: the same for every deployment
MAX_POOL = 32
#: the objective: P99 within this many single-request times (W). On a busy 2-core machine a pool with headroom
#: still sees a P99 of several W, whatever its size (the machine, not the pool); a pool without headroom queues
#: far beyond this. bench_graders.py prints the reference's verdicts over ten gradings.
P99_OVER_W = 10.0
#: what your plan may send to a deployment: requests in all, and in flight at once (counted by the service)
MAX_REQUESTS = 200
MAX_IN_FLIGHT = 2
#: a pool larger than this many times the threads busy on average at the target (rate × W) is over-provisioned
OVER_PROVISIONED = 3.0


@dataclass(frozen=True)
class Deployment:
    """What a check draws (before anything runs): the band, the emulated catalog delay, the pool the service runs
    with, and the target rate."""

    band: str
    catalog_delay_ms: float
    pool: int
    rate: float


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
        p99_over_w: the target P99 at that rate, in single-request times (measured by the grader).
    """

    url: str
    paths: Callable[[int], str]
    pool: int
    cores: int
    max_pool: int
    rate: float
    p99_over_w: float

    def __str__(self) -> str:
        return (f"service at {self.url} with pool={self.pool} on {self.cores} cores; database allows "
                f"{self.max_pool} connections; target: {self.rate:,.0f} req/s with P99 ≤ {self.p99_over_w:g} × "
                "a single request's time")


def draw(rng: random.Random | int) -> tuple[Deployment, Deployment]:
    """The two deployments of a grading, in the order they are graded, drawn from its generator (``rng``; an int
    seeds a new one): two different bands, in either order, the delay within each, one pool for both, a rate
    for each."""
    rng = random.Random(rng) if isinstance(rng, int) else rng
    bands = rng.sample(sorted(BANDS), 2)
    pool = rng.choice(POOLS)
    out = [Deployment(band, round(rng.uniform(*BANDS[band]), 1), pool, round(rng.uniform(*RATES), 1))
           for band in bands]
    return out[0], out[1]


def _stats(url: str) -> dict[str, int]:
    """The service's own counts (requests served, the peak in flight): what the plan's requests are counted by."""
    with urllib.request.urlopen(url + "/stats", timeout=5) as r:
        return json.loads(r.read())


def _alone(url: str, paths: Callable[[int], str], seconds: float) -> Any:
    """The grader's own single requests (closed loop, one in flight): W and the samples the prediction is
    concluded against."""
    one = _run(url, concurrency=1, duration_s=seconds, warmup_s=0.1, paths=paths, progress=False)
    if one.responses == 0 or one.error_count:
        raise RuntimeError(f"the deployment did not answer cleanly ({one.error_count} errors): {one.summary()}")
    return one


@contextmanager
def _running(d: Deployment, pool: int) -> Iterator[tuple[Any, Scenario]]:
    paths = _order_paths()
    with _start(variants={"pool": pool}, catalog_delay_ms=d.catalog_delay_ms) as svc:
        yield svc, Scenario(url=svc.url, paths=paths, pool=pool, cores=os.cpu_count() or 1, max_pool=MAX_POOL,
                            rate=d.rate, p99_over_w=P99_OVER_W)


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
    of throughput, and 40 kept as the pool (more than the database allows)."""
    w = float(_run(s.url, concurrency=1, duration_s=1.0, paths=s.paths, progress=False).service_ns.mean()) / 1e9
    return 40 / w, 40


def _reference(s: Scenario) -> tuple[float, int]:
    from labkit.load import run  # the learner's own import: the reference is shown as the solution

    # W: a single request's time, alone (no queue): a few dozen requests, one at a time. Its time is mostly the
    # wait on the farther catalog, which blocks only its own thread: with the pool busy, each thread finishes
    # one request per W.
    one = run(s.url, concurrency=1, duration_s=0.6, max_requests=60, warmup_s=0.1, paths=s.paths, progress=False)
    w = float(one.service_ns.mean()) / 1e9
    capacity = s.pool / w  # the CPU is far from the limit here: the waits overlap, the work does not
    # Little's law: at the target rate, rate × W threads are busy on average; keep them ~60 % busy so the
    # queue for a thread stays short at P99 (and far from idle), within what the database allows
    pool = min(s.max_pool, math.ceil(s.rate * w / 0.6))
    return capacity, pool


EXERCISE = Exercise(
    "Lab 07 — capacity and pool size for a deployment you have not seen",
    hints=("Measure one thing first: a single request's time W, alone (labkit.load.run with concurrency=1, "
           "paths=s.paths, and max_requests= — the check counts your requests). Where does that time go — "
           "computing, or waiting on something?",
           "A thread that waits on the catalog holds its place in the pool but not the CPU. With the pool full, "
           "how many requests does each thread finish per second? For the target: Little's law says how many "
           "threads are busy on average at s.rate.",
           "Both answers are Little's law, L = λ × W, read two ways: the capacity is λ with L = the pool; the "
           "pool is L at the target rate, divided by how busy you let each thread be — busy enough that the "
           "pool is not over-provisioned (the check's criterion: lab07.OVER_PROVISIONED), idle enough that a "
           "burst rarely finds every thread taken."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def _answer(got: Any) -> tuple[float, int] | str:
    """The (capacity, pool) your function returned, or what is wrong with it (exact types: a tuple of a float
    or int and an int)."""
    if type(got) is not tuple or len(got) != 2:
        return f"return a tuple (capacity in req/s, pool size), got {kind(got)}: {_short(got)}"
    cap, pool = got
    if type(cap) not in (int, float) or not math.isfinite(cap) or cap <= 0:
        return f"the capacity must be a positive number of req/s (an int or a float), got {_short(cap)}"
    if type(pool) is not int or pool < 1:
        return f"the pool size must be an int >= 1 (a number of threads), got {_short(pool)}"
    return float(cap), int(pool)


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as e:  # an answer whose repr raises is reported, never raised
        text = f"<{kind(value)} whose repr raised {type(e).__name__}>"
    return text if len(text) <= 60 else text[:59] + "…"


def _error(e: BaseException) -> str:
    try:
        text = str(e)
    except Exception:  # an exception that cannot be printed is still reported
        text = "<its message could not be printed>"
    return f"{type(e).__name__}: {text[:160]}"


def _in_units_of_w(r: Any, w_ns: float) -> np.ndarray:
    """A run's latencies in units of its deployment's W, scaled to 1 ms, so two deployments can be pooled."""
    return np.asarray(r.samples_ns, dtype=float) / w_ns * 1e6


def check(plan: Callable[[Scenario], tuple[float, int]], experiment: Experiment | None = None, *,
          factor: float = 1.5, seed: int | None = None, capacity_s: float = 2.0, objective_s: float = 4.0,
          save: bool = True) -> CheckResult:
    """Grade ``plan(scenario) -> (capacity, pool)`` on two freshly drawn deployments (see the module docstring).

    Args:
        plan: your function.
        experiment: your :class:`labkit.learner.record.Experiment`, planned before the check, with ``predicted_ratio``
            = the time of a request at the target rate with your pool over its time alone.
        factor: how far your capacity may be from the measured one (1.5: between 2/3 and 1.5 times it).
        seed: reproduce a grading run (a new seed is drawn each time by default).
        capacity_s, objective_s: seconds of the grader's capacity run and of its run at the target rate.
        save: save the concluded experiment record.
    """
    refused, seed, rng = EXERCISE.start(plan, seed)
    if refused is not None:
        return refused
    if not factor > 1:
        return EXERCISE.refuse(f"factor must be > 1 (1.5 allows 2/3× to 1.5×), got {factor!r}")
    deployments, paths = draw(rng), _order_paths()
    answers: dict[int, tuple[float, int, float, Any]] = {}  # k -> capacity, pool, W (ns), the grader's run alone
    at_rate: dict[int, Any] = {}

    def capacity(k: int) -> Item:
        d = deployments[k]
        where = f"deployment {k + 1} (pool={d.pool}, {d.rate:,.0f} req/s target)"
        with _running(d, d.pool) as (svc, s), Caller(timeout_s=120) as caller:
            before = _stats(svc.url)
            out = caller.call(plan, (s,))
            if out.error is not None:  # the learner's code: reported, never raised
                return failed(f"{where}: your function raised {_error(out.error)}",
                              hint="run it on lab07.example() and read the traceback", criterion="correctness")
            got = _answer(out.value)
            after = _stats(svc.url)
            sent, peak = after["served"] - before["served"], after["peak_in_flight"]  # the peak since it started
            if sent > MAX_REQUESTS or peak > MAX_IN_FLIGHT:
                return failed(f"{where}: your plan sent {sent} requests, {peak} at most in flight at once (counted "
                              "by the service)", f"the plan may send {MAX_REQUESTS} at most, {MAX_IN_FLIGHT} at a "
                              "time: the capacity is predicted from single requests and a model, not load-tested",
                              "measure W with concurrency=1 and max_requests=… and let Little's law do the rest",
                              criterion="correctness")
            if isinstance(got, str):
                return failed(f"{where}: {got}", criterion="correctness")
            if (busy := quiet(caller, f"{where}, before the grader's load", "correctness", children=False)) is not None:
                return busy
            watch = Watch(caller, children=False)  # the service is the grader's child
            alone = _alone(svc.url, paths, 0.5)  # the grader's own paths: s.paths is the plan's to change
            flat = _run(svc.url, concurrency=3 * d.pool, duration_s=capacity_s, warmup_s=0.3, paths=paths,
                       progress=False)
            if (busy := watch.busy()) is not None:
                return failed(f"{where}: {busy}", "the grader's load cannot be trusted",
                              "stop the threads your notebook started, then check again", criterion="correctness")
        w_ns = float(alone.service_ns.mean())
        answers[k] = (*got, w_ns, alone)
        cap, measured = got[0], flat.achieved_rate
        ratio = cap / measured if measured else float("inf")
        said = (f"{where}: you predicted {cap:,.0f} req/s, the grader measured {measured:,.0f} req/s flat out "
                f"({sent} requests from your plan)")
        if not 1 / factor <= ratio <= factor:
            return failed(said, f"{ratio:.2f}× {'over' if ratio > 1 else 'under'}, outside {factor:g}×",
                          "lab07.hint(2): what limits how many requests the pool finishes per second?",
                          criterion="correctness")
        return passed(f"{said} — within {factor:g}×", criterion="correctness")

    def sized(k: int) -> Item:
        d = deployments[k]
        _, pool, w_ns, _ = answers[k]
        busy = d.rate * w_ns / 1e9
        most = max(1, math.ceil(OVER_PROVISIONED * busy))
        where = f"deployment {k + 1}: pool={pool}"
        if pool > MAX_POOL:
            return failed(f"{where} needs {pool} database connections", f"the database allows {MAX_POOL}",
                          "choose at most s.max_pool threads", criterion="budget")
        if pool > most:
            return failed(f"{where} is over-provisioned: at {d.rate:,.0f} req/s about {busy:.1f} threads are busy "
                          f"on average (rate × W), each of yours {busy / pool:.0%} of the time",
                          f"a pool is not free (a connection and a stack per thread, more threads taking turns on "
                          f"the interpreter lock): at most {OVER_PROVISIONED:g} × rate × W = {most} threads",
                          "size the pool from Little's law at the target rate, with headroom, not the most allowed",
                          criterion="budget")
        return passed(f"{where} fits the database and is not over-provisioned (at most {most} for about "
                      f"{busy:.1f} threads busy)", criterion="budget")

    def objective(k: int) -> Item:
        d = deployments[k]
        _, pool, w_ns, _ = answers[k]
        p99_ms = P99_OVER_W * w_ns / 1e6

        def met(r: Any) -> bool:
            return r.error_count == 0 and r.percentiles((99,))[99] / 1e6 <= p99_ms

        again = ""
        with _start(variants={"pool": pool}, catalog_delay_ms=d.catalog_delay_ms) as svc:
            r = _run(svc.url, rate=d.rate, arrivals="poisson", duration_s=objective_s, warmup_s=0.5,
                    paths=paths, connections=64, progress=False, seed=seed)
            if not met(r) and _busy_note(r):  # the neighbours' load, not the pool: measured once more
                r = _run(svc.url, rate=d.rate, arrivals="poisson", duration_s=objective_s, warmup_s=0.5,
                        paths=paths, connections=64, progress=False, seed=seed + 1)
                again = " (measured twice: the machine was busy during the first run)"
        at_rate[k] = r
        got_ms = r.percentiles((99,))[99] / 1e6
        said = (f"deployment {k + 1} with pool={pool} at {d.rate:,.0f} req/s: P99 {got_ms:,.1f} ms "
                f"({got_ms * 1e6 / w_ns:.1f} W), {r.error_count} failed{again}")
        if met(r):
            return passed(f"{said} — within the objective of {P99_OVER_W:g} W = {p99_ms:,.0f} ms", criterion="budget")
        busy = _busy_note(r)
        return failed(said, f"the objective is P99 ≤ {P99_OVER_W:g} W = {p99_ms:,.0f} ms with nothing failed" +
                      (f" ({busy})" if busy else ""),
                      "lab07.hint(2): how many threads are busy at this rate, on average and at a peak?",
                      criterion="budget")

    def predicted() -> Item:
        alone = np.concatenate([_in_units_of_w(answers[k][3], answers[k][2]) for k in (0, 1)])
        loaded = np.concatenate([_in_units_of_w(at_rate[k], answers[k][2]) for k in (0, 1)])
        c = _compare(alone, loaded, names=("a request alone", "at the target rate, your pool"))
        return prediction(experiment, c, save=save)

    result = EXERCISE.grade(lambda: planned(experiment), lambda: capacity(0), lambda: sized(0), lambda: capacity(1), lambda: sized(1),
                            lambda: objective(0), lambda: objective(1), predicted, seed=seed)
    return result


_SEALED = seal(globals())
