"""HTTP load generation against the local service: open loop, closed loop, rate sweeps and the knee.

    >>> r = labkit.load.run(svc.url + "/health", rate=2000, duration_s=10)   # open loop, 2,000 req/s
    >>> r.percentiles()            # ns, latency from each request's *intended* send time
    >>> labkit.load.run(url, concurrency=8, duration_s=10)                    # closed loop
    >>> sw = labkit.load.sweep(url, rates=range(500, 5001, 500)); sw.knee(); sw.to_frame()
    >>> with labkit.load.background(url, rate=50, duration_s=60) as bg:   # load while you measure else
    ...     bg.warm(); measure_something()
    >>> bg.result
    >>> labkit.load.knee_chart(sw); labkit.load.timeline_chart(r)          # charts (labkit.load.render)

Results are values (:class:`LoadResult`, :class:`Sweep`) with raw samples, ``to_frame()`` and JSON
``save()``/``load()``; ``labkit.compare(a, b)`` accepts two LoadResults (it reads ``samples_ns``).
Only loopback addresses are ever targeted. The engine is a minimal HTTP/1.1 client on asyncio streams and
uvloop (see ``labkit.load._engine`` for how the open loop schedules and times requests).
"""

from __future__ import annotations

from labkit.load._runner import run, run_async
from labkit.load.handle import Background, background
from labkit.load.ratesweep import Knee, Sweep, sweep
from labkit.load.render import busy_note, knee_chart, timeline_chart
from labkit.load.result import LoadResult

__all__ = ["Background", "Knee", "LoadResult", "Sweep", "background", "busy_note", "knee_chart", "run", "run_async", "sweep",
           "timeline_chart"]
