"""Altair chart builders over labkit's result frames, configured to render with no internet.

Call :func:`enable_offline` once per notebook. It selects Altair's ``jupyter`` renderer in offline mode
(the chart's JavaScript ships inside the ``anywidget`` package, nothing is fetched from a CDN), or the
``svg`` renderer (drawn in Python by vl-convert) for static exports. Never the ``mimetype`` renderer:
JupyterLab 4 cannot draw Vega-Lite 6 by itself, and that renderer breaks notebook validation.

Every builder takes a result (or its ``to_frame()``) and returns an ``alt.Chart``; nothing here measures; every
builder's name ends in ``_chart``.

Only what several domains draw lives here, by topic: :mod:`.offline` (rendering), :mod:`.samples` (measured
samples and comparisons, whatever measured them), :mod:`.growth` (how a cost grows) and :mod:`.guesses` (every
lab's guesses beside its measurements). A domain's own values
are drawn by its package's ``render`` module: ``labkit.nplusone.calls_chart`` (a request's calls, lab 02),
``labkit.load.knee_chart``, ``labkit.latency.ladder_chart``,
``labkit.alloc.pauses_chart``, ``labkit.profile.icicle_chart``, ``labkit.queueing``, ``labkit.layout``,
``labkit.capstone`` … A *waterfall* is always one request's stages laid end to end on a time axis
(``labkit.capstone.waterfall_chart``).
"""

from __future__ import annotations

from labkit.charts.growth import (
    crossover_chart,
    format_map_chart,
    loglog_chart,
    scaling_chart,
    size_steps_chart,
    stage_chart,
)
from labkit.charts.guesses import guesses_chart
from labkit.charts.offline import _bundle_cache, enable_offline, to_svg  # noqa: F401 (_bundle_cache: tests)
from labkit.charts.samples import (
    ab_chart,
    as_frame,
    cdf_chart,
    distribution_chart,
    in_unit,
    percentile_chart,
    predicted_vs_measured,
    predicted_vs_measured_chart,
)

__all__ = ["enable_offline", "to_svg", "as_frame", "in_unit", "distribution_chart", "cdf_chart", "percentile_chart",
           "ab_chart", "predicted_vs_measured_chart", "predicted_vs_measured", "loglog_chart", "scaling_chart",
           "size_steps_chart", "stage_chart", "format_map_chart", "crossover_chart", "guesses_chart"]
