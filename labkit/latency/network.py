"""Loopback networking: a TCP round trip to an echo process, a new TCP connection, and an HTTP request to toyshop's
/health."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from labkit.latency._harness import Samples, method_of, time_each, unavailable

__all__ = ["tcp_loopback_rtt", "tcp_connect", "http_health", "http_samples"]

_ECHO = r"""
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    b = c.recv(64)
    if not b:
        break
    c.sendall(b)
"""


def tcp_loopback_rtt(*, quick: bool = False, rounds: int | None = None) -> Samples:
    """Round trip of 1 byte over a loopback TCP connection to an echo server in another process.

    Method: a child Python process accepts one connection on 127.0.0.1 and echoes what it reads
    (``TCP_NODELAY`` on both ends, so Nagle never delays a byte). A sample is one ``sendall`` + ``recv``
    of one byte, timed per round trip after a warm-up. The echo runs in its own process so no GIL is shared.
    Overhead: four syscalls and two process wake-ups per round trip, plus the Python lines on each side —
    this is a loopback floor, not a network: no NIC, no wire, no switch.
    """
    rounds = rounds or (500 if quick else 2000)
    proc = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    sock: socket.socket | None = None
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s = sock

        def once() -> None:
            s.sendall(b"x")
            s.recv(1)

        samples = time_each(once, rounds, warmup=100)
    finally:
        if sock is not None:
            sock.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return Samples("tcp_loopback_rtt", "TCP round trip over loopback (1 byte)", "io", samples,
                   method_of(tcp_loopback_rtt), None, {"rounds": rounds})


_LISTENER = r"""
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1024)
print(s.getsockname()[1], flush=True)
while True:
    try:
        c, _ = s.accept()
    except OSError:  # a connection reset before it was accepted
        continue
    c.close()
"""

_RESET_ON_CLOSE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST, leaving no TIME_WAIT behind


def tcp_connect(*, quick: bool = False, rounds: int | None = None) -> Samples:
    """Open a new TCP connection to a listening port on 127.0.0.1: ``socket()`` + ``connect()``.

    Method: a child Python process listens on 127.0.0.1 and accepts and closes every connection. A sample is
    ``socket.socket()`` and ``connect()`` to its numeric address (no name lookup), timed one by one after a
    warm-up; ``connect()`` returns once the kernel has sent the SYN, received the SYN-ACK and sent the ACK — on
    loopback the whole three-way handshake runs inside this process's system call, in the kernel, so the
    listener's ``accept()`` is not in the row. Each connection is then closed with a reset (``SO_LINGER`` 0, not
    timed) so thousands of probes leave no ports in TIME_WAIT. No data is sent: add a ``tcp_loopback_rtt`` for
    a first request. Overhead: two Python calls and the socket object; a connection to another host adds a
    network round trip (and TLS its own) to this floor.
    """
    rounds = rounds or (300 if quick else 1000)
    proc = subprocess.Popen([sys.executable, "-c", _LISTENER], stdout=subprocess.PIPE, text=True)
    try:
        addr = ("127.0.0.1", int(proc.stdout.readline()))  # type: ignore[union-attr]
        samples = []
        for i in range(rounds + 20):
            t0 = time.perf_counter_ns()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.connect(addr)
            dt = time.perf_counter_ns() - t0
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
            s.close()
            if i >= 20:  # the first connections warm the listener's process and this code path
                samples.append(float(dt))
    finally:
        proc.kill()
        proc.wait()
    return Samples("tcp_connect", "TCP connect over loopback (socket + handshake)", "io", tuple(samples),
                   method_of(tcp_connect), None, {"rounds": rounds})


def http_samples(url: str, *paths: str, rounds: int = 30, warmup: int = 3) -> tuple[Samples, ...]:
    """Time sequential GETs of each path on one kept-alive connection, interleaved round-robin.

    Method: one :class:`labkit.client.Endpoint` (the keep-alive client every labkit HTTP measurement uses) to
    ``url``; ``warmup`` untimed rounds, then ``rounds`` rounds in which every path is requested once, in turn
    (so a drift in machine load hits every path alike). A sample is one request: send, wait, read the whole
    body. The ``Server-Timing`` header of every response is parsed; ``extra`` keeps each metric's median
    duration (ms) and its last ``count`` (queries, calls), and the body size in bytes. Overhead: ``http.client``
    on this side, as for the ``http_health`` row. Sample *i* of every path comes from round *i*: compare two
    of them with ``labkit.compare(a, b, paired=True)``.

    Raises:
        ServiceError: a request failed or did not answer 200, naming the path and status.
    """
    from labkit.client import Endpoint
    from labkit.errors import ServiceError

    base = urlsplit(url).path.rstrip("/")
    times: dict[str, list[float]] = {p: [] for p in paths}
    timing: dict[str, dict[str, list[float]]] = {p: {} for p in paths}
    counts: dict[str, dict[str, int]] = {p: {} for p in paths}
    size: dict[str, int] = {}
    with Endpoint(url) as client:
        for i in range(warmup + rounds):
            for path in paths:
                reply = client.get(base + path)
                if reply.status != 200:
                    raise ServiceError(f"GET {base + path} answered {reply.status}: {reply.body[:200]!r}")
                if i < warmup:
                    continue
                times[path].append(float(reply.elapsed_ns))
                size[path] = len(reply.body)
                for name, m in reply.timing.items():
                    if m.dur_ms is not None:
                        timing[path].setdefault(name, []).append(m.dur_ms)
                    if m.count is not None:
                        counts[path][name] = m.count
    method = method_of(http_samples)
    return tuple(Samples(path, f"GET {path}", "io", tuple(times[path]), method, None,
                         {"server_timing_ms": {k: float(sorted(v)[len(v) // 2]) for k, v in timing[path].items()},
                          "counts": counts[path], "bytes": size.get(path, 0), "url": url})
                 for path in paths)


def _start_service() -> Any:
    from labkit import service  # the toyshop helper's module; may not exist in a partial checkout

    return service.start(size="small")


def http_health(*, quick: bool = False, rounds: int | None = None, url: str | None = None) -> Samples:
    """One HTTP/1.1 GET of toyshop's ``/health`` over a kept-alive loopback connection.

    Method: starts toyshop with ``labkit.service.start()`` (or uses ``url`` when given), opens one
    :class:`labkit.client.Endpoint` connection, warms it up, then times each GET + full read of the response. The
    connection is reused, so no TCP handshake is included: this is the per-request floor of the client
    library, the loopback round trip and the server framework. Overhead: ``http.client`` parsing the
    response in Python on this side (tens of µs), which any Python client pays.
    Degrades (no samples, with a note) when the service cannot be imported or started.
    """
    from labkit.client import Endpoint
    from labkit.errors import ServiceError

    method = method_of(http_health)
    rounds = rounds or (200 if quick else 1000)
    svc = None
    try:
        if url is None:
            try:
                svc = _start_service()
            except Exception as e:  # ImportError, ServiceError…: this row only, never the whole table
                return unavailable("http_health", "HTTP GET /health (toyshop, loopback)", "io",
                                   f"toyshop could not be started ({type(e).__name__}: {e}); run "
                                   "`labkit serve` by hand to see why, or pass url=", method)
            url = svc.url
        path = (urlsplit(url).path.rstrip("/") or "") + "/health"
        with Endpoint(url, timeout=10) as client:
            for _ in range(50):  # warm-up: the connection, the server's code paths
                client.get(path)
            samples = []
            for _ in range(rounds):
                reply = client.get(path)
                if reply.status != 200:
                    raise ServiceError(f"GET {path} answered {reply.status}")
                samples.append(float(reply.elapsed_ns))
    finally:
        if svc is not None:
            svc.stop()
    return Samples("http_health", "HTTP GET /health (toyshop, loopback)", "io", tuple(samples), method, None,
                   {"url": url, "rounds": rounds})
