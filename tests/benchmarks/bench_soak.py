"""Soak: toyshop at ~70 % of its measured capacity for a set time -- does anything grow, fail or slow down?

Run:  flock /tmp/perflab-heavy.lock .venv/bin/python tests/benchmarks/bench_soak.py [--minutes M]
      [--segment-s S]

Target: GET /orders/{id} (SQLite on the pool + one catalog call), service pinned to CPU 0, generator to
CPU 1, the access log on (``log=sync``, into a file this script keeps). Steps, against one process:

1. capacity C: closed loop, concurrency 16, 5 s;
2. the soak: open loop at 0.7 C for ``--minutes`` (default 10), run as back-to-back segments of
   ``--segment-s`` (default 60) so that between two segments the service's RSS and open file descriptors
   (app + catalog, from /proc) are read; the first segment is the warm-up.

Prints: RSS and open fds at the start (after the warm-up) and at the end, with their growth (the bar: ≤ 10 %);
errors (the bar: 0); P99 of the first and of the last segment and their ratio; the access log's lines for
/orders/ against the requests sent (the bar: equal). Exit code 1 if a bar is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from load_common import LOAD_CPU, SERVER_CPU, machine_note, us

import labkit.load
import labkit.service

ORDERS = 3819  # orders in the "small" dataset


def path(i: int) -> str:
    """Request i reads order 1 + i % ORDERS."""
    return f"/orders/{1 + i % ORDERS}"


def fds(pid: int) -> int:
    """Open file descriptors of a process (0 if it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def footprint(svc: labkit.service.Service) -> tuple[int, int]:
    """(RSS bytes, open fds) of the app and the catalog together."""
    return sum(svc.rss_bytes().values()), fds(svc.pid) + fds(svc.catalog_pid)


def sent(r: labkit.load.LoadResult) -> int:
    """Requests that left the client: responses, plus those that timed out or broke; not the unsent."""
    return r.responses + sum(v for k, v in r.errors.items() if not k.startswith("http_") and k != "unsent")


def growth(a: float, b: float) -> str:
    return f"{(b - a) / a:+.1%}" if a else "n/a"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_soak.py")
    p.add_argument("--minutes", type=float, default=10.0, help="length of the soak (default 10)")
    p.add_argument("--segment-s", type=float, default=60.0, help="seconds between two footprint readings")
    a = p.parse_args(argv)
    segments = max(2, round(a.minutes * 60 / a.segment_s))
    print(machine_note())
    log_path = Path(tempfile.mkdtemp(prefix="perflab-soak-")) / "requests.log"
    svc = labkit.service.start(size="small", variants={"log": "sync"}, cpus={SERVER_CPU}, request_log=log_path)
    try:
        base = f"{svc.url}/orders/1"
        cap = labkit.load.run(base, concurrency=16, duration_s=5, paths=path, cpus={LOAD_CPU}, progress=False)
        rate = 0.7 * cap.ok_rate
        print(f"capacity C = {cap.ok_rate:,.0f} req/s (closed loop, c=16, 5 s); soak at 0.7 C = {rate:,.0f} "
              f"req/s for {segments} × {a.segment_s:g} s (the first is the warm-up)")
        runs, readings = [cap], []
        for k in range(segments):
            r = labkit.load.run(base, rate=rate, duration_s=a.segment_s, paths=lambda i, k=k: path(i + k * 997),
                                cpus={LOAD_CPU}, progress=False, timeout_s=2.0)
            runs.append(r)
            readings.append(footprint(svc))
            p99 = r.percentiles((99,))[99]
            print(f"  segment {k + 1}/{segments}: {r.responses:,} responses, errors {r.errors or 0}, "
                  f"P99 {us(p99)}, RSS {readings[-1][0] / 2**20:.1f} MiB, fds {readings[-1][1]}", flush=True)
    finally:
        svc.stop()
    soak = runs[1:]
    (rss0, fd0), (rss1, fd1) = readings[0], readings[-1]
    errors = sum(r.error_count for r in soak)
    p99_first, p99_last = (soak[i].percentiles((99,))[99] for i in (0, -1))
    lines = sum(1 for line in log_path.read_text().splitlines() if " /orders/" in line)
    requests = sum(sent(r) for r in runs)
    print(f"RSS  after warm-up {rss0 / 2**20:.1f} MiB → end {rss1 / 2**20:.1f} MiB ({growth(rss0, rss1)}; bar ≤ +10 %)")
    print(f"fds  after warm-up {fd0} → end {fd1} ({growth(fd0, fd1)}; bar ≤ +10 %)")
    print(f"errors during the soak: {errors} (bar: 0)")
    print(f"P99  first segment {us(p99_first)}, last {us(p99_last)}: ratio {p99_last / p99_first:.2f}")
    print(f"access log: {lines:,} lines for /orders/ against {requests:,} requests sent (bar: equal)")
    ok = rss1 <= 1.1 * rss0 and fd1 <= 1.1 * fd0 and errors == 0 and lines == requests
    print("verdict:", "every bar met" if ok else "a bar was missed (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
