"""The order service's OpenAPI 3.1 schema (served at ``/openapi.json``): the endpoints written by hand, the
switches read from :data:`labkit.toyshop.switches.TABLE` (request switches as every endpoint's query parameters;
every switch in ``/health``'s ``variants``)."""

from __future__ import annotations

from typing import Any

from labkit.toyshop import gclog, readouts
from labkit.toyshop.quote import MAX_QUOTE_LINES
from labkit.toyshop.statement import MAX_STATEMENT_LINES
from labkit.toyshop.switches import TABLE, Switch

__all__ = ["openapi_schema"]

_ERROR = {"type": "object", "required": ["error", "message"],
          "properties": {"error": {"type": "string"}, "message": {"type": "string"},
                         "parameter": {"type": "string"}}}
_TIMING = {"Server-Timing": {"description": "parse, db (count=queries), catalog (count=calls), compute, "
                                            "serialize, wait, total, then any metric the request added "
                                            "(faults: count=minor page faults in the service's threads for "
                                            "this request, Linux only; lock: count=acquisitions, with the stats "
                                            "switch on; gc; size…); durations in ms",
                             "schema": {"type": "string"}},
           "X-Variant": {"description": "the switches this response was made with", "schema": {"type": "string"}}}


_CATALOG = {"type": "object", "description": "whether the catalog answers, as the calls to it found out (it is "
                                            "restarted when it dies)",
            "required": ["state", "outages", "failed_calls"],
            "properties": {"state": {"enum": ["up", "down"]}, "outages": {"type": "integer", "minimum": 0},
                           "failed_calls": {"type": "integer", "minimum": 0}, "since_s": {"type": "number"},
                           "last_error": {"type": ["string", "null"]}}}


def _switch_schema(s: Switch) -> dict[str, Any]:
    if s.range is not None:
        number = {"type": "integer", "minimum": s.range[0], "maximum": s.range[1]}
        if s.values:  # named values beside the integers (queue: unbounded, or N)
            return {"oneOf": [{"type": "string", "enum": list(s.values)}, number], "default": s.default}
        return {**number, "default": s.default}
    return {"type": "string", "enum": list(s.values), "default": s.default}


def _switch_params() -> list[dict[str, Any]]:
    # no "default" on a parameter's schema: a request without it gets the process's default, not the baseline
    return [{"name": s.name, "in": "query", "required": False,
             "description": f"variant switch: {s.does} (default: the process's, baseline {s.default!r}; "
                            f"lesson {s.lesson}; see docs/switches.md)",
             "schema": {"type": "string", "enum": list(s.values)}} for s in TABLE if s.scope == "request"]


def _health() -> dict[str, Any]:
    variants = {"type": "object", "description": "every switch in force in this process (docs/switches.md)",
                "properties": {s.name: {**_switch_schema(s), "description": f"{s.scope} switch: {s.does}"}
                               for s in TABLE}}
    op = _op("liveness and the process's variant settings", [], not_found=False)
    op["get"]["responses"]["200"]["content"]["application/json"]["schema"] = {
        "type": "object", "properties": {"status": {"type": "string"}, "role": {"type": "string"},
                                         "variants": variants, "catalog": _CATALOG}}
    return op


def _op(summary: str, params: list[dict[str, Any]], *, not_found: bool = True, schema: bool = False) -> dict[str, Any]:
    binary = {"schema": {"type": "string", "format": "binary"}}
    content: dict[str, Any] = {"application/json": {"schema": {"type": "object"}}, "application/msgpack": binary}
    if schema:
        content["application/x-protobuf"] = {**binary, "description": "labkit/toyshop/core/proto/toyshop.proto"}
    responses: dict[str, Any] = {
        "200": {"description": "OK: the format the Accept header picks (JSON for */*); codec= picks the encoder",
                "headers": _TIMING, "content": content},
        "406": {"description": "Accept names no format this endpoint can send, or Accept-Encoding refuses identity "
                               "and every coding the service has; the body lists what it can send",
                "content": {"application/json": {"schema": _ERROR}}},
        "400": {"description": "a bad parameter, named in the body", "headers": _TIMING,
                "content": {"application/json": {"schema": _ERROR}}},
        "502": {"description": "the catalog did not answer", "content": {"application/json": {"schema": _ERROR}}},
        "503": {"description": "overloaded: more than pool + queue requests in flight (only with the queue "
                               "switch set); or database_busy: another connection held a write lock on the "
                               "database longer than the service waits (only for a db_path given at start); "
                               "Retry-After says when to try again",
                "content": {"application/json": {"schema": _ERROR}}},
    }
    if not_found:
        responses["404"] = {"description": "unknown id", "headers": _TIMING,
                            "content": {"application/json": {"schema": _ERROR}}}
    return {"get": {"summary": summary, "parameters": params + _switch_params(), "responses": responses}}


def _path_int(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True,
            "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}}


def openapi_schema() -> dict[str, Any]:
    """The schema as a dict (OpenAPI 3.1)."""
    quote_params = [
        {"name": "customer_id", "in": "query", "description": "price this customer's order history (or give lines)",
         "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}},
        {"name": "lines", "in": "query", "description": "price this many synthetic lines (or give customer_id)",
         "schema": {"type": "integer", "minimum": 0, "maximum": MAX_QUOTE_LINES}},
        {"name": "seed", "in": "query", "description": "seed of the synthetic lines",
         "schema": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1, "default": 0}},
    ]
    key = {"name": "key", "in": "path", "required": True,
           "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "toyshop order service", "version": "1",
                 "description": "The bundled service of perflab's labs. Loopback only."},
        "paths": {
            "/health": _health(),
            "/customers/{customer_id}/export": _op("a customer's orders with product details (N+1 candidate)",
                                                   [_path_int("customer_id")], schema=True),
            "/orders/{order_id}": _op("one order with its items", [_path_int("order_id")], schema=True),
            "/quote": _op("pricing by the performance core", quote_params),
            "/config/{key}": _op("one config value", [key]),
            "/statement": _statement_op(),
            "/recommendations": _op("popular products the customer has not bought; loop=blocking|thread: the "
                                    "recommender's blocking call on the event loop or on a worker thread",
                                    [{"name": "customer_id", "in": "query", "required": True,
                                      "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}}]),
            **readouts.OPENAPI,
            "/gc": gclog.OPENAPI,
            "/cache": {"get": {"summary": "the product and config caches: hits, misses, size, the product "
                                          "snapshot's age and staleness bound; with a Redis (cache=redis) its "
                                          "hits, misses and errors",
                               "responses": {"200": {"description": "OK", "content": {"application/json": {
                                   "schema": {"type": "object"}}}}}}},
            "/stats": {"get": {"summary": "requests in flight now (every request inside the app), the peak, and "
                                          "requests served; this request is not counted",
                               "responses": {"200": {"description": "OK", "content": {"application/json": {
                                   "schema": {"type": "object", "properties": {
                                       k: {"type": "integer"} for k in ("in_flight", "peak_in_flight", "served")}}}}}}}},
        },
    }


def _statement_op() -> dict[str, Any]:
    params = [
        {"name": "customer_id", "in": "query", "description": "that customer's order lines (or give lines)",
         "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}},
        {"name": "lines", "in": "query", "description": "a statement of this many synthetic lines (or give "
         "customer_id)", "schema": {"type": "integer", "minimum": 0, "maximum": MAX_STATEMENT_LINES}},
        {"name": "seed", "in": "query", "description": "seed of the synthetic lines",
         "schema": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1, "default": 0}},
    ]
    op = _op("order lines as CSV; buffers=grow|prealloc|pooled builds the body (pooled carries lab 03's "
             "deliberate stale-state bug)", params)
    ok = op["get"]["responses"]["200"]
    ok["description"] = "OK (CSV, whatever the codec)"
    ok["content"] = {"text/csv": {"schema": {"type": "string"}}}
    return op
