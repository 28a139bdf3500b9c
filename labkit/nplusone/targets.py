"""Targets: the one tap per watched object, shared by every recorder on it (nested ``watch`` blocks, or one per
thread), installed with the first and removed with the last.

Which kind of tap a target gets: :func:`labkit.nplusone.taps.plain_tap` (``sqlite3`` connections, HTTP clients
with an ``observers`` list), else :func:`labkit.nplusone.hooks.hook_tap` (SQLAlchemy, Django), else
:func:`labkit.nplusone.clients.client_tap` (psycopg, redis-py).
"""

from __future__ import annotations

import threading
from typing import Any

from labkit.errors import BadInputError
from labkit.nplusone.clients import client_tap
from labkit.nplusone.hooks import hook_tap, hooked
from labkit.nplusone.taps import Sink, Tap, plain_tap

__all__ = ["tap_for", "release"]

_TAPS: dict[int, Tap] = {}
_LOCK = threading.Lock()


def _make_tap(target: Any) -> Tap:
    tap = plain_tap(target) or hook_tap(target) or client_tap(target)
    if tap is not None:
        return tap
    raise BadInputError(
        f"watch() cannot record queries made through a {type(target).__module__}.{type(target).__name__}: "
        "it knows sqlite3.Connection, SQLAlchemy Engine, Django's database connection (django.db.connection) "
        "HTTP clients with an `observers` list (observer(method, url, duration_ns)), the http.client module "
        "(every request urllib, requests and urllib3 send), psycopg (the module or a connection) and redis-py "
        "(the module or a redis.Redis client). Pass one of those, "
        "e.g. the connection your code queries."
    )


def tap_for(target: Any, sink: Sink) -> Tap:
    """Attach *sink* to *target*'s tap, creating and installing the tap on first use."""
    with _LOCK:
        tap = _TAPS.get(id(target))
        if tap is None:
            target = hooked(target)  # an AsyncEngine shares its sync engine's tap, Django's proxy its connection's
            key = id(target)
            tap = _TAPS.get(key)
        if tap is None:
            tap = _make_tap(target)
            tap.sinks.append(sink)
            tap.resink()
            tap.install()
            _TAPS[key] = tap
        else:
            tap.sinks.append(sink)
            tap.resink()
        return tap


def release(tap: Tap, sink: Sink) -> None:
    """Detach *sink* (completing what its tap still holds open); uninstall the tap when no sink is left."""
    with _LOCK:
        tap.flush()
        first = tap.sinks[0] if tap.sinks else None
        for i, s in enumerate(tap.sinks):
            if s is sink:
                del tap.sinks[i]
                break
        tap.resink()
        if not tap.sinks:
            tap.uninstall()
            _TAPS.pop(id(tap.target), None)
        elif first is sink and tap.sinks[0].clock is not sink.clock:
            tap.uninstall()  # hooks hold the clock they were installed with: re-install with the new first's
            tap.install()
