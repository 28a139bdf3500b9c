"""Every variant switch of the toyshop service: which are per request, which are per process, and defaults.

Each switch names its allowed values with the slow baseline first (the default). *Code-path* switches can be
set at start (as the process default) and overridden per request with a query parameter, so A and B can be
interleaved against one warm process (``/customers/1/export?n1=batched&codec=orjson``). *Process* switches
are chosen at start only, because they change the process itself (garbage collector, thread pool).

| switch  | values                  | scope    | lesson                                                      |
|---------|-------------------------|----------|-------------------------------------------------------------|
| n1      | naive, batched, join    | request  | N+1 queries and catalog calls vs batching vs one JOIN       |
| io      | serial, concurrent      | request  | catalog batches one after another vs fanned out on threads  |
|         |                         |          | (batched/join exports, orders; naive stays one call a time) |
| codec   | json, orjson, msgspec,  | request  | the encoder; the format comes from the Accept header        |
|         | msgpack, protobuf       |          | (:mod:`labkit.toyshop.negotiate`; protobuf: export, order)  |
| compress| none, gzip, zstd        | request  | response compression (Content-Encoding)                     |
| fields  | full, trimmed           | request  | ~30 product fields per item vs 8                            |
| layout  | aos, soa                | request  | quote pricing over dicts vs NumPy columns (core)            |
| buffers | grow, prealloc, pooled  | request  | fresh containers vs reused buffers (core); pooled: a shared |
|         |                         |          | pool with a deliberate stale-state bug (statements only)    |
| cache   | none, local             | request  | config lookups and product details: every time from SQLite  |
|         |                         |          | and the catalog vs in-process caches (productcache.py)      |
| log     | off, sync, queued       | request  | access log: none (default) / written on the request path /  |
|         |                         |          | queued to a listener thread (reqlog.py)                     |
| hop     | pool, inline            | request  | SQLite work always handed to a pool thread vs run on the    |
|         |                         |          | event loop unless it needs the network (a catalog call)     |
| preset  | none, baseline, all     | request  | none: each switch as given; baseline / all: the capstone's  |
|         |                         |          | slow configuration / every request-level fix (PRESETS)      |
| gc      | default, tuned          | process  | CPython's GC thresholds vs gc.freeze() + larger gen-0       |
| pool    | integer >= 1 (40)       | process  | threads for blocking DB work (Starlette's default is 40)    |
| queue   | integer >= 0 (0)        | process  | 0: unbounded wait for a pool thread; N: beyond pool + N     |
|         |                         |          | requests in flight, answer 503 at once (load shedding)      |
| scribble| off, on                 | process  | debug: fill released pool buffers with 0xDD (+ a red zone)  |
| alloc   | off, census             | process  | count allocator calls per request (memray) into Server-     |
|         |                         |          | Timing ``alloc``; serves one request at a time (pool 1)     |

``log`` and ``preset`` default to their first value like every switch, but that value is not a slow baseline:
``off`` keeps other labs' measurements unchanged, ``none`` leaves every switch as given. A ``preset`` sets the
switches of :data:`PRESETS`; a switch given in the same request overrides it (``?preset=all&cache=none``: every
fix but the cache). Process switches (``gc``, ``pool``, ``queue``, ``scribble``, ``alloc``) are never part of a preset.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from labkit.errors import BadInputError
from labkit.toyshop.core.variants import VARIANTS as CORE_VARIANTS

__all__ = ["REQUEST_SWITCHES", "PROCESS_SWITCHES", "DEFAULT_POOL", "PRESETS", "resolve", "check_request_switch",
           "with_preset"]

#: per-request (code-path) switches: name -> allowed values, baseline first.
REQUEST_SWITCHES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "n1": ("naive", "batched", "join"),
    "io": ("serial", "concurrent"),
    **CORE_VARIANTS,
    "log": ("off", "sync", "queued"),
    "hop": ("pool", "inline"),
    "preset": ("none", "baseline", "all"),
})
#: the capstone's two configurations (lab 08). ``all`` keeps the JSON format and every product field: the
#: fixes change how the answer is made, never what it says (trimming fields is a change of contract).
PRESETS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "baseline": MappingProxyType({"n1": "naive", "io": "serial", "codec": "json", "compress": "none",
                                  "fields": "full", "cache": "none", "log": "sync", "hop": "pool",
                                  "layout": "aos", "buffers": "grow"}),
    "all": MappingProxyType({"n1": "join", "io": "concurrent", "codec": "orjson", "compress": "none",
                             "fields": "full", "cache": "local", "log": "queued", "hop": "inline",
                             "layout": "soa", "buffers": "prealloc"}),
})
DEFAULT_POOL = 40  # Starlette/anyio's default thread limiter: the baseline of the pool-sizing lesson
#: process switches: name -> allowed values (``pool`` and ``queue`` take integers).
PROCESS_SWITCHES: Mapping[str, tuple[str, ...]] = MappingProxyType({"gc": ("default", "tuned"), "pool": (),
                                                                    "queue": (), "scribble": ("off", "on"),
                                                                    "alloc": ("off", "census")})


def check_request_switch(name: str, value: str) -> str:
    """Return ``value`` if allowed for the request switch ``name``, else raise BadInputError naming both."""
    allowed = REQUEST_SWITCHES.get(name)
    if allowed is None:
        raise BadInputError(f"unknown variant switch {name!r}; per-request switches are "
                            f"{', '.join(REQUEST_SWITCHES)}")
    if value not in allowed:
        raise BadInputError(f"bad value {value!r} for switch {name!r}: use one of {', '.join(allowed)} "
                            f"(default {allowed[0]!r})")
    return value


def with_preset(defaults: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    """A request's switches: ``defaults`` (the process's), then the preset in force (``given`` or the default)
    applied, then the switches ``given`` in the request itself on top."""
    sw = dict(defaults)
    preset = given.get("preset", sw.get("preset", "none"))
    if preset != "none":
        sw.update(PRESETS[preset])
    sw.update(given)
    return sw


def resolve(variants: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """All switches with defaults filled in and values checked: the process's starting configuration.

    Raises :class:`labkit.errors.BadInputError` naming an unknown switch or a bad value.
    """
    out: dict[str, Any] = {name: values[0] for name, values in REQUEST_SWITCHES.items()}
    out.update(gc="default", pool=DEFAULT_POOL, queue=0, scribble="off", alloc="off")
    for name, value in (variants or {}).items():
        if name == "queue":
            if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit() \
                    or not 0 <= int(value) <= 1_000_000:
                raise BadInputError(f"variant queue={value!r}: must be an integer >= 0 (0 = wait unbounded; "
                                    "N = answer 503 when more than pool + N requests are in flight)")
            out["queue"] = int(value)
        elif name == "pool":
            if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit() \
                    or not 1 <= int(value) <= 1024:
                raise BadInputError(f"variant pool={value!r}: the thread-pool size must be an integer 1–1024 "
                                    f"(Starlette's default is {DEFAULT_POOL}; try 1 or 2 for SQLite work)")
            out["pool"] = int(value)
        elif name in ("gc", "scribble", "alloc"):
            if value not in PROCESS_SWITCHES[name]:
                raise BadInputError(f"bad value {value!r} for switch {name!r}: use one of "
                                    f"{', '.join(PROCESS_SWITCHES[name])}")
            out[name] = value
        else:
            out[name] = check_request_switch(name, value)
    if out["alloc"] == "census":  # the census is process-wide: one request at a time, so one pool thread
        out["pool"] = 1
    return out
