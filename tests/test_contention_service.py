"""The ``stats`` switch through the running service (``labkit.service.start``: uvicorn, the real pool of 40
threads): every variant counts every answered request exactly under a closed loop of 32 connections."""

from __future__ import annotations

import pytest

from labkit.client import Endpoint
from labkit.load import run
from labkit.service import start

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
