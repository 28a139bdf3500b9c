"""labkit.client: the one timed keep-alive HTTP client (latency probes, labs)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from labkit.client import Endpoint
from labkit.errors import BadInputError, ServiceError


def test_endpoint_reads_server_timing_and_times_with_fake_clock() -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # http.server's name
            body = b'{"item_count": 3}'
            self.send_response(200 if self.path != "/missing" else 404)
            self.send_header("Server-Timing", "db;dur=1.5;count=4, catalog;dur=2;count=3, total;dur=4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ticks = iter(range(0, 10**6, 1000))
    try:
        with Endpoint(f"http://127.0.0.1:{server.server_address[1]}", clock=lambda: next(ticks)) as shop:
            r = shop.get("/x")
            assert (r.status, r.elapsed_ns, r.count("db"), r.count("catalog"), r.dur_ms("total")) == (200, 1000, 4, 3, 4.0)
            assert r.json() == {"item_count": 3} and r.count("nope") is None
            shop.caller("/x")()
            with pytest.raises(ServiceError, match="404"):
                shop.caller("/missing")()
    finally:
        server.shutdown()
    with pytest.raises(BadInputError, match="loopback"):
        Endpoint("http://10.0.0.1:80")


def test_endpoint_asks_for_the_codings_it_reads_and_undoes_them() -> None:
    from labkit.toyshop.core import compress

    seen: list[str | None] = []
    plain = b'{"item_count": 3}'

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # http.server's name
            seen.append(self.headers.get("Accept-Encoding"))
            coding = self.path.strip("/")
            body = compress(plain, coding)
            self.send_response(200)
            if coding != "none":
                self.send_header("Content-Encoding", coding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    got = []
    try:
        with Endpoint(f"http://127.0.0.1:{server.server_address[1]}") as shop:
            for coding in ("none", "gzip", "zstd"):
                r = shop.get(f"/{coding}")
                assert r.content == plain and r.json() == {"item_count": 3}
                assert (r.body == plain) == (coding == "none")
                shop.caller(f"/{coding}", decode=got.append)()
            shop.get("/none", headers={"accept-encoding": "identity"})
    finally:
        server.shutdown()
    assert seen == ["gzip, zstd"] * 6 + ["identity"] and got == [plain] * 3
