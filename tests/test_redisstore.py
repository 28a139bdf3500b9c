"""store=redis (issue 42): the products kept in a private Redis, in place of the catalog process. The store answers
as the catalog does, read for read and call for call; it is loaded whole or not at all; its writes never lose one
another; and the service on it answers byte for byte as on the catalog, through an outage of the Redis, with
every acknowledged write still there after the restart."""

from __future__ import annotations

import threading
import time

import pytest

from labkit import trace
from labkit.errors import BadInputError, ServiceError
from labkit.toyshop import redisstore
from labkit.toyshop.backends import Redis, unavailable
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.dataset import ensure
from labkit.toyshop.productstore import load_products

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("backends"),
              pytest.mark.skipif(bool(unavailable("redis")), reason=str(unavailable("redis")))]


@pytest.fixture(scope="module")
def products():
    return load_products(ensure("small"))


@pytest.fixture()
def store(products):
    with Redis.start(settings=redisstore.SERVER_SETTINGS) as server:
        with server.client() as client:
            redisstore.load(client, products)
        catalog = redisstore.RedisCatalog(server.socket)
        yield server, catalog
        catalog.close()


def test_an_unloaded_redis_is_refused_rather_than_read_as_empty() -> None:
    with Redis.start() as server, pytest.raises(BadInputError, match="holds no loaded catalog"):
        redisstore.RedisCatalog(server.socket)


def test_the_store_answers_as_the_catalog_read_for_read_and_call_for_call(store, products) -> None:
    _, catalog = store
    fake = FakeCatalog(products)
    ids = [1, 2, 3, 3, 999_999_999, *range(10, 130)]  # a repeat, an unknown product, and more than two batches
    seen: list[tuple[str, str]] = []
    catalog.observers.append(lambda method, path, _ns: seen.append((method, path)))
    fake_seen: list[tuple[str, str]] = []
    fake.observers.append(lambda method, url, _ns: fake_seen.append((method, url.removeprefix(fake.base_url))))
    assert catalog.get(3) == fake.get(3) and catalog.get(999_999_999) is None
    with trace.collect() as t:
        got = catalog.get_many(ids)
    (calls,) = [m for m in t.metrics() if m.name == "catalog"]
    assert calls.count == 3  # 123 distinct ids in batches of 50
    assert got == fake.get_many(ids)
    assert catalog.get_each(ids[:6]) == fake.get_each(ids[:6])
    fake_seen.clear()
    fake.get(3), fake.get(999_999_999), fake.get_many(ids), fake.get_each(ids[:6])
    assert seen == fake_seen  # the same calls, path for path: the N+1 detector reads both stores alike
    assert catalog.with_concurrency(4).get_many(ids) == fake.get_many(ids)


def test_a_load_that_fails_part_way_leaves_the_store_as_it_was(store, products) -> None:
    server, catalog = store
    catalog.update(3, {"price_cents": 7})
    broken = {**products, 5: {**products[5], "name": object()}}  # cannot be encoded: the load stops part way
    with server.client() as client, pytest.raises(TypeError):
        redisstore.load(client, broken)
    assert catalog.get(3)["price_cents"] == 7 and catalog.changes(0) == (1, [3])
    assert len(catalog.get_many(products)) == len(products)


def test_a_load_the_server_refuses_is_a_clear_error_and_keeps_nothing(products) -> None:
    with Redis.start(settings={"maxmemory": "1mb"}) as server, server.client() as client:  # too small for them
        with pytest.raises(ServiceError, match="nothing of the load was kept.*maxmemory"):
            redisstore.load(client, products)
        assert client.dbsize() == 0
        with pytest.raises(BadInputError, match="holds no loaded catalog"):
            redisstore.RedisCatalog(server.socket)


def test_writes_bump_the_version_feed_the_changes_and_refuse_bad_fields(store, products) -> None:
    _, catalog = store
    assert catalog.changes(0) == (0, [])
    assert catalog.update(7, {"price_cents": 1299, "stock": 3}) == {**products[7], "price_cents": 1299, "stock": 3}
    assert catalog.update(2, {"rating": 4}) == {**products[2], "rating": 4.0}  # an integer for a real
    assert catalog.get(7)["price_cents"] == 1299
    assert catalog.changes(0) == (2, [2, 7]) and catalog.changes(1) == (2, [2]) and catalog.changes(2) == (2, [])
    assert catalog.update(999_999_999, {"stock": 1}) is None
    for fields, says in (({"nope": 1}, "unknown field 'nope'"), ({"id": 4}, "cannot change"),
                         ({"stock": "many"}, "takes a int"), ({}, "JSON object")):
        with pytest.raises(BadInputError, match=says):
            catalog.update(7, fields)
    with pytest.raises(BadInputError, match="since"):
        catalog.changes(-1)
    assert catalog.changes(0)[0] == 2  # a refused write bumps nothing


def test_writes_to_one_product_from_many_threads_lose_none_of_each_other(store) -> None:
    _, catalog = store
    fields = ("stock", "review_count", "warranty_months", "weight_g")  # each thread writes its own field
    rounds = 25
    errors: list[BaseException] = []

    def writer(field: str) -> None:
        try:
            for n in range(1, rounds + 1):
                catalog.update(11, {field: n})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f,)) for f in fields]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors
    final = catalog.get(11)
    assert all(final[f] == rounds for f in fields)  # a read-merge-write without the check would lose some
    assert catalog.changes(0) == (len(fields) * rounds, [11])


def test_a_killed_store_fails_counted_then_answers_with_its_writes(store) -> None:
    server, catalog = store
    catalog.update(9, {"stock": 42})
    server.kill()
    with pytest.raises(ServiceError, match="did not answer"):
        catalog.get(9)
    assert catalog.reach.as_dict()["state"] == "down"
    assert server.wait_back(30), server.log_tail()
    assert catalog.get(9)["stock"] == 42 and catalog.changes(0) == (1, [9])
    assert catalog.reach.as_dict()["state"] == "up" and catalog.reach.as_dict()["outages"] == 1


def test_the_service_on_the_redis_store_answers_as_on_the_catalog_through_an_outage() -> None:
    from labkit.client import Endpoint
    from labkit.service import start

    with pytest.raises(BadInputError, match="already live"):
        start(size="small", variants={"store": "redis", "cache": "redis"})
    with pytest.raises(BadInputError, match="leave catalog_delay_ms out"):
        start(size="small", variants={"store": "redis"}, catalog_delay_ms=1.0)
    paths = ["/customers/5/export?n1=naive", "/customers/5/export?n1=batched", "/customers/5/export?n1=join",
             "/customers/5/export?n1=batched&io=concurrent", "/orders/5", "/customers/5/export?cache=local"]
    with start(size="small") as ref, start(size="small", variants={"store": "redis"}) as svc:
        shop, want = Endpoint(svc.url, timeout=10), Endpoint(ref.url, timeout=10)
        for path in paths:
            a, b = shop.get(path), want.get(path)
            assert a.status == b.status == 200 and a.body == b.body, path
            assert a.timing["db"].count == b.timing["db"].count
            if "cache=local" not in path:  # the cache's hits depend on what each warmed
                assert a.timing["catalog"].count == b.timing["catalog"].count, path
        refused = shop.get(paths[1] + "&cache=redis")
        assert refused.status == 400 and "already live" in refused.body.decode()

        # a write to the store reaches the service's local cache within its staleness bound
        writer = redisstore.RedisCatalog(svc.redis.socket)
        pid = shop.get("/orders/5").json()["items"][0]["product_id"]
        writer.update(pid, {"name": "renamed in the store"})
        deadline = time.monotonic() + 10
        while "renamed in the store" not in shop.get("/orders/5?cache=local").body.decode():
            assert time.monotonic() < deadline, "the local cache never saw the store's write"
            time.sleep(0.2)

        svc.redis.kill()  # WHEN the store dies: its reads answer 502, counted, then 200 with the write kept
        assert shop.get("/orders/5?cache=none").status == 502
        assert shop.get("/health").json()["catalog"]["failed_calls"] >= 1
        assert svc.redis.wait_back(30), svc.redis.log_tail()
        back = shop.get("/orders/5?cache=none")
        assert back.status == 200 and "renamed in the store" in back.body.decode()
        writer.close()
