"""Charts of measured samples: distributions, percentiles, A/B comparisons, predicted vs measured, load runs
over time and rate sweeps."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from labkit.errors import BadInputError

__all__ = ["distribution", "cdf", "percentile_bars", "ab", "predicted_vs_measured", "load_timeline", "knee_chart",
           "UNIT_AXIS"]


UNIT_AXIS = "time (µs)"


def _frame(result: Any) -> pd.DataFrame:
    if isinstance(result, pd.DataFrame):
        return result
    if hasattr(result, "to_frame"):
        return result.to_frame()
    raise BadInputError(f"charts take a labkit result or its to_frame() DataFrame, got {type(result).__name__}")


def _measured(df: pd.DataFrame) -> pd.DataFrame:
    if "ns" not in df.columns:
        raise BadInputError(f"this frame has no 'ns' column (columns: {list(df.columns)}): pass a result's to_frame()")
    if "phase" in df.columns:
        df = df[df["phase"] == "measured"]
    df = df.copy()
    df["us"] = df["ns"] / 1e3
    if "name" not in df.columns:
        df["name"] = "samples"
    return df


def distribution(*results: Any, bins: int = 40, title: str = "Where the samples fall") -> alt.Chart:
    """A histogram of each result's samples, one colour per name, so the spread and outliers show."""
    df = pd.concat([_measured(_frame(r)) for r in results], ignore_index=True)
    return alt.Chart(df, title=title).mark_bar(opacity=0.6).encode(
        alt.X("us:Q", bin=alt.Bin(maxbins=bins), title=UNIT_AXIS),
        alt.Y("count():Q", stack=None, title="samples"),
        alt.Color("name:N", title=None),
        tooltip=["name:N", "count():Q"],
    ).properties(width=520, height=220)


def cdf(*results: Any, log_x: bool = False, title: str = "Cumulative distribution (read percentiles off it)") -> alt.Chart:
    """Empirical CDF of each result's samples: the x value at height 0.99 is the P99."""
    frames = []
    for r in results:
        df = _measured(_frame(r))
        for name, g in df.groupby("name", sort=False):
            v = np.sort(g["us"].to_numpy())
            frames.append(pd.DataFrame({"name": name, "us": v, "fraction": np.arange(1, v.size + 1) / v.size}))
    data = pd.concat(frames, ignore_index=True)
    scale = alt.Scale(type="log", nice=False) if log_x else alt.Scale(zero=False)
    return alt.Chart(data, title=title).mark_line(interpolate="step-after").encode(
        alt.X("us:Q", scale=scale, title=UNIT_AXIS),
        alt.Y("fraction:Q", title="fraction of samples ≤ x", scale=alt.Scale(domain=[0, 1])),
        alt.Color("name:N", title=None),
        tooltip=["name:N", alt.Tooltip("us:Q", format=".3f"), alt.Tooltip("fraction:Q", format=".3f")],
    ).properties(width=520, height=260)


def percentile_bars(*results: Any, qs: tuple[float, ...] = (50, 90, 99), log_y: bool = False,
                    title: str = "Percentiles — the mean hides the tail") -> alt.Chart:
    """Grouped bars of P50/P90/P99 (and the mean, for contrast) per result; ``log_y`` when they differ by 100×."""
    rows = []
    for r in results:
        df = _measured(_frame(r))
        for name, g in df.groupby("name", sort=False):
            v = g["us"].to_numpy()
            rows.append({"name": name, "stat": "mean", "us": float(np.mean(v)), "order": 0})
            for i, q in enumerate(qs, 1):
                rows.append({"name": name, "stat": f"P{q:g}", "us": float(np.percentile(v, q)), "order": i})
    data = pd.DataFrame(rows)
    extra: dict[str, Any] = {}
    if log_y:
        # a log axis has no zero: bars grow from a floor below the smallest value, or Vega draws nothing
        floor = 10 ** np.floor(np.log10(max(data["us"].min(), 1e-3)))
        extra["y2"] = alt.datum(floor)
    return alt.Chart(data, title=title).mark_bar().encode(
        alt.X("stat:N", sort=alt.SortField("order"), title=None),
        alt.Y("us:Q", title=UNIT_AXIS + (", log scale" if log_y else ""),
              scale=alt.Scale(type="log") if log_y else alt.Scale()),
        alt.Color("stat:N", sort=alt.SortField("order"), legend=None),
        alt.Column("name:N", title=None),
        tooltip=["name:N", "stat:N", alt.Tooltip("us:Q", format=".3f")],
        **extra,
    ).properties(width=160, height=220)


def ab(comparison: Any, title: str | None = None) -> alt.LayerChart:
    """An A/B picture: each round's samples as dots, the medians as ticks, and the ratio's interval in the title."""
    df = _measured(comparison.to_frame())
    lo, hi = comparison.ci
    title = title or f"{comparison.verdict}: ratio {comparison.ratio:.3f} ({comparison.ci_label} {lo:.3f}–{hi:.3f})"
    base = alt.Chart(df, title=title)
    dots = base.mark_circle(size=28, opacity=0.5).encode(
        alt.Y("name:N", title=None, sort=[comparison.baseline_name, comparison.candidate_name]),
        alt.X("us:Q", title=UNIT_AXIS, scale=alt.Scale(zero=False)),
        alt.Color("role:N", legend=None),
        tooltip=["name:N", "round:Q", alt.Tooltip("us:Q", format=".3f")],
    )
    medians = base.mark_tick(thickness=3, size=26, color="black").encode(
        alt.Y("name:N", sort=[comparison.baseline_name, comparison.candidate_name]),
        alt.X("median(us):Q"),
    )
    return (dots + medians).properties(width=520, height=120)


def predicted_vs_measured(frame: pd.DataFrame, title: str = "Predicted vs measured: the time saved (1 − ratio)"
                          ) -> alt.Chart:
    """Grouped bars of the **effect**: for each ``experiment``, the time each ``kind`` (e.g. "your guess",
    "model", "measured") says the candidate saves, ``1 − ratio`` (50 % = twice as fast; negative = slower) —
    the scale on which :func:`labkit.record.judge` compares a prediction with a measurement. The measured
    interval is drawn as a rule when the frame has ``ratio_lo`` and ``ratio_hi`` (a comparison's ``ci``).

    Args:
        frame: columns ``experiment``, ``kind`` and ``ratio`` (candidate/baseline time); optionally
            ``ratio_lo``, ``ratio_hi``.
    """
    for col in ("experiment", "kind", "ratio"):
        if col not in frame.columns:
            raise BadInputError(f"predicted_vs_measured needs columns experiment, kind, ratio (got {list(frame.columns)})")
    df = frame.dropna(subset=["ratio"]).copy()
    df["saving"] = 1 - df["ratio"].astype(float)
    has_ci = {"ratio_lo", "ratio_hi"} <= set(df.columns)
    if has_ci:
        df["saving_lo"], df["saving_hi"] = 1 - df["ratio_hi"].astype(float), 1 - df["ratio_lo"].astype(float)
    tips = ["experiment:N", "kind:N", alt.Tooltip("ratio:Q", format=".3f"), alt.Tooltip("saving:Q", format=".0%")]
    base = alt.Chart(df)
    layers = base.mark_bar().encode(
        alt.Y("kind:N", title=None), alt.X("saving:Q", title="time saved (1 − candidate/baseline)", axis=alt.Axis(
            format="%")), alt.Color("kind:N", legend=None), tooltip=tips)
    if has_ci:
        layers = layers + base.mark_rule(color="black", strokeWidth=2).encode(
            alt.Y("kind:N"), alt.X("saving_lo:Q"), alt.X2("saving_hi:Q"))
    return layers.properties(width=440).facet(
        row=alt.Row("experiment:N", title=None, header=alt.Header(labelAngle=0, labelOrient="top", labelAlign="left",
                                                                  labelFontWeight="bold")), title=title)


def load_timeline(result: Any, window_s: float = 1.0,
                  title: str = "Latency over the run (P50 and P99 per window, log scale)") -> alt.Chart:
    """P50 and P99 per time window of a load run, by intended send time: stalls, overload and recovery show.

    Args:
        result: a :class:`labkit.load.LoadResult` (or its ``to_frame()``: columns ``t_s`` and ``ns``).
        window_s: window width in seconds.
    """
    df = _frame(result)
    if "t_s" not in df.columns or "ns" not in df.columns:
        raise BadInputError("load_timeline takes a LoadResult or its to_frame() (columns t_s and ns)")
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
               guess: float | None = None) -> alt.HConcatChart:
    """Two panels over the offered rate of a :class:`labkit.load.Sweep`: P50/P99 latency (log scale) and
    achieved vs offered rate (the diagonal is "keeps up"). The knee (``sweep.knee()``) is a dashed red line;
    ``guess`` (a rate in req/s, e.g. the learner's guessed knee) a dotted grey one."""
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
