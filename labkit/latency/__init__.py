"""The latency ladder, measured on this machine: probes, the table, and published references.

``table()`` runs every probe and returns a :class:`LatencyTable`; each row is a :class:`Samples` holding raw
per-operation samples, the method (the probe's docstring) and a note when the row is degraded. Probes live
in one module per family: :mod:`~labkit.latency.memory` (caches, branch, bandwidth, compiled with numba),
:mod:`~labkit.latency.pycost`, :mod:`~labkit.latency.osprobes`, :mod:`~labkit.latency.network`,
:mod:`~labkit.latency.disk` and :mod:`~labkit.latency.work`. Its charts — ``ladder_chart``, ``working_set_chart``,
``napkin_chart`` — are in :mod:`~labkit.latency.render`.
"""

from typing import Any

from labkit.latency._harness import Samples
from labkit.latency.estimate import napkin
from labkit.latency.ladder import PROBES, LatencyTable, format_table, ladder_frame, table
from labkit.latency.network import http_samples
from labkit.latency.reference import REFERENCE_CSV, references, side_by_side

__all__ = ["Samples", "LatencyTable", "table", "PROBES", "format_table", "ladder_frame", "references",
           "side_by_side", "REFERENCE_CSV", "http_samples", "napkin", "ladder_chart", "working_set_chart", "napkin_chart"]

_CHARTS = {"ladder_chart", "working_set_chart", "napkin_chart"}


def __getattr__(name: str) -> Any:
    # the chart builders need Altair, slow to import: loaded on first use, not by the probes
    if name in _CHARTS:
        from labkit.latency import render

        return getattr(render, name)
    raise AttributeError(f"module 'labkit.latency' has no attribute {name!r}")
