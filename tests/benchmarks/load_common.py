"""Shared pieces of the load benchmarks: a raw ASGI target (optionally stalling), wrk, pinning, formatting.

Not a benchmark itself. Always run the benchmarks one at a time:
``flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_x.py``.

The raw target is a bare ASGI app on uvicorn + uvloop + httptools (the framework floor, ~60-130 µs at c=1,
~30k req/s on one core), used where the generator's own limits must be visible. With ``STALL_MS`` and
``STALL_EVERY_S`` set it freezes its whole event loop for STALL_MS every STALL_EVERY_S seconds -- an
injected stop-the-world pause, like a long GC pause.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SERVER_CPU = 0  # the service under test
LOAD_CPU = 1  # the load generator (labkit's thread, or wrk)

_next_stall = 0.0


async def app(scope, receive, send):  # the raw ASGI target, run by uvicorn
    """GET anything -> 200 {"ok":true}; freezes the loop STALL_MS every STALL_EVERY_S seconds if set."""
    global _next_stall
    if scope["type"] != "http":
        return
    stall_ms = float(os.environ.get("STALL_MS", "0"))
    if stall_ms:
        now = time.monotonic()
        every = float(os.environ.get("STALL_EVERY_S", "1"))
        if _next_stall == 0.0:
            _next_stall = now + every
        elif now >= _next_stall:
            _next_stall += every * max(1, int((now - _next_stall) // every) + 1)
            time.sleep(stall_ms / 1000)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"11")]})
    await send({"type": "http.response.body", "body": b'{"ok":true}'})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def raw_server(*, stall_ms: float = 0.0, stall_every_s: float = 1.0, cpu: int = SERVER_CPU) -> Iterator[str]:
    """Run the raw ASGI app on uvicorn in a child process pinned to ``cpu``; yield its base URL."""
    port = _free_port()
    env = {**os.environ, "STALL_MS": str(stall_ms), "STALL_EVERY_S": str(stall_every_s)}
    cmd = [sys.executable, "-m", "uvicorn", "load_common:app", "--app-dir", str(HERE), "--host", "127.0.0.1",
           "--port", str(port), "--loop", "uvloop", "--http", "httptools", "--no-access-log",
           "--log-level", "warning", "--timeout-keep-alive", "300"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.sched_setaffinity(proc.pid, {cpu})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"raw uvicorn target did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def require_wrk() -> str:
    """Path of wrk, or exit with a message saying how to install it."""
    path = shutil.which("wrk")
    if path is None:
        print("wrk is not installed, so labkit cannot be compared with it.\n"
              "Install it with:  apt-get update && apt-get install -y wrk   (then rerun this benchmark)",
              file=sys.stderr)
        raise SystemExit(2)
    return path


_UNIT_US = {"us": 1.0, "ms": 1e3, "s": 1e6}


def wrk(url: str, *, connections: int, duration_s: float, cpu: int = LOAD_CPU) -> dict[str, float]:
    """Run wrk (closed loop, 1 thread) pinned to ``cpu`` for whole seconds; return req/s and P50/P99 in µs."""
    seconds = max(1, round(duration_s))  # wrk takes whole seconds only
    out = subprocess.run(["taskset", "-c", str(cpu), require_wrk(), "-t1", f"-c{connections}",
                          f"-d{seconds}s", "--latency", url], capture_output=True, text=True, check=True).stdout

    def pct(p: str) -> float:
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m is None:
            raise RuntimeError(f"cannot parse wrk output:\n{out}")
        return float(m.group(1)) * _UNIT_US[m.group(2)]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(rps.group(1)) if rps else float("nan"), "p50_us": pct("50"), "p99_us": pct("99"),
            "non2xx": float(errors.group(1)) if errors else 0.0}


def us(ns: float) -> str:
    """ns -> '123 µs' / '4.56 ms'."""
    from labkit.measure.stats import format_duration

    return format_duration(ns)


def machine_note() -> str:
    """One line on the machine's state, so a reader can judge the noise."""
    load = os.getloadavg()
    return (f"{os.cpu_count()} CPUs, load average {load[0]:.2f}; service pinned to CPU {SERVER_CPU}, "
            f"load generator (labkit's thread / wrk) pinned to CPU {LOAD_CPU}")
