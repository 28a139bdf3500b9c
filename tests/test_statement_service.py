"""The /statement endpoint, the pooled variant's leak behind its switch, scribble, and per-request allocation counts;
and the service's default path sharing no mutable state between requests (answers vs fresh processes)."""

from __future__ import annotations

import mmap
import random
import threading
import warnings

import pytest

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from labkit.errors import BadInputError
from labkit.toyshop import faults
from labkit.toyshop.app import create_app
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.core import SENTINEL
from labkit.toyshop.dataset import LADDER, ensure
from labkit.trace import collect, parse_server_timing

BIG, SMALL, EMPTY = 8, 2, 9  # ladder customers: 200 orders, 1 order, none (4 lines per order)


@pytest.fixture(scope="module")
def db():
    return ensure("small", quiet=True)


@pytest.fixture(scope="module")
def catalog(db):
    return FakeCatalog.from_db(db)


def _client(db, catalog, **variants):
    return TestClient(create_app(db, catalog, variants=variants), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(db, catalog):
    with _client(db, catalog) as c:
        yield c


def _timing(resp):
    return parse_server_timing(resp.headers["server-timing"])


def test_statement_is_csv_of_every_order_line(client):
    resp = client.get(f"/statement?customer_id={BIG}")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/csv")
    lines = resp.text.splitlines()
    assert lines[0] == f"# statement,customer {BIG},Customer {BIG},customer{BIG}@example.invalid"
    assert len(lines) == 3 + 4 * LADDER[BIG] and lines[-1].startswith(f"# end of statement,customer {BIG},")
    assert "buffers=grow" in resp.headers["x-variant"] and _timing(resp)["db"].count == 2
    empty = client.get(f"/statement?customer_id={EMPTY}")
    assert empty.status_code == 200 and len(empty.text.splitlines()) == 3
    assert client.get(f"/statement?customer_id={BIG}&codec=msgpack").content == resp.content  # CSV whatever the codec


@pytest.mark.parametrize("url, status, parameter", [
    ("/statement?customer_id=99999", 404, None), ("/statement?customer_id=0", 400, "customer_id"),
    ("/statement", 400, "customer_id"), ("/statement?customer_id=1&lines=3", 400, "customer_id"),
    ("/statement?lines=20001", 400, "lines"), ("/statement?lines=5&seed=-1", 400, "seed"),
    ("/statement?customer_id=8&buffers=pool", 400, "buffers"), ("/quote?lines=5&buffers=pooled", 400, "buffers"),
])
def test_statement_and_quote_bad_input(client, url, status, parameter):
    resp = client.get(url)
    assert resp.status_code == status and "server-timing" in resp.headers
    if parameter:
        assert resp.json()["parameter"] == parameter


def test_synthetic_statements_of_any_size(client):
    resp = client.get("/statement?lines=1000&seed=4")
    assert resp.status_code == 200 and _timing(resp)["db"].count == 0
    lines = resp.text.splitlines()
    assert len(lines) == 1_003 and lines[0] == "# statement,customer 0,Sample Customer,sample@example.invalid"
    assert client.get("/statement?lines=1000&seed=4&buffers=prealloc").content == resp.content
    assert client.get("/statement?lines=1000&seed=5").content != resp.content


def test_grow_and_prealloc_agree_in_any_order(client):
    order = [BIG, SMALL, EMPTY, 7, SMALL, BIG, 3]
    for buffers in ("grow", "prealloc"):
        got = [client.get(f"/statement?customer_id={c}&buffers={buffers}").content for c in order]
        want = [client.get(f"/statement?customer_id={c}").content for c in order]
        assert got == want, buffers


def test_pooled_leaks_another_customers_lines_only_behind_its_switch(db, catalog):
    with _client(db, catalog) as c:
        c.get(f"/statement?customer_id={BIG}&buffers=pooled")
        right = c.get(f"/statement?customer_id={SMALL}").content
        leaked = c.get(f"/statement?customer_id={SMALL}&buffers=pooled").content
        assert leaked != right and leaked.startswith(right)
        assert f"customer{BIG}@example.invalid".encode() in leaked  # another customer's address: a privacy leak
        # the default path never touches the pool, whatever ran before it
        assert c.get(f"/statement?customer_id={SMALL}").content == right


def test_scribble_switch_shows_sentinel_bytes_on_every_reuse(db, catalog):
    with _client(db, catalog, scribble="on") as c:
        first = c.get(f"/statement?customer_id={SMALL}&buffers=pooled").content
        again = c.get(f"/statement?customer_id={SMALL}&buffers=pooled").content  # same size: no longer one before
        assert bytes([SENTINEL]) not in first and again.startswith(first)
        assert set(again[len(first):]) == {SENTINEL}
        assert c.get("/health").json()["variants"]["scribble"] == "on"
    with pytest.raises(BadInputError, match="scribble"):
        create_app(db, catalog, variants={"scribble": "yes"})


def _counted(resp):
    """The Server-Timing of a response that must carry an allocation count (what it said instead, if not)."""
    timing = _timing(resp)
    assert "alloc" in timing and timing["alloc"].count is not None, \
        f"no allocation count: {resp.status_code}, Server-Timing {resp.headers.get('server-timing')!r}"
    return timing


def test_alloc_census_switch_counts_allocator_calls_per_request(db, catalog):
    pytest.importorskip("memray")
    with _client(db, catalog, alloc="census", pool=8) as c:
        health = c.get("/health").json()["variants"]
        assert health["alloc"] == "census" and health["pool"] == 1  # process-wide counts: one at a time
        grow = _counted(c.get(f"/statement?customer_id={BIG}&buffers=grow"))
        pre = _counted(c.get(f"/statement?customer_id={BIG}&buffers=prealloc"))
        assert grow["alloc"].count > 0 and pre["alloc"].count > 0
        assert "one request at a time" in grow["alloc"].desc
        # bytes += copies the whole body at every line: far more bytes asked for than the body holds
        assert grow["alloc_bytes"].count > 5 * pre["alloc_bytes"].count
        miss = c.get("/statement?customer_id=99999")
        assert miss.status_code == 404 and _counted(miss)["alloc"].count > 0
    with _client(db, catalog) as plain:
        assert "alloc" not in _timing(plain.get(f"/statement?customer_id={SMALL}"))


def _touch_pages(pages: int) -> None:
    # private anonymous memory (what malloc'd memory is), each page written once: one minor fault per page
    mem = mmap.mmap(-1, pages * mmap.PAGESIZE, flags=mmap.MAP_PRIVATE)
    for i in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
        mem[i] = 1
    mem.close()


@pytest.mark.skipif(not faults.available(), reason="RUSAGE_THREAD is Linux's")
def test_faults_counts_this_threads_minor_faults_only():
    # GIVEN 1,024 fresh pages touched inside the block, WHEN counted, THEN at least that many faults
    with collect() as mine, faults.counted():
        _touch_pages(1024)
    assert mine.metrics()[0].name == "faults" and mine.metrics()[0].count >= 1024
    # the same pages touched by another thread are that thread's faults, not this one's
    with collect() as other, faults.counted():
        worker = threading.Thread(target=_touch_pages, args=(1024,))
        worker.start()
        worker.join()
    assert other.metrics()[0].count < 1024
    with faults.counted():  # no request collecting: nothing added, nothing raised
        pass


@pytest.mark.skipif(not faults.available(), reason="RUSAGE_THREAD is Linux's")
def test_every_answer_reports_its_faults_and_none_where_they_cannot_be_counted(client, monkeypatch):
    for url in ("/statement?lines=3000&buffers=grow", f"/customers/{BIG}/export", "/orders/1", "/health",
                "/statement?customer_id=99999"):
        metric = _timing(client.get(url))["faults"]
        assert isinstance(metric.count, int) and metric.count >= 0 and "page faults" in metric.desc
    monkeypatch.setattr(faults, "RUSAGE_THREAD", None)  # a platform without per-thread counts
    assert "faults" not in _timing(client.get(f"/statement?customer_id={SMALL}"))


# ------------------------------------------------------------------------------ no state shared between requests

def _default_urls(rng: random.Random) -> list[str]:
    """Requests of very different sizes to every default endpoint (and the correct reuse, prealloc)."""
    urls = []
    for cid in (BIG, SMALL, EMPTY, 7, 42):
        urls += [f"/customers/{cid}/export", f"/statement?customer_id={cid}",
                 f"/statement?customer_id={cid}&buffers=prealloc", f"/quote?customer_id={cid}",
                 f"/quote?customer_id={cid}&buffers=prealloc&layout=soa"]
    for n in (5_000, 3, 0, 700):
        urls += [f"/quote?lines={n}&seed={n}", f"/quote?lines={n}&seed={n}&buffers=prealloc",
                 f"/quote?lines={n}&seed={n}&buffers=prealloc&layout=soa", f"/statement?lines={n}",
                 f"/statement?lines={n}&buffers=prealloc"]
    urls += ["/orders/1", "/orders/2", "/config/cfg.pricing.000008", "/config/cfg.pricing.000008?cache=local"]
    urls += [f"/customers/{cid}/export?n1={v}" for cid in (BIG, SMALL) for v in ("batched", "join")]
    rng.shuffle(urls)
    return urls


@pytest.mark.slow  # a forked process per request
def test_default_endpoints_share_no_state_between_requests(client):
    # GIVEN requests of very different sizes, interleaved on one warm service
    urls = _default_urls(random.Random(3))
    warm = [(client.get(u).status_code, client.get(u).content) for u in urls]  # each twice: after itself too
    # WHEN each is answered again by a process that never served anything else
    from fresh_toyshop import fresh_answers  # tests/ is on sys.path under pytest

    fresh = fresh_answers(urls)
    # THEN the answers are byte for byte the same: nothing one request left behind changed another's answer
    for url, w, f in zip(urls, warm, fresh, strict=True):
        assert w == f, url
    assert {s for s, _ in fresh} == {200}
