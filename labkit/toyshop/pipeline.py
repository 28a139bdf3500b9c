"""How every endpoint of the order service answers: the response pipeline, and the request parsing it maps.

    respond = Pipeline(settings, request_log).respond
    return await respond(request, handler, schema="export")      # inside a Starlette endpoint

:meth:`Pipeline.respond` negotiates the format (``Accept``, ``codec=``), runs the handler inside the
request's trace (the stages of :data:`STAGES` declared first, so ``Server-Timing`` keeps its order), serializes
the payload (and compresses it with the coding ``Accept-Encoding`` and the ``compress`` switch agree on:
:func:`labkit.toyshop.negotiate.choose_coding`), writes the access-log line (``log``), and maps errors
to statuses: :class:`BadParam` → 400 naming the parameter, :class:`labkit.toyshop.db.NotFoundError` → 404,
:class:`~labkit.toyshop.negotiate.NotAcceptable` → 406, :class:`Overloaded` → 503, a database locked by a
writer for longer than :data:`labkit.toyshop.db.BUSY_TIMEOUT_S` (:func:`labkit.toyshop.db.is_busy`) → 503, PostgreSQL out of reach
(``db=postgres``, :func:`labkit.toyshop.db.is_unreachable`) → 503, a catalog that does not
answer (:class:`labkit.errors.ServiceError`) → 502, anything else → 500 with the traceback logged (the fuzz
tests look for those). Every answer carries ``Server-Timing``, ``X-Variant`` (``compress`` as sent: ``none`` when the client did not
accept the coding asked for) and ``Vary: Accept, Accept-Encoding``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from labkit import trace as _trace
from labkit.errors import BadInputError, ServiceError
from labkit.toyshop import faults, gclog
from labkit.toyshop.db import BUSY_TIMEOUT_S, NotFoundError, is_busy, is_unreachable
from labkit.toyshop.negotiate import choose_coding
from labkit.toyshop.reqlog import RequestLog
from labkit.toyshop.switches import PRESETS, REQUEST_SWITCHES
from labkit.toyshop.wiring import NotAcceptable, negotiate, serialize
from labkit.trace import collect, span

__all__ = ["Pipeline", "Handler", "Raw", "BadParam", "Overloaded", "int_param", "customer_or_lines",
           "error_body", "http_error", "STAGES"]

log = logging.getLogger("labkit.toyshop")
_clock = time.perf_counter_ns

#: the stages every response reports, in this order, even when a request never reached them; db and catalog
#: carry their counts (queries, HTTP calls). Anything else a request adds follows them.
STAGES = (("parse", None), ("db", 0), ("catalog", 0), ("compute", None), ("serialize", None), ("wait", None))

#: an endpoint's work: ``handler(ctx)`` gets ``ctx["sw"]`` (the process's switches; it sets the request's own)
#: and returns a payload to serialize, or :class:`Raw` bytes.
Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Overloaded(Exception):
    """More requests in flight than the ``pool`` + ``queue`` switches allow (→ 503)."""


class BadParam(Exception):
    """A request parameter is missing or invalid (→ 400 naming it)."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


class Raw(NamedTuple):
    """A handler's answer that is already bytes (a CSV statement): sent as is, whatever the codec or Accept."""

    body: bytes
    media: str


def int_param(raw: str | None, name: str, lo: int = 1, hi: int = 2**31 - 1) -> int:
    """The integer parameter ``name`` in ``lo``–``hi``; raises :class:`BadParam` if it is missing or not one."""
    if raw is None or raw == "":
        raise BadParam(name, f"{name} is required: an integer {lo}–{hi}")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12 or not lo <= int(raw) <= hi:
        raise BadParam(name, f"{name} must be an integer {lo}–{hi}, got {raw[:40]!r}")
    return int(raw)


def customer_or_lines(params: Mapping[str, str], max_lines: int, customer_does: str,
                      lines_does: str) -> tuple[int | None, int | None, int]:
    """``(customer_id, lines, seed)`` from a request that takes exactly one of ``customer_id=`` or ``lines=``."""
    if ("customer_id" in params) == ("lines" in params):
        raise BadParam("customer_id", f"give exactly one of customer_id=<id> ({customer_does}) or lines=<n> "
                                      f"({lines_does})")
    seed = int_param(params.get("seed", "0"), "seed", 0)
    cid = int_param(params["customer_id"], "customer_id") if "customer_id" in params else None
    n = int_param(params["lines"], "lines", 0, max_lines) if "lines" in params else None
    return cid, n, seed


def error_body(error: str, message: str, parameter: str | None = None) -> bytes:
    """The JSON body of an error answer: ``{"error": kind, "message": …, "parameter": …}``."""
    body: dict[str, Any] = {"error": error, "message": message}
    if parameter is not None:
        body["parameter"] = parameter
    return orjson.dumps(body)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route, method not allowed) as JSON, pointing at ``/openapi.json``."""
    code = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = {404: "not_found", 405: "method_not_allowed"}.get(code, "http_error")
    msg = f"{request.method} {request.url.path}: {kind.replace('_', ' ')}; see /openapi.json for the endpoints"
    return Response(error_body(kind, msg), status_code=code, media_type="application/json",
                    headers={"Server-Timing": "total;dur=0.000"})


class Pipeline:
    """The order service's way of answering, for the process's ``settings`` (the resolved switches).

    Args:
        settings: every switch's process value (:func:`labkit.toyshop.switches.resolve`).
        request_log: where ``log=sync|queued`` writes a line per request.
    """

    def __init__(self, settings: Mapping[str, Any], request_log: RequestLog) -> None:
        self.settings, self.request_log = settings, request_log
        self._one_at_a_time: asyncio.Lock | None = None  # alloc=census serves one request at a time

    def default_codec(self, request: Request) -> str:
        """The codec when the request names none: its preset's, else the process default."""
        preset = request.query_params.get("preset") or self.settings["preset"]
        return PRESETS.get(preset, {}).get("codec", self.settings["codec"])

    async def _counted(self, run: Callable[[], Awaitable[tuple[bytes, str]]]) -> tuple[bytes, str]:
        """``run()`` (the handler and its serialization) under an allocation census (process switch
        ``alloc=census``), one request at a time: the counts go to Server-Timing ``alloc`` / ``alloc_bytes``."""
        from labkit.alloc import Census
        from labkit.errors import ProbeUnavailable

        if self._one_at_a_time is None:
            self._one_at_a_time = asyncio.Lock()
        async with self._one_at_a_time:
            try:
                census: Census | None = Census().start()
            except ProbeUnavailable as exc:  # another memray tracker in this process: serve, say why not counted
                census, reason = None, str(exc)
            try:
                return await run()
            finally:
                if census is not None:
                    try:
                        census.stop()
                    except Exception as exc:  # the count failed, not the request: answer it, say why not counted
                        census, reason = None, f"the census could not be read ({type(exc).__name__}: {exc})"
                if census is not None:
                    _trace.add("alloc", count=census.allocations, desc="allocator calls (memray census; one "
                                                                       "request at a time: times not comparable)")
                    _trace.add("alloc_bytes", count=census.bytes_allocated, desc="bytes those calls asked for")
                else:
                    _trace.add("alloc", desc=f"not counted: {reason}"[:200])

    async def respond(self, request: Request, handler: Handler, schema: str | None = None, *,
                      raw: bool = False) -> Response:
        """Negotiate the format (Accept, ``codec=``; protobuf only with a ``schema``), run ``handler`` inside the
        request's trace, serialize its payload, and map errors to 4xx/5xx. ``raw``: the handler answers
        :class:`Raw` bytes, sent as they are (no negotiation, no codec, no compression)."""
        t0 = _clock()
        settings = self.settings
        ctx: dict[str, Any] = {"sw": {k: settings[k] for k in REQUEST_SWITCHES}}
        headers: dict[str, str] = {"Vary": "Accept, Accept-Encoding"}
        trace = _trace.Trace()  # declared before it is current: a collection starting now cannot put gc first
        for name, count in STAGES:
            trace.add(name, 0, count)
        gclog.declare(trace)  # gc;dur;count: collections this request triggered (see toyshop.gclog)
        with collect(into=trace):
            try:
                codec, fmt = settings["codec"], None
                if not raw:
                    try:
                        codec, fmt = negotiate(request.headers.get("accept"), request.query_params.get("codec"),
                                               schema, self.default_codec(request))
                    except NotAcceptable:
                        raise
                    except BadInputError as exc:
                        raise BadParam("codec", str(exc)) from None

                async def run() -> tuple[bytes, str]:
                    payload = await handler(ctx)
                    if isinstance(payload, Raw):
                        return payload.body, payload.media
                    ctx["sw"]["codec"] = codec
                    coding = ctx["sw"]["compress"] = choose_coding(request.headers.get("accept-encoding"),
                                                                   ctx["sw"]["compress"])
                    return serialize(payload, codec, fmt, schema, coding, headers)
                with faults.counted():  # the request's faults on the loop (its pool job counts its own)
                    body, media = await (self._counted(run) if settings["alloc"] == "census" else run())
                status = 200
            except NotAcceptable as exc:
                status, media = 406, "application/json"
                body = orjson.dumps({"error": "not_acceptable", "message": str(exc), "supported": exc.supported})
            except BadParam as exc:
                status, media, body = 400, "application/json", error_body("bad_parameter", str(exc), exc.parameter)
            except NotFoundError as exc:
                status, media, body = 404, "application/json", error_body("not_found", str(exc))
            except Overloaded as exc:
                status, media, body = 503, "application/json", error_body("overloaded", str(exc))
                headers["Retry-After"] = "1"
            except ServiceError as exc:
                status, media, body = 502, "application/json", error_body("catalog_unavailable", str(exc))
            except Exception as exc:
                if is_busy(exc):  # another connection is writing the database: say so at once, and when to retry
                    status, media = 503, "application/json"
                    body = error_body("database_busy", f"the database is locked by another connection that is "
                                      f"writing it (waited {BUSY_TIMEOUT_S:g} s): {exc}; retry shortly")
                    headers["Retry-After"] = "1"
                elif is_unreachable(exc):  # db=postgres and the server is gone: counted, and reconnected next time
                    status, media = 503, "application/json"
                    body = error_body("database_unavailable", f"PostgreSQL cannot be reached: {exc}; retry shortly")
                    headers["Retry-After"] = "1"
                else:  # a bug: answer 500 (the fuzz test looks for these) and log the traceback
                    log.exception("toyshop request failed")
                    status, media, body = 500, "application/json", error_body("internal", repr(exc))
            if ctx["sw"]["log"] != "off":
                with span("log"):
                    query = request.scope["query_string"].decode("latin-1")
                    self.request_log.write(ctx["sw"]["log"], request.method, request.scope["path"] + (
                        "?" + query if query else ""), status, _clock() - t0)
            trace.add("total", _clock() - t0)
            headers["Server-Timing"] = trace.server_timing()
        headers["X-Variant"] = ",".join(f"{k}={v}" for k, v in ctx["sw"].items())
        return Response(body, status_code=status, media_type=media, headers=headers)
