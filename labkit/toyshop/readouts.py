"""Lab 09's read-outs of the order service: ``GET /tally`` (the per-request statistics' exact totals) and
``GET /loop`` (the event loop's lag).

``/tally`` answers :meth:`labkit.toyshop.tally.Tally.snapshot`: ``requests`` per endpoint, ``units`` (ordered
quantity per product id), ``total``, ``variants`` (requests per ``stats`` variant), the latency ``histogram``
and ``summary`` of the SQLite stage, and the locks' stats (``lock``: the process-wide one; ``shard_locks``:
``sharded``'s, summed) with ``elapsed_s``, the seconds the totals cover (the lock's utilisation is
``lock.hold_s / elapsed_s``). ``?reset=1`` answers the totals so far and starts them again from zero.

``/loop`` answers the service's :class:`labkit.looplag.LagMonitor` (started on the loop by the first ``/loop`` or
``/recommendations`` request, so no other lab's service runs it): ``samples``, ``worst_ms``, ``worst_at``
(wall clock), ``p99_ms``, ``over_ms`` (samples at least 1, 5 and 20 ms late) and, with ``?samples=1``, every
sample (``lags_ms``, ``at``: :meth:`labkit.looplag.LagReport.from_dict` reads it back). ``?reset=1`` starts a new
window after answering.

Neither goes through the response pipeline (no Server-Timing, not counted in ``/stats``' warm-up), like ``/gc``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from labkit.looplag import LagMonitor
from labkit.toyshop.pipeline import error_body
from labkit.toyshop.tally import Tally

__all__ = ["tally_endpoint", "loop_endpoint", "OVER_MS", "OPENAPI"]

OVER_MS = (1, 5, 20)  #: ``/loop``'s ``over_ms`` thresholds


def _flags(request: Request, names: tuple[str, ...]) -> dict[str, bool] | Response:
    """Each of ``names`` as a 0/1 flag (absent: 0), or a 400 naming the parameter that is not one."""
    out = dict.fromkeys(names, False)
    for key in request.query_params:
        values = request.query_params.getlist(key)
        if key not in names:
            msg = f"unknown parameter {key[:40]!r}; {request.url.path} takes {', '.join(f'{n}=0|1' for n in names)}"
        elif len(values) > 1 or values[0] not in ("0", "1"):
            msg = f"{key} must be given once, as 0 or 1; got {values!r}"[:200]
        else:
            out[key] = values[0] == "1"
            continue
        return Response(error_body("bad_parameter", msg, key[:40]), status_code=400, media_type="application/json")
    return out


def tally_endpoint(tally: Tally) -> Callable[[Request], Any]:
    """The ``GET /tally`` handler over ``tally``."""
    async def tally_read(request: Request) -> Response:
        flags = _flags(request, ("reset",))
        if isinstance(flags, Response):
            return flags
        return Response(orjson.dumps(tally.snapshot(reset=flags["reset"])), media_type="application/json")
    return tally_read


def loop_endpoint(monitor: Callable[[], LagMonitor]) -> Callable[[Request], Any]:
    """The ``GET /loop`` handler; ``monitor()`` gives the service's monitor, started on this loop."""
    async def loop_read(request: Request) -> Response:
        flags = _flags(request, ("reset", "samples"))
        if isinstance(flags, Response):
            return flags
        mon = monitor()
        report = mon.report()
        if flags["reset"]:
            mon.reset()
        body = report.to_dict(raw=flags["samples"])
        body["over_ms"] = {str(t): report.over(t) for t in OVER_MS}
        return Response(orjson.dumps(body), media_type="application/json")
    return loop_read


def _flag_param(name: str, does: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": "string", "enum": ["0", "1"]},
            "description": does}


_JSON_OK = {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}
_BAD = {"description": "a bad parameter, named in the body", "content": {"application/json": {"schema": {
    "type": "object", "required": ["error", "message"]}}}}
#: the OpenAPI descriptions of ``GET /tally`` and ``GET /loop``.
OPENAPI: dict[str, Any] = {
    "/tally": {"get": {
        "summary": "the per-request statistics' exact totals (requests per endpoint and per stats variant, units "
                   "per product, latency histogram and summary) and their locks' stats",
        "parameters": [_flag_param("reset", "1: answer the totals so far, then start them again from zero")],
        "responses": {"200": _JSON_OK, "400": _BAD}}},
    "/loop": {"get": {
        "summary": "the event loop's lag (a timer every 5 ms: how late it fired): samples, worst and when, P99",
        "parameters": [_flag_param("reset", "1: start a new window after answering"),
                       _flag_param("samples", "1: every sample too (lags_ms, at)")],
        "responses": {"200": _JSON_OK, "400": _BAD}}},
}
