"""The learner's guesses (and plans) beside what was measured: :func:`guesses_chart` draws
:func:`labkit.learner.guesses.against`'s frame; nothing here measures."""

from __future__ import annotations

import altair as alt
import pandas as pd

from labkit.errors import BadInputError

__all__ = ["guesses_chart"]

_COLUMNS = ("name", "kind", "predicted", "measured", "unit", "skipped")


def guesses_chart(frame: pd.DataFrame, title: str = "Your predictions beside the measurements") -> alt.LayerChart:
    """One row per guess or plan: the prediction (hollow), the measurement (filled) and a line between them, on
    one log axis (the rows have different units; a log axis shows "off by 3×" the same size everywhere);
    a skipped guess shows its measurement alone, its row labelled "skipped". The tooltip says by what factor
    the measurement differs from the prediction. A concluded plan also shows its measured interval (red) and,
    green behind it, the range a prediction must lie in to be confirmed (:func:`labkit.learner.record.judge`).

    Args:
        frame: :func:`labkit.learner.guesses.against`'s DataFrame.
    """
    missing = [c for c in _COLUMNS if c not in frame.columns]
    if missing:
        raise BadInputError(f"guesses_chart draws labkit.learner.guesses.against(...)'s frame; this one lacks {missing}")
    if frame.empty:
        raise BadInputError("nothing to draw: pass guesses.against({...}) with at least one measured guess")
    df = frame.copy()
    df["label"] = [f"{n} ({u})" if u and k == "guess" else n for n, u, k in zip(df["name"], df["unit"], df["kind"],
                                                                                    strict=True)]
    df.loc[df["skipped"], "label"] = df.loc[df["skipped"], "label"] + " — skipped"
    df["off by"] = [None if f is None or pd.isna(f) or f <= 0 else
                    f"measured {max(f, 1 / f):.2g}× {'above' if f > 1 else 'below'} the prediction"
                    for f in (df["factor"] if "factor" in df.columns else [None] * len(df))]
    values = pd.concat([df["measured"], df["predicted"].dropna()]).astype(float)
    log = bool((values > 0).all())
    scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    points = pd.concat([df.assign(what="your prediction", value=df["predicted"]).dropna(subset=["value"]),
                        df.assign(what="measured", value=df["measured"])], ignore_index=True)
    order = list(df["label"])
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    tips = ["label:N", "what:N", alt.Tooltip("value:Q", format=".3g"), "off by:N"]
    span = alt.Chart(df.dropna(subset=["predicted"]), title=title).mark_rule(color="#999", strokeWidth=2).encode(
        y, alt.X("predicted:Q", scale=scale, title="value, in each row's unit" + (" (log scale)" if log else "")),
        alt.X2("measured:Q"))
    dots = alt.Chart(points).mark_point(size=110, filled=True).encode(
        y, alt.X("value:Q", scale=scale),
        alt.Shape("what:N", title=None, scale=alt.Scale(domain=["your prediction", "measured"],
                                                        range=["circle", "diamond"])),
        alt.Color("what:N", title=None, scale=alt.Scale(domain=["your prediction", "measured"],
                                                        range=["#1f77b4", "#d62728"])),
        tooltip=tips)
    layers = span + dots
    if {"measured_lo", "measured_hi"} <= set(df.columns) and log:
        from labkit.learner.record import NAPKIN_TOLERANCE

        judged = df[(df["kind"] == "plan") & (df["measured_lo"] > 0) & (df["measured_hi"] >= df["measured_lo"])].copy()
        if not judged.empty:  # a plan's measured interval, and the band that confirms a prediction (±25 %)
            judged["band_lo"] = judged["measured_lo"] / (1 + NAPKIN_TOLERANCE)
            judged["band_hi"] = judged["measured_hi"] * (1 + NAPKIN_TOLERANCE)
            judged["confirmed if in"] = [f"{a:.3g}–{b:.3g}" for a, b in zip(judged["band_lo"], judged["band_hi"],
                                                                            strict=True)]
            band = alt.Chart(judged).mark_bar(color="#2ca02c", opacity=0.25, height=16).encode(
                y, alt.X("band_lo:Q", scale=scale), alt.X2("band_hi:Q"), tooltip=["label:N", "confirmed if in:N"])
            ci = alt.Chart(judged).mark_rule(color="#d62728", strokeWidth=3).encode(
                y, alt.X("measured_lo:Q", scale=scale), alt.X2("measured_hi:Q"))
            layers = band + span + ci + dots
    return layers.properties(width=460, height=max(60, 34 * len(df)))


