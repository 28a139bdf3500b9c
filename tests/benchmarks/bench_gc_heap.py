"""toyshop's reloaded heap (process switch ``heap``): what a reload costs, and whether its pauses move the tail.

Run:  flock /tmp/perflab-heavy.lock .venv/bin/python tests/benchmarks/bench_gc_heap.py [--quick]

1. In process, :data:`labkit.toyshop.heap.ROWS` rows: building a snapshot with the collector off (the reload's
   own CPU), one full collection with it alive, and a reload with the collector on (its collections: count,
   total, largest) — ``objects`` (one list per row) beside ``flat`` (NumPy columns).
2. Four services — heap=objects with gc=default (the baseline), gc=frozen and gc=threshold, and heap=flat —
   warmed past the freeze, then the same open-loop load on a small export in rotated rounds
   (:func:`labkit.alloc.compare_processes`): each candidate's P99 and P90 ratio to the baseline, paired by
   round, the share of requests in flight during a pause ≥ 1 ms, the largest pause, requests per round.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import urllib.request

import numpy as np
import pandas as pd

from labkit import alloc
from labkit.measure.machine import fingerprint
from labkit.service import start
from labkit.toyshop.heap import ROWS, _build
from labkit.toyshop.state import FREEZE_AFTER

QUICK = "--quick" in sys.argv
PATH = "/customers/2/export"
ROUNDS, ROUND_S, RATE = (6, 1.05, 286) if QUICK else (8, 4.0, 250)   # lab 06's § 6: ≥ 300 requests a round


def in_process() -> None:
    for mode in ("objects", "flat"):
        gc.collect()
        gc.disable()
        t = time.perf_counter()
        held = _build(mode, ROWS, 1)
        build_ms = (time.perf_counter() - t) * 1e3
        gc.enable()
        full = []
        for _ in range(3):
            t = time.perf_counter()
            gc.collect()
            full.append((time.perf_counter() - t) * 1e3)
        with alloc.PauseRecorder() as rec:
            t = time.perf_counter()
            held = _build(mode, ROWS, 2)
            reload_ms = (time.perf_counter() - t) * 1e3
        p = rec.result
        print(f"{mode:8s} {ROWS:,} rows: build {build_ms:.1f} ms (collector off); one full collection "
              f"{min(full):.1f} ms; a reload with it on {reload_ms:.1f} ms, of which {p.count} collections "
              f"{p.total_ns / 1e6:.1f} ms (largest {p.max_ns / 1e6:.1f} ms, {p.generation(2).count} full)")
        del held


def services() -> None:
    variants = [{"heap": "objects"}, {"heap": "objects", "gc": "frozen"}, {"heap": "objects", "gc": "threshold"},
                {"heap": "flat"}]
    svcs = [start(size="small", variants={"n1": "batched", **v}) for v in variants]
    try:
        for s in svcs:
            for _ in range(FREEZE_AFTER + 5):
                urllib.request.urlopen(s.url + PATH, timeout=30).read()
        t = time.perf_counter()
        cmps = alloc.compare_processes(svcs[0], svcs[1:], PATH, rate=RATE, duration_s=ROUND_S, rounds=ROUNDS,
                                       warmup_s=0.1, progress=False)
        print(f"\n{ROUNDS} rounds of {ROUND_S:g} s per side at {RATE} req/s on {PATH}, "
              f"{time.perf_counter() - t:.0f} s")
        for c in cmps:
            print(c, end="\n\n")
        frames = [cmps[0].to_frame()]
        for c in cmps[1:]:
            f = c.to_frame()
            frames.append(f[f["process"] == c.names[1]])
        frame = pd.concat(frames)
        print(frame.groupby("process")[["requests", "p50_ms", "p90_ms", "p99_ms", "overlap", "max_pause_ms",
                                        "pauses", "gen2"]].median().to_string())
        for s in svcs:
            with urllib.request.urlopen(s.url + "/health", timeout=10) as r:
                h = json.loads(r.read())
            print(s.variants["gc"], s.variants["heap"], h["heap"], "frozen", h["gc"]["frozen"])
    finally:
        for s in svcs:
            s.stop()


if __name__ == "__main__":
    print(fingerprint())
    in_process()
    services()
    print(np.__version__)
