"""The capstone's charts: the waterfall of every step so far, the payoff ranking, micro wins against end to end.

Builders only (nothing here measures); render offline after :func:`labkit.charts.enable_offline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

from labkit.errors import BadInputError

__all__ = ["waterfall_chart", "payoff_chart", "micro_vs_e2e_chart"]

_STAGE_COLORS = {"parse": "#9ecae9", "wait": "#f58518", "db": "#4c78a8", "catalog": "#e45756", "compute": "#72b7b2",
                 "serialize": "#54a24b", "log": "#b279a2", "other": "#bab0ac", "outside": "#d8d8d8"}


_WIDTH, _CHAR_PX = 560, 5.3  # a waterfall row's width, and about one character's width at font size 10


def waterfall_chart(steps: Sequence[Any], title: str = "Where one request's time goes, step by step") -> alt.Chart:
    """One row per step: its median Server-Timing stages laid end to end (``other``: inside the app, no named
    stage; ``outside``: the client's wait beyond the server's total). Each row has its own time axis — the
    steps differ by orders of magnitude — and its client time in the row's title, with the middle half of the
    client's times (P25–P75) drawn as a bar across the row's end: a wide one says the requests disagreed, and
    the row's medians are a rough guide. Each stage's own middle half is in its tooltip.

    Args:
        steps: :class:`labkit.capstone.StageTimes` values, in step order.
    """
    if not steps:
        raise BadInputError("waterfall_chart needs at least one StageTimes (labkit.capstone.stage_times(...))")
    df = pd.concat([w.to_frame() for w in steps], ignore_index=True)
    def ms(v: float) -> str:
        return f"{v:.3f}" if v < 10 else f"{v:.1f}"

    df["row"] = [f"{s} — {ms(c)} ms (middle half {ms(lo)}–{ms(hi)} ms, {n} requests)"
                 for s, c, lo, hi, n in zip(df["step"], df["client_ms"], df["client_p25_ms"], df["client_p75_ms"],
                                            df["n"], strict=True)]
    # a label is written on its bar only where it fits: with the stage's count (db: queries, catalog: calls — a
    # loop of round trips shows itself by them, lab 02), else without it, else not at all (the tooltip has it)
    reach = df.groupby("step")["end_ms"].transform("max").combine(df["client_p75_ms"], max)
    df["px"] = df["ms"] / reach * _WIDTH
    counted = {"db": "queries", "catalog": "calls"}

    def label(st: str, took: float, n: Any, px: float) -> str:
        short = f"{st} {took * 1e3:.0f} µs" if took < 1 else f"{st} {took:.1f} ms"
        full = short + (f" · {n:g} {counted[st]}" if st in counted and n is not None and n == n else "")
        return next((t for t in (full, short) if len(t) * _CHAR_PX + 6 < px), "")

    df["label"] = [label(*r) for r in zip(df["stage"], df["ms"], df["count"], df["px"], strict=True)]
    rows = list(dict.fromkeys(df["row"]))
    stages = list(_STAGE_COLORS)
    axis = "ms since the request arrived (each row its own scale)"
    base = alt.Chart(df).encode(alt.X("start_ms:Q", title=axis),
                                alt.X2("end_ms:Q"))
    bars = base.mark_bar(height=22).encode(
        alt.Color("stage:N", scale=alt.Scale(domain=stages, range=[_STAGE_COLORS[s] for s in stages]),
                  title="stage"),
        tooltip=["step:N", "stage:N", alt.Tooltip("ms:Q", format=".3f", title="median ms"),
                 alt.Tooltip("count:Q", title="median count (queries, calls)"),
                 alt.Tooltip("p25_ms:Q", format=".3f", title="P25 ms"),
                 alt.Tooltip("p75_ms:Q", format=".3f", title="P75 ms")])
    text = base.mark_text(align="left", dx=3, fontSize=10, color="black").encode(text="label:N").transform_filter(
        "datum.label != ''")
    # the client's middle half, once per row (on its last stage's record): a bar with caps across the row's end
    client = alt.Chart(df).transform_filter("datum.stage == 'outside'").encode(
        alt.X("client_p25_ms:Q", title=axis), alt.X2("client_p75_ms:Q"),
        tooltip=["step:N", alt.Tooltip("client_ms:Q", format=".3f", title="client median ms"),
                 alt.Tooltip("client_p25_ms:Q", format=".3f", title="client P25 ms"),
                 alt.Tooltip("client_p75_ms:Q", format=".3f", title="client P75 ms"), "n:Q"])
    spread = client.mark_errorbar(ticks=alt.TickConfig(size=14), thickness=2, color="black")
    return alt.layer(bars, text, spread).properties(width=_WIDTH, height=30).facet(
        row=alt.Row("row:N", sort=rows, title=None, header=alt.Header(labelAngle=0, labelAlign="left",
                                                                      labelOrient="top", labelFontWeight="bold")),
        title=title).resolve_scale(x="independent")


def payoff_chart(frame: pd.DataFrame, title: str = "What each fix bought, and what it cost to build") -> alt.HConcatChart:
    """Fixes ranked by what they bought: bars of ms saved in sequence (and, as ticks, what each is worth in the
    final configuration, left out alone), beside bars of what each cost to build.

    Args:
        frame: one row per fix: ``fix``, ``bought_ms`` and ``cost_lines``; optionally ``worth_at_end_ms``, and
            ``bought_lo_ms``/``bought_hi_ms`` (the step's A/B interval in ms, drawn as a black bar).
    """
    for col in ("fix", "bought_ms", "cost_lines"):
        if col not in frame.columns:
            raise BadInputError(f"payoff_chart needs columns fix, bought_ms, cost_lines (got {list(frame.columns)})")
    df = frame.sort_values("bought_ms", ascending=False)
    order = list(df["fix"])
    y = alt.Y("fix:N", sort=order, title=None)
    saved = "ms saved per request — bars: in sequence (black: its A/B's interval); red ticks: left out alone at the end"
    bought = alt.Chart(df).mark_bar(color="#4c78a8").encode(
        y, alt.X("bought_ms:Q", title=saved),
        tooltip=["fix:N", alt.Tooltip("bought_ms:Q", format=".3f")])
    layers: list[Any] = [bought]
    if {"bought_lo_ms", "bought_hi_ms"} <= set(df.columns):  # what each step's A/B can tell: a tie shows
        layers.append(alt.Chart(df).mark_errorbar(ticks=alt.TickConfig(size=10), color="black").encode(
            y, alt.X("bought_lo_ms:Q", title=saved), alt.X2("bought_hi_ms:Q"),
            tooltip=["fix:N", alt.Tooltip("bought_lo_ms:Q", format=".3f"), alt.Tooltip("bought_hi_ms:Q", format=".3f")]))
    if "worth_at_end_ms" in df.columns:
        layers.append(alt.Chart(df).mark_tick(color="#e45756", thickness=5, size=28).encode(
            y, alt.X("worth_at_end_ms:Q", title=saved), tooltip=["fix:N", alt.Tooltip("worth_at_end_ms:Q", format=".3f",
                                                                          title="worth at the end (ms)")]))
    cost = alt.Chart(df).mark_bar(color="#bab0ac").encode(
        alt.Y("fix:N", sort=order, title=None, axis=None),
        alt.X("cost_lines:Q", title="cost to build (lines of source)"), tooltip=["fix:N", "cost_lines:Q"])
    return alt.hconcat(alt.layer(*layers).properties(width=400, height=32 * len(df)),
                       cost.properties(width=160, height=32 * len(df)), title=title)


def micro_vs_e2e_chart(frame: pd.DataFrame, e2e_ms: float,
                       title: str = "The sum of the micro wins against the end-to-end gain") -> alt.Chart:
    """Two bars: the micro-benchmarked saving of every fix stacked, and the saving measured end to end.

    Args:
        frame: one row per fix: ``fix`` and ``micro_ms`` (the saving its micro-benchmark shows, per request).
        e2e_ms: the end-to-end saving per request (baseline median minus all-fixes median).
    """
    for col in ("fix", "micro_ms"):
        if col not in frame.columns:
            raise BadInputError(f"micro_vs_e2e_chart needs columns fix, micro_ms (got {list(frame.columns)})")
    micro = frame.assign(bar="sum of micro wins")[["bar", "fix", "micro_ms"]].rename(columns={"micro_ms": "ms"})
    e2e = pd.DataFrame([{"bar": "measured end to end", "fix": "end to end", "ms": e2e_ms}])
    df = pd.concat([micro, e2e], ignore_index=True)
    return alt.Chart(df, title=title).mark_bar().encode(
        alt.Y("bar:N", title=None), alt.X("ms:Q", title="ms saved per request"),
        alt.Color("fix:N", title="fix"), alt.Order("fix:N"),
        tooltip=["bar:N", "fix:N", alt.Tooltip("ms:Q", format=".3f")]).properties(width=520, height=90)
