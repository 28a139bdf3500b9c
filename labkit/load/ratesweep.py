"""Rate sweeps: run the open loop at rising rates and find the knee, where latency bends or throughput stops."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from labkit.errors import BadInputError
from labkit.inputs import integer
from labkit.load._runner import run
from labkit.load.result import LoadResult
from labkit.progress import step_beat, steps_bar
from labkit.results import Saveable, TextRepr

__all__ = ["Knee", "Sweep", "sweep", "broken_rule"]

P99_FACTOR = 3.0  # P99 over this many times the first (lowest-rate) step's: the latency has bent
MIN_ACHIEVED = 0.95  # achieved below this share of offered: saturated
MAX_ERROR_RATE = 0.01  # more than this share of requests failed: failing


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
class Sweep(TextRepr, Saveable):
    """The steps of a rate sweep, in the order run (rising offered rate)."""

    KIND: ClassVar[str] = "load_sweep"
    VERSION: ClassVar[int] = 1

    steps: tuple[LoadResult, ...]

    def knee(self, *, p99_factor: float = P99_FACTOR, min_achieved: float = MIN_ACHIEVED,
             max_error_rate: float = MAX_ERROR_RATE) -> Knee | None:
        """The first step where the service stops keeping up -- the rule, checked step by step in rate order:

        1. **saturated**: achieved rate < ``min_achieved`` × the rate the step's schedule offered (default 95 %;
           ``LoadResult.scheduled_rate``: Poisson arrivals offer the nominal rate only on average), or
        2. **failing**: more than ``max_error_rate`` of requests failed (default 1 %: errors, non-2xx, timeouts), or
        3. **P99 bent**: P99 latency (from intended send) > ``p99_factor`` × the P99 of the lowest-rate step
           (default 3×) -- the queueing knee: below it P99 is nearly flat, past it queueing multiplies it.

        Returns None when no step broke a rule (sweep higher rates: :meth:`next_rates`).
        """
        if not self.steps:
            return None
        ordered = sorted(range(len(self.steps)), key=lambda i: self.steps[i].offered_rate or 0.0)
        base = self.steps[ordered[0]]
        prev: float | None = None
        for i in ordered:
            r = self.steps[i]
            reason = broken_rule(r, base, p99_factor=p99_factor, min_achieved=min_achieved,
                                 max_error_rate=max_error_rate)
            if reason:
                return Knee(rate=r.offered_rate or 0.0, index=i, reason=reason, last_good_rate=prev)
            prev = r.offered_rate or 0.0
        return None

    def next_rates(self, n: int = 4) -> tuple[float, ...]:
        """Rates to sweep next, ``n`` of them, rounded to two significant figures:

        * no knee within the rates given -> higher: 1.5×, 2×, 2.5×… the highest rate swept;
        * the lowest rate already broke a rule -> lower: from a quarter of it up to just below it;
        * a knee between two steps -> finer: ``n`` rates evenly between the last good rate and the knee.
        """
        if not self.steps or n < 1:
            return ()
        rates = sorted(r.offered_rate or 0.0 for r in self.steps)
        k = self.knee()
        if k is None:
            out = [rates[-1] * (1 + 0.5 * j) for j in range(1, n + 1)]
        elif k.last_good_rate is None:
            out = [rates[0] * (j + 1) / (n + 1) for j in range(n)]
        else:
            lo, hi = k.last_good_rate, k.rate
            out = [lo + (hi - lo) * j / (n + 1) for j in range(1, n + 1)]
        return tuple(dict.fromkeys(_two_figures(x) for x in out if x > 0))

    @property
    def warnings(self) -> tuple[str, ...]:
        """Reasons not to believe the knee yet, each with what to do: a busy machine during the steps, a
        generator (or its connection pool) falling behind at the knee, no knee at all."""
        from labkit.load.render import busy_note

        out: list[str] = []
        busy = [r for r in self.steps if busy_note(r)]
        if busy:
            worst = max(busy, key=lambda r: r.fingerprint["cpu"]["others_cores"])
            out.append(f"{len(busy)} of {len(self.steps)} steps ran on a busy machine (other programs used up to "
                       f"{worst.fingerprint['cpu']['others_cores']:.2f} cores, at {worst.offered_rate or 0:,.0f} "
                       "req/s): the knee may be the neighbours'. Quieten the machine and sweep again.")
        k = self.knee()
        if k is not None:
            r = self.steps[k.index]
            lag99 = r.percentiles((99,), of="lag")[99]
            svc99 = r.percentiles((99,), of="service")[99]
            if lag99 > 1e6 and lag99 > svc99:
                out.append(f"at the knee ({k.rate:,.0f} req/s) requests left the generator late (P99 send lag "
                           f"{lag99 / 1e6:,.1f} ms, beyond the P99 service time {svc99 / 1e6:,.1f} ms): the queue "
                           "was in the client. Raise connections=, pin the generator (cpus=) and sweep again "
                           "before blaming the service.")
        else:
            rates = sorted(r.offered_rate or 0.0 for r in self.steps)
            out.append(f"no knee between {rates[0]:,.0f} and {rates[-1]:,.0f} req/s: every step kept up. Sweep "
                       f"higher, e.g. rates={list(self.next_rates())}")
        return tuple(out)

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
        from labkit.load.render import sweep_text

        return sweep_text(self)

    def __str__(self) -> str:
        return self.summary()


def sweep(
    url: str,
    rates: Iterable[float],
    *,
    duration_s: float = 5.0,
    warmup_s: float = 1.0,
    pause_s: float = 0.5,
    max_requests: int = 100_000,
    stop_after: int | None = 2,
    progress: bool | None = None,
    on_step: Callable[[LoadResult], None] | None = None,
    **run_kwargs: Any,
) -> Sweep:
    """Run the open loop at each rate (in the order given; give them rising) and return a :class:`Sweep`.

    Every step is bounded twice: ``duration_s`` (plus ``warmup_s``) and ``max_requests``. The sweep stops early
    once it is **clearly past the knee**: ``stop_after`` steps in a row each broke a rule of
    :meth:`Sweep.knee` (saturated, failing, or P99 over 3× the first step's), so a collapsed service is not
    hammered for nothing. A sweep that never bent says so (``Sweep.warnings``) and suggests the next rates
    (``Sweep.next_rates()``).

    Args:
        url: loopback URL, as for :func:`labkit.load.run`.
        rates: offered rates in req/s, rising, e.g. ``range(200, 2001, 200)``; the first is the baseline the
            P99 rule compares with, so start well below the knee.
        duration_s, warmup_s: per step.
        pause_s: idle seconds between steps, so a queue left by one step drains before the next.
        max_requests: cap on measured requests per step.
        stop_after: stop once this many consecutive steps broke a knee rule; None runs every rate.
        progress: one progress bar over the steps (default: only inside a Jupyter kernel); during a step it
            says how far the step is, at least every 30 s (:class:`labkit.progress.Heartbeat`).
        on_step: called with each step's LoadResult as it finishes (e.g. to print it).
        run_kwargs: any other :func:`labkit.load.run` argument (connections=, arrivals=, paths=, cpus=…).
    """
    rate_list: Sequence[float] = list(rates)
    if not rate_list:
        raise BadInputError("rates is empty: give the offered rates to try, e.g. rates=range(200, 2001, 200)")
    if "rate" in run_kwargs or "concurrency" in run_kwargs:
        raise BadInputError("sweep() sets rate= itself from rates=; drop rate=/concurrency=")
    if stop_after is not None:
        integer(stop_after, "stop_after", hint="or None, to run every rate")
    bar = steps_bar(progress, len(rate_list), "sweep", "step")
    steps: list[LoadResult] = []
    past = 0
    try:
        for k, rate in enumerate(rate_list):
            if k and pause_s > 0:
                time.sleep(pause_s)
            with step_beat(bar, f"step {k + 1} at {rate:,.0f} req/s", warmup_s + duration_s):
                r = run(url, rate=rate, duration_s=duration_s, warmup_s=warmup_s, max_requests=max_requests,
                        progress=False, **run_kwargs)
            steps.append(r)
            if on_step is not None:
                on_step(r)
            if bar is not None:
                p99 = r.percentiles((99,))[99]
                bar.set_postfix_str(f"{rate:,.0f} req/s → P99 {p99 / 1e6:,.2f} ms", refresh=False)
                bar.update(1)
            past = past + 1 if broken_rule(r, steps[0]) else 0
            if stop_after is not None and past >= stop_after:
                break
    finally:
        if bar is not None:
            bar.close()
    return Sweep(steps=tuple(steps))


def broken_rule(r: LoadResult, base: LoadResult, *, p99_factor: float = P99_FACTOR,
                min_achieved: float = MIN_ACHIEVED, max_error_rate: float = MAX_ERROR_RATE) -> str | None:
    """Which knee rule (see :meth:`Sweep.knee`) step ``r`` breaks against the baseline step ``base``, or None."""
    due = r.scheduled_rate or r.offered_rate or 0.0
    p99 = r.percentiles((99,))[99]
    base99 = base.percentiles((99,))[99]
    if r.achieved_rate < min_achieved * due:
        return (f"saturated: achieved {r.achieved_rate:,.0f} req/s is "
                f"{100 * r.achieved_rate / due:.0f} % of the {due:,.0f} req/s scheduled")
    if r.error_rate > max_error_rate:
        return f"failing: {100 * r.error_rate:.1f} % of requests failed"
    if math.isnan(p99) or p99 > p99_factor * base99:
        return f"P99 bent: {p99 / base99:.1f}× the P99 at {base.offered_rate or 0:,.0f} req/s"
    return None


def _two_figures(x: float) -> float:
    """Round to two significant figures (1234 -> 1200), so suggested rates read as rates a person would pick."""
    if x <= 0:
        return 0.0
    digits = 1 - math.floor(math.log10(x))
    return float(round(x, digits))
