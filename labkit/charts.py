"""Altair chart builders over labkit's result frames, configured to render with no internet.

Call :func:`enable_offline` once per notebook. It selects Altair's ``jupyter`` renderer in offline mode
(the chart's JavaScript ships inside the ``anywidget`` package, nothing is fetched from a CDN), or the
``svg`` renderer (drawn in Python by vl-convert) for static exports. Never the ``mimetype`` renderer:
JupyterLab 4 cannot draw Vega-Lite 6 by itself, and that renderer breaks notebook validation.

Every builder takes a result (or its ``to_frame()``) and returns an ``alt.Chart``; nothing here measures.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from labkit.errors import BadInputError

__all__ = ["enable_offline", "distribution", "cdf", "percentile_bars", "ab", "to_svg", "UNIT_AXIS", "latency_ladder",
           "latency_curve", "latency_vs_items", "queries_vs_items", "stage_bars", "format_map", "predicted_vs_measured",
           "crossover", "loglog", "napkin_stages", "waterfall", "distance_sweep"]

UNIT_AXIS = "time (µs)"


def enable_offline(mode: str = "jupyter") -> str:
    """Make every Altair chart render offline; returns the renderer name now active.

    Args:
        mode: ``"jupyter"`` (interactive, in JupyterLab) or ``"svg"`` (static pictures, for exported HTML).
    """
    alt.data_transformers.disable_max_rows()
    if mode == "jupyter":
        alt.renderers.enable("jupyter", offline=True)
        with _bundle_cache():  # built now, from the disk cache when there is one, not at the first chart
            alt.JupyterChart.enable_offline(True)
    elif mode in ("svg", "png"):
        alt.renderers.enable(mode)
    else:
        raise BadInputError(f"mode must be 'jupyter' or 'svg' (or 'png'), got {mode!r}")
    return alt.renderers.active


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "labkit"


@contextlib.contextmanager
def _bundle_cache() -> Iterator[None]:
    """Keep the offline renderer's JavaScript bundle on disk: vl-convert builds it for every new kernel (seconds
    of CPU, the slowest step of a lab's first chart), and it only changes with the altair/vl-convert versions.

    The bundle is keyed by a hash of vl-convert's version, the Vega-Lite version and the source altair asks to
    bundle, so an upgrade builds (and caches) a new one; a cache that cannot be read or written is skipped.
    """
    try:
        import vl_convert as vlc
    except ImportError:  # altair then explains what to install
        yield
        return
    build = vlc.javascript_bundle

    def cached(snippet: str | None = None, vl_version: str | None = None) -> str:
        raw = f"{getattr(vlc, '__version__', '?')}\0{vl_version}\0{snippet}".encode()
        path = _cache_dir() / f"altair-offline-{hashlib.sha256(raw).hexdigest()[:20]}.js"
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            pass
        bundle = build(snippet, vl_version=vl_version)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(bundle, encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass
        return bundle

    vlc.javascript_bundle = cached
    try:
        yield
    finally:
        vlc.javascript_bundle = build


def to_svg(chart: alt.TopLevelMixin) -> str:
    """Render a chart to SVG text in Python (vl-convert), with no browser and no network."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict())


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


# --- labs 00–02 revisited: scaling, napkin stages, waterfall, distance sweep ------------------------------


def loglog(frame: pd.DataFrame, x: str, y: str = "ns", by: str = "function", slopes: tuple[float, ...] = (1, 2),
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
            raise BadInputError(f"loglog needs columns {x!r}, {y!r}, {by!r} (got {list(frame.columns)})")
    df = frame.groupby([by, x], sort=False, as_index=False)[y].median()
    df["us"] = df[y] / 1e3
    first = df[df[by] == df[by].iloc[0]].sort_values(x)
    x0, y0, x1 = float(first[x].iloc[0]), float(first["us"].iloc[0]), float(df[x].max())
    guides = pd.DataFrame([{"guide": f"slope {k:g}", x: xv, "us": y0 * (xv / x0) ** k}
                           for k in slopes for xv in (x0, x1)])
    xs = alt.X(f"{x}:Q", scale=alt.Scale(type="log"), title=f"{x} (log scale)")
    ys = alt.Y("us:Q", scale=alt.Scale(type="log"), title=UNIT_AXIS + ", log scale")
    series = alt.Chart(df).mark_line(point=True).encode(
        xs, ys, alt.Color(f"{by}:N", title=None), tooltip=[f"{by}:N", f"{x}:Q", alt.Tooltip("us:Q", format=".3~f")])
    lines = alt.Chart(guides).mark_line(strokeDash=[5, 4], color="gray").encode(xs, ys, alt.Detail("guide:N"))
    labels = alt.Chart(guides[guides[x] == x1]).mark_text(align="left", dx=5, color="gray").encode(
        xs, ys, text="guide:N")
    return alt.layer(lines, labels, series, title=title).properties(width=480, height=300)


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


# --- latency ladder (latency helper's section; appended) ---------------------------------------------------

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
        refs = refs.assign(ref=refs["source"] + " " + refs["year"].astype(str))
        layers.append(alt.Chart(refs).mark_point(size=80, filled=False, strokeWidth=2).encode(
            y, alt.X("value_ns:Q", scale=scale, axis=axis),
            alt.Shape("ref:N", title="reference", legend=alt.Legend(orient="bottom", columns=3, labelLimit=260)),
            alt.Color("ref:N", title="reference", legend=alt.Legend(orient="bottom", columns=3, labelLimit=260)),
            tooltip=["ref:N", "operation:N", alt.Tooltip("value_ns:Q", format=".3~s", title="reference (ns)")]))
    return alt.layer(*layers, title=title).properties(width=560, height=max(240, 26 * len(order)))


# --- N+1 lab (nplusone helper's section; appended) --------------------------------------------------------


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


# --- load generator (load helper's section; appended) -----------------------------------------------------

__all__ += ["load_timeline", "knee_chart"]


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


# --- serialization lab (lab 05; appended) -----------------------------------------------------------------


def stage_bars(frame: pd.DataFrame, title: str = "Where a request's time goes, by payload size") -> alt.Chart:
    """Stacked bars: median ms per Server-Timing stage for each payload (one bar per ``payload`` label).

    Args:
        frame: one row per (request, stage) with columns ``payload`` (a label such as "200 items"),
            ``stage`` and ``ms``.
    """
    for col in ("payload", "stage", "ms"):
        if col not in frame.columns:
            raise BadInputError(f"stage_bars needs columns payload, stage, ms (got {list(frame.columns)})")
    df = frame.groupby(["payload", "stage"], sort=False, as_index=False)["ms"].median()
    order = list(dict.fromkeys(frame["stage"]))
    return alt.Chart(df, title=title).mark_bar().encode(
        alt.Y("payload:N", title=None, sort=list(dict.fromkeys(frame["payload"]))),
        alt.X("ms:Q", title="median time (ms), stacked"), alt.Color("stage:N", sort=order, title="stage"),
        alt.Order("stage_rank:Q"), tooltip=["payload:N", "stage:N", alt.Tooltip("ms:Q", format=".3f")],
    ).transform_calculate(stage_rank=f"indexof({order!r}, datum.stage)").properties(width=520, height=40 * df["payload"].nunique() + 20)


def format_map(frame: pd.DataFrame, x: str = "KiB", y: str = "round trip µs",
               title: str = "Every format: bytes on the wire against encode + decode time") -> alt.LayerChart:
    """One labelled point per format: size against time (log time axis), the fastest and smallest bottom-left.

    Args:
        frame: one row per format with a ``format`` label and the ``x`` and ``y`` columns.
    """
    for col in ("format", x, y):
        if col not in frame.columns:
            raise BadInputError(f"format_map needs columns format, {x!r}, {y!r} (got {list(frame.columns)})")
    base = alt.Chart(frame).encode(alt.X(f"{x}:Q", title=x, scale=alt.Scale(zero=True)),
                                   alt.Y(f"{y}:Q", title=y, scale=alt.Scale(type="log")))
    dots = base.mark_circle(size=90).encode(alt.Color("format:N", legend=None),
                                            tooltip=["format:N", alt.Tooltip(f"{x}:Q", format=".1f"),
                                                     alt.Tooltip(f"{y}:Q", format=".0f")])
    labels = base.mark_text(align="left", dx=7, dy=-6).encode(text="format:N")
    return alt.layer(dots, labels, title=title).properties(width=520, height=320)


def predicted_vs_measured(frame: pd.DataFrame, title: str = "Predicted vs measured (time ratio, lower is faster)"
                          ) -> alt.Chart:
    """Grouped bars of ratios: for each ``experiment``, the ``predicted`` and the ``measured`` candidate/baseline.

    Args:
        frame: columns ``experiment``, ``kind`` (e.g. "your guess", "model", "measured") and ``ratio``.
    """
    for col in ("experiment", "kind", "ratio"):
        if col not in frame.columns:
            raise BadInputError(f"predicted_vs_measured needs columns experiment, kind, ratio (got {list(frame.columns)})")
    df = frame.dropna(subset=["ratio"])
    return alt.Chart(df, title=title).mark_bar().encode(
        alt.Y("kind:N", title=None), alt.X("ratio:Q", title="candidate time / baseline time"),
        alt.Color("kind:N", legend=None),
        alt.Row("experiment:N", title=None, header=alt.Header(labelAngle=0, labelOrient="top", labelAlign="left",
                                                              labelFontWeight="bold")),
        tooltip=["experiment:N", "kind:N", alt.Tooltip("ratio:Q", format=".3f")]).properties(width=440)


def crossover(frame: pd.DataFrame, floor_us: float,
              title: str = "Time a faster encoder saves, against the framework's own cost per request") -> alt.LayerChart:
    """Lines of µs saved per request against payload items, with the HTTP floor as a horizontal rule.

    Args:
        frame: columns ``items``, ``saved µs`` and ``format``.
        floor_us: the framework's own cost per request (e.g. the median of ``GET /health``), in µs.
    """
    for col in ("items", "saved µs", "format"):
        if col not in frame.columns:
            raise BadInputError(f"crossover needs columns items, 'saved µs', format (got {list(frame.columns)})")
    lines = alt.Chart(frame).mark_line(point=True).encode(
        alt.X("items:Q", title="items in the payload", scale=alt.Scale(type="log")),
        alt.Y("saved µs:Q", title="µs saved per request vs stdlib json", scale=alt.Scale(type="symlog")),
        alt.Color("format:N"), tooltip=["format:N", "items:Q", alt.Tooltip("saved µs:Q", format=".1f")])
    rule = alt.Chart(pd.DataFrame({"floor": [floor_us], "label": [f"HTTP floor ≈ {floor_us:.0f} µs"]})).mark_rule(
        strokeDash=[6, 4], color="gray").encode(y="floor:Q")
    text = rule.mark_text(align="left", dx=4, dy=-6, color="gray").encode(text="label:N")
    return alt.layer(lines, rule, text, title=title).properties(width=520, height=300)


# --- preallocation lab (lab 03's section; appended) -------------------------------------------------------

__all__ += ["scaling", "size_steps"]


def scaling(frame: pd.DataFrame, x: str, y: str, color: str = "variant", *, guides: tuple[float, ...] = (1, 2),
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
            raise BadInputError(f"scaling needs columns {x!r} and {y!r} (got {list(frame.columns)})")
    df = frame.copy()
    if color not in df.columns:
        df[color] = y
    df = df[(df[x] > 0) & (df[y] > 0)]
    if df.empty:
        raise BadInputError(f"scaling needs positive {x!r} and {y!r} values (log axes): nothing to draw")
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


def size_steps(frame: pd.DataFrame, x: str = "length", y: str = "bytes",
               title: str = "sys.getsizeof of a list as it grows: capacity comes in steps") -> alt.Chart:
    """A step line of ``y`` against ``x``: where it jumps, the container was reallocated (over-allocated)."""
    for col in (x, y):
        if col not in frame.columns:
            raise BadInputError(f"size_steps needs columns {x!r} and {y!r} (got {list(frame.columns)})")
    return alt.Chart(frame, title=title).mark_line(interpolate="step-after").encode(
        alt.X(f"{x}:Q", title="items appended"), alt.Y(f"{y}:Q", title="sys.getsizeof (bytes)"),
        tooltip=[f"{x}:Q", f"{y}:Q"]).properties(width=520, height=260)
