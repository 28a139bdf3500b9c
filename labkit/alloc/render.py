"""Charts of garbage-collector pauses (Altair, offline like every labkit chart); nothing here measures.

    alloc.pauses_chart(load, pauses)   # requests and collections on one time axis
    alloc.pause_histogram_chart(pauses)               # how long collections take, per generation
    alloc.process_rounds_chart(comparison)            # two processes' P99 and largest pause, round by round
    alloc.memory_growth_chart(frame)                  # memory over iterations, GC on and off
"""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from labkit.errors import BadInputError

__all__ = ["pauses_chart", "pause_histogram_chart", "process_rounds_chart", "memory_growth_chart", "GEN_COLOURS"]

#: one colour per generation, the same in every chart
GEN_COLOURS = alt.Scale(domain=["gen 0", "gen 1", "gen 2"], range=["#9ecae1", "#fd8d3c", "#d62728"])


def _pauses_frame(pauses: Any) -> pd.DataFrame:
    df = pauses.to_frame() if hasattr(pauses, "to_frame") else pauses
    if not {"t_s", "ms", "generation"} <= set(df.columns):
        raise BadInputError("pass a labkit.alloc.GCPauses (or its to_frame(): columns t_s, ms, generation)")
    return df.assign(gen=df["generation"].map(lambda g: f"gen {g}"))


def pauses_chart(load: Any, pauses: Any, *, min_gen: int = 0, width: int = 760,
                          title: str = "Every request's latency, and every GC pause, on one time axis") -> alt.VConcatChart:
    """Two panels sharing the time axis (seconds into the load's measured window): each request as a dot
    (latency from its intended send time, log scale, the run's P99 dashed), and each collection as a bar as
    long as its pause. Collections of generation ``min_gen`` and up are also drawn as vertical lines through
    the requests, so a pause and the requests it delayed line up by eye.

    Args:
        load: a :class:`labkit.load.LoadResult` (from :func:`labkit.alloc.during_load`).
        pauses: the :class:`labkit.alloc.GCPauses` of the same window.
    """
    req = load.to_frame() if hasattr(load, "to_frame") else load
    if not {"t_s", "ns"} <= set(req.columns):
        raise BadInputError("load must be a labkit.load.LoadResult (or its to_frame())")
    req = req.assign(ms=req["ns"] / 1e6)
    pf = _pauses_frame(pauses)
    end = float(max(req["t_s"].max() if len(req) else 0, pf["t_s"].max() if len(pf) else 0)) * 1.01 + 1e-3
    x = alt.X("t_s:Q", title="seconds into the run", scale=alt.Scale(domain=[0, end], nice=False))
    p99 = float(np.percentile(req["ms"], 99)) if len(req) else 0.0
    dots = alt.Chart(req).mark_circle(size=30, opacity=0.8, color="#1f4e79").encode(
        x, alt.Y("ms:Q", scale=alt.Scale(type="log"), title="request latency (ms, log)"),
        tooltip=[alt.Tooltip("t_s:Q", format=".3f", title="sent at (s)"), alt.Tooltip("ms:Q", format=".2f"),
                 "status:Q"])
    rule = alt.Chart(pd.DataFrame({"p99": [p99], "what": [f"P99 {p99:.1f} ms"]})).mark_rule(
        strokeDash=[5, 4], color="black").encode(y="p99:Q", tooltip=["what:N"])
    big = pf[pf["generation"] >= min_gen]
    marks = alt.Chart(big).mark_rule(opacity=0.6, strokeWidth=1.5).encode(
        x, alt.Color("gen:N", scale=GEN_COLOURS, title="GC generation"),
        tooltip=[alt.Tooltip("t_s:Q", format=".3f"), alt.Tooltip("ms:Q", format=".2f", title="pause ms"), "gen:N"])
    top = alt.layer(marks, dots, rule).properties(width=width, height=230)
    bars = alt.Chart(pf).mark_bar(width=3).encode(
        x, alt.Y("ms:Q", title="GC pause (ms)"), alt.Color("gen:N", scale=GEN_COLOURS, title="GC generation"),
        tooltip=[alt.Tooltip("t_s:Q", format=".3f"), alt.Tooltip("ms:Q", format=".3f"), "gen:N", "collected:Q"])
    return alt.vconcat(top, bars.properties(width=width, height=110), title=title).resolve_scale(x="shared")


def pause_histogram_chart(pauses: Any, *, title: str = "How long the collections took, per generation") -> alt.Chart:
    """Pauses binned on a log scale of milliseconds (a bar per bin and generation, stacked)."""
    pf = _pauses_frame(pauses)
    if pf.empty:
        raise BadInputError("no collections to draw: the window held no GC pause (nothing allocated enough "
                            "containers to trigger one)")
    lo = np.floor(np.log10(max(pf["ms"].min(), 1e-3)) * 4) / 4
    hi = np.ceil(np.log10(max(pf["ms"].max(), 1e-3)) * 4) / 4 + 0.25
    edges = 10 ** np.arange(lo, hi + 0.01, 0.25)
    idx = np.clip(np.searchsorted(edges, pf["ms"], side="right") - 1, 0, len(edges) - 2)
    pf = pf.assign(lo=edges[idx], hi=edges[idx + 1])
    agg = pf.groupby(["lo", "hi", "gen"]).size().reset_index(name="collections").sort_values(["lo", "gen"])
    agg["top"] = agg.groupby("lo")["collections"].cumsum()   # stacked by hand: each bar from its base up
    agg["base"] = agg["top"] - agg["collections"]
    return alt.Chart(agg, title=title).mark_rect(stroke="white", strokeWidth=0.5).encode(
        alt.X("lo:Q", scale=alt.Scale(type="log"), title="pause (ms, log scale)"), alt.X2("hi:Q"),
        alt.Y("top:Q", title="collections"), alt.Y2("base:Q"),
        alt.Color("gen:N", scale=GEN_COLOURS, title="GC generation"),
        tooltip=["gen:N", alt.Tooltip("lo:Q", format=".3g", title="from ms"),
                 alt.Tooltip("hi:Q", format=".3g", title="to ms"), "collections:Q"],
    ).properties(width=520, height=200)


def process_rounds_chart(comparison: Any, *, title: str | None = None, tail: int = 99) -> alt.HConcatChart:
    """Round by round, each process's P99 (or the P90: ``tail=90``; left) and its largest GC pause (right), from
    :func:`labkit.alloc.compare_processes` (one result, or the frames of several concatenated) — a
    process-level comparison, labelled so."""
    if tail not in (90, 99):
        raise BadInputError(f"tail must be 90 or 99 (the percentile drawn), got {tail!r}")
    df = comparison.to_frame() if hasattr(comparison, "to_frame") else comparison
    head = title or "Processes under the same load, alternating rounds (a process-level comparison)"
    colour = alt.Color("process:N", title=None)
    left = alt.Chart(df).mark_line(point=True).encode(
        alt.X("round:O", title="round"), alt.Y(f"p{tail}_ms:Q", title=f"P{tail} (ms)"), colour,
        tooltip=["round:O", "process:N", alt.Tooltip(f"p{tail}_ms:Q", format=".2f"),
                 alt.Tooltip("p50_ms:Q", format=".2f")])
    right = alt.Chart(df).mark_bar().encode(
        alt.X("round:O", title="round"), alt.XOffset("process:N"), alt.Y("max_pause_ms:Q", title="largest GC pause (ms)"),
        colour, tooltip=["round:O", "process:N", alt.Tooltip("max_pause_ms:Q", format=".2f"), "pauses:Q", "gen2:Q"])
    return alt.hconcat(left.properties(width=330, height=220), right.properties(width=330, height=220), title=head)


def memory_growth_chart(frame: pd.DataFrame, *, title: str = "Memory held, with the collector on and off") -> alt.Chart:
    """Lines of ``mib`` over ``iteration``, one per ``gc`` setting (columns: iteration, mib, gc)."""
    if not {"iteration", "mib", "gc"} <= set(frame.columns):
        raise BadInputError("memory_growth_chart takes a frame with columns iteration, mib and gc")
    return alt.Chart(frame, title=title).mark_line(point=True).encode(
        alt.X("iteration:Q", title="requests handled"), alt.Y("mib:Q", title="memory held (MiB, tracemalloc)"),
        alt.Color("gc:N", title="collector"), tooltip=["gc:N", "iteration:Q", alt.Tooltip("mib:Q", format=".2f")],
    ).properties(width=520, height=220)
