"""The product catalog's clients: the keep-alive HTTP client of the catalog process, and an in-process fake.

The catalog process itself (its endpoints, the emulated network delay) is :mod:`labkit.toyshop.catalog_server`.
What the order service and the exports ask of a catalog is the :class:`Catalog` protocol (reading product
details, one at a time or in batches) and, for the client the service owns, :class:`RemoteCatalog` (fanning
out, the change feed, the write path, closing).

:class:`CatalogClient` keeps one persistent ``http.client`` connection per thread (keep-alive, TCP_NODELAY)
and notifies every callable in its ``observers`` list after each HTTP call: ``observer(method, url,
duration_ns)``. Its ``.reach`` (:class:`Reach`) follows whether the catalog answers — the order service's
``/health`` shows it, and its log says when an outage starts and ends. :class:`FakeCatalog` has the same
interface without HTTP, for unit tests.
"""

from __future__ import annotations

import contextvars
import http.client
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import orjson

from labkit import trace as _trace
from labkit.errors import BadInputError, ServiceError
from labkit.toyshop.productstore import ProductStore, load_products

__all__ = ["Catalog", "RemoteCatalog", "CatalogClient", "FakeCatalog", "Observer", "MAX_BATCH", "Reach"]

Observer = Callable[[str, str, int], None]
MAX_BATCH = 100  # the server refuses larger batches; the client sends chunks of ``batch_size`` (default 50)
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_clock = time.perf_counter_ns
log = logging.getLogger("labkit.toyshop")


class Reach:
    """Whether the catalog answers, as the calls to it find out (no probe: nothing is added to a request).

    ``answered()`` after a call that got a response, ``failed(error)`` after one that did not; the first
    failure of an outage and its end are logged (WARNING, ``labkit.toyshop``). ``as_dict()`` is ``/health``'s
    ``catalog``: ``{"state": "up"|"down", "outages", "failed_calls", "since_s", "last_error"}``.
    """

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.url, self._clock = url, clock
        self._lock = threading.Lock()
        self.up, self.outages, self.failed_calls, self.last_error = True, 0, 0, None
        self._since = clock()

    def answered(self) -> None:
        """A call got an answer: an outage, if any, is over."""
        if self.up:  # the common case, without the lock
            return
        with self._lock:
            if not self.up:
                self.up, down_s, self._since = True, self._clock() - self._since, self._clock()
                log.warning("catalog at %s answers again after %.1f s down (%d failed calls so far)", self.url,
                            down_s, self.failed_calls)

    def failed(self, error: str) -> None:
        """A call got no answer (the catalog is down or restarting)."""
        with self._lock:
            self.failed_calls += 1
            self.last_error = error[:300]
            if self.up:
                self.up, self.outages, self._since = False, self.outages + 1, self._clock()
                log.warning("catalog at %s does not answer (%s): catalog calls answer 502 until it is back",
                            self.url, self.last_error)

    def as_dict(self) -> dict[str, Any]:
        """The catalog's state for ``/health``."""
        with self._lock:
            return {"state": "up" if self.up else "down", "outages": self.outages,
                    "failed_calls": self.failed_calls, "since_s": round(self._clock() - self._since, 3),
                    "last_error": self.last_error}


@runtime_checkable
class Catalog(Protocol):
    """What an export asks of a catalog: product details by id (unknown ids are left out, or None).

    :class:`CatalogClient`, :class:`FakeCatalog` and the product cache's per-request view
    (:class:`labkit.toyshop.productcache.CachedCatalog`) are catalogs. ``observers`` are notified of every call
    that goes out (the N+1 detector listens there).
    """

    @property
    def observers(self) -> list[Observer]: ...

    def get(self, product_id: int) -> dict[str, Any] | None:
        """One product's details, or None if the catalog does not know it."""
        ...

    def get_each(self, product_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Details of each distinct id, one call per id (the N+1 shape)."""
        ...

    def get_many(self, product_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Details of each distinct id, in batches."""
        ...


@runtime_checkable
class RemoteCatalog(Catalog, Protocol):
    """A catalog client the order service owns: a :class:`Catalog` that can also fan out, follow the change
    feed (the product cache's refresher), write, and close."""

    def with_concurrency(self, concurrency: int) -> RemoteCatalog:
        """A view sharing this client's connections that runs ``concurrency`` calls at once."""
        ...

    def changes(self, since: int) -> tuple[int, list[int]]:
        """``(catalog version now, ids written after version since)``."""
        ...

    def update(self, product_id: int, fields: Mapping[str, Any]) -> dict[str, Any] | None:
        """Change ``fields`` of one product; the product as it is now, or None if unknown."""
        ...

    def close(self) -> None:
        """Release connections and threads."""
        ...


class _Base:
    """What the real and the fake client share: observers, chunking, fan-out, the request's ``catalog`` metric."""

    def __init__(self, observers: list[Observer] | None, batch_size: int, concurrency: int) -> None:
        if not 1 <= batch_size <= MAX_BATCH or concurrency < 1:
            raise BadInputError(f"need 1 <= batch_size <= {MAX_BATCH} and concurrency >= 1 "
                                f"(got batch_size={batch_size}, concurrency={concurrency})")
        self.observers: list[Observer] = observers if observers is not None else []
        self.batch_size = batch_size
        self.concurrency = concurrency
        self._pools: dict[int, ThreadPoolExecutor] = {}
        self._pool_lock = threading.Lock()

    def _fetch(self, path: str) -> tuple[int, bytes]:
        raise NotImplementedError

    def _call(self, path: str) -> tuple[int, bytes]:
        status, body = self._fetch(path)
        _trace.add("catalog", count=1)
        return status, body

    def with_concurrency(self, concurrency: int) -> _Base:
        """A view of this client (same connections, observers and pools) fanning out ``concurrency`` calls."""
        if concurrency == self.concurrency:
            return self
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.concurrency = max(1, int(concurrency))
        return view

    def _map(self, fn: Callable[[Any], Any], args: list[Any]) -> list[Any]:
        if self.concurrency == 1 or len(args) < 2:
            return [fn(a) for a in args]
        with self._pool_lock:
            pool = self._pools.get(self.concurrency)
            if pool is None:
                pool = self._pools[self.concurrency] = ThreadPoolExecutor(self.concurrency, "catalog-io")
        # one copied context per task: a Context cannot be entered by two threads at once
        futures = [pool.submit(contextvars.copy_context().run, fn, a) for a in args]
        return [f.result() for f in futures]

    def _timed(self, fn: Callable[[], Any]) -> Any:
        t0 = _clock()
        try:
            return fn()
        finally:
            _trace.add("catalog", _clock() - t0)  # wall time as the caller saw it: fanned-out calls overlap

    def _one(self, product_id: int) -> dict[str, Any] | None:
        status, body = self._call(f"/products/{int(product_id)}")
        if status == 404:
            return None
        if status != 200:
            raise ServiceError(f"catalog answered {status} for product {product_id}: {body[:200]!r}")
        return orjson.loads(body)

    def _chunk(self, ids: list[int]) -> list[dict[str, Any]]:
        status, body = self._call("/products?ids=" + ",".join(map(str, ids)))
        if status != 200:
            raise ServiceError(f"catalog answered {status} for a batch of {len(ids)}: {body[:200]!r}")
        return orjson.loads(body)["products"]

    def _send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        raise NotImplementedError

    def update(self, product_id: int, fields: Mapping[str, Any]) -> dict[str, Any] | None:
        """The write path: change ``fields`` of one product (one call); the product as it is now, or None if
        the catalog does not know it. Raises BadInputError for a field it refuses (naming it)."""
        status, body = self._send("PATCH", f"/products/{int(product_id)}", orjson.dumps(dict(fields)))
        if status == 404:
            return None
        if status == 400:
            raise BadInputError(f"catalog refused the update of product {product_id}: "
                                f"{orjson.loads(body).get('message', body[:200])}")
        if status != 200:
            raise ServiceError(f"catalog answered {status} to an update of product {product_id}: {body[:200]!r}")
        return orjson.loads(body)

    def changes(self, since: int) -> tuple[int, list[int]]:
        """The change feed (one call): ``(catalog version now, ids written after version since)``."""
        status, body = self._send("GET", f"/products/changes?since={int(since)}")
        if status != 200:
            raise ServiceError(f"catalog answered {status} for its change feed: {body[:200]!r}")
        data = orjson.loads(body)
        return int(data["version"]), [int(i) for i in data["changed"]]

    def get(self, product_id: int) -> dict[str, Any] | None:
        """One product's details (one HTTP call), or None if the catalog does not know it."""
        return self._timed(lambda: self._one(product_id))

    def get_each(self, product_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Details of each distinct id, one HTTP call per id (N+1 shape), ``concurrency`` at a time."""
        ids = list(dict.fromkeys(int(i) for i in product_ids))

        def run() -> dict[int, dict[str, Any]]:
            return {i: p for i, p in zip(ids, self._map(self._one, ids), strict=True) if p is not None}
        return self._timed(run)

    def get_many(self, product_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Details of each distinct id via the batch endpoint, in chunks of ``batch_size``, ``concurrency``
        chunks at a time. Unknown ids are left out of the answer."""
        ids = list(dict.fromkeys(int(i) for i in product_ids))
        chunks = [ids[i:i + self.batch_size] for i in range(0, len(ids), self.batch_size)]

        def run() -> dict[int, dict[str, Any]]:
            return {p["id"]: p for chunk in self._map(self._chunk, chunks) for p in chunk}
        return self._timed(run)

    def close(self) -> None:
        """Release the thread pools (and connections)."""
        with self._pool_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.shutdown(wait=False)

    def __enter__(self) -> _Base:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CatalogClient(_Base):
    """A keep-alive HTTP client for the catalog process (one persistent connection per thread).

    Args:
        base_url: e.g. ``http://127.0.0.1:8101`` (loopback only).
        observers: callables notified after every HTTP call with ``(method, url, duration_ns)``.
        batch_size: ids per batch call (at most :data:`MAX_BATCH`).
        concurrency: how many calls :meth:`get_many`/:meth:`get_each` run at once (1 = serial).
        timeout: socket timeout in seconds.
        delay_ms: a sleep added to every call on this side — an **emulation** of a farther catalog, like the
            catalog process's own ``delay_ms`` but chosen per client, so one catalog serves a sweep of distances.
    """

    def __init__(self, base_url: str, *, observers: list[Observer] | None = None, batch_size: int = 50,
                 concurrency: int = 1, timeout: float = 10.0, delay_ms: float = 0.0) -> None:
        super().__init__(observers, batch_size, concurrency)
        if not delay_ms >= 0:
            raise BadInputError(f"delay_ms is an emulated delay per call in ms and must be >= 0, got {delay_ms!r}")
        self.delay_ms = float(delay_ms)
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname not in _LOOPBACK or parts.port is None:
            raise BadInputError(f"catalog base_url must be http://127.0.0.1:<port> (loopback only), got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._host, self._port, self.timeout = parts.hostname, parts.port, timeout
        self._local = threading.local()
        self.reach = Reach(self.base_url)
        # weak: when a worker thread ends, its thread-local connection goes (and its socket closes) with it
        self._conns: weakref.WeakSet[http.client.HTTPConnection] = weakref.WeakSet()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            with self._pool_lock:
                self._conns.add(conn)
        return conn

    def _fetch(self, path: str) -> tuple[int, bytes]:
        for attempt in (0, 1):
            conn = self._conn()
            t0 = _clock()
            if self.delay_ms:
                time.sleep(self.delay_ms / 1000)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                body = resp.read()
            except (http.client.HTTPException, ConnectionError, TimeoutError, OSError) as exc:
                conn.close()  # a kept-alive connection the server closed: reconnect once
                if attempt or not isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError |
                                             BrokenPipeError | http.client.CannotSendRequest):
                    self.reach.failed(repr(exc))
                    raise ServiceError(f"catalog at {self.base_url} did not answer GET {path}: {exc!r}. Is it "
                                       "running? labkit.service.start() starts it with the order service "
                                       "(and starts it again if it dies).") from exc
                continue
            self.reach.answered()
            dur = _clock() - t0
            for obs in self.observers:
                obs("GET", self.base_url + path, dur)
            return resp.status, body
        raise AssertionError("unreachable")

    def _send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        # the write path and the change feed: off the request path, so neither observers nor the trace see them
        for attempt in (0, 1):
            conn = self._conn()
            try:
                conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
                resp = conn.getresponse()
                answer = resp.status, resp.read()
                self.reach.answered()
                return answer
            except (http.client.HTTPException, OSError) as exc:
                conn.close()  # a kept-alive connection the server closed: reconnect once
                if attempt:
                    self.reach.failed(repr(exc))
                    raise ServiceError(f"catalog at {self.base_url} did not answer {method} {path}: {exc!r}") from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every connection and pool this client opened."""
        super().close()
        with self._pool_lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            conn.close()

    def __repr__(self) -> str:
        return f"CatalogClient({self.base_url!r}, batch_size={self.batch_size}, concurrency={self.concurrency})"


class FakeCatalog(_Base):
    """The catalog's interface in process, without HTTP: for unit tests and quick demos.

    Args:
        products: ``{id: details}``; :meth:`from_db` loads them from a toyshop database.
        delay_ms: optional sleep per call, to mimic a round trip.
    """

    base_url = "fake://catalog"

    def __init__(self, products: Mapping[int, dict[str, Any]], *, observers: list[Observer] | None = None,
                 batch_size: int = 50, concurrency: int = 1, delay_ms: float = 0.0) -> None:
        super().__init__(observers, batch_size, concurrency)
        self.store = ProductStore(products)
        self._encoded = self.store.encoded
        self.delay_ms = delay_ms

    @classmethod
    def from_db(cls, db_path: Path | str, **kwargs: Any) -> FakeCatalog:
        """A fake catalog over the products of a toyshop database."""
        return cls(load_products(db_path), **kwargs)

    def _fetch(self, path: str) -> tuple[int, bytes]:
        t0 = _clock()
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000)
        if path.startswith("/products?ids="):
            ids = [int(p) for p in path.split("=", 1)[1].split(",")]
            found = [self._encoded[i] for i in ids if i in self._encoded]
            status, body = 200, b'{"products":[' + b",".join(found) + b"]}"
        else:
            found_one = self._encoded.get(int(path.rsplit("/", 1)[1]))
            status, body = (200, found_one) if found_one is not None else (404, b'{"error":"not_found"}')
        dur = _clock() - t0
        for obs in self.observers:
            obs("GET", self.base_url + path, dur)
        return status, body

    def _send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000)
        try:
            if method == "PATCH":
                done = self.store.update(int(path.rsplit("/", 1)[1]), orjson.loads(body or b"null"))
                return (404, b'{"error":"not_found"}') if done is None else (200, orjson.dumps(done[1]))
            version, changed = self.store.changes(int(path.split("since=", 1)[1]))
        except BadInputError as exc:
            return 400, orjson.dumps({"error": "bad_parameter", "message": str(exc)})
        return 200, orjson.dumps({"version": version, "changed": changed})

    def __repr__(self) -> str:
        return f"FakeCatalog({len(self._encoded)} products)"
