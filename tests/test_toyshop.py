"""toyshop in process: export variants, per-request counts, the catalog app and fake, and the order service's HTTP
contract (Server-Timing, variants, 400/404, never 500) through Starlette's TestClient."""

from __future__ import annotations

import warnings

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # Starlette 1.x nudges towards httpx2; httpx still works for TestClient
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from labkit.errors import BadInputError
from labkit.toyshop.app import create_app
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.catalog_server import create_app as create_catalog
from labkit.toyshop.dataset import LADDER, ensure
from labkit.toyshop.db import NotFoundError, ToyshopConnection, connect
from labkit.toyshop.export import EXPORTS, export_batched, export_join, export_naive, order_detail
from labkit.toyshop.switches import REQUEST_SWITCHES, resolve
from labkit.trace import collect, parse_server_timing

STAGES = ["parse", "db", "catalog", "compute", "serialize", "wait", "gc", "total"]


@pytest.fixture(scope="module")
def db():
    return ensure("small", quiet=True)


@pytest.fixture(scope="module")
def conn(db):
    return connect(db)


@pytest.fixture(scope="module")
def catalog(db):
    return FakeCatalog.from_db(db)


@pytest.fixture(scope="module")
def catalog_http(db):
    with TestClient(create_catalog(db)) as c:
        yield c


@pytest.fixture(scope="module")
def client(db, catalog):
    with TestClient(create_app(db, catalog), raise_server_exceptions=False) as c:
        yield c


def test_connect_gives_a_read_only_subclass(conn):
    import sqlite3

    assert isinstance(conn, ToyshopConnection) and isinstance(conn, sqlite3.Connection)
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM orders")
    conn.execute = lambda *a: "instrumented"  # an instance can be instrumented
    assert conn.execute("x") == "instrumented"
    del conn.execute


@pytest.mark.parametrize("customer_id", [*LADDER, 10, 57, 123, 300])
def test_export_variants_give_identical_output(conn, catalog, customer_id):
    naive = export_naive(conn, catalog, customer_id)
    assert export_batched(conn, catalog, customer_id) == naive
    assert export_join(conn, catalog, customer_id) == naive
    assert naive["order_count"] == len(naive["orders"])


def test_export_content(conn, catalog):
    out = export_naive(conn, catalog, 1)
    assert (out["order_count"], out["item_count"]) == (50, 200)
    item = out["orders"][0]["items"][0]
    assert item["line_total_cents"] == item["quantity"] * item["unit_price_cents"]
    assert item["product"]["id"] == item["product_id"] and len(item["product"]) == 32
    dates = [o["created_at"] for o in out["orders"]]
    assert dates == sorted(dates)


@pytest.mark.parametrize("fn, queries, calls", [(export_naive, 252, 200), (export_batched, 4, 4),
                                                (export_join, 2, 4)])
def test_queries_and_catalog_calls_are_counted(conn, catalog, fn, queries, calls):
    seen = []
    catalog.observers.append(lambda method, url, dur: seen.append((method, url, dur)))
    try:
        with collect() as trace:
            fn(conn, catalog, 1)
    finally:
        catalog.observers.clear()
    m = {x.name: x for x in trace.metrics()}
    assert (m["db"].count, m["catalog"].count, len(seen)) == (queries, calls, calls)
    assert m["db"].dur_ms > 0 and all(m == "GET" and url.startswith("fake://catalog/products") for m, url, _ in seen)


def test_unknown_ids_raise_not_found(conn, catalog):
    for fn in EXPORTS.values():
        with pytest.raises(NotFoundError):
            fn(conn, catalog, 10**9)
    with pytest.raises(NotFoundError):
        order_detail(conn, catalog, 10**9)


def test_concurrent_catalog_view_gives_same_answer(catalog):
    ids = list(range(1, 230))
    fanned = catalog.with_concurrency(4)
    with collect() as trace:
        assert fanned.get_many(ids) == catalog.get_many(ids) == catalog.get_each(ids)
    # the fanned-out calls ran on worker threads and still counted into this trace
    assert {x.name: x for x in trace.metrics()}["catalog"].count == 5 + 5 + 229
    assert fanned.observers is catalog.observers


def test_catalog_app_single_and_batch(db):
    with TestClient(create_catalog(db, max_batch=3)) as c:
        assert c.get("/products/7").json()["id"] == 7
        assert c.get("/products/999999").status_code == 404
        assert c.get("/products/x").json()["parameter"] == "product_id"
        body = c.get("/products?ids=3,999999,1").json()
        assert [p["id"] for p in body["products"]] == [3, 1] and body["missing"] == [999999]
        too_many = c.get("/products?ids=1,2,3,4")
        assert too_many.status_code == 400 and "at most 3" in too_many.json()["message"]
        assert c.get("/products").json()["parameter"] == "ids"


def test_catalog_delay_is_labelled_an_emulation(db):
    with TestClient(create_catalog(db, delay_ms=1.5)) as c:
        assert c.get("/products/1").headers["X-Emulated-Delay-Ms"] == "1.5"


def _timing(resp) -> dict:
    metrics = parse_server_timing(resp.headers["server-timing"])
    names = list(metrics)
    assert names[:7] == STAGES[:7] and names[-1] == "total" and set(names[7:-1]) <= {"size", "compress", "faults"}, names
    assert all(m.dur_ms is not None and m.dur_ms >= 0 for n, m in metrics.items() if n not in ("size", "faults"))
    if resp.status_code == 200:
        assert metrics["size"].count == len(resp.content)  # the body as sent (compressed, if it was)
    return metrics


def _content(resp, schema=None):
    """What a client reads from a response: decoded by its Content-Type."""
    from labkit.toyshop.core import decode, to_builtins

    fmt = {"application/json": "json", "application/msgpack": "msgpack",
           "application/x-protobuf": "protobuf"}[resp.headers["content-type"]]
    return to_builtins(decode(resp.content, fmt, schema=schema if fmt == "protobuf" else None))


@pytest.mark.parametrize("variant, queries, calls", [("naive", 252, 200), ("batched", 4, 4), ("join", 2, 4)])
def test_server_timing_counts_queries_and_catalog_calls(client, variant, queries, calls):
    resp = client.get(f"/customers/1/export?n1={variant}")
    assert resp.status_code == 200
    m = _timing(resp)
    assert (m["db"].count, m["catalog"].count) == (queries, calls)
    assert m["total"].dur_ms >= m["db"].dur_ms
    assert f"n1={variant}" in resp.headers["x-variant"]


def test_every_variant_of_export_gives_the_same_content(client):
    base = client.get("/customers/5/export").json()
    for n1 in REQUEST_SWITCHES["n1"]:
        for io in REQUEST_SWITCHES["io"]:
            for codec in REQUEST_SWITCHES["codec"]:
                resp = client.get(f"/customers/5/export?n1={n1}&io={io}&codec={codec}")
                assert _content(resp, "export") == base, (n1, io, codec)
    trimmed = client.get("/customers/5/export?fields=trimmed").json()
    assert len(trimmed["orders"][0]["items"][0]["product"]) == 8
    assert client.get("/customers/5/export?codec=msgpack").headers["content-type"] == "application/msgpack"


def test_quote_is_the_same_for_every_core_variant(client):
    answers = {client.get(f"/quote?customer_id=1&layout={lay}&buffers={buf}").content
               for lay in ("aos", "soa") for buf in ("grow", "prealloc")}
    assert len(answers) == 1
    quote = orjson.loads(answers.pop())
    assert quote["lines"] == 200
    synthetic = client.get("/quote?lines=500&seed=3&layout=soa")
    assert synthetic.status_code == 200 and synthetic.json()["lines"] == 500
    assert _timing(synthetic)["db"].count == 0


def test_config_lookup_and_local_cache(client):
    key = "cfg.search.000004"
    first = client.get(f"/config/{key}")
    assert first.status_code == 200 and first.json()["key"] == key
    assert _timing(first)["db"].count == 1
    client.get(f"/config/{key}?cache=local")
    hit = client.get(f"/config/{key}?cache=local")
    assert hit.json() == first.json() and _timing(hit)["db"].count == 0


def test_one_order(client):
    resp = client.get("/orders/1")
    assert resp.status_code == 200 and resp.json()["id"] == 1 and resp.json()["items"]


@pytest.mark.parametrize("url, parameter", [
    ("/customers/0/export", "customer_id"), ("/customers/abc/export", "customer_id"),
    ("/customers/1/export?n1=fast", "n1"), ("/customers/1/export?codex=orjson", "codex"),
    ("/customers/1/export?n1=join&n1=naive", "n1"), ("/orders/-1", "order_id"),
    ("/quote", "customer_id"), ("/quote?customer_id=1&lines=5", "customer_id"), ("/quote?lines=x", "lines"),
    ("/quote?lines=999999999", "lines"), ("/config/bad%20key", "key"),
])
def test_bad_input_is_a_400_naming_the_parameter(client, url, parameter):
    resp = client.get(url)
    assert resp.status_code == 400
    assert resp.json()["parameter"] == parameter and resp.json()["error"] == "bad_parameter"
    _timing(resp)


@pytest.mark.parametrize("url", ["/customers/99999/export", "/orders/99999999", "/config/no.such.key",
                                 "/quote?customer_id=99999"])
def test_unknown_ids_are_404(client, url):
    resp = client.get(url)
    assert resp.status_code == 404 and resp.json()["error"] == "not_found"
    _timing(resp)


def test_unknown_route_is_a_json_404(client):
    resp = client.get("/nope")
    assert resp.status_code == 404 and "openapi" in resp.json()["message"]
    assert client.post("/health").status_code == 405


def test_openapi_lists_every_endpoint(client):
    schema = client.get("/openapi.json").json()
    assert set(schema["paths"]) == {"/health", "/customers/{customer_id}/export", "/orders/{order_id}",
                                    "/quote", "/config/{key}", "/stats", "/statement", "/gc", "/cache",
                                    "/recommendations", "/tally", "/loop"}


def test_process_defaults_and_validation(db, catalog):
    with TestClient(create_app(db, catalog, variants={"n1": "join", "codec": "orjson", "pool": 1})) as c:
        resp = c.get("/customers/1/export")
        assert _timing(resp)["db"].count == 2 and "n1=join" in resp.headers["x-variant"]
        assert c.get("/health").json()["variants"]["pool"] == 1
    with pytest.raises(BadInputError, match="pool"):
        resolve({"pool": 0})
    with pytest.raises(BadInputError, match="unknown variant switch"):
        resolve({"nplus1": "join"})


_accepts = st.sampled_from([None, "*/*", "application/msgpack", "application/x-protobuf", "text/html", "a/b;q=0",
                            "application/json;q=0", "application/*;q=0.2, application/msgpack;q=0"]) | st.text(max_size=20)
_switch_values = st.sampled_from([v for vs in REQUEST_SWITCHES.values() for v in vs] + ["", "x", "1", "é"])
_names = st.sampled_from([*REQUEST_SWITCHES, "customer_id", "lines", "seed", "ids"]) | st.text(max_size=6)
_values = _switch_values | st.integers(-5, 10**12).map(str) | st.text(max_size=12)
_segment = (st.integers(-3, 2**40).map(str) | st.text(max_size=20)
            | st.sampled_from(["1", "cfg.pricing.000008", "0", "٣", "1.5", "%00"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(template=st.sampled_from(["/customers/{}/export", "/orders/{}", "/config/{}", "/quote", "/health"]),
       segment=_segment, params=st.lists(st.tuples(_names, _values), max_size=4), accept=_accepts)
def test_fuzz_no_endpoint_answers_500(client, template, segment, params, accept):
    from urllib.parse import quote

    path = template.format(quote(segment, safe="")) if "{}" in template else template
    try:
        headers = {"accept": accept} if accept is not None else {}
        resp = client.get(path, params=params, headers=headers)
    except (UnicodeEncodeError, ValueError):
        return  # a header no HTTP client can send
    assert resp.status_code in (200, 400, 404, 406), (path, params, accept, resp.text[:300])
    if resp.status_code != 404 or path.count("/") > 1:
        assert "server-timing" in resp.headers


def test_queue_bounds_the_waiting_requests_and_zero_means_none_wait(db):
    def limit(**variants):
        return create_app(db, FakeCatalog.from_db(db), variants=variants).state.service._max_in_flight

    assert limit(pool=3) is None and limit(pool=3, queue="unbounded") is None
    assert limit(pool=3, queue=0) == 3 and limit(pool=3, queue=2) == 5


def test_queue_switch_sheds_load_with_503(db):
    import asyncio
    import threading
    import time

    import httpx

    # GIVEN one pool thread, room for one waiting request, and a catalog that holds every call until released
    gate = threading.Event()

    class HeldCatalog(FakeCatalog):
        def _fetch(self, path):
            gate.wait(30)
            return super()._fetch(path)

    app = create_app(db, HeldCatalog.from_db(db), variants={"pool": 1, "queue": 1})

    async def burst():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://toyshop") as c:
            tasks = [asyncio.create_task(c.get("/orders/1")) for _ in range(5)]
            deadline = time.monotonic() + 30
            while sum(t.done() for t in tasks) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            # WHEN five arrive while the first is held THEN three are shed at once, without waiting for it
            shed = [t.result().status_code for t in tasks if t.done()]
            gate.set()
            return shed, sorted(r.status_code for r in await asyncio.gather(*tasks))

    try:
        shed, statuses = asyncio.run(burst())
    finally:
        gate.set()
    assert shed == [503, 503, 503]
    # AND the two admitted (one running, one queued) are served once the catalog answers
    assert statuses == [200, 200, 503, 503, 503]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segment=_segment, ids=st.lists(_segment, max_size=5), extra=st.lists(st.tuples(_names, _values), max_size=2))
def test_fuzz_catalog_answers_no_500(catalog_http, segment, ids, extra):
    from urllib.parse import quote

    client = catalog_http
    assert client.get(f"/products/{quote(segment, safe='')}").status_code in (200, 400, 404)
    resp = client.get("/products", params=[("ids", ",".join(ids)), *extra])
    assert resp.status_code in (200, 400), resp.text[:300]


def test_stats_counts_every_request_in_flight_not_only_those_in_the_pool(db):
    # GIVEN a catalog that holds every call until released, so requests stay in flight as long as we like
    import asyncio
    import threading
    import time

    import httpx

    gate = threading.Event()
    keys = ("in_flight", "peak_in_flight", "served", "time_in_app_ns", "in_flight_ns")

    class HeldCatalog(FakeCatalog):
        def _fetch(self, path):
            gate.wait(30)
            return super()._fetch(path)

    app = create_app(db, HeldCatalog.from_db(db))

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toyshop") as c:
            first = (await c.get("/stats")).json()
            assert {k: first[k] for k in keys} == {"in_flight": 0, "peak_in_flight": 0, "served": 0,
                                                   "time_in_app_ns": 0, "in_flight_ns": 0}
            t_sent = time.perf_counter_ns()
            tasks = [asyncio.create_task(c.get(f"/customers/{cid}/export?n1=batched")) for cid in (1, 2, 5)]
            deadline = time.monotonic() + 30
            while (stats := (await c.get("/stats")).json())["in_flight"] < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            # WHEN three requests wait on the catalog, THEN all three are in flight (and /stats is not counted)
            assert {k: stats[k] for k in keys[:-1]} == {"in_flight": 3, "peak_in_flight": 3, "served": 0,
                                                        "time_in_app_ns": 0}
            t_seen = time.perf_counter_ns()
            await asyncio.sleep(0.05)
            held = (await c.get("/stats")).json()
            t_open = time.perf_counter_ns()
            gate.set()
            # AND while three are held, the count's integral grows by three times the time between two reads
            assert held["in_flight_ns"] - stats["in_flight_ns"] == 3 * (held["now_ns"] - stats["now_ns"])
            assert [r.status_code for r in await asyncio.gather(*tasks)] == [200, 200, 200]
            await c.get("/health")
            t_end = time.perf_counter_ns()
            stats = (await c.get("/stats")).json()
            assert {k: stats[k] for k in ("in_flight", "peak_in_flight", "served")} == \
                {"in_flight": 0, "peak_in_flight": 3, "served": 4}
            # AND the time inside the app is summed over the served requests: each held one was inside at
            # least from when all three were seen until the gate opened, and no request longer than the test
            assert 3 * (t_open - t_seen) <= stats["time_in_app_ns"] <= 4 * (t_end - t_sent)

    try:
        asyncio.run(scenario())
    finally:
        gate.set()


# ------------------------------------------------------------------------------- content negotiation


@pytest.mark.parametrize("path, schema", [("/customers/5/export", "export"), ("/orders/3", "order")])
def test_accept_picks_the_format_and_every_format_carries_the_same_content(client, path, schema):
    base = client.get(path).json()
    for accept, media in [("*/*", "application/json"), ("application/msgpack", "application/msgpack"),
                          ("application/x-protobuf", "application/x-protobuf"),
                          ("application/json;q=0.1, application/x-msgpack;q=0.9", "application/msgpack")]:
        resp = client.get(path, headers={"accept": accept})
        assert resp.status_code == 200 and resp.headers["content-type"] == media, accept
        assert resp.headers["vary"] == "Accept, Accept-Encoding"
        assert _content(resp, schema) == base, accept
        _timing(resp)
    typed = client.get(path + "?codec=msgspec", headers={"accept": "application/msgpack"})
    assert typed.headers["content-type"] == "application/msgpack" and "codec=msgspec" in typed.headers["x-variant"]
    assert _content(typed) == base


def test_406_names_what_is_supported_and_protobuf_needs_a_schema(client):
    resp = client.get("/quote?lines=3", headers={"accept": "application/x-protobuf"})
    assert resp.status_code == 406
    assert resp.json()["supported"] == ["application/json", "application/msgpack"]
    assert "application/msgpack" in resp.json()["message"]
    _timing(resp)
    assert client.get("/customers/5/export", headers={"accept": "text/html"}).json()["supported"] == [
        "application/json", "application/msgpack", "application/x-protobuf"]
    bad = client.get("/quote?lines=3&codec=protobuf")
    assert bad.status_code == 400 and bad.json()["parameter"] == "codec"
    assert client.get("/customers/5/export?codec=pickle").json()["parameter"] == "codec"
    only_msgpack = client.get("/orders/3?codec=msgpack", headers={"accept": "application/json"})
    assert only_msgpack.status_code == 406 and only_msgpack.json()["supported"] == ["application/msgpack"]


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_compression_switch_sets_content_encoding_and_keeps_content(client, coding):
    from labkit.toyshop.core import decompress

    base = client.get("/customers/1/export?fields=trimmed")
    with client.stream("GET", f"/customers/1/export?fields=trimmed&compress={coding}",
                       headers={"Accept-Encoding": f"{coding}, identity;q=0.5"}) as resp:
        raw = b"".join(resp.iter_raw())
    assert resp.headers["content-encoding"] == coding and len(raw) < len(base.content) / 3
    assert resp.headers["vary"] == "Accept, Accept-Encoding" and f"compress={coding}" in resp.headers["x-variant"]
    assert decompress(raw, coding) == base.content
    m = parse_server_timing(resp.headers["server-timing"])
    assert m["size"].count == len(raw) and m["size"].desc == f"from {len(base.content)} bytes"
    assert m["compress"].dur_ms > 0


@pytest.mark.parametrize("accept_encoding, compress, sent", [
    (None, "zstd", None),                   # the bug: zstd to a client that never said it reads zstd
    ("identity", "gzip", None),             # … and gzip to one that asked for identity
    ("gzip, deflate", "zstd", None),
    ("gzip;q=0, zstd", "gzip", None),
    ("gzip, deflate", "none", None),
    ("identity;q=0, zstd", "none", "zstd"),  # identity refused: the client's own coding
    ("gzip;q=0.1, zstd", "gzip", "gzip"),
])
def test_compression_is_negotiated_with_accept_encoding(client, accept_encoding, compress, sent):
    from labkit.toyshop.core import decompress

    base = client.get("/orders/3", headers={"Accept-Encoding": "identity"})
    request = client.build_request("GET", f"/orders/3?compress={compress}")
    del request.headers["accept-encoding"]  # httpx's own ("gzip, deflate, zstd"): the exact header or none
    if accept_encoding is not None:
        request.headers["accept-encoding"] = accept_encoding
    resp = client.send(request, stream=True)
    raw = b"".join(resp.iter_raw())
    resp.close()
    assert resp.status_code == 200 and resp.headers.get("content-encoding") == sent
    assert resp.headers["vary"] == "Accept, Accept-Encoding"
    assert f"compress={sent or 'none'}" in resp.headers["x-variant"]  # what was sent, not what was asked
    assert (decompress(raw, sent) if sent else raw) == base.content


def test_a_client_refusing_identity_and_every_coding_gets_406(client):
    resp = client.get("/orders/3?compress=gzip", headers={"Accept-Encoding": "identity;q=0, br"})
    assert resp.status_code == 406 and "content-encoding" not in resp.headers
    assert resp.json()["supported"] == ["identity", "gzip", "zstd"] and "Accept-Encoding" in resp.json()["message"]


def test_every_catalog_the_service_uses_has_the_catalog_protocol(db, catalog):
    from labkit.toyshop.catalog import Catalog, CatalogClient, RemoteCatalog
    from labkit.toyshop.productcache import ProductCache

    client = CatalogClient("http://127.0.0.1:9")  # no call is made: the protocol is about methods
    for remote in (catalog, catalog.with_concurrency(4), client):
        assert isinstance(remote, RemoteCatalog) and isinstance(remote, Catalog)
    view = ProductCache(catalog, autostart=False).view()
    assert isinstance(view, Catalog) and not isinstance(view, RemoteCatalog)
    client.close()


def test_reach_follows_outages_from_the_calls_and_logs_their_start_and_end(caplog):
    from labkit.toyshop.catalog import Reach

    now = [100.0]
    reach = Reach("http://127.0.0.1:9", clock=lambda: now[0])
    reach.answered()
    assert reach.as_dict() == {"state": "up", "outages": 0, "failed_calls": 0, "since_s": 0.0, "last_error": None}
    with caplog.at_level("WARNING", logger="labkit.toyshop"):
        now[0] = 101.0
        reach.failed("ConnectionRefusedError(111)")
        now[0] = 101.5
        reach.failed("ConnectionRefusedError(111)")
        assert reach.as_dict() == {"state": "down", "outages": 1, "failed_calls": 2, "since_s": 0.5,
                                   "last_error": "ConnectionRefusedError(111)"}
        now[0] = 103.0
        reach.answered()
    assert reach.as_dict()["state"] == "up" and reach.as_dict()["outages"] == 1
    assert [r.getMessage() for r in caplog.records] == [
        "catalog at http://127.0.0.1:9 does not answer (ConnectionRefusedError(111)): catalog calls answer 502 "
        "until it is back",
        "catalog at http://127.0.0.1:9 answers again after 2.0 s down (2 failed calls so far)"]


def test_health_reports_the_catalog(client):
    assert client.get("/health").json()["catalog"]["state"] == "up"
