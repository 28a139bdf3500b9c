"""Benchmark: every format and codec against stdlib json on the export payload, then the export end to end.

Run it alone (benchmarks never overlap):

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_serialization.py [--rounds 12] [--quick]

1. serialize — the service's serialize stage (``encode(payload, codec, format=…, schema="export")``) on the
   batched export of three ladder customers (20, 200 and 800 items, all 32 product fields), each codec
   against stdlib json in one interleaved ``labkit.compare``. Issue 11's goal: the best ≥ 10× json.
2. decode — what a client does with the bytes: stdlib ``json.loads`` against each codec's decoder (typed
   ones return the schema's Structs or messages; the lab converts them only to check content).
3. bytes — per format and per field set (full 32 / trimmed 8), raw and compressed (gzip, zstd), with the
   compression CPU per response.
4. end to end — the batched export over HTTP, stdlib json against the fastest served codec of part 1,
   open loop at a fixed low rate, A and B alternating request by request: P50 and P99 ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import msgspec
import numpy as np

from labkit.measure.comparison import compare
from labkit.measure.stats import format_duration
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.core import CODECS, SCHEMAS, compress, decode, decompress, encode
from labkit.toyshop.core.encoding import codec_label
from labkit.toyshop.dataset import ITEMS_PER_LADDER_ORDER, LADDER, ensure
from labkit.toyshop.db import connect
from labkit.toyshop.export import export_batched
from labkit.toyshop.wiring import trim_export

SIZES = (4, 1, 8)  # ladder customers: 5, 50 and 200 orders of 4 items
PAIRS = [(c, f) for c, fs in CODECS.items() for f in fs if c != "json"]
SERVED = ("orjson", "msgspec", "msgpack", "protobuf")  # pickle is never served


def line(label: str, c) -> None:  # a labkit Comparison
    a, b = np.median(c.baseline_ns), np.median(c.candidate_ns)
    lo, hi = c.ci
    print(f"  {label:<26} {format_duration(a):>9} → {format_duration(b):>9}   {c.speedup:6.2f}× "
          f"(ratio {c.ratio:.3f}, CI {lo:.3f}–{hi:.3f}) {c.verdict}")


def payloads() -> dict[int, dict]:
    path = ensure("small", quiet=True)
    conn, catalog = connect(path), FakeCatalog.from_db(path)
    return {cid: export_batched(conn, catalog, cid) for cid in SIZES}


def serialize(data: dict[int, dict], rounds: int) -> dict[tuple[str, str], list[float]]:
    print("1. serialize stage — stdlib json → codec, export payload (full fields), interleaved")
    speedups: dict[tuple[str, str], list[float]] = {}
    for cid, payload in data.items():
        items = LADDER[cid] * ITEMS_PER_LADDER_ORDER
        print(f" customer {cid}: {items} items, {len(encode(payload, 'json')) / 1024:.0f} KiB as JSON")
        for codec, fmt in PAIRS:
            def base(p=payload):
                return encode(p, "json", schema="export")

            def cand(p=payload, c=codec, f=fmt):
                return encode(p, c, format=f, schema="export")

            c = compare(base, cand, rounds=rounds, names=("json", codec_label(codec, fmt)))
            speedups.setdefault((codec, fmt), []).append(c.speedup)
            line(codec_label(codec, fmt), c)
        struct = msgspec.convert(payload, SCHEMAS["export"].struct)
        for fmt, enc in (("json", msgspec.json.Encoder()), ("msgpack", msgspec.msgpack.Encoder())):
            def typed(s=struct, e=enc):
                return e.encode(s)

            def base(p=payload):
                return encode(p, "json", schema="export")

            label = f"msgspec Struct ({fmt})"
            c = compare(base, typed, rounds=rounds, names=("json", label))
            line(label + " *", c)
        conv = compare(lambda p=payload: encode(p, "json", schema="export"),
                       lambda p=payload: msgspec.convert(p, SCHEMAS["export"].struct), rounds=rounds,
                       names=("json", "convert"))
        line("dicts → Struct (convert) *", conv)
    print("  * payload already typed (a data layer that builds Structs); the convert row is what turning the\n"
          "    service's dicts into Structs costs per response — not part of any other row")
    best = max(speedups, key=lambda k: min(speedups[k]))
    print(f"  best (highest worst-size speed-up): {codec_label(*best)}, "
          f"{' / '.join(f'{s:.1f}×' for s in speedups[best])} at {len(SIZES)} sizes — issue goal ≥ 10×")
    return speedups


def decoding(data: dict[int, dict], rounds: int) -> None:
    print("2. decode — json.loads → codec's decoder (typed: into Structs / messages), interleaved")
    for cid, payload in data.items():
        print(f" customer {cid}: {LADDER[cid] * ITEMS_PER_LADDER_ORDER} items")
        jb = encode(payload, "json")
        for codec, fmt in PAIRS:
            b = encode(payload, codec, format=fmt, schema="export")

            def base(b=jb):
                return decode(b, "json")

            def cand(b=b, c=codec, f=fmt):
                return decode(b, c, format=f, schema="export")

            line(codec_label(codec, fmt), compare(base, cand, rounds=rounds, names=("json", codec_label(codec, fmt))))


def sizes(data: dict[int, dict]) -> None:
    import copy

    cid = 1
    print(f"3. bytes — customer {cid} ({LADDER[cid] * ITEMS_PER_LADDER_ORDER} items); ratio to stdlib json full")
    full = data[cid]
    trimmed = trim_export(copy.deepcopy(full), "trimmed")
    base = len(encode(full, "json"))
    print(f"  {'format':<20} {'full':>9} {'trimmed':>9} {'trim/full':>9} | {'gzip':>8} {'zstd':>8} "
          f"(full; compress+decompress CPU per response)")
    for codec, fmt in [("json", "json"), *PAIRS]:
        f = encode(full, codec, format=fmt, schema="export")
        t = encode(trimmed, codec, format=fmt, schema="export")
        packed = []
        for coding in ("gzip", "zstd"):
            z = compress(f, coding)
            t0 = time.perf_counter_ns()
            for _ in range(5):
                decompress(compress(f, coding), coding)
            packed.append(f"{len(z) / base:.3f} {format_duration((time.perf_counter_ns() - t0) / 5)}")
        print(f"  {codec_label(codec, fmt):<20} {len(f) / base:>9.3f} {len(t) / base:>9.3f} {len(t) / len(f):>9.3f} "
              f"| {packed[0]:>16} {packed[1]:>16}")
    print(f"  (stdlib json, full fields: {base / 1024:.0f} KiB)")


def end_to_end(codec: str, quick: bool) -> None:
    from load_common import LOAD_CPU, machine_note

    import labkit.load
    import labkit.service

    rate, duration = (20.0, 10.0) if quick else (20.0, 40.0)
    fast = f"n1=batched&codec={codec}"

    def path(i: int) -> str:
        cid = SIZES[(i // 2) % len(SIZES)]
        return f"/customers/{cid}/export?" + (fast if i % 2 else "n1=batched")

    print(f"4. end to end — batched export, json vs codec={codec}, {machine_note()}")
    print(f"  open loop {rate:g} req/s for {duration:g} s, A/B alternating, customers {SIZES}")
    with labkit.service.start(cpus={0}) as svc:
        r = labkit.load.run(svc.url, rate=rate, duration_s=duration, warmup_s=3.0, paths=path, connections=4,
                            timeout_s=5.0, cpus={LOAD_CPU}, progress=False)
    base = r.select(lambda p: f"codec={codec}" not in p)
    cand = r.select(lambda p: f"codec={codec}" in p)
    pb, pc = base.percentiles((50, 99)), cand.percentiles((50, 99))
    print(f"  json:  n={base.responses} P50 {pb[50] / 1e3:.0f} µs  P99 {pb[99] / 1e3:.0f} µs")
    print(f"  {codec}: n={cand.responses} P50 {pc[50] / 1e3:.0f} µs  P99 {pc[99] / 1e3:.0f} µs")
    print(f"  json / {codec}: P50 {pb[50] / pc[50]:.2f}×, P99 {pb[99] / pc[99]:.2f}× "
          f"(errors {r.error_count}, achieved {r.achieved_rate:.1f} of {rate:g} req/s)")
    if r.error_count:
        print(f"  !! {r.error_count} requests failed: the ratios above are not to be trusted")
    c = compare(base, cand, names=("json", codec))
    print(f"  labkit.compare: {c.verdict}, ratio of medians {c.ratio:.3f} (95 % CI {c.ci[0]:.3f}–{c.ci[1]:.3f})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=12, help="interleaved A/B rounds per comparison")
    p.add_argument("--quick", action="store_true", help="fewer rounds, shorter load (a smoke run)")
    p.add_argument("--no-http", action="store_true", help="skip part 4 (the end-to-end load)")
    args = p.parse_args(argv)
    rounds = 5 if args.quick else args.rounds
    print(f"bench_serialization — {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
          f"python {sys.version.split()[0]}")
    data = payloads()
    speedups = serialize(data, rounds)
    decoding(data, rounds)
    sizes(data)
    if not args.no_http:
        served = {k: v for k, v in speedups.items() if k[0] in SERVED and k[1] == CODECS[k[0]][0]}
        end_to_end(max(served, key=lambda k: min(served[k]))[0], args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
