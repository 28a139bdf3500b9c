"""Rate sweeps: run the open loop at rising rates and find the knee, where latency bends or throughput stops."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from labkit.errors import BadInputError
from labkit.load._runner import run
from labkit.load.result import LoadResult
from labkit.results import Saveable

__all__ = ["Knee", "Sweep", "sweep"]


@dataclass(frozen=True)
class Knee:
    """Where a sweep bent: ``rate`` is the first offered rate that broke a rule, ``reason`` says which.

    ``last_good_rate`` is the highest offered rate before it (None when the very first step broke a rule):
    the most the service sustains within the rules.
    """

    rate: float
    index: int
    reason: str
    last_good_rate: float | None


@dataclass(frozen=True, eq=False)
class Sweep(Saveable):
    """The steps of a rate sweep, in the order run (rising offered rate)."""

    KIND: ClassVar[str] = "load_sweep"
    VERSION: ClassVar[int] = 1

    steps: tuple[LoadResult, ...]

    def knee(self, *, p99_factor: float = 3.0, min_achieved: float = 0.95,
             max_error_rate: float = 0.01) -> Knee | None:
        """The first step where the service stops keeping up -- the rule, checked step by step in rate order:

        1. **saturated**: achieved rate < ``min_achieved`` × offered (default 95 %), or
        2. **failing**: more than ``max_error_rate`` of requests failed (default 1 %: errors, non-2xx, timeouts), or
        3. **P99 bent**: P99 latency (from intended send) > ``p99_factor`` × the P99 of the lowest-rate step
           (default 3×) -- the queueing knee: below it P99 is nearly flat, past it queueing multiplies it.

        Returns None when no step broke a rule (sweep higher rates).
        """
        if not self.steps:
            return None
        ordered = sorted(range(len(self.steps)), key=lambda i: self.steps[i].offered_rate or 0.0)
        base = self.steps[ordered[0]].percentiles((99,))[99]
        prev: float | None = None
        for i in ordered:
            r = self.steps[i]
            offered = r.offered_rate or 0.0
            p99 = r.percentiles((99,))[99]
            reason = None
            if r.achieved_rate < min_achieved * offered:
                reason = (f"saturated: achieved {r.achieved_rate:,.0f} req/s is "
                          f"{100 * r.achieved_rate / offered:.0f} % of offered")
            elif r.error_rate > max_error_rate:
                reason = f"failing: {100 * r.error_rate:.1f} % of requests failed"
            elif math.isnan(p99) or p99 > p99_factor * base:
                reason = f"P99 bent: {p99 / base:.1f}× the P99 at {self.steps[ordered[0]].offered_rate:,.0f} req/s"
            if reason:
                return Knee(rate=offered, index=i, reason=reason, last_good_rate=prev)
            prev = offered
        return None

    def to_frame(self) -> Any:
        """One row per step: offered, achieved, ok_rate, P50/P90/P99/P99.9 (ns, from intended send), service
        P50/P99, responses, errors, error_rate."""
        import pandas as pd

        rows = []
        for r in self.steps:
            p = r.percentiles((50, 90, 99, 99.9))
            sp = r.percentiles((50, 99), of="service")
            rows.append({
                "offered": r.offered_rate, "achieved": r.achieved_rate, "ok_rate": r.ok_rate,
                "p50_ns": p[50], "p90_ns": p[90], "p99_ns": p[99], "p999_ns": p[99.9],
                "service_p50_ns": sp[50], "service_p99_ns": sp[99],
                "responses": r.responses, "errors": r.error_count, "error_rate": r.error_rate,
            })
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``kind``, ``version`` and each step's LoadResult dict."""
        return {"kind": self.KIND, "version": self.VERSION, "steps": [r.to_dict() for r in self.steps]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sweep:
        """Rebuild a Sweep saved by :meth:`to_dict`."""
        cls.check_header(data)
        return cls(steps=tuple(LoadResult.from_dict(d) for d in data["steps"]))

    def summary(self) -> str:
        """A table of steps and the knee, as text."""
        from labkit.load._render import sweep_text

        return sweep_text(self)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.summary())}</pre>"


def sweep(
    url: str,
    rates: Iterable[float],
    *,
    duration_s: float = 5.0,
    warmup_s: float = 1.0,
    pause_s: float = 0.5,
    stop_after: int | None = 2,
    progress: bool | None = None,
    on_step: Callable[[LoadResult], None] | None = None,
    **run_kwargs: Any,
) -> Sweep:
    """Run the open loop at each rate (in the order given; give them rising) and return a :class:`Sweep`.

    Args:
        url: loopback URL, as for :func:`labkit.load.run`.
        rates: offered rates in req/s, e.g. ``range(200, 2001, 200)``.
        duration_s, warmup_s: per step.
        pause_s: idle seconds between steps, so a queue left by one step drains before the next.
        stop_after: stop once this many consecutive steps were saturated (achieved < 95 % of offered), so
            a collapsed service is not hammered for nothing; None runs every rate.
        progress: one progress bar over the steps (default: only inside a Jupyter kernel).
        on_step: called with each step's LoadResult as it finishes (e.g. to print it).
        run_kwargs: any other :func:`labkit.load.run` argument (connections=, arrivals=, paths=, cpus=…).
    """
    rate_list: Sequence[float] = list(rates)
    if not rate_list:
        raise BadInputError("rates is empty: give the offered rates to try, e.g. rates=range(200, 2001, 200)")
    if "rate" in run_kwargs or "concurrency" in run_kwargs:
        raise BadInputError("sweep() sets rate= itself from rates=; drop rate=/concurrency=")
    if stop_after is not None and stop_after < 1:
        raise BadInputError(f"stop_after must be >= 1 or None, got {stop_after!r}")
    if progress is None:
        from labkit.load._runner import _in_notebook

        progress = _in_notebook()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(rate_list), desc="sweep", unit="step", leave=False)
    steps: list[LoadResult] = []
    saturated = 0
    try:
        for k, rate in enumerate(rate_list):
            if k and pause_s > 0:
                time.sleep(pause_s)
            r = run(url, rate=rate, duration_s=duration_s, warmup_s=warmup_s, progress=False, **run_kwargs)
            steps.append(r)
            if on_step is not None:
                on_step(r)
            if bar is not None:
                p99 = r.percentiles((99,))[99]
                bar.set_postfix_str(f"{rate:,.0f} req/s → P99 {p99 / 1e6:,.2f} ms", refresh=False)
                bar.update(1)
            saturated = saturated + 1 if r.achieved_rate < 0.95 * rate else 0
            if stop_after is not None and saturated >= stop_after:
                break
    finally:
        if bar is not None:
            bar.close()
    return Sweep(steps=tuple(steps))
