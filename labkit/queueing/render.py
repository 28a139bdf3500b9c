"""Charts and tables for the queueing lab: pure functions of measured values (nothing here measures).

Charts are Altair (render them offline with :func:`labkit.charts.enable_offline`); tables are DataFrames.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from labkit.errors import BadInputError

__all__ = ["runs_table", "little_chart", "in_flight_chart", "pool_chart", "points_chart"]


def runs_table(*results: Any) -> pd.DataFrame:
    """One row per load run: what was offered and achieved, what failed, the latency, the generator's lag,
    and how busy the rest of the machine was -- everything to judge a run (and the generator) at a glance.

    Columns: name, offered, achieved, kept_up (achieved / what the run's schedule offered: Poisson arrivals
    offer the nominal rate only on average), ok_per_s (2xx per second), shed (503s),
    other_errors, p50_ms, p99_ms (every response), p99_ok_ms (2xx only), lag_p99_ms (how late requests left
    the generator: its own delay plus any wait for a free connection), others_cores (CPU the rest of the
    machine used meanwhile).
    """
    if not results:
        raise BadInputError("runs_table needs at least one load result")
    rows = []
    for r in results:
        if not hasattr(r, "samples_ns"):
            raise BadInputError(f"runs_table takes labkit.load LoadResults, got {type(r).__name__}")
        p = r.percentiles((50, 99))
        shed = r.errors.get("http_503", 0)
        lag = r.percentiles((99,), of="lag")[99] / 1e6 if r.mode == "open" else float("nan")
        cpu = r.fingerprint.get("cpu") or {}
        rows.append({"name": r.label, "offered": r.offered_rate, "achieved": r.achieved_rate,
                     "kept_up": r.achieved_rate / r.scheduled_rate if r.scheduled_rate else float("nan"),
                     "ok_per_s": r.ok_rate, "shed": shed, "other_errors": r.error_count - shed,
                     "p50_ms": p[50] / 1e6, "p99_ms": p[99] / 1e6,
                     "p99_ok_ms": r.percentiles((99,), ok_only=True)[99] / 1e6, "lag_p99_ms": lag,
                     "others_cores": cpu.get("others_cores", float("nan"))})
    return pd.DataFrame(rows)


def little_chart(observations: Sequence[Any],
                 title: str = "Little's law: requests in flight, predicted (λ × W) vs counted by the service"
                 ) -> alt.Chart:
    """Bars per run: the in-flight count Little's law predicts from the client's numbers, the same law with the
    app's own time in system, and the service's own average count. The second and third agree whatever the
    load (one boundary, one queue); the first sits above them by the time spent outside the app."""
    rows = []
    for o in observations:
        if not hasattr(o, "predicted_in_flight"):
            raise BadInputError(f"little_chart takes labkit.queueing Observations, got {type(o).__name__}")
        run = f"{o.arrival_rate:,.0f} req/s"
        rows += [{"run": run, "kind": "1. predicted: λ × W (client's W)", "in_flight": o.predicted_in_flight},
                 {"run": run, "kind": "2. λ × W inside the app", "in_flight": o.arrival_rate * o.time_in_app_s},
                 {"run": run, "kind": "3. counted by the service (time average)", "in_flight": o.measured_in_flight}]
    df = pd.DataFrame(rows)
    return alt.Chart(df, title=title).mark_bar().encode(
        alt.Y("run:N", title="achieved rate", sort=list(dict.fromkeys(df["run"]))),
        alt.YOffset("kind:N"), alt.X("in_flight:Q", title="requests in flight"),
        alt.Color("kind:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["run:N", "kind:N", alt.Tooltip("in_flight:Q", format=".2f")],
    ).properties(width=480, height=max(120, 75 * len(observations)))


def in_flight_chart(observation: Any, title: str | None = None) -> alt.LayerChart:
    """The service's in-flight count over one run (each sample a dot, a rolling mean as a line) with Little's
    prediction as a dashed rule: flat and on the rule below the knee; climbing past it (a queue filling)."""
    if not hasattr(observation, "in_flight"):
        raise BadInputError(f"in_flight_chart takes a labkit.queueing Observation, got {type(observation).__name__}")
    df = observation.to_frame()
    if len(df):
        df["rolling"] = df["in_flight"].rolling(max(1, len(df) // 20), min_periods=1).mean()
    title = title or (f"In flight at {observation.arrival_rate:,.0f} req/s achieved "
                      f"({observation.result.offered_rate or 0:,.0f} offered)")
    x = alt.X("t_s:Q", title="time into the run (s)")
    base = alt.Chart(df)
    dots = base.mark_circle(size=12, opacity=0.35).encode(x, alt.Y("in_flight:Q", title="requests in flight"),
                                                           tooltip=["t_s:Q", "in_flight:Q"])
    line = base.mark_line(color="black").encode(x, alt.Y("rolling:Q"))
    pred = observation.predicted_in_flight
    rule = alt.Chart(pd.DataFrame({"y": [pred], "label": [f"λ × W = {pred:.1f}"]})).mark_rule(
        strokeDash=[6, 4], color="firebrick").encode(y="y:Q", tooltip=["label:N"])
    return alt.layer(dots, line, rule, title=title).properties(width=480, height=220)


def pool_chart(study: Any, title: str = "Pool size: capacity flat out, and P99 at a common rate") -> alt.HConcatChart:
    """Left: each pool's capacity (closed loop, flat out). Right: each pool's P99 (log scale) at every common
    rate of the study, so the pool sizes are read at the same traffic."""
    if not hasattr(study, "capacity_of"):
        raise BadInputError(f"pool_chart takes a labkit.queueing PoolStudy, got {type(study).__name__}")
    df = study.to_frame()
    df["pool"] = df["pool"].astype(str)
    order = [str(p) for p in sorted(study.pools)]
    df["at"] = [f"{o:,.0f} req/s ({f:.0%})" for o, f in zip(df["offered"], df["fraction"], strict=True)]
    caps = df.drop_duplicates("pool")
    left = alt.Chart(caps, title="capacity (req/s, flat out)").mark_bar().encode(
        alt.X("pool:N", sort=order, title="pool size"), alt.Y("capacity:Q", title="req/s"),
        tooltip=["pool:N", alt.Tooltip("capacity:Q", format=",.0f")]).properties(width=220, height=220)
    # a log axis has no zero: bars grow from a floor below the smallest value, or Vega draws none
    floor = 10 ** np.floor(np.log10(max(float(df["p99_ms"].min()), 1e-3)))
    right = alt.Chart(df, title=f"P99 at {int(100 * max(study.fractions))} % of pool={study.reference}'s capacity"
                      if len(study.fractions) == 1 else "P99 at the common rates").mark_bar().encode(
        alt.X("pool:N", sort=order, title="pool size"), alt.XOffset("at:N"),
        alt.Y("p99_ms:Q", scale=alt.Scale(type="log"), title="P99 (ms, log)"),
        alt.Color("at:N", title="offered"),
        tooltip=["pool:N", "at:N", alt.Tooltip("p99_ms:Q", format=".2f"), alt.Tooltip("achieved:Q", format=",.0f"),
                 "errors:Q"], y2=alt.datum(floor)).properties(width=300, height=220)
    return alt.hconcat(left, right, title=title)


def points_chart(points: Sequence[dict[str, Any]], knee: float | None = None,
                 title: str = "P99 against offered rate, one line per pool size") -> alt.LayerChart:
    """The panel's chart: one point per bounded run (``{"pool", "offered", "p99_ms", "achieved", …}``), a line
    per pool size, P99 on a log axis; ``knee`` (req/s) as a dashed rule (e.g. the sweep's knee)."""
    df = pd.DataFrame(list(points))
    if df.empty or not {"pool", "offered", "p99_ms"} <= set(df.columns):
        raise BadInputError("points_chart needs points with pool, offered and p99_ms")
    df = df.sort_values(["pool", "offered"])
    df["pool"] = "pool=" + df["pool"].astype(str)
    df["p99_ms"] = df["p99_ms"].clip(lower=1e-3)
    enc = [alt.X("offered:Q", title="offered rate (req/s)"),
           alt.Y("p99_ms:Q", scale=alt.Scale(type="log"), title="P99 (ms, log)"),
           alt.Color("pool:N", title=None)]
    tips = ["pool:N", alt.Tooltip("offered:Q", format=",.0f"), alt.Tooltip("achieved:Q", format=",.0f"),
            alt.Tooltip("p99_ms:Q", format=".2f")]
    layers: list[Any] = [alt.Chart(df).mark_line(point=True).encode(*enc, tooltip=tips)]
    if knee is not None and np.isfinite(knee):
        layers.append(alt.Chart(pd.DataFrame({"offered": [knee], "what": ["the sweep's knee"]})).mark_rule(
            strokeDash=[6, 4], color="firebrick").encode(alt.X("offered:Q"), tooltip=["what:N"]))
    return alt.layer(*layers, title=title).properties(width=480, height=260)
