"""How load results look: text, HTML and charts (pure functions of the value; no measuring here).

The charts import Altair when first drawn, so a load run and its text summary never pay for it.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from labkit.errors import BadInputError
from labkit.measure.stats import format_duration

if TYPE_CHECKING:
    from labkit.load.ratesweep import Sweep
    from labkit.load.result import LoadResult

__all__ = ["summary_text", "summary_html", "warnings_for", "sweep_text", "busy_note", "timeline_chart", "knee_chart"]

# A run is "saturated" when it delivers less than this share of the offered rate.
SATURATED = 0.95
# Other programs using this many cores during a run make it a busy-machine run (see labkit.measure.machine.CpuWatch).
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


def timeline_chart(result: Any, window_s: float = 1.0,
                  title: str = "Latency over the run (P50 and P99 per window, log scale)") -> Any:
    """P50 and P99 per time window of a load run, by intended send time: stalls, overload and recovery show.

    Args:
        result: a :class:`labkit.load.LoadResult` (or its ``to_frame()``: columns ``t_s`` and ``ns``).
        window_s: window width in seconds.
    """
    import altair as alt
    import numpy as np

    from labkit.charts.samples import as_frame

    df = as_frame(result)
    if "t_s" not in df.columns or "ns" not in df.columns:
        raise BadInputError("timeline_chart takes a LoadResult or its to_frame() (columns t_s and ns)")
    if not window_s > 0:
        raise BadInputError(f"window_s must be > 0 seconds, got {window_s!r}")
    df = df.assign(t=(df["t_s"] // window_s) * window_s)
    agg = df.groupby("t")["ns"].agg(P50=lambda v: np.percentile(v, 50), P99=lambda v: np.percentile(v, 99),
                                    responses="size").reset_index()
    long = agg.melt(id_vars=["t", "responses"], value_vars=["P50", "P99"], var_name="stat", value_name="ns")
    long["ms"] = long["ns"] / 1e6
    return alt.Chart(long, title=title).mark_line(point=True).encode(
        alt.X("t:Q", title=f"intended send time (s), {window_s:g}-s windows"),
        alt.Y("ms:Q", scale=alt.Scale(type="log"), title="latency (ms, log scale)"),
        alt.Color("stat:N", title=None),
        tooltip=["t:Q", "stat:N", alt.Tooltip("ms:Q", format=".3f"), "responses:Q"],
    ).properties(width=520, height=240)


def knee_chart(sweep: Any, title: str = "Rate sweep: where latency bends and throughput stops",
               guess: float | None = None) -> Any:
    """Two panels over the offered rate of a :class:`labkit.load.Sweep`: P50/P99 latency (log scale) and
    achieved vs offered rate (the diagonal is "keeps up"). The knee (``sweep.knee()``) is a dashed red line;
    ``guess`` (a rate in req/s, e.g. the learner's guessed knee) a dotted grey one."""
    import altair as alt
    import pandas as pd

    if not hasattr(sweep, "knee"):
        raise BadInputError(f"knee_chart takes a labkit.load.Sweep, got {type(sweep).__name__}")
    df = sweep.to_frame()
    lat = df.melt(id_vars=["offered"], value_vars=["p50_ns", "p99_ns"], var_name="stat", value_name="ns")
    lat["stat"] = lat["stat"].map({"p50_ns": "P50", "p99_ns": "P99"})
    lat["ms"] = lat["ns"] / 1e6
    x = alt.X("offered:Q", title="offered rate (req/s)")
    left = alt.Chart(lat).mark_line(point=True).encode(
        x, alt.Y("ms:Q", scale=alt.Scale(type="log"), title="latency from intended send (ms, log)"),
        alt.Color("stat:N", title=None), tooltip=["offered:Q", "stat:N", alt.Tooltip("ms:Q", format=".3f")])
    rates = df[["offered", "achieved"]]
    diag = alt.Chart(rates).mark_line(strokeDash=[2, 2], color="gray").encode(x, alt.Y("offered:Q"))
    right = alt.Chart(rates).mark_line(point=True).encode(
        x, alt.Y("achieved:Q", title="achieved rate (req/s)"),
        tooltip=["offered:Q", alt.Tooltip("achieved:Q", format=",.0f")])
    k = sweep.knee()
    left_layers, right_layers = [left], [diag, right]
    if k is not None:
        rule = alt.Chart(pd.DataFrame({"offered": [k.rate], "why": [k.reason]})).mark_rule(
            strokeDash=[6, 4], color="firebrick").encode(alt.X("offered:Q"), tooltip=["why:N"])
        left_layers.append(rule)
        right_layers.append(rule)
    if guess is not None:
        mine = alt.Chart(pd.DataFrame({"offered": [float(guess)], "why": ["your guess"]})).mark_rule(
            strokeDash=[2, 3], color="gray", strokeWidth=2).encode(alt.X("offered:Q"), tooltip=["why:N"])
        left_layers.append(mine)
        right_layers.append(mine)
    return alt.hconcat(alt.layer(*left_layers).properties(width=300, height=240),
                       alt.layer(*right_layers).properties(width=300, height=240),
                       title=title + (f" — knee at {k.rate:,.0f} req/s ({k.reason})" if k else " — no knee yet"))
