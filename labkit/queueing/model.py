"""Napkin queueing for a pool of threads: Little's law's offered load, and Erlang C's chance of waiting.

    offered = rate * w                   # threads busy on average (Little's law), "erlangs"
    erlang_c(4, offered)                 # chance an arriving request finds all 4 threads busy (M/M/c)
    rate_where_pool_fills(4, w)          # below this rate a 4-thread pool is (almost) never the queue

The M/M/c model assumes independent threads, Poisson arrivals and exponential service times. Python threads
that share one interpreter lock are not independent servers, so read these numbers as the napkin a lab
checks against a measurement, not as a prediction to trust on its own.
"""

from __future__ import annotations

from labkit.errors import BadInputError
from labkit.inputs import integer

__all__ = ["erlang_c", "rate_where_pool_fills"]


def erlang_c(servers: int, offered: float) -> float:
    """Erlang C: the chance that an arrival waits because all ``servers`` are busy, for ``offered`` erlangs
    (rate × mean service time). 1.0 when ``offered >= servers`` (no steady state: the queue grows)."""
    integer(servers, "servers", hint="servers counts the threads in the pool")
    if not offered >= 0:
        raise BadInputError(f"offered load must be >= 0 erlangs (rate × service time), got {offered!r}")
    if offered >= servers:
        return 1.0
    # Erlang B by its stable recurrence, then C from B
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1 - rho + rho * b)


def rate_where_pool_fills(servers: int, w_s: float, chance: float = 0.01) -> float:
    """The arrival rate (req/s) above which a request finds all ``servers`` threads busy more often than
    ``chance``, when each request holds a thread ``w_s`` seconds: below it, the pool's size is not where any
    request waits, and changing it cannot be measured."""
    if not w_s > 0 or not 0 < chance < 1:
        raise BadInputError(f"need w_s > 0 seconds and 0 < chance < 1, got w_s={w_s!r}, chance={chance!r}")
    lo, hi = 0.0, float(servers)
    for _ in range(60):  # bisect on the offered load: erlang_c rises monotonically with it
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if erlang_c(servers, mid) < chance else (lo, mid)
    return lo / w_s
