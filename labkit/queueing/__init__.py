"""Queueing on a live service (lab 07): Little's law against the service's own count, pool sizes by
experiment, and the panel that adds one bounded step at a time.

    shop = Services(); svc = shop.get(pool=40)               # services kept running per pool size
    obs = observe(svc.url, rate=300, paths=orders)          # load, with GET /stats sampled meanwhile
    obs.predicted_in_flight, obs.measured_in_flight          # λ × W vs the service's mean in-flight count
    study = pool_study([1, 2, 4, 40], paths=orders)         # capacity, and P99 at a common rate, per pool
    duel = tail_rounds({"pool=40": a.url, "pool=4": b.url}, rate=r, paths=orders)
    duel.compare("pool=40", "pool=4")                        # interleaved P99s, with a verdict
    runs_table(r1, r2)                                       # offered, achieved, shed, P99, generator lag, neighbours
    rate_where_pool_fills(4, w)                              # Erlang C: below this rate pool=4 is never the queue

The knee itself is :func:`labkit.load.sweep` (and ``labkit.load.knee_chart``); a busy machine is flagged on
every load result (``labkit.measure.machine.CpuWatch``).
"""

from __future__ import annotations

from labkit.queueing.model import erlang_c, rate_where_pool_fills
from labkit.queueing.observation import Observation, StatsSampler, observe, stages_under_load
from labkit.queueing.panel import PoolPanel, pool_panel
from labkit.queueing.pools import (
    OrderPaths,
    PoolStudy,
    Services,
    TailRounds,
    order_paths,
    pool_study,
    tail_rounds,
)
from labkit.queueing.render import in_flight_chart, little_chart, points_chart, pool_chart, runs_table

__all__ = ["Observation", "OrderPaths", "PoolPanel", "PoolStudy", "Services", "StatsSampler", "TailRounds",
           "erlang_c", "in_flight_chart", "little_chart", "observe", "order_paths", "points_chart", "pool_chart",
           "pool_panel", "pool_study", "rate_where_pool_fills", "runs_table", "stages_under_load", "tail_rounds"]
