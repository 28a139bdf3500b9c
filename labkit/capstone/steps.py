"""What the capstone measures between its steps: median Server-Timing stage times, the kept baseline's diff,
build cost.

    w = stage_times(shop, "/customers/4/export?preset=baseline", "baseline")    # median stages of n requests
    w.stage_ms["catalog"], w.counts["catalog"], w.client_ms
    disagreement(before_w, w, comparison)                                     # a warning, or None if they agree
    diff = kept_diff(baseline_load, final_load)                              # P50…P99.9 side by side, ratios
    source_lines(export_join)                                                # a fix's cost to build, in lines

A :class:`StageTimes` is a value (raw samples kept, ``to_frame()``, ``save()``/``load()``); charts are in
:mod:`labkit.capstone.render`.
"""

from __future__ import annotations

import inspect
import statistics
from dataclasses import dataclass, field
from typing import Any

from labkit.errors import BadInputError
from labkit.results import Saveable

__all__ = ["STAGES", "StageTimes", "stage_times", "disagreement", "kept_diff", "source_lines"]

#: how far a step's waterfall ratio may lie outside its A/B's interval before it is called disturbed: the A/B
#: times the whole client call (a little more than the waterfall's send-to-last-byte, which moves small ratios)
#: and a waterfall is a few requests in a row; a factor this wide is beyond both
DISAGREE_X = 1.5

#: Server-Timing stages in the order a request meets them; ``other`` (inside the app, in no named stage)
#: and ``outside`` (the client's time minus the server's total: framework, HTTP, loopback) are added.
STAGES = ("parse", "wait", "db", "catalog", "compute", "serialize", "log")
COUNTS = ("db", "catalog", "cache_hit", "cache_miss", "size")


@dataclass(frozen=True)
class StageTimes(Saveable):
    """The median Server-Timing stages of ``n`` requests to one path, and the client's own time.

    Attributes:
        label: a name for the configuration (a step of the lab).
        path: the path requested.
        samples_ms: per stage (and ``total``, ``client``), one value per request, in ms.
        counts: per counted metric (queries, catalog calls, cache hits and misses, body bytes), the median.
    """

    KIND = "stage_times"

    label: str
    path: str
    samples_ms: dict[str, tuple[float, ...]]
    counts: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageTimes:
        """Rebuild from :meth:`to_dict` output (the samples come back as tuples)."""
        w = super().from_dict(data)
        return cls(w.label, w.path, {k: tuple(v) for k, v in w.samples_ms.items()}, dict(w.counts))

    @property
    def n(self) -> int:
        """Requests measured."""
        return len(self.samples_ms.get("client", ()))

    @property
    def stage_ms(self) -> dict[str, float]:
        """Median ms per stage, with ``other`` (total minus the named stages) and ``outside`` (client minus
        total), in request order."""
        med = {k: statistics.median(v) for k, v in self.samples_ms.items() if v}
        out = {s: med.get(s, 0.0) for s in STAGES}
        out["other"] = max(0.0, med.get("total", 0.0) - sum(out.values()))
        out["outside"] = max(0.0, med.get("client", 0.0) - med.get("total", 0.0))
        return out

    @property
    def total_ms(self) -> float:
        """Median of the server's ``total``."""
        return statistics.median(self.samples_ms["total"])

    @property
    def client_ms(self) -> float:
        """Median time the client waited (send to last byte)."""
        return statistics.median(self.samples_ms["client"])

    @property
    def spread_ms(self) -> dict[str, tuple[float, float]]:
        """The middle half (P25, P75) of each stage's per-request ms, in the order of :attr:`stage_ms`, and of
        ``total`` and ``client``; ``other`` and ``outside`` are taken request by request."""
        per = {k: v for k, v in self.samples_ms.items() if v}
        n = len(per.get("client", ()))
        if all(len(v) == n for v in per.values()):  # one value per request in every series: derive the rest
            named = [sum(per[s][i] for s in STAGES if s in per) for i in range(n)]
            total = per.get("total", (0.0,) * n)
            per["other"] = tuple(max(0.0, t - m) for t, m in zip(total, named, strict=True))
            per["outside"] = tuple(max(0.0, c - t) for c, t in zip(per["client"], total, strict=True))
        out = {}
        for k in (*self.stage_ms, "total", "client"):
            v = per.get(k, (0.0,))
            if len(v) == 1:
                out[k] = (v[0], v[0])
            else:
                q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
                out[k] = (q1, q3)
        return out

    def to_frame(self) -> Any:
        """One row per stage: ``step``, ``stage``, ``ms`` (median), ``start_ms`` and ``end_ms`` laid end to end,
        the stage's middle half (``p25_ms``, ``p75_ms``), its median count where it has one (``db``: queries,
        ``catalog``: calls; else None), and the client's median and middle half."""
        import pandas as pd

        rows, t = [], 0.0
        spread = self.spread_ms
        lo, hi = spread["client"]
        for stage, ms in self.stage_ms.items():
            rows.append({"step": self.label, "stage": stage, "ms": ms, "start_ms": t, "end_ms": t + ms,
                         "p25_ms": spread[stage][0], "p75_ms": spread[stage][1], "client_ms": self.client_ms,
                         "client_p25_ms": lo, "client_p75_ms": hi, "n": self.n, "count": self.counts.get(stage)})
            t += ms
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        top = sorted(self.stage_ms.items(), key=lambda kv: -kv[1])[:3]
        return (f"StageTimes({self.label!r}: client {self.client_ms:.3f} ms over {self.n} requests; biggest "
                + ", ".join(f"{s} {ms:.3f}" for s, ms in top) + ")")


def stage_times(shop: Any, path: str, label: str | None = None, n: int = 20, warmup: int = 2,
              headers: dict[str, str] | None = None) -> StageTimes:
    """GET ``path`` ``n`` times one after another (after ``warmup``) with a :class:`labkit.client.Endpoint`
    and keep every response's Server-Timing stages and counts.

    Raises BadInputError for ``n`` < 1, and :class:`labkit.errors.ServiceError` if a response is not 200.
    """
    from labkit.errors import ServiceError

    if not isinstance(n, int) or n < 1:
        raise BadInputError(f"n is how many requests to measure, at least 1, got {n!r}")
    for _ in range(warmup):
        shop.get(path, headers)
    samples: dict[str, list[float]] = {s: [] for s in (*STAGES, "total", "client")}
    counts: dict[str, list[float]] = {c: [] for c in COUNTS}
    for _ in range(n):
        r = shop.get(path, headers)
        if r.status != 200:
            raise ServiceError(f"GET {path} answered {r.status}: {r.body[:200]!r}")
        for s in (*STAGES, "total"):
            samples[s].append(r.dur_ms(s) or 0.0)
        samples["client"].append(r.elapsed_ns / 1e6)
        for c in COUNTS:
            counts[c].append(float(r.count(c) or 0))
    return StageTimes(label or path, path, {k: tuple(v) for k, v in samples.items()},
                     {k: statistics.median(v) for k, v in counts.items()})


def disagreement(before: StageTimes, after: StageTimes, comparison: Any) -> str | None:
    """A warning when two waterfalls' ratio (``after.client_ms / before.client_ms``) lies more than
    :data:`DISAGREE_X` outside the interval of the interleaved A/B of the same two paths (``comparison``, a
    :class:`labkit.measure.comparison.Comparison`): one of them was disturbed — another program, a collection —
    and the waterfall's stages should not be read as this step's; None when they agree."""
    if not (isinstance(before, StageTimes) and isinstance(after, StageTimes)):
        raise BadInputError("disagreement(before, after, comparison) takes two stage_times() results")
    lo, hi = comparison.ci
    seen = after.client_ms / before.client_ms
    if lo / DISAGREE_X <= seen <= hi * DISAGREE_X:
        return None
    return (f"{after.label}: its waterfall says {seen:.2f}× the time of {before.label}'s ({after.client_ms:.3f} "
            f"against {before.client_ms:.3f} ms, {after.n} requests each in a row), the interleaved A/B "
            f"{comparison.ratio:.3f} (interval {lo:.3f}–{hi:.3f}): far apart, so one of them was disturbed (another "
            "program, a collection). Trust the A/B, which interleaves; read this waterfall's stages with care, "
            "and re-run the step to measure both again")


#: a percentile with fewer responses than this beyond it (in the smaller run) is the slowest few, not a tail
THIN_BEYOND = 5


def kept_diff(kept: Any, now: Any, qs: tuple[float, ...] = (50, 90, 99, 99.9)) -> Any:
    """The kept baseline beside a new run, as a design review reads it: a row per percentile (ms), the
    ratio kept/now, how many responses of the smaller run lie beyond it (``beyond``: under
    :data:`THIN_BEYOND`, the row reads the slowest few responses, and ``attrs["thin"]`` names it), and each
    run's responses, errors and offered rate. Both are load results."""
    import pandas as pd

    pk, pn = kept.percentiles(qs), now.percentiles(qs)
    n = min(kept.responses, now.responses)
    rows = [{"percentile": f"P{q:g}", "kept baseline (ms)": pk[q] / 1e6, "now (ms)": pn[q] / 1e6,
             "× faster": pk[q] / pn[q] if pn[q] else float("nan"), "beyond": int(n * (1 - q / 100))} for q in qs]
    df = pd.DataFrame(rows)
    df.attrs["thin"] = [r["percentile"] for r in rows if r["beyond"] < THIN_BEYOND]
    df.attrs["runs"] = {name: {"responses": r.responses, "errors": r.error_count, "offered req/s": r.offered_rate,
                               "when": r.created} for name, r in (("kept", kept), ("now", now))}
    return df


def source_lines(*objects: Any) -> int:
    """Lines of source of functions, classes or modules: a rough, countable proxy for what a fix cost to
    build (and to keep). Objects without source count zero."""
    total = 0
    for obj in objects:
        try:
            total += len([ln for ln in inspect.getsource(obj).splitlines() if ln.strip()])
        except (OSError, TypeError):
            continue
    return total
