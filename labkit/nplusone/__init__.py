"""N+1 detector: record the queries a block makes through sqlite3, SQLAlchemy, Django or an HTTP client, group
them by shape, and point at the shapes one line sends once per item.

>>> from labkit.nplusone import watch                     # doctest: +SKIP
>>> with watch(conn, catalog) as w:                        # doctest: +SKIP
...     export_naive(conn, catalog, 42)
>>> w.report                                               # doctest: +SKIP   (a table, worst shape first)

Modules: ``shapes`` (normalisation), ``taps`` (how each target is listened to and timed; ``hooks`` for
SQLAlchemy's and Django's own hooks), ``recorder``
(``watch``), ``report`` (the value), ``render`` (text/HTML, and lab 02's charts: ``calls_chart`` …), ``budget`` (assertions for tests),
``sites`` (call sites), ``pytest_plugin`` (the ``query_budget`` fixture). The keep-alive client that times
requests and reads their Server-Timing is ``labkit.client.Endpoint``.
"""

from labkit.nplusone.budget import QueryBudgetExceeded, assert_max_queries, check_budget
from labkit.nplusone.recorder import Watch, watch
from labkit.nplusone.render import (
    calls_chart,
    distance_chart,
    latency_vs_items_chart,
    queries_vs_items_chart,
    render_html,
    render_text,
)
from labkit.nplusone.report import DEFAULT_THRESHOLD, Query, Report, ShapeStats
from labkit.nplusone.shapes import normalise_sql, normalise_url

__all__ = [
    "DEFAULT_THRESHOLD",
    "Query",
    "QueryBudgetExceeded",
    "Report",
    "ShapeStats",
    "Watch",
    "assert_max_queries",
    "calls_chart",
    "check_budget",
    "distance_chart",
    "latency_vs_items_chart",
    "normalise_sql",
    "normalise_url",
    "queries_vs_items_chart",
    "render_html",
    "render_text",
    "watch",
]
