"""Altair chart builders over labkit's result frames, configured to render with no internet.

Call :func:`enable_offline` once per notebook. It selects Altair's ``jupyter`` renderer in offline mode
(the chart's JavaScript ships inside the ``anywidget`` package, nothing is fetched from a CDN), or the
``svg`` renderer (drawn in Python by vl-convert) for static exports. Never the ``mimetype`` renderer:
JupyterLab 4 cannot draw Vega-Lite 6 by itself, and that renderer breaks notebook validation.

Every builder takes a result (or its ``to_frame()``) and returns an ``alt.Chart``; nothing here measures.

The builders live by topic: :mod:`.offline` (rendering), :mod:`.samples` (measured samples, comparisons, load
runs), :mod:`.latency` (the latency labs' charts) and :mod:`.growth` (how a cost grows).
"""

from __future__ import annotations

from labkit.charts.growth import (
    crossover,
    format_map,
    loglog,
    scaling,
    size_steps,
    stage_bars,
)
from labkit.charts.latency import (
    distance_sweep,
    latency_curve,
    latency_ladder,
    latency_vs_items,
    napkin_stages,
    queries_vs_items,
    waterfall,
)
from labkit.charts.offline import _bundle_cache, enable_offline, to_svg  # noqa: F401 (_bundle_cache: tests)
from labkit.charts.samples import (
    UNIT_AXIS,
    ab,
    cdf,
    distribution,
    knee_chart,
    load_timeline,
    percentile_bars,
    predicted_vs_measured,
)

__all__ = ["enable_offline", "distribution", "cdf", "percentile_bars", "ab", "to_svg", "UNIT_AXIS", "latency_ladder",
           "latency_curve", "latency_vs_items", "queries_vs_items", "stage_bars", "format_map", "predicted_vs_measured",
           "crossover", "loglog", "napkin_stages", "waterfall", "distance_sweep", "load_timeline", "knee_chart",
           "scaling", "size_steps"]
