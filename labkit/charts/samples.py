"""Charts of measured samples, whatever measured them: distributions, percentiles, A/B comparisons, and
predicted vs measured."""

from __future__ import annotations

from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from labkit.errors import BadInputError
from labkit.measure.stats import duration_unit

__all__ = ["distribution_chart", "cdf_chart", "percentile_chart", "ab_chart", "predicted_vs_measured_chart",
           "predicted_vs_measured", "as_frame", "in_unit"]


def as_frame(result: Any) -> pd.DataFrame:
    """A result's ``to_frame()`` (a DataFrame passes through): what every chart builder starts from."""
    if isinstance(result, pd.DataFrame):
        return result
    if hasattr(result, "to_frame"):
        return result.to_frame()
    raise BadInputError(f"charts take a labkit result or its to_frame() DataFrame, got {type(result).__name__}")


def log_ticks(lo: float, hi: float, signed: bool = False) -> list[float]:
    """Tick values 1, 2, 5 × 10ᵏ from ``lo`` to ``hi`` (positive), and ``lo`` to one digit where the next tick is
    far above it, for a log or symlog axis, whose own ticks can leave whole decades unlabelled (a symlog axis
    labelled only 0, 1,000, 2,000 … shows nothing below 1,000).
    ``signed``: also 0 and the same values negated, down to ``-hi`` (a symlog axis crosses zero)."""
    lo, hi = max(float(lo), 1e-12), max(float(hi), 1e-12)
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    ticks = [float(f"{m * 10.0 ** k:.1g}") for k in decades for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    if len(ticks) > 12:  # a wide range: decades only, so labels do not overlap
        ticks = [t for t in ticks if f"{t:.0e}".startswith("1")]
    e = 10.0 ** np.floor(np.log10(lo))
    start = float(f"{np.ceil(lo / e - 1e-9) * e:.1g}")  # where the data starts, to one digit: the axis is read from there
    if start <= hi and (not ticks or start < ticks[0] / 1.5):
        ticks = [start, *ticks]
    return sorted({0.0, *ticks, *(-t for t in ticks)}) if signed else ticks


def in_unit(df: pd.DataFrame, ns: str = "ns") -> tuple[pd.DataFrame, str]:
    """``df`` with a ``time`` column: its ``ns`` column in the unit a reader would pick for these values
    (:func:`labkit.measure.stats.duration_unit`: ns, µs, ms or s, the median between 1 and 1000), and that axis title,
    e.g. ``"time (ms)"``."""
    scale, unit = duration_unit(df[ns])
    df = df.copy()
    df["time"] = df[ns] / scale
    return df, f"time ({unit})"


def _measured(df: pd.DataFrame) -> pd.DataFrame:
    if "ns" not in df.columns:
        raise BadInputError(f"this frame has no 'ns' column (columns: {list(df.columns)}): pass a result's to_frame()")
    if "phase" in df.columns:
        df = df[df["phase"] == "measured"]
    df = df.copy()
    if "name" not in df.columns:
        df["name"] = "samples"
    return df


def distribution_chart(*results: Any, bins: int = 40, title: str = "Where the samples fall") -> alt.Chart:
    """A histogram of each result's samples, one colour per name, so the spread and outliers show."""
    df, axis = in_unit(pd.concat([_measured(as_frame(r)) for r in results], ignore_index=True))
    return alt.Chart(df, title=title).mark_bar(opacity=0.6).encode(
        alt.X("time:Q", bin=alt.Bin(maxbins=bins), title=axis),
        alt.Y("count():Q", stack=None, title="samples"),
        alt.Color("name:N", title=None),
        tooltip=["name:N", "count():Q"],
    ).properties(width=520, height=220)


def cdf_chart(*results: Any, log_x: bool = False, title: str = "Cumulative distribution (read percentiles off it)") -> alt.Chart:
    """Empirical CDF of each result's samples: the x value at height 0.99 is the P99."""
    frames = []
    for r in results:
        df = _measured(as_frame(r))
        for name, g in df.groupby("name", sort=False):
            v = np.sort(g["ns"].to_numpy())
            frames.append(pd.DataFrame({"name": name, "ns": v, "fraction": np.arange(1, v.size + 1) / v.size}))
    data, axis = in_unit(pd.concat(frames, ignore_index=True))
    scale = alt.Scale(type="log", nice=False) if log_x else alt.Scale(zero=False)
    ticks = alt.Axis(values=log_ticks(data["time"].min(), data["time"].max())) if log_x else alt.Axis()
    return alt.Chart(data, title=title).mark_line(interpolate="step-after").encode(
        alt.X("time:Q", scale=scale, title=axis, axis=ticks),
        alt.Y("fraction:Q", title="fraction of samples ≤ x", scale=alt.Scale(domain=[0, 1])),
        alt.Color("name:N", title=None),
        tooltip=["name:N", alt.Tooltip("time:Q", format=".3f"), alt.Tooltip("fraction:Q", format=".3f")],
    ).properties(width=520, height=260)


def percentile_chart(*results: Any, qs: tuple[float, ...] = (50, 90, 99), log_y: bool = False,
                    title: str = "Percentiles — the mean hides the tail") -> alt.Chart:
    """Grouped bars of P50/P90/P99 (and the mean, for contrast) per result; ``log_y`` when they differ by 100×."""
    rows = []
    for r in results:
        df = _measured(as_frame(r))
        for name, g in df.groupby("name", sort=False):
            v = g["ns"].to_numpy()
            rows.append({"name": name, "stat": "mean", "ns": float(np.mean(v)), "order": 0})
            for i, q in enumerate(qs, 1):
                rows.append({"name": name, "stat": f"P{q:g}", "ns": float(np.percentile(v, q)), "order": i})
    data, axis = in_unit(pd.DataFrame(rows))
    extra: dict[str, Any] = {}
    if log_y:
        # a log axis has no zero: bars grow from a floor below the smallest value, or Vega draws nothing
        floor = 10 ** np.floor(np.log10(max(data["time"].min(), 1e-3)))
        extra["y2"] = alt.datum(floor)
    return alt.Chart(data, title=title).mark_bar().encode(
        alt.X("stat:N", sort=alt.SortField("order"), title=None),
        alt.Y("time:Q", title=axis + (", log scale" if log_y else ""),
              scale=alt.Scale(type="log") if log_y else alt.Scale()),
        alt.Color("stat:N", sort=alt.SortField("order"), legend=None),
        alt.Column("name:N", title=None),
        tooltip=["name:N", "stat:N", alt.Tooltip("time:Q", format=".3f")],
        **extra,
    ).properties(width=160, height=220)


def ab_chart(comparison: Any, title: str | None = None) -> alt.LayerChart:
    """An A/B picture: each round's samples as dots, the medians as ticks, and the ratio's interval in the title."""
    df, axis = in_unit(_measured(comparison.to_frame()))
    lo, hi = comparison.ci
    title = title or f"{comparison.verdict}: ratio {comparison.ratio:.3f} ({comparison.ci_label} {lo:.3f}–{hi:.3f})"
    base = alt.Chart(df, title=title)
    dots = base.mark_circle(size=28, opacity=0.5).encode(
        alt.Y("name:N", title=None, sort=[comparison.baseline_name, comparison.candidate_name]),
        alt.X("time:Q", title=axis, scale=alt.Scale(zero=False)),
        alt.Color("role:N", legend=None),
        tooltip=["name:N", "round:Q", alt.Tooltip("time:Q", format=".3f")],
    )
    medians = base.mark_tick(thickness=3, size=26, color="black").encode(
        alt.Y("name:N", sort=[comparison.baseline_name, comparison.candidate_name]),
        alt.X("median(time):Q"),
    )
    return (dots + medians).properties(width=520, height=120)


def predicted_vs_measured(frame: pd.DataFrame, title: str = "Predicted vs measured: the time saved (1 − ratio)"
                          ) -> alt.Chart:
    """Grouped bars of the **effect**: for each ``experiment``, the time each ``kind`` (e.g. "your guess",
    "model", "measured") says the candidate saves, ``1 − ratio`` (50 % = twice as fast; negative = slower).
    When the frame has ``ratio_lo`` and ``ratio_hi`` (a comparison's ``ci``) on the measured row, the measured
    interval is drawn as a black rule on that row, and the range a prediction must fall in to be confirmed
    (:func:`labkit.learner.record.accepted_range`: the interval widened by the napkin tolerance) as a green band
    behind every row of the experiment — a bar ending inside the band is *confirmed*, outside it *refuted*.

    Args:
        frame: columns ``experiment``, ``kind`` and ``ratio`` (candidate/baseline time); optionally
            ``ratio_lo``, ``ratio_hi``. Rows without a ratio (a skipped guess) are left out.
    """
    from labkit.learner.record import NAPKIN_TOLERANCE, accepted_range

    for col in ("experiment", "kind", "ratio"):
        if col not in frame.columns:
            raise BadInputError(f"predicted_vs_measured needs columns experiment, kind, ratio (got {list(frame.columns)})")
    df = frame.dropna(subset=["ratio"]).copy()
    df["saving"] = 1 - df["ratio"].astype(float)
    # the % axis squeezes big speed-ups together (5x is 80 %, 13x is 93 %): each bar also says its factor
    df["says"] = [f"{1 / r:.3g}× faster" if 0 < r < 1 else f"{r:.3g}× slower" if r > 1 else ("same" if r == 1 else "")
                  for r in df["ratio"].astype(float)]
    kinds, order = list(dict.fromkeys(df["kind"])), list(dict.fromkeys(df["experiment"]))
    tips = ["experiment:N", "kind:N", alt.Tooltip("ratio:Q", format=".3f"), alt.Tooltip("saving:Q", format=".0%")]
    base = alt.Chart()
    layers: alt.Chart | alt.LayerChart = base.mark_bar().encode(
        alt.Y("kind:N", title=None, sort=kinds),
        alt.X("saving:Q", title="time saved (1 − candidate/baseline)", axis=alt.Axis(format="%")),
        alt.Color("kind:N", legend=None), tooltip=tips)
    if {"ratio_lo", "ratio_hi"} <= set(df.columns):
        lo, hi = df["ratio_lo"].astype(float), df["ratio_hi"].astype(float)
        usable = (lo > 0) & (hi >= lo)  # NaN compares False: rows without an interval
        if usable.any():
            df["saving_lo"], df["saving_hi"] = (1 - hi).where(usable), (1 - lo).where(usable)
            df["band_lo"] = (1 - hi * (1 + NAPKIN_TOLERANCE)).where(usable)
            df["band_hi"] = (1 - lo / (1 + NAPKIN_TOLERANCE)).where(usable)
            df["accepted"] = [f"ratio {accepted_range((a, b))[0]:.3g}–{accepted_range((a, b))[1]:.3g} (measured "
                              f"{a:.3g}–{b:.3g}, ±{NAPKIN_TOLERANCE:.0%})" if ok else None
                              for a, b, ok in zip(lo, hi, usable, strict=True)]
            band = base.mark_rect(color="#2ca02c", opacity=0.2).encode(
                alt.X("band_lo:Q"), alt.X2("band_hi:Q"),
                tooltip=["experiment:N", alt.Tooltip("accepted:N", title="confirmed if the ratio is in")],
            ).transform_filter("isValid(datum.band_lo)")
            rule = base.mark_rule(color="black", strokeWidth=2).encode(
                alt.Y("kind:N", sort=kinds), alt.X("saving_lo:Q"), alt.X2("saving_hi:Q"),
                tooltip=["experiment:N", alt.Tooltip("ratio_lo:Q", format=".3f"),
                         alt.Tooltip("ratio_hi:Q", format=".3f")],
            ).transform_filter("isValid(datum.saving_lo)")
            layers = band + layers + rule
            title = alt.TitleParams(title, subtitle=f"black: the measured interval · green: it widened by "
                                    f"±{NAPKIN_TOLERANCE:.0%}, where a prediction is confirmed")
    # the factor is written right of the bar, of its interval, and of zero, whichever ends furthest right
    df["says_at"] = df[[c for c in ("saving", "saving_hi") if c in df.columns]].max(axis=1).clip(lower=0)
    layers += base.mark_text(align="left", dx=4, fontSize=10).encode(
        alt.Y("kind:N", sort=kinds), alt.X("says_at:Q"), text="says:N")
    return layers.properties(width=440).facet(
        row=alt.Row("experiment:N", title=None, sort=order, header=alt.Header(
            labelAngle=0, labelOrient="top", labelAlign="left", labelFontWeight="bold")),
        data=df, title=title).resolve_scale(y="independent")  # each experiment shows only its own rows


#: every builder's name ends in ``_chart``; ``predicted_vs_measured`` is the name labs 03, 05, 07 and 08 used first
predicted_vs_measured_chart = predicted_vs_measured
