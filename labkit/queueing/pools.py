"""Sizing a thread pool by experiment: capacity and the tail at a fixed load, for several pool sizes.

    study = pool_study([1, 2, 4, 40], paths=orders)      # one service per pool size, one after another
    study.to_frame()                                     # pool, capacity, P50/P99 at 80 % of the reference's
    study.best()                                         # the pool with the lowest P99 there
    duel = tail_rounds({"pool=40": a.url, "pool=4": b.url}, rate=..., paths=orders, rounds=6)
    duel.compare("pool=40", "pool=4")                    # labkit.compare of the per-round P99s

Why one *common* rate: a pool is judged by what users of the same service would see at the same traffic.
The rate is a fraction of the **reference** pool's measured capacity (the service as shipped, ``pool=40``), so
a pool that cannot carry it shows as overloaded -- a result, not an error. Capacity is measured with a closed
loop, the same for every pool and busier than the largest (``concurrency`` = 2 × the largest pool, at least
16): what the service completes flat out under the same pressure.

A single load run's P99 comes with no honest interval (neighbouring requests share a queue, so its samples
are not independent). :func:`tail_rounds` measures the tail the way ``labkit.compare`` needs: several short
runs per side, interleaved (A B, B A …), one P99 per run, then the P99s compared as samples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from labkit.errors import BadInputError
from labkit.inputs import integer
from labkit.load import LoadResult, run
from labkit.progress import steps_bar
from labkit.results import Saveable

__all__ = ["PoolStudy", "pool_study", "TailRounds", "tail_rounds", "OrderPaths", "order_paths", "Services"]

PathPicker = Callable[[int], str]


@dataclass(frozen=True)
class OrderPaths:
    """The request picker the lab loads toyshop with: request ``i`` reads ``/orders/{id}``, the ids spread over
    all ``n`` orders by a fixed stride, so neighbouring requests read different rows (no one hot row)."""

    n: int

    def __call__(self, i: int) -> str:
        return f"/orders/{1 + (i * 7919) % self.n}"


class Services:
    """Running toyshops, one per (pool, queue) setting, started on first use and kept until :meth:`close`:
    a lab that compares pool sizes pays each start once.

        shop = Services()                 # start_kwargs (size=, cpus=, catalog_delay_ms=…) apply to every service
        svc = shop.get(pool=40)           # started now; the same object the next time
        pool_study([4, 40], paths=orders, start=shop.start)   # reuses them (and keeps the ones it starts)
        shop.close()                      # stops every one

    :meth:`start` has the signature of :func:`labkit.service.start` (``variants=`` with ``pool``/``queue``) and
    returns a stand-in whose ``stop()`` and ``with`` block leave the service running: what ``pool_study(start=)``
    and ``pool_panel(start=)`` take.
    """

    def __init__(self, **start_kwargs: Any) -> None:
        self._kw = start_kwargs
        self._running: dict[tuple[int, int], Any] = {}

    def get(self, pool: int = 40, queue: int | str = "unbounded") -> Any:
        """The running service with ``pool`` threads and ``queue`` (``"unbounded"``, or at most N requests waiting
        for a thread: 503 beyond), started if need be."""
        key = (int(pool), queue if queue == "unbounded" else int(queue))
        svc = self._running.get(key)
        if svc is None or not svc.alive:
            from labkit.service import start

            svc = self._running[key] = start(variants={"pool": key[0], "queue": key[1]}, **self._kw)
        return svc

    def start(self, *, variants: Mapping[str, Any] | None = None, **kwargs: Any) -> _Kept:
        """Like :func:`labkit.service.start` for ``pool``/``queue`` variants, but kept running (see above)."""
        v = dict(variants or {})
        if set(v) - {"pool", "queue"} or kwargs:
            raise BadInputError(f"Services.start varies only pool= and queue= (set the rest once, in Services(...)); "
                                f"got variants={v!r} and {sorted(kwargs)}")
        return _Kept(self.get(int(v.get("pool", 40)), v.get("queue", "unbounded")))

    def close(self) -> None:
        """Stop every service started here."""
        for svc in self._running.values():
            svc.stop()
        self._running.clear()

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Services: {', '.join(f'pool={p} queue={q}' for p, q in self._running) or 'none running'}>"


class _Kept:
    """A running service lent out by :class:`Services`: everything reads through, stopping it does nothing."""

    def __init__(self, service: Any) -> None:
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)

    def stop(self, *args: Any, **kwargs: Any) -> None:
        """Leaves the service running: :meth:`Services.close` stops it."""

    def __enter__(self) -> _Kept:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def order_paths(size: str = "small") -> OrderPaths:
    """An :class:`OrderPaths` over every order of the dataset of ``size`` (built if needed)."""
    from labkit.toyshop.db import connect

    conn = connect(size=size)
    try:
        return OrderPaths(int(conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]))
    finally:
        conn.close()


@dataclass(frozen=True, eq=False)
class PoolStudy(Saveable):
    """The runs of :func:`pool_study`.

    Attributes:
        pools: the pool sizes, in the order run (the reference first).
        reference: the pool whose capacity set the rates.
        fractions: the shares of the reference's capacity that each pool was run at.
        capacity: per pool, the closed-loop run that measured its capacity.
        runs: per pool, one open-loop run per fraction (``runs[i][j]``: pool ``pools[i]`` at ``fractions[j]``).
    """

    KIND: ClassVar[str] = "pool_study"
    VERSION: ClassVar[int] = 1

    pools: tuple[int, ...]
    reference: int
    fractions: tuple[float, ...]
    capacity: tuple[LoadResult, ...]
    runs: tuple[tuple[LoadResult, ...], ...]

    @property
    def rates(self) -> tuple[float, ...]:
        """The offered rates, one per fraction (the same for every pool)."""
        return tuple(r.offered_rate or 0.0 for r in self.runs[0])

    def capacity_of(self, pool: int) -> float:
        """Requests per second pool ``pool`` completed flat out."""
        return self.capacity[self.pools.index(pool)].achieved_rate

    def at(self, pool: int, fraction: float) -> LoadResult:
        """The open-loop run of ``pool`` at ``fraction`` of the reference's capacity."""
        if pool not in self.pools or fraction not in self.fractions:
            raise BadInputError(f"this study ran pools {list(self.pools)} at fractions {list(self.fractions)}; "
                                f"got pool={pool!r}, fraction={fraction!r}")
        return self.runs[self.pools.index(pool)][self.fractions.index(fraction)]

    def best(self, fraction: float | None = None) -> int:
        """The pool with the lowest P99 at ``fraction`` (default: the highest fraction run)."""
        f = max(self.fractions) if fraction is None else fraction
        return min(self.pools, key=lambda p: self.at(p, f).percentiles((99,))[99])

    def to_frame(self) -> Any:
        """One row per pool and fraction: pool, capacity, fraction, offered, achieved, p50_ms, p99_ms,
        p99_ok_ms (2xx only), errors."""
        import pandas as pd

        rows = []
        for pool, cap, runs in zip(self.pools, self.capacity, self.runs, strict=True):
            for f, r in zip(self.fractions, runs, strict=True):
                p = r.percentiles((50, 99))
                rows.append({"pool": pool, "capacity": cap.achieved_rate, "fraction": f, "offered": r.offered_rate,
                             "achieved": r.achieved_rate, "p50_ms": p[50] / 1e6, "p99_ms": p[99] / 1e6,
                             "p99_ok_ms": r.percentiles((99,), ok_only=True)[99] / 1e6, "errors": r.error_count})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the settings and every run's dict."""
        return {"kind": self.KIND, "version": self.VERSION, "pools": list(self.pools), "reference": self.reference,
                "fractions": list(self.fractions), "capacity": [r.to_dict() for r in self.capacity],
                "runs": [[r.to_dict() for r in row] for row in self.runs]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolStudy:
        """Rebuild a study saved with :meth:`to_dict`."""
        cls.check_header(data)
        return cls(pools=tuple(data["pools"]), reference=int(data["reference"]), fractions=tuple(data["fractions"]),
                   capacity=tuple(LoadResult.from_dict(d) for d in data["capacity"]),
                   runs=tuple(tuple(LoadResult.from_dict(d) for d in row) for row in data["runs"]))


def _check_pools(pools: Sequence[int]) -> list[int]:
    out = list(pools)
    if not out or any(isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 1024 for p in out):
        raise BadInputError(f"pools must be a list of thread-pool sizes 1–1024, e.g. [1, 2, 4, 40]; got {pools!r}")
    if len(set(out)) != len(out):
        raise BadInputError(f"pools lists a size twice: {pools!r}")
    return out


def pool_study(pools: Sequence[int], *, paths: Sequence[str] | PathPicker, reference: int = 40,
               fractions: Sequence[float] = (0.8,), capacity_s: float = 3.0, step_s: float = 4.0,
               warmup_s: float = 0.5, connections: int = 64, start: Callable[..., Any] | None = None,
               progress: bool | None = None, reference_rate: float | None = None, **start_kwargs: Any) -> PoolStudy:
    """For each pool size: start toyshop with ``variants={"pool": N}``, measure its capacity, then run it at each
    fraction of the reference pool's capacity (Poisson arrivals). Services are started one at a time.

    Args:
        pools: sizes to try, e.g. ``[1, 2, 4, 40]``; ``reference`` is added if missing and run first.
        paths: the requests (a list, or a function ``i -> path``), e.g. orders spread over the dataset.
        reference: the pool whose capacity sets the common rates (default 40, Starlette's default).
        fractions: shares of the reference's capacity to run every pool at, e.g. ``(0.3, 0.8)``.
        capacity_s, step_s, warmup_s: seconds of the capacity run, of each open-loop run, and of each warm-up.
        connections: the open loop's connections (enough that the client is never where the queue forms).
        start: how to start a service (default :func:`labkit.service.start`), called as
            ``start(variants={"pool": N, …}, **start_kwargs)``; ``start_kwargs`` may hold ``variants``, ``cpus``,
            ``catalog_delay_ms``, ``size``.
        progress: a progress bar over the runs (default: only inside a Jupyter kernel).
        reference_rate: the reference pool's capacity (req/s) when it was measured already: the rates are
            fractions of it, so "80 % of capacity" means the same rate here as where it was measured (each
            pool's own flat-out run still happens and is reported). Default: the reference's run here.
    """
    pools = _check_pools(pools)
    if isinstance(reference, bool) or not isinstance(reference, int) or reference < 1:
        raise BadInputError(f"reference must be a pool size (an integer >= 1), got {reference!r}")
    fracs = tuple(float(f) for f in fractions)
    if not fracs or any(not 0 < f <= 2 for f in fracs):
        raise BadInputError(f"fractions must be shares of capacity in (0, 2], e.g. (0.3, 0.8); got {fractions!r}")
    if reference_rate is not None and (isinstance(reference_rate, bool) or not isinstance(reference_rate, int | float)
                                       or not reference_rate > 0):
        raise BadInputError(f"reference_rate must be a rate in requests per second (> 0), got {reference_rate!r}")
    order = [reference] + [p for p in pools if p != reference]
    if start is None:
        from labkit.service import start as _start

        start = _start
    base_variants = dict(start_kwargs.pop("variants", None) or {})
    bar = steps_bar(progress, len(order) * (1 + len(fracs)), "pool study", "run")
    capacity: list[LoadResult] = []
    runs: list[tuple[LoadResult, ...]] = []
    rates: list[float] = []
    flat_out = max(16, 2 * max(order))
    try:
        for pool in order:
            with start(variants={**base_variants, "pool": pool}, **start_kwargs) as svc:
                cap = run(svc.url, concurrency=flat_out, duration_s=capacity_s, warmup_s=warmup_s,
                          paths=paths, progress=False, name=f"pool={pool} flat out")
                capacity.append(cap)
                if bar is not None:
                    bar.set_postfix_str(f"pool={pool}: {cap.achieved_rate:,.0f} req/s flat out", refresh=False)
                    bar.update(1)
                if not rates:
                    ref = reference_rate if reference_rate is not None else cap.achieved_rate
                    rates = [max(1.0, round(f * ref)) for f in fracs]
                row = []
                for f, rate in zip(fracs, rates, strict=True):
                    row.append(run(svc.url, rate=rate, arrivals="poisson", duration_s=step_s, warmup_s=warmup_s,
                                   paths=paths, connections=connections, progress=False,
                                   name=f"pool={pool} @ {f:.0%}"))
                    if bar is not None:
                        bar.update(1)
                runs.append(tuple(row))
    finally:
        if bar is not None:
            bar.close()
    return PoolStudy(pools=tuple(order), reference=reference, fractions=fracs, capacity=tuple(capacity),
                     runs=tuple(runs))


@dataclass(frozen=True, eq=False)
class TailRounds(Saveable):
    """Interleaved short runs of several services at one rate: one P99 per run (see :func:`tail_rounds`).

    Attributes:
        names: the sides, in the order given.
        rate: the offered rate (req/s, Poisson arrivals).
        runs: ``runs[k]`` holds side ``names[k]``'s runs, in round order.
    """

    KIND: ClassVar[str] = "tail_rounds"
    VERSION: ClassVar[int] = 1

    names: tuple[str, ...]
    rate: float
    runs: tuple[tuple[LoadResult, ...], ...]

    def p99s_ns(self, name: str) -> tuple[float, ...]:
        """Side ``name``'s P99 of each round, in ns."""
        if name not in self.names:
            raise BadInputError(f"no side {name!r} here; the sides are {list(self.names)}")
        return tuple(r.percentiles((99,))[99] for r in self.runs[self.names.index(name)])

    def compare(self, baseline: str, candidate: str, **kwargs: Any) -> Any:
        """``labkit.compare`` of the two sides' per-round P99s (independent samples): its ratio is
        median P99 of ``candidate`` / median P99 of ``baseline``."""
        from labkit.measure.comparison import compare

        return compare(list(self.p99s_ns(baseline)), list(self.p99s_ns(candidate)),
                       names=(f"{baseline} P99", f"{candidate} P99"), **kwargs)

    def to_frame(self) -> Any:
        """One row per run: name, round, offered, achieved, p50_ms, p99_ms, errors."""
        import pandas as pd

        rows = [{"name": n, "round": i, "offered": r.offered_rate, "achieved": r.achieved_rate,
                 "p50_ms": r.percentiles((50,))[50] / 1e6, "p99_ms": r.percentiles((99,))[99] / 1e6,
                 "errors": r.error_count}
                for n, side in zip(self.names, self.runs, strict=True) for i, r in enumerate(side)]
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"kind": self.KIND, "version": self.VERSION, "names": list(self.names), "rate": self.rate,
                "runs": [[r.to_dict() for r in side] for side in self.runs]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TailRounds:
        """Rebuild from :meth:`to_dict`."""
        cls.check_header(data)
        return cls(names=tuple(data["names"]), rate=float(data["rate"]),
                   runs=tuple(tuple(LoadResult.from_dict(d) for d in side) for side in data["runs"]))


def tail_rounds(urls: Mapping[str, str], *, rate: float,
                paths: Sequence[str] | PathPicker | Mapping[str, Sequence[str] | PathPicker], rounds: int = 6,
                step_s: float = 3.0, warmup_s: float = 0.3, connections: int = 64, pause_s: float = 0.3,
                progress: bool | None = None) -> TailRounds:
    """Run each service at ``rate`` (Poisson) for ``step_s``, side after side, for ``rounds`` rounds, alternating
    which side goes first (A B, B A …) so a slow spell of the machine lands on both alike.

    Args:
        urls: name -> a running service's URL, e.g. ``{"pool=40": a.url, "pool=4": b.url}``; two sides may
            share one URL when their ``paths`` differ (a request switch: one process, no process to blame).
        rate: offered rate, req/s.
        paths: the requests, as for :func:`labkit.load.run`; or name -> requests, one entry per side, e.g.
            ``{"codec=json": orders, "codec=orjson": lambda i: orders(i) + "?codec=orjson"}``.
        rounds: one P99 per side per round; ``labkit.compare`` needs at least 2 (and 6 or more to decide).
        pause_s: idle time after each run, so a queue it left drains before the next.
    """
    import time

    names = list(urls)
    if len(names) < 2:
        raise BadInputError(f"tail_rounds compares services: give at least two, e.g. {{'pool=40': a.url, "
                            f"'pool=4': b.url}}; got {list(urls)}")
    integer(rounds, "rounds", low=2, hint="each round gives one P99 per side, e.g. rounds=5")
    if isinstance(paths, Mapping):
        if set(paths) != set(names):
            raise BadInputError(f"paths as a mapping needs one entry per side of urls ({names}); got {list(paths)}")
        per_side = dict(paths)
    else:
        per_side = {n: paths for n in names}
    bar = steps_bar(progress, rounds * len(names), "tail rounds", "run")
    out: dict[str, list[LoadResult]] = {n: [] for n in names}
    try:
        for k in range(rounds):
            for name in (names if k % 2 == 0 else names[::-1]):
                out[name].append(run(urls[name], rate=rate, arrivals="poisson", seed=k, duration_s=step_s,
                                     warmup_s=warmup_s, paths=per_side[name], connections=connections, progress=False,
                                     name=f"{name} round {k + 1}"))
                if bar is not None:
                    bar.update(1)
                time.sleep(pause_s)
    finally:
        if bar is not None:
            bar.close()
    return TailRounds(names=tuple(names), rate=float(rate), runs=tuple(tuple(out[n]) for n in names))
