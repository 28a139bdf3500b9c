"""toyshop's garbage-collector log: each collection in the request's ``Server-Timing``, all of them at ``GET /gc``.

:func:`install` starts one :class:`labkit.alloc.PauseRecorder` for the life of the process (the last
100,000 pauses are kept) and adds the ``/gc`` route. Every response then carries a ``gc`` metric —
``gc;dur=<ms in collections>;desc="…";count=<collections>`` — holding the collections that started while
code running for that request triggered them. A collection stops every thread of the process, not only the
one that triggered it, so at concurrency above 1 a request can wait through a collection counted in
another's header: the numbers are exact per request only at concurrency 1, and the metric's description
says so.

``GET /gc?since_ns=N`` answers the recorded pauses (``[start_ns, dur_ns, generation, collected,
uncollectable]`` on ``time.perf_counter_ns``, the machine-wide monotonic clock on Linux, so a load generator
in another process can put them on its own time axis: :func:`labkit.alloc.service_pauses`), with the
process's ``gc.get_threshold()``, ``gc.get_freeze_count()``, ``gc.get_stats()`` and Python version.
``?objects=1`` also counts the objects the collector tracks (a full ``gc.get_objects()`` walk: slow on a big
heap, so only when asked).
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

import orjson

from labkit import trace as _trace
from labkit.alloc.pauses import PauseRecorder, clock_is_shared

__all__ = ["install", "declare", "recorder", "DESC", "OPENAPI"]

DESC = "cyclic GC collections this request triggered; pauses are process-wide: exact only at concurrency 1"
_recorder: PauseRecorder | None = None
_METRIC = "gc"


def _into_request(start_ns: int, dur_ns: int, generation: int, collected: int, uncollectable: int) -> None:
    # runs inside the collector's callback, possibly while this thread is inside Trace.add (its lock is
    # re-entrant for exactly this)
    _trace.add(_METRIC, dur_ns, 1)


def recorder() -> PauseRecorder:
    """The process's pause recorder (started on first use)."""
    global _recorder
    if _recorder is None:
        _recorder = PauseRecorder(limit=100_000, on_pause=_into_request).start()
    return _recorder


def declare(trace: Any) -> None:
    """Put the ``gc`` metric (zero, with its description) into a request's trace as it begins."""
    trace.add(_METRIC, 0, 0, desc=DESC)


def _bad(parameter: str, message: str) -> Any:
    from starlette.responses import Response

    body = {"error": "bad_parameter", "parameter": parameter, "message": message}
    return Response(orjson.dumps(body), status_code=400, media_type="application/json")


async def _log(request: Any) -> Any:
    from starlette.responses import Response

    known = {"since_ns", "objects"}
    for key in request.query_params:
        if key not in known:
            return _bad(key, f"unknown parameter {key[:40]!r}; /gc takes since_ns=<int> and objects=1")
    raw = request.query_params.get("since_ns")
    since = None
    if raw is not None:
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 20 or int(raw) > _MAX_NS:  # the clock is int64
            return _bad("since_ns", f"since_ns must be an integer 0–{_MAX_NS} (ns on the perf_counter clock), "
                                    f"got {raw[:40]!r}")
        since = int(raw)
    objects = request.query_params.get("objects")
    if objects not in (None, "0", "1"):
        return _bad("objects", f"objects must be 0 or 1, got {objects[:40]!r}")
    snap = recorder().snapshot(since)
    body = {"now_ns": time.perf_counter_ns(), "t0_ns": snap.t0_ns, "window_ns": snap.window_ns,
            "pauses": snap.pauses, "dropped": recorder().dropped, "threshold": snap.threshold,
            "frozen": snap.frozen, "enabled": snap.enabled, "python": sys.version.split()[0],
            "stats": gc.get_stats(), "clock_shared": clock_is_shared()}
    if objects == "1":
        body["tracked_objects"] = len(gc.get_objects())
    return Response(orjson.dumps(body), media_type="application/json")


def install(app: Any) -> PauseRecorder:
    """Start the process's pause recorder (once) and add ``GET /gc`` to a toyshop app."""
    from starlette.routing import Route

    rec = recorder()
    app.router.routes.append(Route("/gc", _log))
    return rec


_INT = {"type": "integer"}
_MAX_NS = 2**63 - 1  # the pauses are kept as int64 nanoseconds
#: the OpenAPI description of ``GET /gc``.
OPENAPI: dict[str, Any] = {"get": {
    "summary": "the process's garbage-collector pauses (start_ns, dur_ns, generation, collected, uncollectable) "
               "on the machine-wide monotonic clock, and its GC settings",
    "parameters": [{"name": "since_ns", "in": "query", "required": False, "schema": {**_INT, "minimum": 0, "maximum": _MAX_NS},
                    "description": "only pauses that started at or after this perf_counter_ns time"},
                   {"name": "objects", "in": "query", "required": False, "schema": {"enum": ["0", "1"]},
                    "description": "1: also count the objects the collector tracks (slow on a big heap)"}],
    "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}},
                  "400": {"description": "a bad parameter, named in the body"}}}}
