"""LoadResult: one load run as a value -- settings, raw per-response samples, errors, rates, fingerprint."""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from labkit.errors import BadInputError
from labkit.load._options import Settings
from labkit.results import Saveable

__all__ = ["LoadResult", "encode_array", "decode_array"]

DEFAULT_QS = (50.0, 90.0, 99.0, 99.9)


def encode_array(a: np.ndarray) -> dict[str, str]:
    """A compact JSON form for a 1-D integer array: dtype + base64 of the zlib-compressed little-endian bytes."""
    a = np.ascontiguousarray(a)
    dt = a.dtype.newbyteorder("<")
    return {"dtype": dt.str, "zlib_b64": base64.b64encode(zlib.compress(a.astype(dt).tobytes(), 6)).decode()}


def decode_array(d: dict[str, str] | list[int]) -> np.ndarray:
    """Inverse of :func:`encode_array` (a plain list is accepted too)."""
    if isinstance(d, list):
        return np.asarray(d, dtype=np.int64)
    return np.frombuffer(zlib.decompress(base64.b64decode(d["zlib_b64"])), dtype=np.dtype(d["dtype"])).copy()


_ARRAYS = ("samples_ns", "service_ns", "start_ns", "statuses", "path_ids")


@dataclass(frozen=True, eq=False)
class LoadResult(Saveable):
    """One load run. Arrays hold one entry per **response** received in the measured window (warm-up excluded).

    Attributes:
        settings: the checked knobs of the run (mode, rate or concurrency, duration, connections…).
        samples_ns: latency per response, in ns. Open loop: from the request's *intended* send time (the
            coordinated-omission-corrected latency a user would see). Closed loop: from the actual send.
        service_ns: from the actual send to the full response, in ns (equals samples_ns in a closed loop).
        start_ns: each request's intended send time, ns after the measured start (for timelines).
        statuses: HTTP status per response; paths / path_ids: the distinct paths and each response's index.
        status_counts: responses per status code.
        errors: failures by kind, never dropped: ``http_<code>`` (non-2xx responses, also in the samples),
            ``timeout`` (no full response within ``timeout_s`` of the send), ``connect``, ``closed``,
            ``protocol``, ``os``, ``unsent`` (waited ``timeout_s`` for a free connection and was never sent).
            ``error_examples`` holds one message per kind.
        offered_rate: the scheduled rate (req/s) in an open loop, None in a closed loop.
        achieved_rate: responses per second over ``duration_s`` (measured start to last response).
        warmup_requests: requests sent during the warm-up and not counted.
        fingerprint: the machine and its load when the run finished (:func:`labkit.fingerprint`).
        t0_ns: the measured start on the run's clock, ``time.perf_counter_ns`` — machine-wide on Linux, so a
            service's own records (its GC pauses, say) can be put on this run's time axis: ``start_ns`` counts
            from it. 0 in results saved before it was recorded.
    """

    KIND: ClassVar[str] = "load"
    VERSION: ClassVar[int] = 1

    settings: Settings
    samples_ns: np.ndarray
    service_ns: np.ndarray
    start_ns: np.ndarray
    statuses: np.ndarray
    path_ids: np.ndarray
    paths: tuple[str, ...]
    status_counts: dict[int, int]
    errors: dict[str, int]
    error_examples: dict[str, str]
    offered_rate: float | None
    achieved_rate: float
    duration_s: float
    warmup_requests: int = 0
    connections_opened: int = 0
    fingerprint: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    name: str = ""
    t0_ns: int = 0

    @property
    def label(self) -> str:
        """``name`` if set, else e.g. ``"open 2,000/s"`` or ``"closed c=8"`` (used in frames, charts, compare)."""
        if self.name:
            return self.name
        s = self.settings
        return f"open {s.rate:,.0f}/s" if s.mode == "open" else f"closed c={s.concurrency}"

    # -- counts and rates ---------------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        """``"open"`` or ``"closed"``."""
        return self.settings.mode

    @property
    def responses(self) -> int:
        """Responses received (any status)."""
        return int(self.samples_ns.size)

    @property
    def ok(self) -> int:
        """2xx responses."""
        return int(np.count_nonzero((self.statuses >= 200) & (self.statuses < 300)))

    @property
    def requests(self) -> int:
        """Requests that were due in the measured window: responses + failures without a response."""
        return self.responses + sum(v for k, v in self.errors.items() if not k.startswith("http_"))

    @property
    def error_count(self) -> int:
        """All failures: non-2xx responses plus requests without a response."""
        return sum(self.errors.values())

    @property
    def error_rate(self) -> float:
        """Failures / requests (0.0 when nothing was due)."""
        return self.error_count / self.requests if self.requests else 0.0

    @property
    def scheduled_rate(self) -> float | None:
        """Open loop: the requests due in the measured window per second of it -- the rate this run's own
        schedule offered. With Poisson arrivals it differs from ``offered_rate`` by chance (a 1-s window at
        100 req/s holds ~100 ± 10), so "did the service keep up?" compares ``achieved_rate`` with this, not
        with the nominal rate. ``offered_rate`` when the request cap ended the run early; None in a closed loop."""
        if self.offered_rate is None:
            return None
        if self.requests >= self.settings.max_requests:
            return self.offered_rate
        return self.requests / self.settings.duration_s

    @property
    def ok_rate(self) -> float:
        """2xx responses per second."""
        return self.ok / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def lag_ns(self) -> np.ndarray:
        """Per response: how late it was sent after its intended time (client-side queueing), in ns."""
        return self.samples_ns - self.service_ns

    # -- statistics ---------------------------------------------------------------------------------------------
    def _pick(self, of: str, ok_only: bool) -> np.ndarray:
        arrays = {"latency": self.samples_ns, "service": self.service_ns, "lag": self.lag_ns}
        if of not in arrays:
            raise BadInputError(f"of= must be one of {sorted(arrays)}, got {of!r}")
        a = arrays[of]
        if ok_only:
            a = a[(self.statuses >= 200) & (self.statuses < 300)]
        return a

    def percentiles(
        self, qs: Sequence[float] = DEFAULT_QS, *, of: str = "latency", ok_only: bool = False
    ) -> dict[float, float]:
        """Percentiles in ns, keyed by percentile (numpy's linear interpolation, as labkit.measure.stats).

        Args:
            qs: percentiles to compute, 0-100.
            of: ``"latency"`` (samples_ns), ``"service"`` (from actual send) or ``"lag"`` (send lateness).
            ok_only: only 2xx responses (e.g. to leave fast 503 rejections out of an overload's latency).

        Returns NaN for every percentile when there is no response to summarise.
        """
        from labkit.measure.stats import percentiles

        a = self._pick(of, ok_only)
        if a.size == 0:
            return {float(q): float("nan") for q in qs}
        return percentiles(a, qs)

    @cached_property
    def histogram(self) -> Any:
        """The latencies (samples_ns) in an ``hdrh`` HdrHistogram (1 ns to 1 h, 3 significant digits)."""
        from hdrh.histogram import HdrHistogram

        h = HdrHistogram(1, 3600 * 10**9, 3)
        for v in np.clip(self.samples_ns, 1, 3600 * 10**9).tolist():
            h.record_value(v)
        return h

    def select(self, path: str | Callable[[str], bool], *, name: str | None = None) -> LoadResult:
        """The responses for one path, or for the paths where ``path(p)`` is true, as a LoadResult.

        Use it to split an interleaved A/B run: ``r.select(lambda p: "n1=join" in p, name="join")``. Rates
        and errors stay those of the whole run (failures without a response cannot be split by path). The
        selection is named ``name``, else the path (for a single path), else the run's label.
        """
        if callable(path):
            keep = [i for i, p in enumerate(self.paths) if path(p)]
        elif path in self.paths:
            keep = [self.paths.index(path)]
        else:
            raise BadInputError(f"path {path!r} was not requested in this run; the run's paths are "
                                f"{self.paths[:10]!r}; or pass a predicate, e.g. lambda p: 'codec=orjson' in p")
        mask = np.isin(self.path_ids, keep)
        arrays = {name: getattr(self, name)[mask] for name in _ARRAYS}
        remap = np.zeros(max(len(self.paths), 1), dtype=np.int32)
        remap[keep] = np.arange(len(keep), dtype=np.int32)
        arrays["path_ids"] = remap[arrays["path_ids"]]
        counts = {int(k): int(v) for k, v in zip(*np.unique(arrays["statuses"], return_counts=True), strict=True)}
        new_name = name if name is not None else (path if isinstance(path, str) else self.label)
        return replace(self, paths=tuple(self.paths[i] for i in keep), status_counts=counts, name=new_name,
                       **arrays)

    # -- frames and files ---------------------------------------------------------------------------------------
    def to_frame(self) -> Any:
        """One row per response: ``t_s`` (intended send, s after the measured start), ``ns`` (the latency,
        = samples_ns), ``service_ns``, ``status``, ``ok`` (2xx), ``path`` and ``name`` (the label) -- the
        ``ns``/``name`` columns the generic labkit.charts builders (cdf, distribution…) read."""
        import pandas as pd

        paths = np.asarray(self.paths, dtype=object)
        return pd.DataFrame(
            {
                "t_s": self.start_ns / 1e9,
                "ns": self.samples_ns,
                "service_ns": self.service_ns,
                "status": self.statuses,
                "ok": (self.statuses >= 200) & (self.statuses < 300),
                "path": paths[self.path_ids] if self.paths else np.array([], dtype=object),
                "name": self.label,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``kind``, ``version``); arrays are stored compactly (see :func:`encode_array`)."""
        from labkit.results import jsonable

        body: dict[str, Any] = {"kind": self.KIND, "version": self.VERSION, "settings": self.settings.to_dict()}
        for name in _ARRAYS:
            body[name] = encode_array(getattr(self, name))
        for name in ("paths", "error_examples", "offered_rate", "achieved_rate", "duration_s",
                     "warmup_requests", "connections_opened", "fingerprint", "created", "name", "t0_ns"):
            body[name] = jsonable(getattr(self, name))
        body["status_counts"] = {str(k): int(v) for k, v in self.status_counts.items()}
        body["errors"] = dict(self.errors)
        return body

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadResult:
        """Rebuild a LoadResult from :meth:`to_dict` output."""
        cls.check_header(data)
        arrays = {name: decode_array(data[name]) for name in _ARRAYS}
        return cls(
            settings=Settings.from_dict(data["settings"]),
            paths=tuple(data["paths"]),
            status_counts={int(k): int(v) for k, v in data["status_counts"].items()},
            errors={str(k): int(v) for k, v in data["errors"].items()},
            error_examples=dict(data.get("error_examples", {})),
            offered_rate=data["offered_rate"],
            achieved_rate=float(data["achieved_rate"]),
            duration_s=float(data["duration_s"]),
            warmup_requests=int(data.get("warmup_requests", 0)),
            connections_opened=int(data.get("connections_opened", 0)),
            fingerprint=dict(data.get("fingerprint", {})),
            created=str(data.get("created", "")),
            name=str(data.get("name", "")),
            t0_ns=int(data.get("t0_ns", 0)),
            **arrays,
        )

    # -- rendering (pure; see labkit.load.render) ------------------------------------------------------------
    def summary(self) -> str:
        """A few lines of text: what was run, rates, errors, percentiles and any warnings."""
        from labkit.load.render import summary_text

        return summary_text(self)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What looks wrong with this run, each with what to do about it (also read by labkit.compare)."""
        from labkit.load.render import warnings_for

        return tuple(warnings_for(self))

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        from labkit.measure.stats import format_duration

        p = self.percentiles((50, 99))
        return (f"<LoadResult {self.label!r} {self.settings.url} responses={self.responses} "
                f"errors={self.error_count} achieved={self.achieved_rate:,.1f}/s P50={format_duration(p[50])} "
                f"P99={format_duration(p[99])}>")

    def _repr_html_(self) -> str:
        from labkit.load.render import summary_html

        return summary_html(self)
