"""labkit.client: the one timed keep-alive HTTP client (latency probes, labs)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from labkit.client import Endpoint
from labkit.errors import BadInputError, ServiceError


@contextmanager
def serving(answer: Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]) -> Iterator[str]:
    """A keep-alive HTTP/1.1 server on loopback whose every GET is ``answer(request) -> (status, headers,
    body)``; yields its URL and shuts it down after the block."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # http.server's name
            status, headers, body = answer(self)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_endpoint_reads_server_timing_and_times_with_fake_clock() -> None:
    timing = {"Server-Timing": "db;dur=1.5;count=4, catalog;dur=2;count=3, total;dur=4"}
    ticks = iter(range(0, 10**6, 1000))
    body = b'{"item_count": 3}'
    with serving(lambda req: (200 if req.path != "/missing" else 404, timing, body)) as url, \
            Endpoint(url, clock=lambda: next(ticks)) as shop:
        r = shop.get("/x")
        assert (r.status, r.elapsed_ns, r.count("db"), r.count("catalog"), r.dur_ms("total")) == (200, 1000, 4, 3, 4.0)
        assert r.json() == {"item_count": 3} and r.count("nope") is None
        shop.caller("/x")()
        with pytest.raises(ServiceError, match="404"):
            shop.caller("/missing")()
    with pytest.raises(BadInputError, match="loopback"):
        Endpoint("http://10.0.0.1:80")


def test_endpoint_asks_for_the_codings_it_reads_and_undoes_them() -> None:
    from labkit.toyshop.core import compress

    seen: list[str | None] = []
    plain = b'{"item_count": 3}'

    def answer(req: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        seen.append(req.headers.get("Accept-Encoding"))
        coding = req.path.strip("/")
        return 200, {} if coding == "none" else {"Content-Encoding": coding}, compress(plain, coding)

    got = []
    with serving(answer) as url, Endpoint(url) as shop:
        for coding in ("none", "gzip", "zstd"):
            r = shop.get(f"/{coding}")
            assert r.content == plain and r.json() == {"item_count": 3}
            assert (r.body == plain) == (coding == "none")
            shop.caller(f"/{coding}", decode=got.append)()
        shop.get("/none", headers={"accept-encoding": "identity"})
    assert seen == ["gzip, zstd"] * 6 + ["identity"] and got == [plain] * 3
