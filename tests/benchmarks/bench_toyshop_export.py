"""Export endpoint: baseline vs all fixes, interleaved request by request at a fixed low rate.

Run:  flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_toyshop_export.py [--quick]

One warm toyshop process (pinned to CPU 0, the generator to CPU 1) serves both variants; the per-request
switches ride as query parameters, so A and B alternate request by request (same customers, same moment):

- baseline:  /customers/{id}/export                      (n1=naive, io=serial, codec=json, fields=full)
- all fixes: /customers/{id}/export?n1=join&io=concurrent&codec=orjson&fields=trimmed

Open loop, constant arrivals, latency from the intended send time. The rate is low (the service is far from
saturated) so the ratio is the per-request cost, not queueing. The process-level fix (gc=tuned) cannot be
interleaved and is left out.
"""

from __future__ import annotations

import sys

from load_common import LOAD_CPU, machine_note, us

import labkit
import labkit.load
import labkit.service

FIXED = "n1=join&io=concurrent&codec=orjson&fields=trimmed"
CUSTOMERS = 300


def path(i: int) -> str:
    """Request i: customer 1 + (i // 2) % 300, baseline on even i and all-fixes on odd i."""
    cid = 1 + (i // 2) % CUSTOMERS
    return f"/customers/{cid}/export" + (f"?{FIXED}" if i % 2 else "")


def main() -> int:
    quick = "--quick" in sys.argv
    rate, duration = (5.0, 20.0) if quick else (5.0, 60.0)
    print(f"export: baseline vs all fixes — {machine_note()}")
    print(f"open loop {rate:g} req/s for {duration:g} s, A/B alternating per request; fixes: {FIXED}\n")
    with labkit.service.start(cpus={0}) as svc:
        r = labkit.load.run(svc.url, rate=rate, duration_s=duration, warmup_s=4.0, paths=path, connections=8,
                            timeout_s=5.0, cpus={LOAD_CPU}, progress=False)
    base = r.select(lambda p: "?" not in p)
    fixed = r.select(lambda p: "?" in p)
    print(f"  {'variant':<10} {'n':>5} {'P50':>9} {'P90':>9} {'P99':>9} {'errors (whole run)':>20}")
    for name, x in (("baseline", base), ("all fixes", fixed)):
        p = x.percentiles((50, 90, 99))
        print(f"  {name:<10} {x.responses:>5} {us(p[50]):>9} {us(p[90]):>9} {us(p[99]):>9} {r.error_count:>20}")
    pb, pf = base.percentiles((50, 99)), fixed.percentiles((50, 99))
    print(f"\n  baseline / all fixes: P50 {pb[50] / pf[50]:.1f}×, P99 {pb[99] / pf[99]:.1f}× "
          f"(achieved {r.achieved_rate:.2f} of {rate:g} req/s offered)")
    c = labkit.compare(base, fixed, names=("baseline", "all fixes"))
    print(f"  labkit.compare: {c.verdict}, ratio of medians {c.ratio:.3f} ({c.ci_label} {c.ci[0]:.3f}–{c.ci[1]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
