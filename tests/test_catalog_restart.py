"""The catalog comes back: killed under load, it is restarted by labkit.service (bounded retries, back-off) on
the same port; meanwhile the order service answers 502 at once (never a hang, never a 500), says so in
``/health`` and its log, and answers again without being restarted."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from labkit.client import Endpoint
from labkit.service import start

pytestmark = pytest.mark.slow

PATH = "/customers/5/export?n1=batched"  # 40 items: every request calls the catalog


def test_a_killed_catalog_is_restarted_and_exports_answer_again():
    with start(size="small") as svc:
        app_pid, old_catalog = svc.pid, svc.catalog_pid
        shop, probe = Endpoint(svc.url, timeout=10), Endpoint(svc.url, timeout=10)
        assert shop.get(PATH).status == 200
        replies: list[tuple[float, int, float]] = []  # (sent at, status, seconds)
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set() and len(replies) < 20_000:
                t = time.monotonic()
                r = shop.get(PATH)
                replies.append((t, r.status, r.elapsed_ns / 1e9))

        worker = threading.Thread(target=load)
        worker.start()
        try:
            time.sleep(0.3)
            killed_at = time.monotonic()
            os.kill(old_catalog, signal.SIGKILL)  # WHEN the catalog dies mid-load
            health_down = None
            deadline = killed_at + 30
            while time.monotonic() < deadline:  # until the catalog is back and has answered for a while
                if health_down is None and any(s == 502 for _, s, _ in replies[-50:]):
                    health_down = probe.get("/health").json()["catalog"]
                back = [t for t, s, _ in replies if t > killed_at and s == 200]
                if back and time.monotonic() - back[0] > 1.0:
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            worker.join(30)
        health = probe.get("/health").json()["catalog"]
        app_log, new_catalog, restarts = svc.log_tail(200), svc.catalog_pid, svc.catalog_restarts
        assert svc.pid == app_pid and svc.alive  # the order service was never restarted

    during = [(s, dt) for t, s, dt in replies if t > killed_at and (not back or t < back[0])]
    after = [s for t, s, _ in replies if back and t >= back[0]]
    # THEN requests during the outage failed fast with 502, and those after it succeed
    assert back, f"no export answered within 30 s of the kill; {len(during)} during the outage"
    assert {s for s, _ in during} <= {200, 502} and sum(s == 502 for s, _ in during) > 0, during[:20]
    assert max(dt for _, dt in during) < 2.0, "a request hung during the outage"
    assert len(after) > 10 and set(after) == {200}, after[:20]
    # … the catalog is a new process, counted once; /health said down, then up again
    assert new_catalog != old_catalog and restarts == 1
    assert health_down is not None and health_down["state"] == "down" and health_down["outages"] == 1
    assert health["state"] == "up" and health["outages"] == 1 and health["failed_calls"] >= sum(
        s == 502 for s, _ in during)
    # … and both logs say what happened
    assert "does not answer" in app_log and "answers again" in app_log and "catalog restarted" in app_log
