"""The layout explorer: pick a layout, an operation and a size, run it, and watch the chart grow.

    from labkit.layout.panel import layout_panel
    panel = layout_panel()       # displays the controls, Run / Cancel, a progress bar and the chart
    panel.run(layout="slots", operation="filter_sum", n=100_000)   # the same, synchronously (tests, papermill)

A run measures the chosen layout and operation at every size of :data:`labkit.layout.SIZES` up to ``n``
(one :func:`labkit.layout.sweep` cell per size, the progress bar advancing per size; Cancel stops after the
current one), so each run adds a line to the time-per-element chart. Running the same layout and operation
again replaces its line. Built on :class:`labkit.widgets.Panel`.
"""

from __future__ import annotations

from typing import Any

from labkit.errors import LabkitError
from labkit.layout.records import LAYOUTS, OPERATIONS
from labkit.layout.timing import SIZES, LayoutSweep, sweep

__all__ = ["layout_panel", "measure", "chart"]


class _Part:
    """The progress of one size within a run: forwards to the panel's bar as (sizes done, sizes)."""

    def __init__(self, progress: Any, offset: int, total: int) -> None:
        self._progress, self._offset, self._total = progress, offset, total

    def update(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress.update(self._offset + done // max(total, 1), self._total,
                                  f"{self._offset + 1} of {self._total} sizes")

    @property
    def cancelled(self) -> bool:
        return bool(getattr(self._progress, "cancelled", False))


def measure(params: dict[str, Any], progress: Any = None) -> LayoutSweep:
    """One run: ``params["layout"]`` and ``params["operation"]`` at every lab size up to ``params["n"]``."""
    n = int(params["n"])
    sizes = [s for s in SIZES if s <= n] or [n]
    parts: list[LayoutSweep] = []
    for i, size in enumerate(sizes):
        part = _Part(progress, i, len(sizes))
        if part.cancelled:
            break
        parts.append(sweep(params["layout"], params["operation"], size, repeat=3, measure_bytes=False,
                           progress=part))
    if not any(p.timings for p in parts):
        raise LabkitError("cancelled before the first size was measured: press Run again")
    return LayoutSweep(tuple(t for p in parts for t in p.timings), {}, 0,
                       len(parts) == len(sizes) and all(p.complete for p in parts))


def chart(results: list[LayoutSweep]) -> Any:
    """Time per element of every run so far (the latest run of a layout and operation wins)."""
    import pandas as pd

    from labkit.layout.render import per_element_chart

    frames = [r.to_frame().assign(run=i) for i, r in enumerate(results) if r.timings]
    df = pd.concat(frames, ignore_index=True)
    last = df.groupby(["layout", "operation"])["run"].transform("max")
    return per_element_chart(df[df["run"] == last], title="Time per element, every run so far (log–log)")


def layout_panel(layout: str = "dicts", operation: str = "sum", n: int = 100_000) -> Any:
    """The explorer as a :class:`labkit.widgets.Panel`: dropdowns for layout and operation, a size slider."""
    import ipywidgets as w

    from labkit.widgets import Panel

    controls = {"layout": w.Dropdown(options=list(LAYOUTS), value=layout, description="layout"),
                "operation": w.Dropdown(options=list(OPERATIONS), value=operation, description="operation"),
                "n": w.SelectionSlider(options=list(SIZES), value=n, description="up to n")}
    return Panel("Layouts × operations × sizes: time per element", controls, measure, chart,
                 description="Pick a layout and an operation, press Run: it is measured at every size up to n, "
                             "and its line joins the chart.")
