"""How the latency table looks: as text, as an HTML table, and as charts — the measured ladder (with published
references), the pointer-chase curve, and napkin math against the measured stages.

Pure functions of the values (nothing here measures). The charts import Altair when first drawn, so printing a
table never pays for it; render them offline after :func:`labkit.charts.enable_offline`.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np

from labkit.errors import BadInputError
from labkit.measure.stats import format_duration

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from labkit.latency.ladder import LatencyTable

__all__ = ["format_table", "table_html", "ladder_chart", "working_set_chart", "napkin_chart"]


def format_table(t: LatencyTable) -> str:
    """The table as aligned text: label, median, p10–p90, and notes underneath their row."""
    w = max([48, *(len(r.label) for r in t.rows)])  # the label column fits the longest label
    lines = [f"{'operation':<{w}} {'median':>10} {'p10 – p90':>23}"]
    for r in t.rows:
        if r.available:
            span = f"{format_duration(r.percentile_ns(10))} – {format_duration(r.percentile_ns(90))}"
            lines.append(f"{r.label:<{w}} {format_duration(r.median_ns):>10} {span:>23}")
        else:
            lines.append(f"{r.label:<{w}} {'n/a':>10}")
        if r.note:
            lines.append(f"    note: {r.note}")
    bw = next((r for r in t.rows if r.key == "mem_seq_read_1mb" and r.available), None)
    if bw is not None:
        lines.append(f"(sequential memory read: {bw.extra.get('gb_per_s', float('nan')):.1f} GB/s, one core)")
    lines.append(f"{'quick' if t.quick else 'full'} run, {t.elapsed_s:.1f} s")
    lines += [f"warning: {w}" for w in t.warnings]
    return "\n".join(lines)


def table_html(t: LatencyTable) -> str:
    """The table as HTML (a notebook's view of a LatencyTable): label, median, P10, P90, n, note; warnings under it."""
    df = t.to_frame()
    df["P10"], df["P90"] = df["p10_ns"].map(format_duration), df["p90_ns"].map(format_duration)
    html = df[["label", "median", "P10", "P90", "n", "note"]].to_html(index=False)
    return html + "".join(f"<p><b>warning:</b> {escape(w)}</p>" for w in t.warnings)


_LADDER_TICKS = [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]
_LADDER_LABELS = ("datum.value >= 1e9 ? format(datum.value / 1e9, '~g') + ' s' : "
                  "datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' ms' : "
                  "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + ' µs' : "
                  "format(datum.value, '~g') + ' ns'")


def ladder_chart(table: Any, references: pd.DataFrame | None = None,
                   title: str = "The latency ladder, measured here (log scale)") -> alt.LayerChart:
    """The latency table as a ladder: one row per operation on a log axis from 1 ns to 1 s.

    Each measured row is a dot at its median with a bar from P10 to P90. With ``references`` (the frame of
    :func:`labkit.latency.references`), the published figures for the same operation are drawn beside it
    as hollow marks, one shape per source, so "measured vs Norvig 2001" is read off one line. Values outside
    1 ns … 1 s (a process spawn is tens of ms) are pinned to the edge; rows with no measurement (or a median ≤ 0) are left out.
    """
    import altair as alt
    import pandas as pd

    from labkit.charts.samples import as_frame

    df = as_frame(table)
    for col in ("key", "label", "median_ns", "p10_ns", "p90_ns"):
        if col not in df.columns:
            raise BadInputError(f"ladder_chart takes a LatencyTable or its to_frame(); column {col!r} is missing")
    df = df[np.isfinite(df["median_ns"]) & (df["median_ns"] > 0)].copy()
    df["p10_ns"] = df["p10_ns"].clip(lower=0.5)
    df["source"] = "measured here"
    order = list(df.sort_values("median_ns")["label"])
    scale = alt.Scale(type="log", domain=[1, 1e9], clamp=True)
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


def working_set_chart(table: Any, title: str = "Dependent-load latency vs working-set size") -> alt.LayerChart:
    """The pointer-chase curve of a :class:`labkit.latency.LatencyTable`: ns per load against working set.

    Both axes are logarithmic; the steps are where the working set outgrows a cache level. Each point is the
    median, with a bar from P10 to P90. Nothing is drawn for a curve measured as unavailable (no numba).
    """
    import altair as alt

    from labkit.charts.samples import as_frame

    df = table.curve_frame() if hasattr(table, "curve_frame") else as_frame(table)
    if "working_set_bytes" not in df.columns:
        raise BadInputError("working_set_chart takes a LatencyTable (or its curve_frame())")
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


def napkin_chart(frame: pd.DataFrame, title: str = "Where the time goes: napkin vs measured, stage by stage"
                  ) -> alt.Chart:
    """Stacked bars, one per (variant, predicted or measured): milliseconds per stage, so the stage whose
    estimate was off stands out.

    Args:
        frame: columns ``variant`` (e.g. naive/batched), ``kind`` (e.g. "napkin", "measured"), ``stage`` and
            ``ms``; stages are stacked in the order they first appear.
    """
    import altair as alt

    for col in ("variant", "kind", "stage", "ms"):
        if col not in frame.columns:
            raise BadInputError(f"napkin_chart needs columns variant, kind, stage, ms (got {list(frame.columns)})")
    df = frame.assign(bar=frame["variant"].astype(str) + " · " + frame["kind"].astype(str))
    stages = list(dict.fromkeys(df["stage"]))
    df["rank"] = df["stage"].map(stages.index)
    return alt.Chart(df, title=title).mark_bar().encode(
        alt.Y("bar:N", title=None, sort=list(dict.fromkeys(df["bar"])), axis=alt.Axis(labelLimit=260)),
        alt.X("ms:Q", title="milliseconds (stacked)"),
        alt.Color("stage:N", sort=stages, title="stage"), alt.Order("rank:Q"),
        tooltip=["variant:N", "kind:N", "stage:N", alt.Tooltip("ms:Q", format=".3f")],
    ).properties(width=520, height=34 * df["bar"].nunique())
