"""The timed keep-alive HTTP client: one loopback connection, each request timed, Server-Timing read.

Everything in labkit that asks a running service one request at a time goes through it — the latency table's
HTTP rows (``labkit.latency.network``), the labs' end-to-end measurements — so every such figure has the
same client cost in it::

    shop = Endpoint(svc.url)
    r = shop.get("/customers/5/export?n1=naive")
    r.elapsed_ns, r.count("db"), r.count("catalog"), r.json()["item_count"]
    labkit.compare(shop.caller("/customers/1/export?n1=naive"), shop.caller("/customers/1/export?n1=batched"))

One persistent HTTP/1.1 connection (``http.client`` sets TCP_NODELAY), loopback only. A request's time runs
from the send to the last byte of the body; parsing headers and Server-Timing comes after. Not a load
generator: requests go one at a time (see ``labkit.load`` for load).

Every request says ``Accept-Encoding: gzip, zstd`` (the codings it can read; a ``headers`` entry overrides it),
so toyshop's ``compress=`` switch takes effect; ``Reply.body`` is the bytes as sent, ``Reply.content`` (and
``json()``) the body decoded per its ``Content-Encoding``.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from labkit.clock import Clock
from labkit.errors import ServiceError
from labkit.inputs import loopback_url
from labkit.trace import ServerTimingMetric, parse_server_timing

__all__ = ["Endpoint", "Reply", "ACCEPT_ENCODING"]

#: the content codings the client reads (``Reply.content``), sent with every request.
ACCEPT_ENCODING = "gzip, zstd"

class Reply(NamedTuple):
    """One response: status, client-side latency, headers (lower-case names), body, parsed Server-Timing."""

    status: int
    elapsed_ns: int
    headers: dict[str, str]
    body: bytes
    timing: dict[str, ServerTimingMetric]

    @property
    def content(self) -> bytes:
        """The body with its ``Content-Encoding`` (gzip, zstd) undone: what the client reads."""
        coding = self.headers.get("content-encoding", "identity").strip().lower()
        if coding in ("", "identity"):
            return self.body
        from labkit.toyshop.core import decompress  # lazily: most replies are not compressed

        return decompress(self.body, "gzip" if coding == "x-gzip" else coding)

    def json(self) -> Any:
        """The body (decoded per its Content-Encoding) read as JSON."""
        return json.loads(self.content)

    def count(self, metric: str) -> int | None:
        """The ``count`` the server reported for a Server-Timing metric (``db`` queries, ``catalog`` calls)."""
        m = self.timing.get(metric)
        return None if m is None else m.count

    def dur_ms(self, metric: str) -> float | None:
        """The duration in ms the server reported for a Server-Timing metric (``total``, ``db``…)."""
        m = self.timing.get(metric)
        return None if m is None else m.dur_ms


class Endpoint:
    """Keep-alive client for one loopback service.

    Args:
        base_url: ``http://127.0.0.1:<port>`` (loopback only).
        timeout: socket timeout in seconds.
        clock: nanosecond clock (inject a fake one in tests).
    """

    def __init__(self, base_url: str, *, timeout: float = 60.0,
                 clock: Clock = time.perf_counter_ns) -> None:
        where = loopback_url(base_url, "Endpoint", example="http://127.0.0.1:<port>")
        self.base_url = base_url.rstrip("/")
        self._host, self._port, self._timeout = where.host, where.port, timeout
        self._conn: http.client.HTTPConnection | None = None
        self.clock = clock

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        """GET ``path`` (with extra request ``headers``, e.g. ``{"Accept": "application/msgpack"}``);
        reconnects once if the kept-alive connection was closed by the server."""
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            t0 = self.clock()
            try:
                sent = {"Accept-Encoding": ACCEPT_ENCODING} if not any(
                    k.lower() == "accept-encoding" for k in headers or {}) else {}
                self._conn.request("GET", path, headers={**sent, **(headers or {})})
                resp = self._conn.getresponse()
                body = resp.read()
            except (http.client.HTTPException, OSError) as exc:
                self.close()
                if attempt:
                    raise ServiceError(f"{self.base_url} did not answer GET {path}: {exc!r}. Is the service "
                                       "running? (labkit.service.start())") from exc
                continue
            elapsed = self.clock() - t0
            headers = {k.lower(): v for k, v in resp.getheaders()}
            timing = parse_server_timing(headers.get("server-timing", ""))
            return Reply(resp.status, elapsed, headers, body, timing)
        raise AssertionError("unreachable")

    def caller(self, path: str, expect: int = 200, headers: dict[str, str] | None = None,
               decode: Callable[[bytes], Any] | None = None) -> Callable[[], None]:
        """A zero-argument function that GETs ``path`` and checks the status: for ``labkit.compare``.

        ``decode``, if given, is called on every body (its Content-Encoding undone, see ``Reply.content``)
        inside the timed call — a client reads what it gets, so an end-to-end comparison of formats or
        compressions includes the decoding side."""

        def call() -> None:
            reply = self.get(path, headers)
            if reply.status != expect:
                raise ServiceError(f"GET {path} answered {reply.status}, expected {expect}: {reply.body[:200]!r}")
            if decode is not None:
                decode(reply.content)

        call.__name__ = call.__qualname__ = path
        return call

    def close(self) -> None:
        """Close the connection (the next get reconnects)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Endpoint({self.base_url!r})"
