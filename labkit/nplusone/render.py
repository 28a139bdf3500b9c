"""Rendering of N+1 reports and of lab 02's measurements: plain text for terminals and failure messages, an HTML
table for notebooks, and the charts — a request's calls one bar each (:func:`calls_chart`), and latency and
round trips against the items and the dependency's distance.

Pure functions of the values; nothing here measures. Altair is imported when a chart is drawn, so the detector
and its pytest plugin never pay for it.
"""

from __future__ import annotations

import html
import os
from typing import TYPE_CHECKING

from labkit.errors import BadInputError
from labkit.measure.stats import format_duration

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from labkit.nplusone.report import Report

__all__ = ["render_text", "render_html", "summary_line", "calls_chart", "distance_chart", "latency_vs_items_chart",
           "queries_vs_items_chart"]


def _fmt(ns: float) -> str:
    return format_duration(ns)


def _short_site(site: str) -> str:
    path, _, line = site.rpartition(":")
    parts = path.split(os.sep)
    return f"{os.sep.join(parts[-2:])}:{line}" if len(parts) > 2 else site


def summary_line(report: Report) -> str:
    """One sentence: queries, time in queries, share of the block, suspects."""
    n = len(report.suspects)
    what = f"{n} suspect{'s' if n != 1 else ''}" if n else "no suspects"
    return (
        f"{report.count} queries in {len(report.shapes)} shapes; {_fmt(report.query_ns)} in queries = "
        f"{report.query_share:.1%} of {_fmt(report.wall_ns)} wall; {what} (shape repeated > {report.threshold}× from one line)"
    )


def render_text(report: Report, limit: int = 15, width: int = 70) -> str:
    """Text table, worst shape first, at most *limit* shapes; shapes cut to *width* characters."""
    width = min(width, max((len(s.shape) for s in report.shapes[:limit]), default=5))
    lines = [("N+1 report" + (f" — {report.label}" if report.label else "")) + ": " + summary_line(report)]
    if report.shapes:
        lines.append(f"  {'':2}{'count':>6} {'total':>10} {'mean':>10}  {'shape':<{width}}  site")
    for s in report.shapes[:limit]:
        shape = s.shape if len(s.shape) <= width else s.shape[: width - 1] + "…"
        flag = "!!" if s.suspect else "  "
        lines.append(
            f"  {flag}{s.count:>6} {_fmt(s.total_ns):>10} {_fmt(s.mean_ns):>10}  {shape:<{width}}  "
            f"{_short_site(s.site)}"
        )
    if len(report.shapes) > limit:
        lines.append(f"  … {len(report.shapes) - limit} more shapes (report.shapes_frame() lists all)")
    return "\n".join(lines)


def render_html(report: Report, limit: int = 25) -> str:
    """HTML table, worst shape first; suspects highlighted. Self-contained (inline styles, no scripts)."""
    esc = html.escape
    rows = []
    for s in report.shapes[:limit]:
        style = ' style="background:#fde2e1"' if s.suspect else ""
        others = f" (+{len(s.sites) - 1} more)" if len(s.sites) > 1 else ""
        rows.append(
            f"<tr{style}><td>{'⚠ suspect' if s.suspect else ''}</td><td style='text-align:right'>{s.count}</td>"
            f"<td style='text-align:right'>{esc(_fmt(s.total_ns))}</td>"
            f"<td style='text-align:right'>{esc(_fmt(s.mean_ns))}</td>"
            f"<td><code>{esc(s.shape)}</code></td><td title='{esc(s.site)}'><code>{esc(_short_site(s.site))}"
            f"</code>{esc(others)}</td></tr>"
        )
    more = f"<p>… {len(report.shapes) - limit} more shapes: <code>report.shapes_frame()</code></p>" if len(
        report.shapes) > limit else ""
    title = "N+1 report" + (f" — {esc(report.label)}" if report.label else "")
    return (
        f"<div class='labkit-nplusone'><p><b>{title}</b>: {esc(summary_line(report))}</p>"
        "<table><thead><tr><th></th><th>count</th><th>total</th><th>mean</th><th>shape</th><th>site</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>{more}</div>"
    )

def calls_chart(frame: pd.DataFrame, title: str = "One request, call by call") -> alt.VConcatChart:
    """One bar per query or remote call, from its start to its end, a row per call in the order issued: one
    panel per variant on one shared time axis, so the long staircase and the short one are compared as is.

    Args:
        frame: one row per call with ``variant``, ``start_ms``, ``end_ms`` and ``kind`` (sql/http); e.g. the
            ``to_frame()`` of a ``labkit.nplusone`` report with times in ms and a ``variant`` column.
    """
    import altair as alt

    for col in ("variant", "start_ms", "end_ms", "kind"):
        if col not in frame.columns:
            raise BadInputError(f"calls_chart needs columns variant, start_ms, end_ms, kind (got {list(frame.columns)})")
    end = float(frame["end_ms"].max()) or 1.0
    panels = []
    for variant, g in frame.groupby("variant", sort=False):
        g = g.sort_values("start_ms").assign(call=range(1, len(g) + 1))
        g = g.assign(next_call=g["call"] + 0.9)
        panels.append(alt.Chart(g, title=f"{variant}: {len(g)} calls, {g['end_ms'].max():.2f} ms").mark_rect().encode(
            alt.X("start_ms:Q", scale=alt.Scale(domain=[0, end]), title="time since the request started (ms)"),
            alt.X2("end_ms:Q"),
            alt.Y("call:Q", scale=alt.Scale(reverse=True, domain=[0, len(g) + 1]), title="call, in order"),
            alt.Y2("next_call:Q"), alt.Color("kind:N", title="kind", scale=alt.Scale(domain=["sql", "http", "redis"])),
            tooltip=["kind:N", "call:Q", alt.Tooltip("start_ms:Q", format=".3f"),
                     alt.Tooltip("end_ms:Q", format=".3f")] + (["shape:N"] if "shape" in g.columns else []),
        ).properties(width=520, height=min(260, max(50, 3 * len(g)))))
    return alt.vconcat(*panels, title=title).resolve_scale(x="shared")


def distance_chart(frame: pd.DataFrame, title: str = "The fix is worth more the farther the dependency"
                   ) -> alt.LayerChart:
    """Latency against the emulated distance to a dependency, one line per variant: measured medians as
    solid lines with points, the napkin's prediction dashed.

    Args:
        frame: columns ``delay_ms``, ``variant``, ``ms`` and ``kind`` ("measured" per request, or "napkin").
    """
    import altair as alt

    for col in ("delay_ms", "variant", "ms", "kind"):
        if col not in frame.columns:
            raise BadInputError(f"distance_chart needs columns delay_ms, variant, ms, kind (got {list(frame.columns)})")
    df = frame.groupby(["kind", "variant", "delay_ms"], as_index=False)["ms"].median()
    x = alt.X("delay_ms:Q", title="emulated delay per catalog call (ms)")
    y = alt.Y("ms:Q", title="request latency, median (ms)")
    colour = alt.Color("variant:N", title="variant")
    tip = ["variant:N", "kind:N", "delay_ms:Q", alt.Tooltip("ms:Q", format=".2f")]
    measured = alt.Chart(df[df["kind"] == "measured"]).mark_line(point=True).encode(x, y, colour, tooltip=tip)
    napkin = alt.Chart(df[df["kind"] != "measured"]).mark_line(strokeDash=[5, 4]).encode(x, y, colour, tooltip=tip)
    return alt.layer(napkin, measured, title=title + " (dashed: napkin)").properties(width=520, height=300)


def latency_vs_items_chart(frame: pd.DataFrame, title: str = "Export latency against the number of items") -> alt.LayerChart:
    """Each request as a dot (latency against item count) with the median per item count as a line.

    Args:
        frame: one row per request with columns ``items`` (int), ``ms`` (latency) and optionally ``variant``.
    """
    import altair as alt

    for col in ("items", "ms"):
        if col not in frame.columns:
            raise BadInputError(f"latency_vs_items_chart needs columns 'items' and 'ms' (got {list(frame.columns)})")
    df = frame.copy()
    if "variant" not in df.columns:
        df["variant"] = "export"
    colour = alt.Color("variant:N", title="variant")
    x = alt.X("items:Q", title="items in the export")
    base = alt.Chart(df)
    dots = base.mark_circle(opacity=0.35, size=30).encode(
        x, alt.Y("ms:Q", title="latency (ms)"), colour, tooltip=["variant:N", "items:Q", alt.Tooltip("ms:Q", format=".3f")])
    line = base.mark_line(point=True).encode(x, alt.Y("median(ms):Q", title="latency (ms)"), colour)
    return alt.layer(dots, line, title=title).properties(width=520, height=300)


def queries_vs_items_chart(frame: pd.DataFrame, title: str = "Queries and catalog calls per request") -> alt.Chart:
    """Bars of SQL queries and catalog calls per request against item count (from Server-Timing counts).

    Args:
        frame: one row per request with ``items`` and the count columns ``sql`` and ``catalog``.
    """
    import altair as alt

    for col in ("items", "sql", "catalog"):
        if col not in frame.columns:
            raise BadInputError(f"queries_vs_items_chart needs columns items, sql, catalog (got {list(frame.columns)})")
    df = frame.drop_duplicates("items").melt(id_vars=["items"], value_vars=["sql", "catalog"], var_name="kind",
                                             value_name="count")
    return alt.Chart(df, title=title).mark_line(point=True).encode(
        alt.X("items:Q", title="items in the export"), alt.Y("count:Q", title="calls per request"),
        alt.Color("kind:N", title="kind"), tooltip=["kind:N", "items:Q", "count:Q"]).properties(width=520, height=260)
