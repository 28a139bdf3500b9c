"""Drawing profiles, offline: our own icicle chart (Altair), and the tools' own pages in a sandboxed frame.

    profile.icicle_chart(cpu_profile)              # Altair: survives a static export (SVG/PNG), no script needed
    profile.icicle_chart(mem.by_count, title=…)    # any Stacks: samples, allocations or bytes
    profile.flamegraph(cpu_profile)          # py-spy's own SVG (click to zoom, Ctrl-F to search)
    profile.memray_html(mem_profile)         # memray's own page, self-contained (made with html=True)

An icicle chart is a flame graph upside down: the root (every sample, every allocation) on top, each row
below split among the functions the one above called, widths proportional to weight. Read it from the top:
wide boxes are where the cost is; a wide box with nothing below it is cost *in* that function itself.

The tools' pages are embedded with ``<iframe srcdoc=…>``: the whole page travels inside the notebook, so
nothing is fetched from anywhere (memray's page only in its self-contained mode, which labkit always uses).
"""

from __future__ import annotations

import base64
import html as _html
from typing import Any

import altair as alt

from labkit.errors import BadInputError
from labkit.profile.stacks import Stacks

__all__ = ["icicle_chart", "flamegraph", "memray_html", "Frame"]

_ROW_PX = 18
_WIDTH_PX = 860
_DATA_URL_MAX = 1_500_000  # characters; browsers cap data: URLs near 2 MB


def _stacks_of(x: Any) -> Stacks:
    if isinstance(x, Stacks):
        return x
    for attr in ("stacks", "by_count"):
        s = getattr(x, attr, None)
        if isinstance(s, Stacks):
            return s
    raise BadInputError(f"icicle_chart() takes a CpuProfile, a MemoryProfile or a Stacks, got {type(x).__name__}")


def _label(row: Any, px_per_unit: float) -> str:
    room = int((row["x1"] - row["x0"]) * px_per_unit / 6.5) - 1  # ~6.5 px per character at 11 px
    name = row["function"]
    if room < 4:
        return ""
    return name if len(name) <= room else name[: room - 1] + "…"


def icicle_chart(profile: Any, *, title: str | None = None, max_depth: int = 40, min_share: float = 0.004,
           width: int = _WIDTH_PX) -> alt.LayerChart:
    """An icicle chart (a flame graph, root on top) of a profile's stacks, drawn by Altair.

    Args:
        profile: a :class:`CpuProfile` (its samples), a :class:`MemoryProfile` (allocations by count; pass
            ``prof.by_bytes`` for bytes) or any :class:`Stacks`.
        title: the chart's title (default: what the weights count and their total).
        max_depth: frames below this depth are folded into their parent.
        min_share: boxes narrower than this share of the total are left out (kept in their parent's width).
        width: pixels.

    Colour is the package a frame's file belongs to (your code, the framework, the standard library…);
    hover a box for the function, its file and line, and its share.
    """
    stacks = _stacks_of(profile)
    df = stacks.layout(max_depth=max_depth, min_share=min_share)
    if df.empty:
        raise BadInputError("this profile holds no stacks to draw (no samples were taken): profile for longer, "
                            "or check that the process was busy while it was sampled")
    df = df.assign(label=df.apply(_label, axis=1, px_per_unit=width), pct=(100 * df["share"]).round(1))
    depth = int(df["depth"].max()) + 1
    head = title or f"{stacks.total:,} {stacks.unit} — wider is costlier; read from the top"
    y = alt.Y("depth:O", axis=None, scale=alt.Scale(paddingInner=0.06))
    base = alt.Chart(df, title=head).encode(
        alt.X("x0:Q", axis=None, scale=alt.Scale(domain=[0, 1], nice=False)), alt.X2("x1:Q"), y)
    boxes = base.mark_bar(stroke="white", strokeWidth=0.5, cornerRadius=1).encode(
        alt.Color("package:N", legend=alt.Legend(title="package", orient="bottom", columns=6),
                  scale=alt.Scale(scheme="tableau20")),
        tooltip=[alt.Tooltip("function:N"), alt.Tooltip("file:N"), alt.Tooltip("value:Q", format=",", title=stacks.unit),
                 alt.Tooltip("pct:Q", title="% of total")])
    labels = alt.Chart(df[df["label"] != ""]).mark_text(align="left", baseline="middle", dx=3, fontSize=11,
                                                        color="black").encode(
        alt.X("x0:Q", scale=alt.Scale(domain=[0, 1], nice=False)), y, text="label:N")
    return alt.layer(boxes, labels).properties(width=width, height=depth * _ROW_PX)


class Frame:
    """A tool's own page, shown inline in a sandboxed frame (scripts allowed, nothing fetched): an HTML page
    as ``<iframe srcdoc>``, an SVG as a ``data:`` URL (its script needs the SVG as its own document).
    ``Frame(svg_or_html, height=…)``; ``.data`` is the page itself."""

    def __init__(self, page: str, *, height: int = 560, title: str = "") -> None:
        self.data, self.height, self.title = page, height, title

    def _repr_html_(self) -> str:
        doc = self.data
        style = f"style='width:100%;height:{self.height}px;border:1px solid #ddd'"
        title = _html.escape(self.title, quote=True)
        if doc.lstrip().startswith(("<?xml", "<svg")) and len(doc) < _DATA_URL_MAX:
            # an SVG with its own script must be its own document (its script expects the SVG as the root):
            # a data: URL makes it one; nothing is fetched either way
            src = "data:image/svg+xml;base64," + base64.b64encode(doc.encode()).decode()
            return f"<iframe class='labkit-frame' title='{title}' sandbox='allow-scripts' {style} src='{src}'></iframe>"
        if doc.lstrip().startswith(("<?xml", "<svg")):  # too big for a data: URL: shown, without its script
            doc = "<!DOCTYPE html><html><body style='margin:0'>" + doc[doc.find("<svg"):] + "</body></html>"
        return (f"<iframe class='labkit-frame' title='{title}' sandbox='allow-scripts' {style} "
                f"srcdoc=\"{_html.escape(doc, quote=True)}\"></iframe>")


def flamegraph(profile: Any, *, height: int = 520) -> Frame:
    """py-spy's own flame graph of a :class:`CpuProfile` recorded with ``svg=True`` (interactive: click a box
    to zoom in, Ctrl-F to search), in a sandboxed frame."""
    svg = getattr(profile, "svg", None)
    if not svg:
        raise BadInputError("this profile has no py-spy SVG: record it with svg=True "
                            "(profile.attach(..., svg=True), profile.under_load(..., svg=True), "
                            "profile.call(..., svg=True))")
    return Frame(svg, height=height, title="py-spy flame graph")


def memray_html(profile: Any, *, height: int = 640) -> Frame:
    """memray's own flame graph page of a :class:`MemoryProfile` made with ``html=True`` (self-contained:
    its scripts are inlined, so it works with no network), in a sandboxed frame."""
    page = getattr(profile, "html", None)
    if not page:
        raise BadInputError("this profile has no memray page: track with html=True "
                            "(profile.memory(fn, ..., html=True))")
    return Frame(page, height=height, title="memray flame graph")
