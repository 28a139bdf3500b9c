"""Rendering of N+1 reports: plain text for terminals and failure messages, an HTML table for notebooks.

Pure functions of a ``Report``; nothing here measures.
"""

from __future__ import annotations

import html
import os
from typing import TYPE_CHECKING

from labkit.stats import format_duration

if TYPE_CHECKING:
    from labkit.nplusone.report import Report

__all__ = ["render_text", "render_html", "summary_line"]


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
