"""Argument checks every package shares: counts, amounts, functions, and the one loopback rule.

Each check returns the value, converted (``int``/``float``), or raises :class:`~labkit.errors.BadInputError`
naming the argument, what it got, and — in ``hint`` — what to pass instead.

The loopback rule: labkit only ever sends requests to this machine, so a lab can never load-test or poll
someone else's server by mistake. Loopback is what the operating system routes to itself: ``localhost``,
the whole of ``127.0.0.0/8`` (RFC 1122 §3.2.1.3: 127.0.0.2 is as local as 127.0.0.1) and ``::1`` —
:attr:`ipaddress.IPv4Address.is_loopback`.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import numpy as np

from labkit.errors import BadInputError

__all__ = ["LoopbackURL", "function", "integer", "number", "loopback_url"]


def _fix(hint: str) -> str:
    return f"; {hint}" if hint else ""


def integer(value: Any, name: str, *, low: int = 1, high: int | None = None, hint: str = "") -> int:
    """``value`` as an ``int`` in ``[low, high]`` (no upper bound when ``high`` is None); bools are refused."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low or (
            high is not None and value > high):
        span = f"≥ {low:,}" if high is None else f"{low:,}–{high:,}"
        raise BadInputError(f"{name} must be an integer {span}, got {value!r}{_fix(hint)}")
    return int(value)


def number(value: Any, name: str, *, low: float = 0.0, high: float | None = None, low_ok: bool = False,
           unit: str = "", hint: str = "") -> float:
    """``value`` as a finite ``float`` above ``low`` (or equal to it with ``low_ok``) and at most ``high``."""
    if (isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating)
            or not math.isfinite(value) or value < low or (value == low and not low_ok)
            or (high is not None and value > high)):
        span = (f"{'≥' if low_ok else '>'} {low:g}" if high is None
                else f"{'from' if low_ok else 'over'} {low:g} to {high:g}")
        what = f" {unit}" if unit else ""
        raise BadInputError(f"{name} must be a finite number {span}{what}, got {value!r}{_fix(hint)}")
    return float(value)


def function(fn: Any, name: str) -> Any:
    """``fn`` when it is callable; else say so — and, for a value, that it was probably called already."""
    if not callable(fn):
        hint = " — did you call it? pass the function itself, e.g. bench(f) not bench(f())" if fn is not None else ""
        raise BadInputError(f"{name} must be a callable, got {type(fn).__name__} {fn!r:.60}{hint}")
    return fn


class LoopbackURL(NamedTuple):
    """A checked ``http://`` URL to this machine: where to connect, and the parts a client needs."""

    host: str  #: the address to connect to (``localhost`` is connected to as 127.0.0.1, without a lookup)
    port: int
    netloc: str  #: host and port as written in the URL (the ``Host`` header)
    path: str  #: path and query, ``/`` when the URL has none


def loopback_url(url: Any, who: str, *, example: str = "http://127.0.0.1:PORT",
                 default_port: int | None = None) -> LoopbackURL:
    """Check that ``url`` is plain HTTP to a loopback address with a port; raise naming ``who`` refuses it.

    Args:
        url: the URL to check.
        who: the function or class that needs it, for the message (``"labkit.load.run"``).
        example: what a right URL looks like there.
        default_port: the port of a URL that names none (None: a port is required).
    """
    how = "labkit.service.start() gives you one as Service.url"
    if not isinstance(url, str):
        raise BadInputError(f"{who} needs a URL string like {example!r}, got {type(url).__name__}; {how}")
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise BadInputError(f"{who} needs a plain 'http://' URL to this machine, like {example!r}; got {url!r} "
                            f"(scheme {parts.scheme!r})")
    try:
        port = parts.port or default_port
    except ValueError:
        raise BadInputError(f"{who}: the port of {url!r} is not a number between 0 and 65535") from None
    host = parts.hostname or ""
    if host == "localhost":
        connect = "127.0.0.1"
    else:
        try:
            connect = str(ipaddress.ip_address(host))
            local = ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = False
        if not local:
            raise BadInputError(
                f"{who}: {host or url!r} in {url!r} is not a loopback address. labkit only sends requests to this "
                f"machine (127.0.0.0/8, ::1 or 'localhost'), never to another host; use e.g. {example!r} ({how})")
    if port is None:
        raise BadInputError(f"{who}: {url!r} names no port; give the service's, e.g. {example!r} ({how})")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return LoopbackURL(connect, port, parts.netloc.rsplit("@", 1)[-1], path)
