"""The pool-size panel of lab 07: pick a pool size and a rate, run one bounded step, add the point to the chart.

    panel = pool_panel(paths=orders, rate_max=1200, knee=sweep.knee().rate)
    panel                      # controls, Run / Cancel, progress, the chart of every point so far
    panel.run(pool=4, rate=600)  # the same, synchronously (tests, papermill)
    panel.stop()               # stop the service it keeps running between steps

Each step is bounded by ``step_s`` seconds and ``max_requests``. The service of the chosen pool size is kept
running between steps and restarted only when the pool size changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from labkit.errors import BadInputError, LabkitError
from labkit.load import run
from labkit.widgets import Panel, Progress

__all__ = ["PoolPanel", "pool_panel"]


class PoolPanel(Panel):
    """A :class:`labkit.widgets.Panel` that owns one running toyshop (the pool size last run); ``stop()`` ends it."""

    _service: Any = None
    _pool: int | None = None

    def service_for(self, pool: int, start: Callable[..., Any], **start_kwargs: Any) -> Any:
        """The running service with ``pool`` threads, (re)starting it when the size changed."""
        if self._service is not None and self._pool == pool and self._service.alive:
            return self._service
        self.stop()
        variants = {**(start_kwargs.pop("variants", None) or {}), "pool": pool}
        self._service, self._pool = start(variants=variants, **start_kwargs), pool
        return self._service

    def stop(self) -> None:
        """Stop the service this panel started (if any)."""
        if self._service is not None:
            self._service.stop()
        self._service, self._pool = None, None


def pool_panel(paths: Sequence[str] | Callable[[int], str], *, pools: Sequence[int] = (1, 2, 4, 8, 16, 40),
               rate_max: float = 2000.0, rate: float | None = None, pool: int = 40, step_s: float = 2.0,
               warmup_s: float = 0.3, max_requests: int = 20_000, knee: float | None = None,
               start: Callable[..., Any] | None = None, **start_kwargs: Any) -> PoolPanel:
    """Build the panel.

    Args:
        paths: the requests of every step (a list, or a function ``i -> path``).
        pools: the pool sizes offered in the dropdown; ``pool`` is selected first.
        rate_max: the rate slider's top (req/s); ``rate`` its first value (default: half of it).
        step_s, warmup_s, max_requests: the bounds of one step (Poisson arrivals, 64 connections).
        knee: a rate drawn as a dashed rule on the chart (e.g. the sweep's knee).
        start: how to start a service (default :func:`labkit.service.start`); ``start_kwargs`` go to it.
    """
    import ipywidgets as w

    from labkit.queueing.render import points_chart

    if not pools or pool not in pools:
        raise BadInputError(f"pool={pool!r} must be one of pools={list(pools)!r}")
    if not rate_max > 0 or not step_s > 0:
        raise BadInputError(f"rate_max and step_s must be > 0, got rate_max={rate_max!r}, step_s={step_s!r}")
    if start is None:
        from labkit.service import start as _start

        start = _start
    step = max(1, round(rate_max / 100))
    controls = {
        "pool": w.Dropdown(options=list(pools), value=pool, description="pool"),
        "rate": w.IntSlider(value=round(rate if rate is not None else rate_max / 2), min=step, max=round(rate_max),
                            step=step, description="req/s", continuous_update=False),
    }

    def measure(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
        p, r = int(params["pool"]), float(params["rate"])
        progress.update(0, 3, f"starting the service with pool={p}…")
        svc = panel.service_for(p, start, **dict(start_kwargs))
        if progress.cancelled:
            raise LabkitError("cancelled before the run: press Run again")
        progress.update(1, 3, f"{r:,.0f} req/s for {step_s:g} s…")
        res = run(svc.url, rate=r, arrivals="poisson", duration_s=step_s, warmup_s=warmup_s,
                  max_requests=max_requests, paths=paths, connections=64, progress=False, name=f"pool={p}")
        q = res.percentiles((50, 99))
        cpu = res.fingerprint.get("cpu") or {}
        progress.update(3, 3, f"pool={p} at {r:,.0f} req/s: P99 {q[99] / 1e6:,.2f} ms, "
                              f"achieved {res.achieved_rate:,.0f} req/s")
        return {"pool": p, "offered": r, "achieved": res.achieved_rate, "p50_ms": q[50] / 1e6,
                "p99_ms": q[99] / 1e6, "errors": res.error_count, "others_cores": cpu.get("others_cores")}

    panel = PoolPanel("Pool size × rate: one bounded step per Run", controls, measure,
                      lambda points: points_chart(points, knee=knee),
                      description=f"Pick a pool size and a rate, press Run: {step_s:g} s of Poisson arrivals add "
                                  "one point. Try two pool sizes at the same rates, below and near the knee.")
    return panel
