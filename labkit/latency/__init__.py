"""The latency ladder, measured on this machine: probes, the table, and published references.

``table()`` runs every probe and returns a :class:`LatencyTable`; each row is a :class:`Samples` holding raw
per-operation samples, the method (the probe's docstring) and a note when the row is degraded. Probes live
in one module per family: :mod:`~labkit.latency.memory` (caches, branch, bandwidth, compiled with numba),
:mod:`~labkit.latency.pycost`, :mod:`~labkit.latency.osprobes`, :mod:`~labkit.latency.concurrency` (locks,
the GIL, asyncio, threads and processes started), :mod:`~labkit.latency.network`,
:mod:`~labkit.latency.disk` and :mod:`~labkit.latency.work`. How the table looks — ``format_table``, its HTML,
``ladder_chart``, ``working_set_chart``, ``napkin_chart`` — is :mod:`~labkit.latency.render`.
"""

from labkit.latency._harness import Samples
from labkit.latency.estimate import napkin
from labkit.latency.ladder import PROBES, LatencyTable, ladder_frame, table
from labkit.latency.network import http_samples
from labkit.latency.reference import REFERENCE_CSV, references, side_by_side
from labkit.latency.render import format_table, ladder_chart, napkin_chart, working_set_chart

__all__ = ["Samples", "LatencyTable", "table", "PROBES", "format_table", "ladder_frame", "references",
           "side_by_side", "REFERENCE_CSV", "http_samples", "napkin", "ladder_chart", "working_set_chart", "napkin_chart"]
