"""Content negotiation for the order service: the ``Accept`` header picks the format, ``codec=`` the code.

    choose(accept, offered=("json", "msgpack"), codec=None, default_codec="json") -> (codec, format)

* The format comes from ``Accept`` (RFC 9110 §12.5.1): media ranges with q-values, the most specific range
  that matches a format deciding its weight (``application/msgpack;q=0, */*`` excludes msgpack), ``q=0``
  meaning "not acceptable", ties going to the server's order (JSON first). No header, or ``*/*``, is JSON.
  Entries that do not parse are skipped, as browsers and servers commonly do.
* ``codec=`` (a query parameter) is an override: it picks the implementation, so only the formats that codec
  produces remain; ``Accept`` still chooses among them. Without it, the process's default codec is used when
  it produces the chosen format, else the format's own default (json, msgpack, protobuf).
* Schema-bound formats (protobuf) are offered only by endpoints whose payload has a schema (export, order).

Raises :class:`NotAcceptable` (→ 406, naming the media types this endpoint can send) when nothing acceptable
remains, and :class:`labkit.errors.BadInputError` for a codec this endpoint cannot use (→ 400).

    choose_coding(accept_encoding, requested="none") -> "none" | "gzip" | "zstd"

* The content coding comes from ``Accept-Encoding`` (RFC 9110 §12.5.3), the ``compress`` switch only asking
  for one: the requested coding is sent when the client accepts it (q > 0, by name or by ``*``), else the body
  goes as it is (``identity``). Without the header nothing is compressed: RFC 9110 lets a server send identity
  to anyone, and a client that named no coding may not decode one. ``x-gzip`` is ``gzip`` (§8.4.1.3).
* ``identity`` is acceptable unless refused (``identity;q=0``, or ``*;q=0`` with no ``identity`` entry); a
  client that refused it gets its own best coding among ``gzip`` and ``zstd`` (the higher q; ties: gzip, the
  one every client reads), and :class:`NotAcceptable` (406) when it accepts none of them either.
"""

from __future__ import annotations

from collections.abc import Sequence

from labkit.errors import BadInputError
from labkit.toyshop.core import CODECS, FORMATS

__all__ = ["NotAcceptable", "choose", "choose_coding", "parse_accept", "parse_accept_encoding", "CONTENT_CODINGS", "media_type", "SERVED_FORMATS", "SCHEMA_FORMATS",
           "DEFAULT_CODEC"]

#: formats the service may send, in its order of preference (pickle is never served: it runs code on load).
SERVED_FORMATS: tuple[str, ...] = ("json", "msgpack", "protobuf")
#: formats that need the payload's schema: offered by the export and order endpoints only.
SCHEMA_FORMATS: frozenset[str] = frozenset({"protobuf"})
#: format -> the codec that produces it when neither ``codec=`` nor the process default does.
DEFAULT_CODEC: dict[str, str] = {"json": "json", "msgpack": "msgpack", "protobuf": "protobuf"}
#: the content codings the service can apply, in its order of preference when the client's q-values tie.
CONTENT_CODINGS: tuple[str, ...] = ("gzip", "zstd")
_ALIASES: dict[str, str] = {
    **{mt: fmt for fmt, mt in FORMATS.items() if fmt in SERVED_FORMATS},
    "application/x-msgpack": "msgpack", "application/vnd.msgpack": "msgpack",
    "application/protobuf": "protobuf", "application/vnd.google.protobuf": "protobuf",
}


class NotAcceptable(BadInputError):
    """Nothing the endpoint can send is acceptable to the client (HTTP 406); ``supported`` lists media types."""

    def __init__(self, message: str, supported: Sequence[str]) -> None:
        super().__init__(message)
        self.supported = tuple(supported)


def _q_of(params: list[str]) -> float:
    """The ``q`` of one list element's parameters (RFC 9110 §12.4.2): 1 when absent, -1 when unreadable (the
    element is then ignored, as a malformed weight must not be taken as preference)."""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return -1.0
    return 1.0


def media_type(fmt: str) -> str:
    """The Content-Type the service sends for ``fmt``."""
    return FORMATS[fmt]


def parse_accept(header: str | None) -> list[tuple[str, str, float]]:
    """``Accept`` as ``(type, subtype, q)`` ranges, lower-cased; entries that do not parse are skipped."""
    out: list[tuple[str, str, float]] = []
    for part in (header or "").split(","):
        fields = [f.strip() for f in part.split(";")]
        kind, _, sub = fields[0].lower().partition("/")
        if not kind or not sub or "/" in sub or " " in fields[0]:
            continue
        q = _q_of(fields[1:])
        if 0.0 <= q <= 1.0:
            out.append((kind, sub, q))
    return out


def _weight(ranges: list[tuple[str, str, float]], fmt: str) -> float:
    """The q of the most specific range matching any of the format's media types (-1: none matches)."""
    names = [mt for mt, f in _ALIASES.items() if f == fmt]
    best_spec, best_q = -1, -1.0
    for kind, sub, q in ranges:
        for name in names:
            t, _, s = name.partition("/")
            spec = 2 if (kind, sub) == (t, s) else 1 if (kind == t and sub == "*") else \
                0 if (kind, sub) == ("*", "*") else -1
            if spec > best_spec or (spec == best_spec and q > best_q):
                best_spec, best_q = spec, q
    return best_q if best_spec >= 0 else -1.0


def choose(accept: str | None, offered: Sequence[str] = ("json", "msgpack"), codec: str | None = None,
           default_codec: str = "json") -> tuple[str, str]:
    """Pick ``(codec, format)`` for a response; see the module docstring for the rules.

    Args:
        accept: the request's ``Accept`` header (None or empty: anything, so JSON).
        offered: the formats this endpoint can send, in the server's preference order.
        codec: the request's ``codec=`` parameter (an override), or None.
        default_codec: the process's default codec (the ``codec`` switch set at start).
    """
    if codec is not None:
        if codec not in CODECS or codec == "pickle":
            raise BadInputError(f"codec {codec!r} is not served; use one of "
                                f"{', '.join(c for c in CODECS if c != 'pickle')}")
        usable = [f for f in offered if f in CODECS[codec]]
        if not usable:
            raise BadInputError(f"codec {codec!r} produces {', '.join(CODECS[codec])}, which this endpoint does "
                                f"not offer (it has no schema for protobuf); it offers {', '.join(offered)}")
    else:
        usable = list(offered)
    ranges = parse_accept(accept) or [("*", "*", 1.0)]
    weights = {f: _weight(ranges, f) for f in usable}
    best = max(usable, key=lambda f: (weights[f], -usable.index(f)))
    if weights[best] <= 0:
        supported = [media_type(f) for f in usable]
        why = f" (codec={codec} produces only {', '.join(CODECS[codec])})" if codec else ""
        raise NotAcceptable(f"Accept: {str(accept)[:120]!r} accepts none of the formats this endpoint can send"
                            f"{why}: {', '.join(supported)}", supported)
    if codec is None:
        codec = default_codec if best in CODECS.get(default_codec, ()) else DEFAULT_CODEC[best]
    return codec, best


def parse_accept_encoding(header: str | None) -> dict[str, float]:
    """``Accept-Encoding`` as ``{coding: q}`` (lower-cased, ``x-gzip`` read as ``gzip``, ``*`` kept); entries
    that do not parse are skipped; a coding listed twice keeps its first q."""
    out: dict[str, float] = {}
    for part in (header or "").split(","):
        fields = [f.strip() for f in part.split(";")]
        token = fields[0].lower()
        if not token or not all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in token):
            continue
        q = _q_of(fields[1:])
        if 0.0 <= q <= 1.0:
            out.setdefault("gzip" if token == "x-gzip" else token, q)
    return out


def choose_coding(accept_encoding: str | None, requested: str = "none") -> str:
    """The content coding of a response (``none`` for identity); see the module docstring for the rules.

    Args:
        accept_encoding: the request's ``Accept-Encoding`` header (None: the client named no coding).
        requested: the ``compress`` switch (``none``, ``gzip`` or ``zstd``): the coding the lab asks for.

    Raises:
        NotAcceptable: the client refused identity and accepts none of :data:`CONTENT_CODINGS`.
    """
    if accept_encoding is None:
        return "none"
    weights = parse_accept_encoding(accept_encoding)
    star = weights.get("*")

    def q(coding: str) -> float:
        return weights.get(coding, star if star is not None else 0.0)

    if requested != "none" and q(requested) > 0:
        return requested
    identity = weights.get("identity", star if star is not None else 1.0)
    if identity > 0:
        return "none"
    best = max(CONTENT_CODINGS, key=lambda c: (q(c), -CONTENT_CODINGS.index(c)))
    if q(best) > 0:
        return best
    raise NotAcceptable(f"Accept-Encoding: {accept_encoding[:120]!r} refuses identity and accepts none of the "
                        f"content codings this service can apply: {', '.join(CONTENT_CODINGS)}",
                        ["identity", *CONTENT_CODINGS])
