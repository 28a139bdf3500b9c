"""lab 09's switches through the running service (``labkit.service.start``: uvicorn, the real pool of 40
threads): every ``stats`` variant counts every answered request exactly under a closed loop of 32 connections,
and ``loop=blocking`` makes the event loop late where ``loop=thread`` does not."""

from __future__ import annotations

import pytest

from labkit.client import Endpoint
from labkit.load import run
from labkit.service import start
from labkit.toyshop.recommend import RECOMMENDER_S

pytestmark = pytest.mark.slow

VARIANTS = ("locked", "short", "sharded", "queued")


@pytest.fixture(scope="module")
def service():
    with start(size="small") as svc:
        yield svc


@pytest.mark.parametrize("mode", VARIANTS)
def test_every_answered_request_is_counted_once(service, mode):
    shop = Endpoint(service.url)
    shop.get("/tally?reset=1")
    paths = [f"/orders/{1 + i % 200}?stats={mode}" for i in range(50)]
    r = run(service.url, concurrency=32, duration_s=1.0, paths=paths, progress=False)
    snap = shop.get("/tally").json()
    assert r.ok > 100 and r.error_count == 0
    assert snap["total"] == snap["requests"]["orders"] == snap["variants"][mode] == r.ok
    assert sum(snap["histogram"]["counts"]) == snap["total"]
    if mode in ("locked", "short"):
        assert snap["lock"]["acquisitions"] >= snap["total"]


def _lag_under(service, loop: str) -> dict:
    shop = Endpoint(service.url)
    paths = [f"/recommendations?customer_id={1 + i % 300}&loop={loop}" for i in range(300)]
    shop.get("/loop?reset=1")
    r = run(service.url, concurrency=8, duration_s=1.0, paths=paths, progress=False)
    assert r.ok > 50 and r.error_count == 0
    return shop.get("/loop").json()


def test_a_blocking_call_on_the_loop_makes_it_late_and_a_thread_does_not(service):
    blocked, threaded = _lag_under(service, "blocking"), _lag_under(service, "thread")
    # THEN with 8 requests sleeping on the loop one after another, its timer waited at least one sleep, it fired
    # far fewer times in the same second of load, and it is late by more than a sleep far more often than with
    # the sleeps in threads. Not the tail (worst, P99): one stall of the whole process on a loaded machine makes
    # the threaded loop's the larger (a full-suite run: P99 36 ms threaded against 27 ms blocked; under three CPU
    # hogs here the blocked loop fired 76-112 times, the threaded one 181-186, with 36-51 % and 0-2 % of the
    # ticks over 5 ms late).
    assert blocked["worst_ms"] >= RECOMMENDER_S * 1e3 * 0.9, blocked
    assert blocked["samples"] < 0.8 * threaded["samples"], (blocked, threaded)
    assert blocked["over_ms"]["5"] / blocked["samples"] > threaded["over_ms"]["5"] / threaded["samples"], \
        (blocked, threaded)
