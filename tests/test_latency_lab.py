"""Lab 01's measuring helpers: the endpoint timer and napkin pricing (the grader is in tests/test_lab01.py)."""

from __future__ import annotations

import http.server
import threading

import pytest

from labkit.latency import Samples
from labkit.latency.network import http_samples


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # http.server's naming
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Server-Timing", "db;dur=0.5;count=2, catalog;dur=1.25;count=1, total;dur=2")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_http_samples_interleaves_paths_and_reads_server_timing():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        a, b = http_samples(url, "/orders/1", "/health", rounds=4, warmup=1)
    finally:
        server.shutdown()
        server.server_close()
    assert len(a.samples_ns) == 4 and len(b.samples_ns) == 4
    assert a.extra["counts"] == {"db": 2, "catalog": 1}
    assert a.extra["server_timing_ms"]["catalog"] == 1.25
    assert a.extra["bytes"] == len(b'{"ok": true}')


def test_napkin_prices_counts_with_table_rows():
    from labkit.errors import BadInputError
    from labkit.latency import LatencyTable, napkin

    t = LatencyTable(rows=(Samples("sqlite_point_query", "q", "work", (10_000.0,)),
                           Samples("http_health", "h", "io", (300_000.0,)),
                           Samples("disk_random_read_4k", "d", "io", (), note="no O_DIRECT")))
    df = napkin(t, {"queries": (4, "sqlite_point_query"), "calls": (2, "http_health")})
    assert list(df["term"]) == ["queries", "calls", "total"]
    assert df["subtotal_ms"].tolist() == pytest.approx([0.04, 0.6, 0.64])
    with pytest.raises(BadInputError, match="not measured"):
        napkin(t, {"reads": (1, "disk_random_read_4k")})
    with pytest.raises(BadInputError, match="no row"):
        napkin(t, {"x": (1, "warp")})
