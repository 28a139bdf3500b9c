"""The capstone's service work: the catalog's write path and change feed, the per-request preset, the access log
(off / sync / queued, nothing lost on shutdown), and the product cache inside the service — all fixes answer
what the baseline answers for every customer, a change shows up within the documented staleness, and a
refresh during a load run loses no request."""

from __future__ import annotations

import json
import re
import threading
import time
import warnings

import orjson
import pytest

with warnings.catch_warnings():  # Starlette 1.x nudges towards httpx2; httpx still works for TestClient
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from labkit.client import Endpoint
from labkit.service import start
from labkit.toyshop.app import create_app
from labkit.toyshop.catalog import CatalogClient, FakeCatalog
from labkit.toyshop.catalog_server import create_app as create_catalog
from labkit.toyshop.dataset import ensure, hot_products
from labkit.toyshop.db import connect
from labkit.toyshop.productcache import MAX_STALE_S
from labkit.toyshop.reqlog import RequestLog
from labkit.toyshop.switches import PRESETS
from labkit.trace import parse_server_timing

_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} GET /\S+ \d{3} \d+\.\d{3} ms$")


@pytest.fixture(scope="module")
def db():
    return ensure("small", quiet=True)


@pytest.fixture
def app_client(db, tmp_path):
    app = create_app(db, FakeCatalog.from_db(db), request_log=tmp_path / "requests.log")
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c, app.state.service, tmp_path / "requests.log"
    app.state.service.close()


def _timing(resp):
    return parse_server_timing(resp.headers["server-timing"])


# -- the catalog's write path -----------------------------------------------------------------------------------
def test_catalog_takes_a_write_and_lists_it_in_its_change_feed(db):
    with TestClient(create_catalog(db)) as c:
        assert c.get("/products/changes?since=0").json() == {"version": 0, "changed": []}
        resp = c.patch("/products/7", content=orjson.dumps({"price_cents": 1234, "rating": 4}))
        assert resp.status_code == 200 and resp.headers["x-catalog-version"] == "1"
        assert resp.json()["price_cents"] == 1234 and resp.json()["rating"] == 4.0
        assert c.get("/products/7").json() == resp.json()
        assert c.get("/products?ids=7").json()["products"] == [resp.json()]
        c.patch("/products/9", content=b'{"stock": 1}')
        assert c.get("/products/changes?since=0").json() == {"version": 2, "changed": [7, 9]}
        assert c.get("/products/changes?since=1").json() == {"version": 2, "changed": [9]}


@pytest.mark.parametrize("body, words", [(b'{"nope": 1}', "unknown field 'nope'"),
                                         (b'{"id": 3}', "'id' cannot change"),
                                         (b'{"stock": "many"}', "'stock' takes a int"),
                                         (b'{"stock": true}', "'stock' takes a int"),
                                         (b'{}', "JSON object of the fields"),
                                         (b'[1]', "JSON object of the fields"),
                                         (b'not json', "not JSON")])
def test_catalog_refuses_a_bad_write_naming_the_field(db, body, words):
    with TestClient(create_catalog(db)) as c:
        resp = c.patch("/products/7", content=body)
        assert resp.status_code == 400 and words in resp.json()["message"]
        assert c.get("/products/changes?since=0").json()["version"] == 0  # nothing changed
        assert c.patch("/products/999999", content=b'{"stock": 1}').status_code == 404
        assert c.get("/products/changes?since=-1").status_code == 400


# -- the preset switch ------------------------------------------------------------------------------------------
def test_a_preset_sets_its_switches_and_a_switch_given_beside_it_wins(app_client):
    c, _, _ = app_client
    variant = dict(kv.split("=") for kv in c.get("/customers/4/export?preset=all").headers["x-variant"].split(","))
    assert {k: variant[k] for k in PRESETS["all"]} == dict(PRESETS["all"])
    variant = dict(kv.split("=") for kv in c.get("/customers/4/export?preset=all&cache=none").headers["x-variant"]
                   .split(","))
    assert variant["cache"] == "none" and variant["n1"] == "join" and variant["codec"] == "orjson"
    resp = c.get("/customers/4/export?preset=baseline")
    assert _timing(resp)["db"].count == 27 and "codec=json" in resp.headers["x-variant"]
    bad = c.get("/customers/4/export?preset=fast")
    assert bad.status_code == 400 and bad.json()["parameter"] == "preset" and "baseline, all" in bad.json()["message"]


def test_a_process_default_preset_applies_to_every_request(db):
    app = create_app(db, FakeCatalog.from_db(db), variants={"preset": "all"})
    with TestClient(app) as c:
        c.get("/customers/4/export")  # the cache's first miss: see the hop test below
        resp = c.get("/customers/4/export")
        assert "codec=orjson" in resp.headers["x-variant"] and _timing(resp)["db"].count == 2
    app.state.service.close()


def test_hop_inline_runs_on_the_loop_while_the_cache_hits_and_retries_a_miss_on_the_pool(db):
    # GIVEN a service whose product cache is cold, WHEN the export runs with hop=inline, THEN the first request
    # misses, is run again on a pool thread (a hop_retry, its queries counted twice) and answers what the
    # baseline answers; the next one hits, never waits for a pool thread and has no retry
    app = create_app(db, FakeCatalog.from_db(db))
    svc = app.state.service
    on = []
    real_blocking = svc.blocking

    async def spy(fn, inline=False, **tally):
        on.append("loop" if inline else "pool")
        return await real_blocking(fn, inline, **tally)
    svc.blocking = spy
    with TestClient(app) as c:
        slow = c.get("/customers/4/export?preset=baseline")
        on.clear()
        first = c.get("/customers/4/export?preset=all")
        assert on == ["loop", "pool"] and _timing(first)["hop_retry"].count == 1 and _timing(first)["db"].count == 4
        on.clear()
        second = c.get("/customers/4/export?preset=all")
        assert on == ["loop"] and "hop_retry" not in _timing(second) and _timing(second)["db"].count == 2
        assert _timing(second)["wait"].dur_ms == 0 and _timing(second)["cache_miss"].count == 0
        assert json.loads(first.content) == json.loads(second.content) == json.loads(slow.content)
        on.clear()
        c.get("/customers/4/export?preset=all&cache=none")  # no cache: every product is a catalog call
        assert on == ["pool"]
        on.clear()
        assert c.get("/quote?customer_id=4&hop=inline").status_code == 200 and on == ["loop"]
    svc.close()


@pytest.mark.slow  # every customer, twice: seconds
def test_all_fixes_answer_what_the_baseline_answers_for_every_customer(db):
    # GIVEN one service, WHEN every customer of the small dataset (and an unknown one) is exported with the
    # baseline and with every fix, THEN the decoded bodies are equal, and so are the errors
    app = create_app(db, FakeCatalog.from_db(db))
    ids = [cid for (cid,) in connect(db).execute("SELECT id FROM customers ORDER BY id")]
    with TestClient(app) as c:
        for cid in [*ids, 10**6]:
            slow = c.get(f"/customers/{cid}/export?preset=baseline")
            fast = c.get(f"/customers/{cid}/export?preset=all")
            assert slow.status_code == fast.status_code and json.loads(slow.content) == json.loads(fast.content), cid
        hits = c.get("/cache").json()["products"]
        assert hits["hits"] > 0 and hits["misses"] > 0  # the cache really answered part of it
    app.state.service.close()


# -- the access log ---------------------------------------------------------------------------------------------
def test_log_off_writes_nothing_and_sync_writes_a_line_before_the_response(app_client):
    c, svc, path = app_client
    c.get("/customers/2/export")
    assert not path.exists() or path.read_text() == ""
    resp = c.get("/customers/2/export?log=sync")
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and _LINE.match(lines[0]) and "/customers/2/export?log=sync 200 " in lines[0]
    assert _timing(resp)["log"].dur_ms > 0


def test_queued_lines_are_all_written_by_close(tmp_path):
    log = RequestLog(tmp_path / "a.log")
    for i in range(2000):
        log.write("queued", "GET", f"/x/{i}", 200, 1_000_000)
    log.write("sync", "GET", "/sync", 200, 5)
    log.close()
    lines = (tmp_path / "a.log").read_text().splitlines()
    assert len(lines) == 2001 and {ln.split()[3] for ln in lines} == {f"/x/{i}" for i in range(2000)} | {"/sync"}
    log.write("queued", "GET", "/late", 404, 5)  # after close: written directly, not dropped
    assert (tmp_path / "a.log").read_text().splitlines()[-1].endswith("/late 404 0.000 ms")
    with pytest.raises(ValueError, match="off, sync, queued"):
        log.write("loud", "GET", "/", 200, 1)


def test_a_queued_line_wakes_no_thread_and_reaches_the_file_within_the_drain_interval(tmp_path, monkeypatch):
    # GIVEN the queued log, WHEN lines are put, THEN the listener is never blocked on the queue (a blocked
    # getter is what a put would wake), and the lines are in the file after a drain interval
    import queue as queue_module

    from labkit.toyshop import reqlog
    waits = []
    real_get = queue_module.SimpleQueue.get

    class Spy(queue_module.SimpleQueue):
        def get(self, block=True, timeout=None):
            waits.append(block)
            return real_get(self, block, timeout)

        def get_nowait(self):
            return self.get(False)
    monkeypatch.setattr(reqlog.queue, "SimpleQueue", Spy)
    log = RequestLog(tmp_path / "b.log")
    for i in range(50):
        log.write("queued", "GET", f"/y/{i}", 200, 1)
    deadline = time.monotonic() + reqlog.DRAIN_S * 20
    while len((tmp_path / "b.log").read_text().splitlines()) < 50 and time.monotonic() < deadline:
        time.sleep(reqlog.DRAIN_S / 5)
    assert len((tmp_path / "b.log").read_text().splitlines()) == 50 and time.monotonic() < deadline
    log.close()
    assert waits and not any(waits)


def test_a_temporary_log_is_removed_on_close():
    log = RequestLog()
    log.write("sync", "GET", "/", 200, 1)
    path = log.path
    assert path is not None and path.exists()
    log.close()
    assert not path.exists()


# -- the real service -------------------------------------------------------------------------------------------
@pytest.mark.slow  # starts the real service
def test_queued_log_loses_nothing_when_the_service_stops(tmp_path):
    path = tmp_path / "requests.log"
    with start(size="small", request_log=path) as svc:
        shop = Endpoint(svc.url)
        for i in range(300):
            assert shop.get(f"/customers/{2 + i % 3}/export?log={'queued' if i % 5 else 'sync'}").status == 200
        shop.get("/health")  # not logged: log=off
    lines = path.read_text().splitlines()
    assert len(lines) == 300 and all(_LINE.match(ln) for ln in lines)


@pytest.fixture(scope="module")
def cached_service():
    with start(size="small", catalog_delay_ms=0.5) as svc:
        yield svc


@pytest.mark.slow  # the real service (cached_service)
def test_a_changed_product_is_served_within_the_documented_staleness(cached_service):
    svc = cached_service
    shop = Endpoint(svc.url)
    path = "/customers/4/export?preset=all"
    shop.get(path)  # the first lookups start the cache and back-fill this customer's products
    first = shop.get(path)
    product = first.json()["orders"][0]["items"][0]["product"]
    new = f"{product['description']} (changed {time.time_ns()})"
    with CatalogClient(svc.catalog_url) as catalog:
        assert catalog.update(product["id"], {"description": new})["description"] == new
    written = time.monotonic()
    time.sleep(MAX_STALE_S)  # every lookup that starts from now on must see the change
    assert time.monotonic() - written >= MAX_STALE_S
    after = shop.get(path)
    items = [i for o in after.json()["orders"] for i in o["items"] if i["product_id"] == product["id"]]
    assert items and all(i["product"]["description"] == new for i in items)
    # visible: each response says how old its snapshot was, never beyond the bound
    for r in (first, after):
        assert 0 <= r.dur_ms("cache_age") <= MAX_STALE_S * 1e3 and r.count("cache_hit") > 0


@pytest.mark.slow  # the real service (cached_service)
def test_refreshes_during_a_load_run_lose_no_request(cached_service):
    import labkit.load

    svc = cached_service
    stop = threading.Event()
    hot = hot_products("small")

    def writer() -> None:
        with CatalogClient(svc.catalog_url) as catalog:
            i = 0
            while not stop.wait(0.02):
                i += 1
                catalog.update(hot[i % len(hot)], {"stock": i})

    before = Endpoint(svc.url).get("/cache").json()["products"]["refreshes"]
    t = threading.Thread(target=writer)
    t.start()
    try:
        r = labkit.load.run(svc.url + "/customers/5/export?preset=all", rate=100, duration_s=2.0,
                            paths=[f"/customers/{c}/export?preset=all" for c in (5, 12, 40, 77)], progress=False)
    finally:
        stop.set()
        t.join()
    after = Endpoint(svc.url).get("/cache").json()["products"]
    assert r.errors == {} and r.responses == r.requests and r.status_counts == {200: r.responses}
    assert after["refreshes"] - before >= 2 and after["version"] > 0
