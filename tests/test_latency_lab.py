"""Lab 01's grader, tested both ways (a right estimate passes, a wrong one fails), and the endpoint timer."""

from __future__ import annotations

import http.server
import threading

import numpy as np
import pytest

from labkit.exercises import lab01
from labkit.latency import Samples
from labkit.latency.network import http_samples

MEASURED = Samples("/orders/1", "GET /orders/1", "io", (1.9e6, 2.0e6, 2.1e6))  # median 2 ms


@pytest.mark.parametrize("estimate_ms", [2.0, 1.0, 5.5, 0.7])
def test_estimate_within_factor_passes(estimate_ms):
    result = lab01.check(estimate_ms, MEASURED)
    assert result.passed, str(result)


@pytest.mark.parametrize("estimate_ms,word", [(20.0, "too high"), (0.2, "too low"), (6.5, "too high")])
def test_estimate_outside_factor_fails_and_says_which_way(estimate_ms, word):
    result = lab01.check(estimate_ms, MEASURED)
    assert not result.passed
    assert word in str(result)


@pytest.mark.parametrize("bad", [None, "2 ms", -1, 0, float("nan"), True])
def test_bad_estimate_fails_without_crashing(bad):
    result = lab01.check(bad, MEASURED)
    assert not result.passed and "positive number" in str(result)


def test_measurement_forms_and_factor():
    assert lab01.check(2.0, [2e6, 2e6]).passed  # a plain sequence of ns
    assert lab01.check(2.0, np.array([2e6])).passed
    assert lab01.check(2.0, 2e6).passed  # one median in ns
    assert not lab01.check(2.0, Samples("x", "x", "io", ())).passed  # unavailable measurement
    assert lab01.check(4.2, MEASURED, factor=2).passed is False
    assert lab01.check(3.9, MEASURED, factor=2).passed
    assert not lab01.check(2.0, MEASURED, factor=0.5).passed


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


def test_a_noisy_measurement_earns_a_rerun_hint():
    noisy = Samples("/orders/1", "GET /orders/1", "io", (1e6, 1e6, 2e6, 5e6, 8e6, 9e6, 1e6))
    result = lab01.check(0.1, noisy)
    assert not result.passed and "noisy" in str(result) and "rerun" in str(result)
    assert "noisy" not in str(lab01.check(0.1, MEASURED))
