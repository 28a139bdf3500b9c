"""Charts of how a cost grows: log-log slopes, scaling and size steps, serialization stages and formats, and
crossovers."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from labkit.charts.samples import in_unit, log_ticks
from labkit.errors import BadInputError

__all__ = ["loglog_chart", "scaling_chart", "size_steps_chart", "stage_chart", "format_map_chart", "crossover_chart"]


def loglog_chart(frame: pd.DataFrame, x: str, y: str = "ns", by: str = "function", slopes: tuple[float, ...] = (1, 2),
           title: str = "Time against size, both axes logarithmic") -> alt.LayerChart:
    """Each series' medians against size on log-log axes, with dashed guide lines of the given slopes.

    On log-log axes a power law ``time ∝ size**k`` is a straight line of slope ``k``: follow a series beside
    the guides to read its exponent (slope 1 linear, slope 2 quadratic). The guides start at the first series'
    smallest size.

    Args:
        frame: one row per sample (or per median) with the size column ``x``, a time column ``y`` in ns and
            the series column ``by``.
        slopes: the guide lines to draw.
    """
    for col in (x, y, by):
        if col not in frame.columns:
            raise BadInputError(f"loglog_chart needs columns {x!r}, {y!r}, {by!r} (got {list(frame.columns)})")
    df, axis = in_unit(frame.groupby([by, x], sort=False, as_index=False)[y].median(), ns=y)
    first = df[df[by] == df[by].iloc[0]].sort_values(x)
    x0, y0, x1 = float(first[x].iloc[0]), float(first["time"].iloc[0]), float(df[x].max())
    guides = pd.DataFrame([{"guide": f"slope {k:g}", x: xv, "time": y0 * (xv / x0) ** k}
                           for k in slopes for xv in (x0, x1)])
    xs = alt.X(f"{x}:Q", scale=alt.Scale(type="log"), title=f"{x} (log scale)")
    ys = alt.Y("time:Q", scale=alt.Scale(type="log"), title=axis + ", log scale")
    series = alt.Chart(df).mark_line(point=True).encode(
        xs, ys, alt.Color(f"{by}:N", title=None), tooltip=[f"{by}:N", f"{x}:Q", alt.Tooltip("time:Q", format=".3~f")])
    lines = alt.Chart(guides).mark_line(strokeDash=[5, 4], color="gray").encode(xs, ys, alt.Detail("guide:N"))
    labels = alt.Chart(guides[guides[x] == x1]).mark_text(align="left", dx=5, color="gray").encode(
        xs, ys, text="guide:N")
    return alt.layer(lines, labels, series, title=title).properties(width=480, height=300)


def scaling_chart(frame: pd.DataFrame, x: str, y: str, color: str = "variant", *, guides: tuple[float, ...] = (1, 2),
            x_title: str | None = None, y_title: str | None = None,
            title: str = "Cost against size (log-log): the slope is the exponent") -> alt.LayerChart:
    """Log-log lines of the median ``y`` per ``x`` for each ``color``, with dashed guide lines of slope 1, 2…

    On log-log axes ``y ∝ xᵏ`` is a straight line of slope ``k``: a series running parallel to the slope-2
    guide grows with the square of its size. The guides pass through the first series' largest-size point,
    so its upper end can be read against them.

    Args:
        frame: one row per measurement, with numeric ``x`` and ``y`` (positive) and a ``color`` column.
        guides: the slopes to draw (empty for none).
    """
    for col in (x, y):
        if col not in frame.columns:
            raise BadInputError(f"scaling_chart needs columns {x!r} and {y!r} (got {list(frame.columns)})")
    df = frame.copy()
    if color not in df.columns:
        df[color] = y
    df = df[(df[x] > 0) & (df[y] > 0)]
    if df.empty:
        raise BadInputError(f"scaling_chart needs positive {x!r} and {y!r} values (log axes): nothing to draw")
    med = df.groupby([color, x], sort=False, as_index=False)[y].median()
    first = med[med[color] == med[color].iloc[0]].sort_values(x)
    x0, y0 = float(first[x].iloc[-1]), float(first[y].iloc[-1])
    xs = np.geomspace(float(df[x].min()), float(df[x].max()), 12)
    lo, hi = float(df[y].min()) / 2, float(df[y].max()) * 2  # guides are clipped to the data's range
    lines = pd.DataFrame([{x: v, y: y0 * (v / x0) ** k, "guide": f"slope {k:g}"} for k in guides for v in xs
                          if lo <= y0 * (v / x0) ** k <= hi])
    xe = alt.X(f"{x}:Q", scale=alt.Scale(type="log"), title=x_title or x)
    ye = alt.Y(f"{y}:Q", scale=alt.Scale(type="log"), title=y_title or y)
    dots = alt.Chart(df).mark_circle(opacity=0.3, size=25).encode(xe, ye, alt.Color(f"{color}:N", title=color))
    line = alt.Chart(med).mark_line(point=True).encode(
        xe, ye, alt.Color(f"{color}:N", title=color),
        tooltip=[f"{color}:N", f"{x}:Q", alt.Tooltip(f"{y}:Q", format=".3~g")])
    layers = [dots, line]
    if guides and not lines.empty:
        layers.append(alt.Chart(lines).mark_line(strokeDash=[5, 4], color="#888").encode(
            xe, ye, alt.Detail("guide:N"), tooltip=["guide:N"]))
        ends = lines.groupby("guide", as_index=False).first()
        layers.append(alt.Chart(ends).mark_text(align="left", dx=4, dy=-6, color="#666").encode(xe, ye, text="guide:N"))
    return alt.layer(*layers, title=title).properties(width=520, height=320)


def size_steps_chart(frame: pd.DataFrame, x: str = "length", y: str = "bytes",
               title: str = "sys.getsizeof of a list as it grows: capacity comes in steps") -> alt.Chart:
    """A step line of ``y`` against ``x``: where it jumps, the container was reallocated (over-allocated)."""
    for col in (x, y):
        if col not in frame.columns:
            raise BadInputError(f"size_steps_chart needs columns {x!r} and {y!r} (got {list(frame.columns)})")
    return alt.Chart(frame, title=title).mark_line(interpolate="step-after").encode(
        alt.X(f"{x}:Q", title="items appended"), alt.Y(f"{y}:Q", title="sys.getsizeof (bytes)"),
        tooltip=[f"{x}:Q", f"{y}:Q"]).properties(width=520, height=260)


def stage_chart(frame: pd.DataFrame, title: str = "Where a request's time goes, by payload size") -> alt.Chart:
    """Stacked bars: median ms per Server-Timing stage for each payload (one bar per ``payload`` label).

    Args:
        frame: one row per (request, stage) with columns ``payload`` (a label such as "200 items"),
            ``stage`` and ``ms``.
    """
    for col in ("payload", "stage", "ms"):
        if col not in frame.columns:
            raise BadInputError(f"stage_chart needs columns payload, stage, ms (got {list(frame.columns)})")
    df = frame.groupby(["payload", "stage"], sort=False, as_index=False)["ms"].median()
    order = list(dict.fromkeys(frame["stage"]))
    return alt.Chart(df, title=title).mark_bar().encode(
        alt.Y("payload:N", title=None, sort=list(dict.fromkeys(frame["payload"]))),
        alt.X("ms:Q", title="median time (ms), stacked"), alt.Color("stage:N", sort=order, title="stage"),
        alt.Order("stage_rank:Q"), tooltip=["payload:N", "stage:N", alt.Tooltip("ms:Q", format=".3f")],
    ).transform_calculate(stage_rank=f"indexof({order!r}, datum.stage)").properties(width=520, height=40 * df["payload"].nunique() + 20)


def format_map_chart(frame: pd.DataFrame, x: str = "KiB", y: str = "round trip µs",
               title: str = "Every format: bytes on the wire against encode + decode time") -> alt.LayerChart:
    """One labelled point per format: size against time (log time axis), the fastest and smallest bottom-left.

    Args:
        frame: one row per format with a ``format`` label and the ``x`` and ``y`` columns.
    """
    for col in ("format", x, y):
        if col not in frame.columns:
            raise BadInputError(f"format_map_chart needs columns format, {x!r}, {y!r} (got {list(frame.columns)})")
    df = frame.reset_index(drop=True).copy()
    width, height = 520, 320
    xs, ys = df[x].astype(float), np.log10(df[y].astype(float).clip(lower=1e-9))
    # where each point sits in pixels (the axes as drawn: x from 0, y over whole decades), for placing labels
    lo, hi = np.floor(ys.min()), max(np.ceil(ys.max()), np.floor(ys.min()) + 1)
    px = xs / (float(xs.max()) * 1.05 or 1.0) * width
    py = (hi - ys) / (hi - lo) * height
    df["place"] = _place_labels(px.to_numpy(), py.to_numpy(), [str(f) for f in df["format"]])
    enc = (alt.X(f"{x}:Q", title=x, scale=alt.Scale(zero=True)), alt.Y(f"{y}:Q", title=y, scale=alt.Scale(type="log")))
    dots = alt.Chart(df).mark_circle(size=90).encode(*enc, alt.Color("format:N", legend=None),
                                                     tooltip=["format:N", alt.Tooltip(f"{x}:Q", format=".1f"),
                                                              alt.Tooltip(f"{y}:Q", format=".0f")])
    # formats that land near one another (orjson and msgspec write the same JSON about as fast) get their labels
    # where no other label or point is, so neither hides the other
    labels = [alt.Chart(df[df.place == k]).mark_text(align="left" if dx > 0 else "right", dx=dx, dy=dy).encode(
        *enc, text="format:N") for k, (dx, dy) in enumerate(_PLACES) if (df.place == k).any()]
    return alt.layer(dots, *labels, title=title).properties(width=width, height=height)


#: where a point's label may go, tried in order: (dx, dy) in pixels, right of the point when dx > 0
_PLACES = ((7, -6), (7, 10), (-7, -6), (-7, 10), (7, -20), (7, 24), (-7, -20), (-7, 24))


def _place_labels(px: np.ndarray, py: np.ndarray, texts: list[str], char_px: float = 6.5) -> list[int]:
    """For each point (in pixels), the first of :data:`_PLACES` whose label box overlaps no label placed
    before it and no other point (the last place when all are taken)."""
    boxes: list[tuple[float, float, float, float]] = []
    out = []
    for i, text in enumerate(texts):
        w = char_px * len(text)
        for k, (dx, dy) in enumerate(_PLACES):
            x0 = px[i] + dx if dx > 0 else px[i] + dx - w
            box = (x0, py[i] + dy - 6, x0 + w, py[i] + dy + 6)
            clear = all(box[2] < b[0] or b[2] < box[0] or box[3] < b[1] or b[3] < box[1] for b in boxes)
            clear = clear and not any(j != i and box[0] - 5 < px[j] < box[2] + 5 and box[1] - 5 < py[j] < box[3] + 5
                                      for j in range(len(texts)))
            if clear or k == len(_PLACES) - 1:
                boxes.append(box)
                out.append(k)
                break
    return out


def crossover_chart(frame: pd.DataFrame, floor_us: float,
              title: str = "Time a faster encoder saves, against the framework's own cost per request") -> alt.LayerChart:
    """Lines of µs saved per request against payload items, with the HTTP floor as a horizontal rule.

    Args:
        frame: columns ``items``, ``saved µs`` and ``format``.
        floor_us: the framework's own cost per request (e.g. the median of ``GET /health``), in µs.
    """
    for col in ("items", "saved µs", "format"):
        if col not in frame.columns:
            raise BadInputError(f"crossover_chart needs columns items, 'saved µs', format (got {list(frame.columns)})")
    saved = frame["saved µs"].astype(float)
    top, low = max(float(saved.abs().max()), floor_us, 1.0), float(saved.min())
    # codecs that save alike draw on top of each other: each line has its own dash as well as its colour, and
    # its name at its right end, one text line apart, so a line hidden under another is still named
    x = alt.X("items:Q", title="items in the payload", scale=alt.Scale(type="log"))
    y = alt.Y("saved µs:Q", title="µs saved per request vs stdlib json", scale=alt.Scale(type="symlog", nice=False),
              axis=alt.Axis(values=[t for t in log_ticks(1, top, signed=True) if t >= min(low, 0)]))
    lines = alt.Chart(frame).mark_line(point=True).encode(
        x, y, alt.Color("format:N", legend=None), alt.StrokeDash("format:N", legend=None),
        tooltip=["format:N", "items:Q", alt.Tooltip("saved µs:Q", format=".1f")])
    ends = frame.reset_index(drop=True)
    ends = ends.loc[ends.groupby("format")["items"].idxmax()].sort_values("saved µs", ascending=False)
    names = alt.layer(*(alt.Chart(ends.iloc[[i]]).mark_text(align="left", dx=8, dy=12 * i - 6 * (len(ends) - 1))
                        .encode(x, y, alt.Color("format:N", legend=None), text="format:N")
                        for i in range(len(ends))))
    rule = alt.Chart(pd.DataFrame({"floor": [floor_us], "label": [f"HTTP floor ≈ {floor_us:.0f} µs"]})).mark_rule(
        strokeDash=[6, 4], color="gray").encode(y="floor:Q")
    # the label sits at the left end, above the rule: small payloads save least, so no line reaches it there
    text = rule.mark_text(align="left", dx=4, dy=-6, color="gray").encode(text="label:N", x=alt.value(0))
    return alt.layer(lines, names, rule, text, title=title).properties(width=520, height=300,
                                                                       padding={"left": 5, "bottom": 5, "right": 80, "top": 10})
