"""Data layout, measured: one record type in eight layouts, and the locality cases behind lab 04.

    from labkit import layout
    cols = layout.make_columns(100_000)                 # the source: one int64 array per field
    rows = layout.build("dicts", cols)                  # ... in any of layout.LAYOUTS
    layout.operation("dicts", "sum")(rows)              # sum / filter_sum / update, the same answer everywhere
    layout.bytes_per_record("dicts")                    # measured with tracemalloc
    s = layout.sweep(sizes=(1_000, 1_000_000))          # time per element of every layout × operation × size
    layout.per_element_chart(s)

    case = layout.FieldSum(4_000_000)                   # structured-array field vs column: cache-line napkin math
    labkit.compare(case.column_sum, case.field_sum)     # against case.predicted_ratio()
    layout.Scattered(1_000_000)                         # the same objects, in allocation order and shuffled
    layout.Loads(layout.past_llc())                     # dependent (chase) vs independent (gather) loads
    layout.FalseSharing().compare()                     # two threads, one cache line

Modules: :mod:`~labkit.layout.records` (layouts and operations), :mod:`~labkit.layout.timing` (the
measurement and its result), :mod:`~labkit.layout.locality` (the cases), :mod:`~labkit.layout.render` (charts),
:mod:`~labkit.layout.panel` (the interactive explorer, on :class:`labkit.widgets.Panel`).
"""

from typing import Any

from labkit.layout.locality import LINE, FalseSharing, FieldSum, Loads, Scattered, past_llc, total_price
from labkit.layout.records import (
    FIELDS,
    LAYOUTS,
    OPERATIONS,
    PAYLOAD_BYTES,
    build,
    bytes_per_record,
    make_columns,
    operation,
    to_columns,
)
from labkit.layout.timing import SIZES, LayoutSweep, Timing, crossover, sweep

__all__ = [
    "FIELDS", "LAYOUTS", "OPERATIONS", "PAYLOAD_BYTES", "SIZES", "LINE",
    "make_columns", "build", "operation", "to_columns", "bytes_per_record",
    "sweep", "LayoutSweep", "Timing", "crossover",
    "FieldSum", "Scattered", "Loads", "FalseSharing", "total_price", "past_llc",
    "per_element_chart", "bytes_chart", "relative_chart", "quote_latency_chart", "ratios_chart",
]

_CHARTS = {"per_element_chart", "bytes_chart", "relative_chart", "quote_latency_chart", "ratios_chart"}


def __getattr__(name: str) -> Any:
    # the chart builders need Altair, slow to import: loaded on first use, not by measuring code
    if name in _CHARTS:
        from labkit.layout import render

        return getattr(render, name)
    raise AttributeError(f"module 'labkit.layout' has no attribute {name!r}")
