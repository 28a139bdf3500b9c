"""The product cache: preload, exact hit/miss counts, copy-on-write refresh, the staleness bound (fake clock),
and readers that never see a snapshot older than its version while writes and refreshes race them."""

from __future__ import annotations

import bisect
import sys
import threading
import time

import pytest

from labkit.errors import BadInputError
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.dataset import HOT_FRACTION, SIZES, ensure, hot_products
from labkit.toyshop.productcache import OFFLINE, ProductCache, WouldBlock
from labkit.trace import collect


class FakeClock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


@pytest.fixture
def catalog():
    return FakeCatalog.from_db(ensure("small", quiet=True))


@pytest.fixture
def clock():
    return FakeClock()


def _calls(catalog):
    seen = []
    catalog.observers.append(lambda method, url, dur: seen.append(url))
    return seen


def test_hot_products_are_a_fixed_fifth_of_the_catalog():
    hot = hot_products("small")
    assert hot == hot_products("small") == sorted(set(hot))
    assert len(hot) == int(SIZES["small"][1] * HOT_FRACTION) and hot != list(range(1, len(hot) + 1))


def test_first_refresh_preloads_the_hot_products_and_lookups_hit_them(catalog, clock):
    hot = hot_products("small")[:50]
    cache = ProductCache(catalog, preload=hot, clock=clock, autostart=False)
    snap = cache.refresh()
    assert set(snap.products) == set(hot) and snap.version == 0
    calls = _calls(catalog)
    with collect() as trace:
        got = cache.get_many(hot[:10] + hot[:3])  # repeated ids are looked up once, as get_many does
    assert got == {pid: catalog.get(pid) for pid in hot[:10]}
    m = {x.name: x.count for x in trace.metrics()}
    assert (m["cache_hit"], m["cache_miss"]) == (10, 0) and calls == [f"fake://catalog/products/{p}" for p in hot[:10]]
    assert cache.stats()[:2] == (10, 0)
    cache.stop()


def test_misses_go_to_the_catalog_in_one_batch_and_are_back_filled_up_to_capacity(catalog, clock):
    cache = ProductCache(catalog, capacity=100, clock=clock, autostart=False)
    cold = list(range(1, 121))
    calls = _calls(catalog)
    assert cache.get_many(cold) == catalog.get_many(cold)
    assert len(calls) == 3 + 3  # the cache's batches of 50, then the check's own
    assert len(cache.snapshot().products) == 100  # back-fill stopped at capacity
    assert cache.get_many(cold) == catalog.get_many(cold)
    assert cache.stats()[:2] == (100, 120 + 20)
    assert cache.get(10**6) is None and cache.get(10**6) is None  # full: an unknown id is not kept either
    assert cache.stats()[:2] == (100, 142)
    roomy = ProductCache(catalog, clock=clock, autostart=False)
    assert roomy.get(10**6) is None and roomy.get(10**6) is None  # with room, "no such product" is kept
    assert roomy.stats()[:2] == (1, 1)
    cache.stop()
    roomy.stop()


def test_an_offline_view_answers_hits_and_refuses_a_miss_before_touching_anything(catalog, clock):
    # hop=inline runs a request on the event loop through view(OFFLINE): a miss must raise, fetch nothing, count
    # nothing and back-fill nothing, so the request can run again on a pool thread with the real catalog
    cache = ProductCache(catalog, clock=clock, autostart=False)
    cache.get_many([1, 2])
    calls = _calls(catalog)
    view = cache.view(OFFLINE)
    assert view.get_many([2, 1]) == {1: catalog.get(1), 2: catalog.get(2)}
    with pytest.raises(WouldBlock, match="1 products not in the cache"):
        view.get_many([1, 3])
    assert calls == [f"fake://catalog/products/{p}" for p in (1, 2)]  # only the check's own
    assert 3 not in cache.snapshot().products and cache.stats()[:2] == (2, 2)  # the first call missed, the view hit
    cache.stop()


def test_a_write_is_dropped_from_the_next_snapshot_and_hot_products_are_refetched(catalog, clock):
    hot = hot_products("small")[:5]
    cache = ProductCache(catalog, preload=hot, clock=clock, autostart=False)
    cache.refresh()
    cold = next(p for p in range(1, 100) if p not in hot)
    cache.get(cold)  # back-filled
    catalog.update(hot[0], {"stock": 12345})
    catalog.update(cold, {"description": "changed"})
    assert cache.get(hot[0])["stock"] != 12345  # not polled yet: the old value, within the bound
    snap = cache.refresh()
    assert snap.version == 2 and snap.products[hot[0]]["stock"] == 12345 and cold not in snap.products
    assert cache.get(cold)["description"] == "changed"
    cache.stop()


def test_a_snapshot_older_than_the_bound_is_bypassed_until_a_poll_succeeds(catalog, clock):
    hot = hot_products("small")[:5]
    cache = ProductCache(catalog, preload=hot, refresh_s=0.5, max_stale_s=2.0, clock=clock, autostart=False)
    cache.refresh()
    catalog.update(hot[1], {"stock": 777})
    clock.advance(2.0)
    assert cache.get(hot[1])["stock"] != 777  # exactly at the bound: still served
    clock.advance(0.001)
    with collect() as trace:
        assert cache.get(hot[1])["stock"] == 777  # past the bound: straight from the catalog
    m = {x.name: x for x in trace.metrics()}
    assert m["cache_miss"].count == 1 and "too old" in m["cache_miss"].desc
    cache.refresh()
    assert cache.get(hot[1])["stock"] == 777 and cache.stats().age_ms == 0


def test_the_background_refresher_polls_and_reports_and_stops(catalog):
    cache = ProductCache(catalog, preload=hot_products("small")[:20], refresh_s=0.01, max_stale_s=1.0)
    assert cache.wait_until_loaded(5)
    deadline = threading.Event()
    while cache.stats().refreshes < 3 and not deadline.wait(0.01):
        pass
    s = cache.stats()
    assert s.running and s.refreshes >= 3 and s.size == 20 and s.failed_refreshes == 0
    cache.stop()
    assert not cache.stats().running


def test_a_catalog_that_does_not_answer_is_counted_and_retried(clock):
    class Down(FakeCatalog):
        def _send(self, method, path, body=None):
            raise OSError("connection refused")

    cache = ProductCache(Down({1: {"id": 1}}), refresh_s=0.01, max_stale_s=1.0)
    cache.start()
    while cache.stats().failed_refreshes < 2:
        threading.Event().wait(0.005)
    assert "connection refused" in cache.last_error
    cache.stop()


def test_bad_settings_are_refused_naming_them(catalog):
    with pytest.raises(BadInputError, match="refresh_s"):
        ProductCache(catalog, refresh_s=3, max_stale_s=2)
    with pytest.raises(BadInputError, match="capacity"):
        ProductCache(catalog, preload=range(1, 11), capacity=5)


def test_readers_never_see_an_entry_older_than_their_snapshot_while_writes_and_refreshes_race():
    # GIVEN a catalog whose hot products are written over and over with rising stock values, a refresher
    # polling as fast as it can, and readers looking products up and inspecting whole snapshots
    catalog = FakeCatalog.from_db(ensure("small", quiet=True))
    hot = hot_products("small")[:40]
    cache = ProductCache(catalog, preload=hot, capacity=200)
    cache.refresh()
    history: dict[int, tuple[list[int], list[int]]] = {pid: ([], []) for pid in hot}  # versions, values
    stop, enough = threading.Event(), threading.Event()
    problems: list[str] = []

    def writer() -> None:
        value = 10_000
        while not stop.is_set():
            if value > 10_000 + 150:
                enough.set()
            value += 1
            for pid in hot[: 1 + value % 7]:
                version = catalog.store.update(pid, {"stock": value})[0]
                versions, values = history[pid]
                values.append(value)  # values first: a reader that sees the version also sees its value
                versions.append(version)
            time.sleep(0)

    def refresher() -> None:
        while not stop.is_set():
            cache.refresh()
            time.sleep(0)

    def reader() -> None:
        rounds = 0
        while (rounds := rounds + 1) < 50 or not enough.is_set():
            snap = cache.snapshot()
            for pid in hot:
                product = snap.products.get(pid)
                versions, values = history[pid]
                k = bisect.bisect_right(versions, snap.version)  # writes committed by the snapshot's poll
                floor = values[k - 1] if k else 0
                if product is None:
                    problems.append(f"hot product {pid} missing from a snapshot: half-built")
                elif product["stock"] < floor:
                    problems.append(f"product {pid}: stock {product['stock']} older than version {snap.version}")
            got = cache.get_many(hot + list(range(1, 6)))
            if set(hot) - set(got):
                problems.append("a lookup lost products")

    threads = [threading.Thread(target=f) for f in (writer, refresher)]
    readers = [threading.Thread(target=reader) for _ in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so a reader lands inside any window a refresh leaves open
    try:
        for t in threads + readers:
            t.start()
        for t in readers:
            t.join()
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(interval)
    # THEN no reader ever saw a half-built or out-of-date snapshot, and after a last poll every value is current
    assert problems == [] and sum(len(v) for v, _ in history.values()) > 100
    cache.refresh()
    assert cache.get_many(hot) == catalog.get_many(hot)
