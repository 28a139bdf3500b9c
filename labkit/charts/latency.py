"""Charts of the latency labs: the latency ladder and curve, napkin against measured stages, a request's calls as a
waterfall, and the N+1 sweeps over distance and items."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from labkit.charts.samples import _frame
from labkit.errors import BadInputError

__all__ = ["latency_ladder", "latency_curve", "napkin_stages", "waterfall", "distance_sweep", "latency_vs_items",
           "queries_vs_items"]


_LADDER_TICKS = [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7]
_LADDER_LABELS = ("datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' ms' : "
                  "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + ' µs' : "
                  "format(datum.value, '~g') + ' ns'")


def latency_ladder(table: Any, references: pd.DataFrame | None = None,
                   title: str = "The latency ladder, measured here (log scale)") -> alt.LayerChart:
    """The latency table as a ladder: one row per operation on a log axis from 1 ns to 10 ms.

    Each measured row is a dot at its median with a bar from P10 to P90. With ``references`` (the frame of
    :func:`labkit.latency.references`), the published figures for the same operation are drawn beside it
    as hollow marks, one shape per source, so "measured vs Norvig 2001" is read off one line. Values outside
    1 ns … 10 ms are pinned to the edge; rows with no measurement (or a median ≤ 0) are left out.
    """
    df = _frame(table)
    for col in ("key", "label", "median_ns", "p10_ns", "p90_ns"):
        if col not in df.columns:
            raise BadInputError(f"latency_ladder takes a LatencyTable or its to_frame(); column {col!r} is missing")
    df = df[np.isfinite(df["median_ns"]) & (df["median_ns"] > 0)].copy()
    df["p10_ns"] = df["p10_ns"].clip(lower=0.5)
    df["source"] = "measured here"
    order = list(df.sort_values("median_ns")["label"])
    scale = alt.Scale(type="log", domain=[1, 1e7], clamp=True)
    axis = alt.Axis(values=_LADDER_TICKS, labelExpr=_LADDER_LABELS, title="time per operation (log scale)")
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    base = alt.Chart(df)
    spread = base.mark_rule(opacity=0.5).encode(y, alt.X("p10_ns:Q", scale=scale, axis=axis), alt.X2("p90_ns:Q"))
    dots = base.mark_circle(size=70, color="black").encode(
        y, alt.X("median_ns:Q", scale=scale, axis=axis),
        tooltip=["label:N", alt.Tooltip("median_ns:Q", format=".3~s", title="median (ns)"), "note:N"])
    layers = [spread, dots]
    if references is not None and len(references):
        refs = references[references["probe_key"].isin(df["key"])].merge(df[["key", "label"]], left_on="probe_key",
                                                                           right_on="key")
        refs = refs.assign(ref=[f"{src} {yr}" if pd.notna(yr) else str(src)
                                for src, yr in zip(refs["source"], refs["year"], strict=True)])
        layers.append(alt.Chart(refs).mark_point(size=80, filled=False, strokeWidth=2).encode(
            y, alt.X("value_ns:Q", scale=scale, axis=axis),
            alt.Shape("ref:N", title="reference", legend=alt.Legend(orient="bottom", columns=3, labelLimit=260)),
            alt.Color("ref:N", title="reference", legend=alt.Legend(orient="bottom", columns=3, labelLimit=260)),
            tooltip=["ref:N", "operation:N", alt.Tooltip("value_ns:Q", format=".3~s", title="reference (ns)")]))
    return alt.layer(*layers, title=title).properties(width=560, height=max(240, 26 * len(order)))


def latency_curve(table: Any, title: str = "Dependent-load latency vs working-set size") -> alt.LayerChart:
    """The pointer-chase curve of a :class:`labkit.latency.LatencyTable`: ns per load against working set.

    Both axes are logarithmic; the steps are where the working set outgrows a cache level. Each point is the
    median, with a bar from P10 to P90. Nothing is drawn for a curve measured as unavailable (no numba).
    """
    df = table.curve_frame() if hasattr(table, "curve_frame") else _frame(table)
    if "working_set_bytes" not in df.columns:
        raise BadInputError("latency_curve takes a LatencyTable (or its curve_frame())")
    df = df[np.isfinite(df["median_ns"])].copy()
    df["kib"] = df["working_set_bytes"] / 1024
    x = alt.X("kib:Q", scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(labelExpr="datum.value >= 1024 ? format(datum.value / 1024, '~g') + ' MiB' : "
                                      "format(datum.value, '~g') + ' KiB'", title="working set (log scale)",
                            values=[16 * 4**i for i in range(10)]))
    y = alt.Scale(type="log")
    base = alt.Chart(df)
    line = base.mark_line(point=True).encode(x, alt.Y("median_ns:Q", scale=y, title="ns per dependent load (log)"),
                                             tooltip=["label:N", alt.Tooltip("median_ns:Q", format=".3~s")])
    bars = base.mark_rule(opacity=0.4).encode(x, alt.Y("p10_ns:Q", scale=y), alt.Y2("p90_ns:Q"))
    return alt.layer(bars, line, title=title).properties(width=520, height=260)


def napkin_stages(frame: pd.DataFrame, title: str = "Where the time goes: napkin vs measured, stage by stage"
                  ) -> alt.Chart:
    """Stacked bars, one per (variant, predicted or measured): milliseconds per stage, so the stage whose
    estimate was off stands out.

    Args:
        frame: columns ``variant`` (e.g. naive/batched), ``kind`` (e.g. "napkin", "measured"), ``stage`` and
            ``ms``; stages are stacked in the order they first appear.
    """
    for col in ("variant", "kind", "stage", "ms"):
        if col not in frame.columns:
            raise BadInputError(f"napkin_stages needs columns variant, kind, stage, ms (got {list(frame.columns)})")
    df = frame.assign(bar=frame["variant"].astype(str) + " · " + frame["kind"].astype(str))
    stages = list(dict.fromkeys(df["stage"]))
    df["rank"] = df["stage"].map(stages.index)
    return alt.Chart(df, title=title).mark_bar().encode(
        alt.Y("bar:N", title=None, sort=list(dict.fromkeys(df["bar"])), axis=alt.Axis(labelLimit=260)),
        alt.X("ms:Q", title="milliseconds (stacked)"),
        alt.Color("stage:N", sort=stages, title="stage"), alt.Order("rank:Q"),
        tooltip=["variant:N", "kind:N", "stage:N", alt.Tooltip("ms:Q", format=".3f")],
    ).properties(width=520, height=34 * df["bar"].nunique())


def waterfall(frame: pd.DataFrame, title: str = "One request, call by call") -> alt.VConcatChart:
    """One bar per query or remote call, from its start to its end, a row per call in the order issued: one
    panel per variant on one shared time axis, so the long staircase and the short one are compared as is.

    Args:
        frame: one row per call with ``variant``, ``start_ms``, ``end_ms`` and ``kind`` (sql/http); e.g. the
            ``to_frame()`` of a ``labkit.nplusone`` report with times in ms and a ``variant`` column.
    """
    for col in ("variant", "start_ms", "end_ms", "kind"):
        if col not in frame.columns:
            raise BadInputError(f"waterfall needs columns variant, start_ms, end_ms, kind (got {list(frame.columns)})")
    end = float(frame["end_ms"].max()) or 1.0
    panels = []
    for variant, g in frame.groupby("variant", sort=False):
        g = g.sort_values("start_ms").assign(call=range(1, len(g) + 1))
        g = g.assign(next_call=g["call"] + 0.9)
        panels.append(alt.Chart(g, title=f"{variant}: {len(g)} calls, {g['end_ms'].max():.2f} ms").mark_rect().encode(
            alt.X("start_ms:Q", scale=alt.Scale(domain=[0, end]), title="time since the request started (ms)"),
            alt.X2("end_ms:Q"),
            alt.Y("call:Q", scale=alt.Scale(reverse=True, domain=[0, len(g) + 1]), title="call, in order"),
            alt.Y2("next_call:Q"), alt.Color("kind:N", title="kind", scale=alt.Scale(domain=["sql", "http"])),
            tooltip=["kind:N", "call:Q", alt.Tooltip("start_ms:Q", format=".3f"),
                     alt.Tooltip("end_ms:Q", format=".3f")] + (["shape:N"] if "shape" in g.columns else []),
        ).properties(width=520, height=min(260, max(50, 3 * len(g)))))
    return alt.vconcat(*panels, title=title).resolve_scale(x="shared")


def distance_sweep(frame: pd.DataFrame, title: str = "The fix is worth more the farther the dependency"
                   ) -> alt.LayerChart:
    """Latency against the emulated distance to a dependency, one line per variant: measured medians as
    solid lines with points, the napkin's prediction dashed.

    Args:
        frame: columns ``delay_ms``, ``variant``, ``ms`` and ``kind`` ("measured" per request, or "napkin").
    """
    for col in ("delay_ms", "variant", "ms", "kind"):
        if col not in frame.columns:
            raise BadInputError(f"distance_sweep needs columns delay_ms, variant, ms, kind (got {list(frame.columns)})")
    df = frame.groupby(["kind", "variant", "delay_ms"], as_index=False)["ms"].median()
    x = alt.X("delay_ms:Q", title="emulated delay per catalog call (ms)")
    y = alt.Y("ms:Q", title="request latency, median (ms)")
    colour = alt.Color("variant:N", title="variant")
    tip = ["variant:N", "kind:N", "delay_ms:Q", alt.Tooltip("ms:Q", format=".2f")]
    measured = alt.Chart(df[df["kind"] == "measured"]).mark_line(point=True).encode(x, y, colour, tooltip=tip)
    napkin = alt.Chart(df[df["kind"] != "measured"]).mark_line(strokeDash=[5, 4]).encode(x, y, colour, tooltip=tip)
    return alt.layer(napkin, measured, title=title + " (dashed: napkin)").properties(width=520, height=300)


def latency_vs_items(frame: pd.DataFrame, title: str = "Export latency against the number of items") -> alt.LayerChart:
    """Each request as a dot (latency against item count) with the median per item count as a line.

    Args:
        frame: one row per request with columns ``items`` (int), ``ms`` (latency) and optionally ``variant``.
    """
    for col in ("items", "ms"):
        if col not in frame.columns:
            raise BadInputError(f"latency_vs_items needs columns 'items' and 'ms' (got {list(frame.columns)})")
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


def queries_vs_items(frame: pd.DataFrame, title: str = "Queries and catalog calls per request") -> alt.Chart:
    """Bars of SQL queries and catalog calls per request against item count (from Server-Timing counts).

    Args:
        frame: one row per request with ``items`` and the count columns ``sql`` and ``catalog``.
    """
    for col in ("items", "sql", "catalog"):
        if col not in frame.columns:
            raise BadInputError(f"queries_vs_items needs columns items, sql, catalog (got {list(frame.columns)})")
    df = frame.drop_duplicates("items").melt(id_vars=["items"], value_vars=["sql", "catalog"], var_name="kind",
                                             value_name="count")
    return alt.Chart(df, title=title).mark_line(point=True).encode(
        alt.X("items:Q", title="items in the export"), alt.Y("count:Q", title="calls per request"),
        alt.Color("kind:N", title="kind"), tooltip=["kind:N", "items:Q", "count:Q"]).properties(width=520, height=260)
