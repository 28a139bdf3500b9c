"""Text and HTML renderings of load results (pure functions of the value; no measuring here)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from labkit.stats import format_duration

if TYPE_CHECKING:
    from labkit.load.ratesweep import Sweep
    from labkit.load.result import LoadResult

__all__ = ["summary_text", "summary_html", "warnings_for", "sweep_text", "busy_note"]

# A run is "saturated" when it delivers less than this share of the offered rate.
SATURATED = 0.95
# Other programs using this many cores during a run make it a busy-machine run (see labkit.machine.CpuWatch).
BUSY_OTHERS_CORES = 0.25


def busy_note(r: LoadResult) -> str | None:
    """A sentence when other programs used the CPUs during the run (``fingerprint["cpu"]``), else None."""
    cpu = r.fingerprint.get("cpu") or {}
    others = cpu.get("others_cores")
    if others is None or others < BUSY_OTHERS_CORES:
        return None
    waited = cpu.get("cpu_pressure")
    also = f"; some task waited for a CPU {100 * waited:.0f} % of the time" if waited is not None else ""
    return (f"the machine was busy: other programs used {others:.2f} of {cpu.get('cores', 0):g} cores during this "
            f"run{also}. Latencies include waiting for a core and the capacity is shared, so a knee here may "
            "be the neighbours'. Quieten the machine (or wait) and run again before believing it.")


def _head(r: LoadResult) -> str:
    s = r.settings
    if s.mode == "open":
        what = f"open loop, {s.rate:,.0f} req/s offered ({s.arrivals} arrivals), {s.connections} connections"
    else:
        what = f"closed loop, concurrency {s.concurrency}"
    return f"{what}, {r.duration_s:.1f} s → {s.url}"


def _errors(r: LoadResult) -> str:
    if not r.errors:
        return "errors: none"
    parts = ", ".join(f"{k} {v:,}" for k, v in sorted(r.errors.items(), key=lambda kv: -kv[1]))
    return f"errors: {r.error_count:,} ({100 * r.error_rate:.2f} % of requests) — {parts}"


def _pcts(r: LoadResult, of: str) -> str:
    p = r.percentiles(of=of)
    return "  ".join(f"P{q:g} {format_duration(v)}" for q, v in p.items())


def warnings_for(r: LoadResult) -> list[str]:
    """Problems with a run, each saying what to change."""
    out: list[str] = []
    if r.responses == 0:
        out.append("no response at all: is the service running at this URL? (labkit.service.start())")
        return out
    if r.offered_rate and r.achieved_rate < SATURATED * (r.scheduled_rate or r.offered_rate):
        out.append(
            f"achieved {r.achieved_rate:,.0f} req/s is below the offered {r.offered_rate:,.0f}: the service (or the "
            "generator) is saturated at this rate; latencies here include queueing. Lower rate= to measure "
            "below the knee, or use sweep() to find it."
        )
    if r.mode == "open":
        lag99 = r.percentiles((99,), of="lag")[99]
        svc99 = r.percentiles((99,), of="service")[99]
        if lag99 > 1e6 and lag99 > svc99:
            out.append(
                f"P99 send lag {format_duration(lag99)} exceeds the P99 service time: requests waited for a free "
                f"connection. This is real queueing (it is in the latency, as a user would see it); if you meant "
                f"to measure the server only, raise connections= (now {r.settings.connections})."
            )
    for kind, msg in r.error_examples.items():
        if kind == "unsent":
            out.append(f"{r.errors.get(kind, 0):,} requests waited timeout_s={r.settings.timeout_s:g} for a free "
                       "connection and were never sent: the service cannot keep up with this rate (lower rate=, or "
                       "raise connections= if the service has spare capacity)")
        else:
            out.append(f"{kind}: {r.errors.get(kind, 0):,} × e.g. {msg}")
    busy = busy_note(r)
    if busy:
        out.append(busy)
    if r.responses < 100:
        out.append(f"only {r.responses} responses: P99 needs well over 100; raise duration_s= or rate=")
    return out


def summary_text(r: LoadResult) -> str:
    """The run in a few lines."""
    lines = [_head(r)]
    rate = f"achieved {r.achieved_rate:,.1f} req/s"
    if r.offered_rate:
        rate += f" of {r.offered_rate:,.1f} offered ({100 * r.achieved_rate / r.offered_rate:.1f} %)"
    lines.append(f"{rate} · {r.responses:,} responses ({r.ok:,} 2xx) · {_errors(r)}")
    if r.responses:
        label = "latency (from intended send)" if r.mode == "open" else "latency"
        lines.append(f"{label}: {_pcts(r, 'latency')}  max {format_duration(float(r.samples_ns.max()))}")
        if r.mode == "open":
            lines.append(f"service time (from actual send): {_pcts(r, 'service')}")
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def summary_html(r: LoadResult) -> str:
    """A small HTML table for notebooks."""
    rows = [("run", _head(r))]
    rate = f"{r.achieved_rate:,.1f} req/s"
    if r.offered_rate:
        rate += f" of {r.offered_rate:,.1f} offered"
    rows += [("achieved", rate), ("responses", f"{r.responses:,} ({r.ok:,} 2xx)"), ("errors", _errors(r)[8:])]
    if r.responses:
        rows.append(("latency" + (" (from intended send)" if r.mode == "open" else ""), _pcts(r, "latency")))
        if r.mode == "open":
            rows.append(("service time", _pcts(r, "service")))
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(v)}</td></tr>" for k, v in rows)
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in r.warnings)
    return f"<table>{body}</table>" + (f"<p><b>warnings</b></p><ul>{warn}</ul>" if warn else "")


def sweep_text(sw: Sweep) -> str:
    """The sweep as a table of steps plus the knee."""
    lines = [f"{'offered':>10} {'achieved':>10} {'P50':>10} {'P99':>10} {'errors':>8}"]
    for r in sw.steps:
        p = r.percentiles((50, 99))
        lines.append(f"{r.offered_rate or 0:>10,.0f} {r.achieved_rate:>10,.0f} {format_duration(p[50]):>10} "
                     f"{format_duration(p[99]):>10} {r.error_count:>8,}")
    k = sw.knee()
    if k is None:
        lines.append("knee: not reached (no step bent)")
    elif k.last_good_rate is None:
        lines.append(f"knee: at or below the first rate, {k.rate:,.0f} req/s ({k.reason}); sweep lower, e.g. "
                     f"rates={list(sw.next_rates())}")
    else:
        lines.append(f"knee: {k.rate:,.0f} req/s ({k.reason}); last good {k.last_good_rate:,.0f} req/s")
    lines += [f"warning: {w}" for w in sw.warnings]
    return "\n".join(lines)
