"""Charts for lab 04 (data layout). Pure: each takes measured data and returns an Altair chart.

Call ``labkit.charts.enable_offline()`` once per notebook first (nothing here fetches anything).
"""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from labkit.errors import BadInputError
from labkit.layout.records import LAYOUTS, OPERATIONS, PAYLOAD_BYTES

__all__ = ["per_element_chart", "bytes_chart", "relative_chart", "quote_latency_chart", "ratios_chart"]

_PALETTE = ["#c0392b", "#e67e22", "#d4ac0d", "#8e6c3a", "#7f8c8d", "#2e86c1", "#1e8449", "#7d3c98"]
_LAYOUT_COLOUR = alt.Scale(domain=list(LAYOUTS), range=_PALETTE)


def _frame(data: Any, needs: tuple[str, ...], what: str) -> pd.DataFrame:
    df = data.to_frame() if hasattr(data, "to_frame") else data
    if not isinstance(df, pd.DataFrame) or any(c not in df.columns for c in needs):
        cols = list(df.columns) if isinstance(df, pd.DataFrame) else type(df).__name__
        raise BadInputError(f"{what} needs a LayoutSweep (or a frame with columns {', '.join(needs)}); got {cols}")
    return df


def _floor(values: pd.Series) -> float:
    """Where log-scale bars start: a power of ten below the smallest value (a bar from zero has no length)."""
    v = pd.to_numeric(values, errors="coerce")
    v = v[np.isfinite(v) & (v > 0)]
    return float(10 ** np.floor(np.log10(min(v.min(), 1.0)))) / 2 if len(v) else 0.1


def per_element_chart(sweep: Any, title: str = "Time per element against the number of records (log–log)") -> Any:
    """ns per element against n, one line per layout, one panel per operation; both axes logarithmic.

    Falling lines are fixed costs being spread over more elements; a line that rises at large n has
    outgrown a cache. The vertical gap between two lines is their ratio (log scale: equal gaps, equal ratios).
    """
    df = _frame(sweep, ("layout", "operation", "n", "ns_per_element"), "per_element_chart")
    df = df[np.isfinite(df["ns_per_element"])]
    if df.empty:
        raise BadInputError("per_element_chart: nothing measured yet — run a sweep (or the panel) first")
    ops = [o for o in OPERATIONS if o in set(df["operation"])]
    base = alt.Chart(df).encode(
        alt.X("n:Q", scale=alt.Scale(type="log"), title="records (log)"),
        alt.Y("ns_per_element:Q", scale=alt.Scale(type="log"), title="ns per element (log)"),
        alt.Color("layout:N", scale=_LAYOUT_COLOUR, title="layout", legend=alt.Legend(labelLimit=200)),
        tooltip=["layout:N", "operation:N", alt.Tooltip("n:Q", format=","),
                 alt.Tooltip("ns_per_element:Q", format=".3~g", title="ns/element")])
    chart = base.mark_line(point=True).properties(width=260, height=240)
    return chart.facet(column=alt.Column("operation:N", sort=ops, title=None), title=title)


def bytes_chart(sweep: Any, title: str = "Memory per record (measured), against the 40 bytes of payload") -> Any:
    """Bars of measured bytes per record per layout, with a rule at the payload (five int64 fields)."""
    if hasattr(sweep, "bytes_per_record") and isinstance(sweep.bytes_per_record, dict):
        df = pd.DataFrame({"layout": list(sweep.bytes_per_record), "bytes": list(sweep.bytes_per_record.values())})
    else:
        df = _frame(sweep, ("layout", "bytes_per_record"), "bytes_chart").rename(columns={"bytes_per_record": "bytes"})
        df = df.drop_duplicates("layout")[["layout", "bytes"]]
    if df.empty:
        raise BadInputError("bytes_chart: no bytes per record measured (sweep(..., measure_bytes=True))")
    order = [x for x in LAYOUTS if x in set(df["layout"])]
    bars = alt.Chart(df).mark_bar().encode(
        alt.Y("layout:N", sort=order, title=None), alt.X("bytes:Q", title="bytes per record"),
        alt.Color("layout:N", scale=_LAYOUT_COLOUR, legend=None),
        tooltip=["layout:N", alt.Tooltip("bytes:Q", format=".1f")])
    text = bars.mark_text(align="left", dx=3).encode(text=alt.Text("bytes:Q", format=".0f"))
    rule = alt.Chart(pd.DataFrame({"bytes": [PAYLOAD_BYTES]})).mark_rule(strokeDash=[4, 3]).encode(x="bytes:Q")
    return alt.layer(bars, text, rule, title=title).properties(width=480, height=220)


def relative_chart(sweep: Any, n: int, title: str | None = None) -> Any:
    """Time per element at ``n`` as a multiple of the ``columns`` layout's, per operation (log scale)."""
    rel = sweep.relative(n)
    df = rel.reset_index().melt(id_vars="layout", var_name="operation", value_name="times")
    order = [x for x in LAYOUTS if x in set(df["layout"])]
    df["floor"] = _floor(df["times"])
    bars = alt.Chart(df).mark_bar().encode(
        alt.Y("layout:N", sort=order, title=None),
        alt.X("times:Q", scale=alt.Scale(type="log"), title="× the columns layout's time per element (log)"),
        alt.X2("floor:Q"), alt.Color("layout:N", scale=_LAYOUT_COLOUR, legend=None),
        tooltip=["layout:N", "operation:N", alt.Tooltip("times:Q", format=".3~g")])
    rule = alt.Chart(pd.DataFrame({"times": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(x="times:Q")
    ops = [o for o in OPERATIONS if o in set(df["operation"])]
    return (alt.layer(bars, rule, data=df).properties(width=240, height=200)
            .facet(column=alt.Column("operation:N", sort=ops, title=None),
                   title=title or f"How many times slower than NumPy columns, at {n:,} records"))


def quote_latency_chart(frame: pd.DataFrame, guess_lines: float | None = None,
                        title: str = "/quote latency against lines priced (log–log), P50 per size",
                        value: str = "ms", axis: str = "latency seen by the client, ms (log)") -> Any:
    """P50 latency per (lines, layout) as lines, each request as a faint dot; both axes logarithmic.

    Args:
        frame: one row per request with ``lines``, ``layout`` (``aos``/``soa``) and the ``value`` column.
        guess_lines: the learner's guessed crossover, drawn as a dashed vertical rule (None: not drawn).
        value: the column to draw (``ms`` as the client measured it, or ``total ms`` from Server-Timing).
        axis: the y axis title.
    """
    for col in ("lines", value, "layout"):
        if col not in frame.columns:
            raise BadInputError(f"quote_latency_chart needs columns lines, {value}, layout (got {list(frame.columns)})")
    df = frame[frame["lines"] > 0].rename(columns={value: "value"})
    x = alt.X("lines:Q", scale=alt.Scale(type="log"), title="order lines priced (log)")
    colour = alt.Color("layout:N", title="layout", scale=alt.Scale(domain=["aos", "soa"], range=["#c0392b", "#1e8449"]),
                       legend=alt.Legend(orient="top-left"))  # inside the plot: survives side-by-side charts
    base = alt.Chart(df)
    dots = base.mark_circle(opacity=0.25, size=20).encode(
        x, alt.Y("value:Q", scale=alt.Scale(type="log"), title=axis), colour)
    p50 = base.mark_line(point=True).encode(
        x, alt.Y("median(value):Q", scale=alt.Scale(type="log")), colour,
        tooltip=["layout:N", "lines:Q", alt.Tooltip("median(value):Q", format=".3f", title="P50 ms")])
    layers = [dots, p50]
    if guess_lines is not None:
        g = pd.DataFrame({"lines": [float(guess_lines)], "label": ["your guess"]})
        rule = alt.Chart(g).mark_rule(strokeDash=[5, 4], color="#555").encode(x="lines:Q")
        layers += [rule, alt.Chart(g).mark_text(align="left", dx=4, dy=-120, color="#555").encode(
            x="lines:Q", text="label:N")]
    return alt.layer(*layers, title=title).properties(width=420, height=280)


def ratios_chart(frame: pd.DataFrame, title: str = "Your guess, the model, the measurement (ratios, log scale)") -> Any:
    """Grouped bars of ratios per experiment: ``source`` is e.g. "your guess", "model", "measured".

    Args:
        frame: columns ``experiment``, ``source`` and ``ratio`` (rows with a missing ratio are skipped, so a
            skipped guess simply has no bar); optional ``lo``/``hi`` draw an interval on measured bars and,
            behind the experiment's bars, the band that confirms a prediction (:func:`labkit.learner.record.judge`).
    """
    for col in ("experiment", "source", "ratio"):
        if col not in frame.columns:
            raise BadInputError(f"ratios_chart needs columns experiment, source, ratio (got {list(frame.columns)})")
    df = frame.copy()
    df["ratio"] = pd.to_numeric(df["ratio"], errors="coerce")
    floor = _floor(pd.concat([df["ratio"], pd.to_numeric(df.get("lo", df["ratio"]), errors="coerce")]))
    df["floor"] = floor
    df["label"] = [f"{r:.2f}".rstrip("0").rstrip(".") if np.isfinite(r) else "skipped" for r in df["ratio"]]
    df["at"] = df["ratio"].where(np.isfinite(df["ratio"]), floor)  # a skipped guess: its label at the floor
    known = ["your guess", "model", "measured"]
    sources = [s for s in known if s in set(df["source"])] + [s for s in dict.fromkeys(df["source"]) if s not in known]
    y = alt.Y("source:N", sort=sources, title=None)
    x = alt.X("ratio:Q", scale=alt.Scale(type="log"), title="ratio (log)")
    colour = alt.Color("source:N", title=None, scale=alt.Scale(domain=sources, range=["#7d3c98", "#e67e22", "#2e86c1",
                                                                                      "#7f8c8d"][: len(sources)]))
    base = alt.Chart(df)
    layers = [base.transform_filter("isFinite(datum.ratio)").mark_bar().encode(
                  x, alt.X2("floor:Q"), y, colour,
                  tooltip=["experiment:N", "source:N", alt.Tooltip("ratio:Q", format=".3~g")]),
              base.mark_text(align="left", dx=3).encode(alt.X("at:Q", scale=alt.Scale(type="log")), y,
                                                        text="label:N")]
    if {"lo", "hi"} <= set(df.columns):
        from labkit.learner.record import NAPKIN_TOLERANCE

        # behind the bars: the range a prediction must lie in to be confirmed (the interval widened ±25 %)
        df["band_lo"] = pd.to_numeric(df["lo"], errors="coerce") / (1 + NAPKIN_TOLERANCE)
        df["band_hi"] = pd.to_numeric(df["hi"], errors="coerce") * (1 + NAPKIN_TOLERANCE)
        layers.insert(0, base.transform_filter("isFinite(datum.band_lo)").mark_rect(color="#2ca02c", opacity=0.2)
                      .encode(alt.X("band_lo:Q", scale=alt.Scale(type="log")), alt.X2("band_hi:Q")))
        layers.append(base.transform_filter("isFinite(datum.lo)").mark_rule().encode(
            alt.X("lo:Q", scale=alt.Scale(type="log")), alt.X2("hi:Q"), y))
        title = alt.TitleParams(title, subtitle=f"green: where a prediction is confirmed (the measured interval "
                                f"widened ±{NAPKIN_TOLERANCE:.0%})")
    return (alt.layer(*layers, data=df).properties(width=380, height=80)
            .facet(row=alt.Row("experiment:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
                   title=title))
