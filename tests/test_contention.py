"""toyshop's contended pieces for lab 09: the ``stats`` switch's statistics (``labkit.toyshop.tally``) keep exact
totals in every variant under many threads — directly, through the app, and through the running service — the
``lock`` metric of Server-Timing, ``GET /tally``, and the ``loop`` switch's blocking call seen by ``GET /loop``."""

from __future__ import annotations

import sys
import threading
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

with warnings.catch_warnings():  # Starlette 1.x nudges towards httpx2; httpx still works for TestClient
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from labkit.toyshop import tally as tally_module
from labkit.toyshop.app import create_app
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.dataset import ensure
from labkit.toyshop.db import connect
from labkit.toyshop.recommend import RECOMMENDER_S
from labkit.toyshop.switches import SWITCHES
from labkit.toyshop.tally import BOUNDS_MS, MODES, Tally, lines_of
from labkit.trace import collect, parse_server_timing

VARIANTS = [m for m in MODES if m != "off"]
THREADS, EACH = 16, 200


@pytest.fixture(scope="module")
def db():
    return ensure("small", quiet=True)


@pytest.fixture(scope="module")
def client(db):
    with TestClient(create_app(db, FakeCatalog.from_db(db)), raise_server_exceptions=False) as c:
        yield c


def _order(i: int) -> dict:
    # an order payload as order_detail returns it: product i % 7 + 1 bought twice, product 99 once
    return {"id": i, "items": [{"product_id": i % 7 + 1, "quantity": 2}, {"product_id": 99, "quantity": 1}]}


def test_the_switch_is_the_tallys_modes():
    assert SWITCHES["stats"].values == MODES and SWITCHES["stats"].default == "off"
    assert SWITCHES["loop"].values == ("blocking", "thread")
    assert lines_of({"orders": [_order(1), _order(2)]}) == ((2, 2), (99, 1), (3, 2), (99, 1))
    assert lines_of(_order(0)) == ((1, 2), (99, 1)) and lines_of([1, 2]) == () and lines_of({"key": "x"}) == ()


@pytest.mark.parametrize("mode", VARIANTS)
def test_every_variant_keeps_exact_totals_under_many_threads(mode, monkeypatch):
    # GIVEN 16 threads recording at once, each its own mix of endpoints and latencies (and queued's worker
    # draining all the time, so that it races the reader)
    monkeypatch.setattr(tally_module, "DRAIN_S", 0.0002)
    tally = Tally()
    start = threading.Barrier(THREADS)

    def hammer(k: int) -> None:
        start.wait()
        for i in range(EACH):
            tally.record(mode, "orders" if i % 3 else "export", _order(k * EACH + i), (i % 50) * 100_000)
    seen: list[int] = []
    done = threading.Event()

    def read_meanwhile() -> None:  # a reader merging shards and draining the queue while the writers write
        while not done.is_set():
            seen.append(tally.snapshot()["total"])
    reader = threading.Thread(target=read_meanwhile)
    reader.start()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(hammer, range(THREADS)))
    done.set()
    reader.join()
    # WHEN the totals are read (queued: while its worker may still hold updates)
    snap = tally.snapshot()
    assert seen == sorted(seen) and seen[-1] <= THREADS * EACH  # the reads never went back
    tally.close()
    # THEN not one update is lost, in any counter
    n = THREADS * EACH
    expected_units = Counter()
    for j in range(n):
        expected_units[str(j % 7 + 1)] += 2
    expected_units["99"] += n
    per_thread = Counter("orders" if i % 3 else "export" for i in range(EACH))
    assert snap["total"] == n and snap["variants"] == {mode: n}
    assert snap["requests"] == {k: v * THREADS for k, v in per_thread.items()}
    assert snap["units"] == dict(expected_units)
    assert sum(snap["histogram"]["counts"]) == n and snap["histogram"]["bounds_ms"] == list(BOUNDS_MS)
    assert snap["summary"]["window"] > 0 and 0 <= snap["summary"]["p50_ms"] <= snap["summary"]["p99_ms"] <= 4.9
    locks = snap["shard_locks"] if mode == "sharded" else snap["lock"]
    assert locks["acquisitions"] >= (n if mode != "queued" else 1)
    assert (snap["running_summary"] is not None) == (mode == "locked")


@pytest.mark.parametrize("mode", VARIANTS)
def test_a_read_right_after_an_update_always_sees_it(mode, monkeypatch):
    # queued: its worker drains all the time, so an update is often in its hands when the read comes
    monkeypatch.setattr(tally_module, "DRAIN_S", 0.0001)
    tally = Tally()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as CPython can: the rare interleavings come often
    try:
        with ThreadPoolExecutor(1) as writer:
            for i in range(300):
                writer.submit(tally.record, mode, "orders", _order(i), 1000).result()
                assert tally.snapshot()["total"] == i + 1
    finally:
        sys.setswitchinterval(interval)
        tally.close()


def test_variants_mixed_in_one_process_add_up_and_reset_starts_again():
    tally = Tally()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: tally.record(VARIANTS[i % 4], "orders", _order(i), 1000), range(2000)))
    tally.record("off", "orders", _order(0), 1000)  # off tallies nothing
    first = tally.snapshot(reset=True)
    assert first["total"] == 2000 and first["variants"] == dict.fromkeys(VARIANTS, 500)
    assert first["histogram"]["counts"][0] == 2000  # 1 µs: the first bucket
    again = tally.snapshot()
    assert again["total"] == 0 and again["units"] == {} and again["lock"]["acquisitions"] <= 1
    assert 0 < again["elapsed_s"] < first["elapsed_s"]  # the window started again at the reset
    tally.close()
    with pytest.raises(ValueError, match="stats mode must be one of off, locked"):
        tally.record("fast", "orders", None, 0)


def test_the_shard_of_a_thread_that_ended_folds_into_the_totals():
    tally = Tally()
    for _ in range(3):  # three short-lived threads, each with its own shard
        t = threading.Thread(target=lambda: [tally.record("sharded", "orders", _order(i), 1) for i in range(10)])
        t.start()
        t.join()
    tally.record("sharded", "orders", _order(0), 1)  # this thread's, alive
    snap = tally.snapshot()
    # 31 updates, and the read's own acquisitions: 3 folds and 1 live shard read
    assert snap["total"] == 31 and snap["shards"] == 1 and snap["shard_locks"]["acquisitions"] == 31 + 4
    assert tally.snapshot(reset=True)["total"] == 31  # the retired shards' lock stats are kept until a reset
    assert tally.snapshot()["shard_locks"]["acquisitions"] == 1 and tally.snapshot()["total"] == 0


def test_queued_updates_are_never_lost_at_close_or_after():
    tally = Tally()
    for i in range(100):
        tally.record("queued", "orders", _order(i), 1)
    tally.close()  # merges what is queued
    tally.record("queued", "orders", _order(0), 1)  # after close: kept until read
    assert tally.snapshot()["total"] == 101


def test_a_request_shows_its_lock_wait_in_server_timing(client):
    for mode in VARIANTS:
        resp = client.get(f"/orders/1?stats={mode}")
        assert resp.status_code == 200 and f"stats={mode}" in resp.headers["x-variant"]
        lock = parse_server_timing(resp.headers["server-timing"])["lock"]
        assert lock.dur_ms is not None and lock.dur_ms >= 0
        assert lock.count == (0 if mode == "queued" else 1), mode
    off = parse_server_timing(client.get("/orders/1").headers["server-timing"])
    assert "lock" not in off  # stats=off adds nothing


def _expected_units(db, order_ids) -> dict[str, int]:
    conn = connect(db)
    try:
        units: Counter = Counter()
        for oid in order_ids:
            for pid, qty in conn.execute("SELECT product_id, quantity FROM order_items WHERE order_id = ?", (oid,)):
                units[str(pid)] += qty
        return dict(units)
    finally:
        conn.close()


@pytest.mark.parametrize("mode", VARIANTS)
def test_the_service_counts_every_request_exactly_under_concurrency(client, db, mode):
    client.get("/tally?reset=1")
    ids = [1 + i % 40 for i in range(120)]
    with ThreadPoolExecutor(12) as pool:
        statuses = list(pool.map(lambda oid: client.get(f"/orders/{oid}?stats={mode}").status_code, ids))
        statuses += list(pool.map(lambda c: client.get(f"/quote?customer_id={c}&stats={mode}").status_code,
                                  range(1, 21)))
    assert statuses.count(200) == len(statuses)
    snap = client.get("/tally").json()
    assert snap["requests"] == {"orders": 120, "quote": 20} and snap["total"] == 140
    assert snap["variants"] == {mode: 140} and snap["units"] == _expected_units(db, ids)
    assert client.get("/orders/1").status_code == 200 and client.get("/tally").json()["total"] == 140  # off


def test_tally_and_loop_refuse_bad_parameters(client):
    for url, param in [("/tally?reset=yes", "reset"), ("/tally?since=1", "since"), ("/loop?samples=2", "samples"),
                       ("/tally?reset=1&reset=1", "reset")]:
        resp = client.get(url)
        assert resp.status_code == 400 and resp.json()["parameter"] == param, url
    assert client.get("/recommendations").status_code == 400
    assert client.get("/recommendations?customer_id=999999999").status_code == 404


def test_recommendations_answer_the_same_either_way_and_loop_reports_the_window(client):
    # the lag itself is compared on the running service (test_contention_service.py): in process, the
    # client's own threads share the loop's GIL and make its lag their own
    first = client.get("/recommendations?customer_id=1").json()
    assert first["customer_id"] == 1 and len(first["products"]) == 5
    assert client.get("/recommendations?customer_id=1&loop=thread").json() == first
    client.get("/loop?reset=1")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda c: client.get(f"/recommendations?customer_id={c}"), range(1, 21)))
    lag = client.get("/loop?samples=1").json()
    assert lag["samples"] == len(lag["lags_ms"]) == len(lag["at"]) > 0 and set(lag["over_ms"]) == {"1", "5", "20"}
    assert lag["worst_ms"] >= RECOMMENDER_S * 1e3 * 0.9  # 20 sleeps on the loop: some tick came due in one
    assert "lags_ms" not in client.get("/loop").json()


def test_other_endpoints_tally_and_the_loop_monitor_starts_only_when_asked(db):
    app = create_app(db, FakeCatalog.from_db(db))
    with TestClient(app) as c, collect():
        c.get("/tally?reset=1")
        for url in ("/customers/1/export?stats=short", "/statement?customer_id=1&stats=sharded",
                    "/config/feature.0000?stats=locked&cache=none"):
            assert c.get(url).status_code in (200, 404), url
        assert app.state.service._lag is None  # no timer on the loop of a service that never served /loop
        assert c.get("/recommendations?customer_id=2&stats=queued").status_code == 200
        snap = c.get("/tally").json()
        assert set(snap["requests"]) <= {"export", "statement", "config", "recommendations"}
        assert {"export", "statement", "recommendations"} <= set(snap["requests"])
    app.state.service.close()
    assert not app.state.service._lag.running  # started by /recommendations, stopped by close()
