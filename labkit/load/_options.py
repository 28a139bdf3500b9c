"""Checked settings for a load run: the target (loopback only) and the knobs, with errors that say how to fix."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from labkit import inputs
from labkit.errors import BadInputError
from labkit.inputs import loopback_url

__all__ = ["Target", "Settings", "parse_target", "make_settings", "make_picker", "PathPicker"]

PathPicker = Callable[[int], str]
"""A function from the request index (0, 1, 2…, warm-up included) to the path + query to GET."""

MAX_DURATION_S = 3600.0
MAX_REQUESTS = 50_000_000


@dataclass(frozen=True)
class Target:
    """Where requests go: a loopback ``host``/``port``, the ``Host`` header, and the URL's path + query."""

    host: str
    port: int
    host_header: str
    path: str


@dataclass(frozen=True)
class Settings:
    """Everything that shapes a run (saved with its result so a run can be repeated)."""

    url: str
    mode: str  # "open" (constant arrival rate) or "closed" (fixed concurrency)
    rate: float | None
    concurrency: int | None
    arrivals: str  # "constant" or "poisson" (open loop only)
    duration_s: float
    max_requests: int
    timeout_s: float
    connections: int
    warmup_s: float
    seed: int
    paths: tuple[str, ...] | None  # the path list when one was given; None for the URL's own path or a picker
    picker: str | None  # the picker function's name when a callable was given

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict."""
        d = asdict(self)
        d["paths"] = list(self.paths) if self.paths is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        """Rebuild settings saved by :meth:`to_dict`."""
        d = dict(d)
        d["paths"] = tuple(d["paths"]) if d.get("paths") is not None else None
        return cls(**d)


def parse_target(url: str) -> Target:
    """Split ``url`` into a :class:`Target`, refusing anything that is not plain HTTP to a loopback address
    (the rule of :func:`labkit.inputs.loopback_url`; a URL without a port means port 80)."""
    u = loopback_url(url, "labkit.load", example="http://127.0.0.1:8000/health", default_port=80)
    return Target(host=u.host, port=u.port, host_header=u.netloc, path=u.path)


def _positive(name: str, value: Any, hint: str, *, integer: bool = False, zero_ok: bool = False) -> None:
    if integer:
        inputs.integer(value, name, low=0 if zero_ok else 1, hint=hint)
    else:
        inputs.number(value, name, low_ok=zero_ok, hint=hint)


def make_settings(
    url: str,
    *,
    rate: float | None,
    concurrency: int | None,
    arrivals: str,
    duration_s: float,
    max_requests: int,
    timeout_s: float,
    connections: int | None,
    warmup_s: float,
    seed: int,
    paths: Sequence[str] | None,
    picker: str | None,
) -> Settings:
    """Check every knob and fill in defaults; raise BadInputError naming the argument and the fix."""
    parse_target(url)
    if (rate is None) == (concurrency is None):
        raise BadInputError(
            "give exactly one of rate= (open loop: requests per second, arrivals on a schedule) or "
            f"concurrency= (closed loop: that many requests in flight), got rate={rate!r}, concurrency={concurrency!r}"
        )
    _positive("duration_s", duration_s, "every run is bounded in time, e.g. duration_s=10")
    if duration_s > MAX_DURATION_S:
        raise BadInputError(f"duration_s={duration_s} is over the {MAX_DURATION_S:.0f} s limit; split the run")
    _positive("max_requests", max_requests, "every run has a request cap, e.g. max_requests=100_000", integer=True)
    if max_requests > MAX_REQUESTS:
        raise BadInputError(f"max_requests={max_requests} is over the {MAX_REQUESTS:,} limit; lower it")
    _positive("timeout_s", timeout_s, "a request that takes longer is counted as a 'timeout' error, e.g. 5")
    _positive("warmup_s", warmup_s, "warm-up seconds whose requests are not counted, e.g. 1", zero_ok=True)
    if arrivals not in ("constant", "poisson"):
        raise BadInputError(f"arrivals must be 'constant' or 'poisson', got {arrivals!r}")
    if rate is not None:
        _positive("rate", rate, "it is the offered load in requests per second, e.g. rate=1000")
        if connections is None:
            # Enough connections that the client's pool rarely becomes the queue (see labkit.load._engine).
            connections = min(128, max(8, math.ceil(rate * 0.02)))
        _positive("connections", connections, "the number of keep-alive connections, e.g. 16", integer=True)
        mode = "open"
    else:
        _positive("concurrency", concurrency, "the number of requests kept in flight, e.g. 8", integer=True)
        if arrivals != "constant":
            raise BadInputError("arrivals= applies to the open loop only (rate=…); drop it when using concurrency=")
        if connections not in (None, concurrency):
            raise BadInputError(
                f"a closed loop uses one connection per in-flight request: drop connections= or set it to "
                f"concurrency ({concurrency}), got connections={connections!r}"
            )
        connections = concurrency
        mode = "closed"
    assert connections is not None
    if connections > 10_000:
        raise BadInputError(f"connections={connections} is more than this machine should open; use <= 10000")
    if isinstance(paths, str):
        paths = [paths]
    path_tuple = None if paths is None else tuple(paths)
    if path_tuple is not None and (
            not path_tuple or not all(isinstance(p, str) and p.startswith("/") for p in path_tuple)):
        raise BadInputError(
            f"paths must be a non-empty list of strings starting with '/', e.g. ['/orders/1', '/orders/2'], "
            f"got {paths!r}; or pass a function i -> path"
        )
    return Settings(
        url=url,
        mode=mode,
        rate=float(rate) if rate is not None else None,
        concurrency=concurrency,
        arrivals=arrivals,
        duration_s=float(duration_s),
        max_requests=int(max_requests),
        timeout_s=float(timeout_s),
        connections=int(connections),
        warmup_s=float(warmup_s),
        seed=int(seed),
        paths=path_tuple,
        picker=picker,
    )


def make_picker(target: Target, paths: Sequence[str] | PathPicker | None) -> tuple[PathPicker, str | None]:
    """Turn ``paths`` into a function ``i -> path``; also return the picker's name (for the settings)."""
    if paths is None:
        fixed = target.path
        return (lambda i: fixed), None
    if callable(paths):
        return paths, getattr(paths, "__qualname__", repr(paths))
    seq = [paths] if isinstance(paths, str) else list(paths)
    n = len(seq)
    return (lambda i: seq[i % n]), None
