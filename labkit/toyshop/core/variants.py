"""The registry of the performance core's code-path switches, and their validation.

Every switch names its allowed values with the slow baseline first (the default). The service reads
:data:`VARIANTS` to list the switches a request may carry (``?layout=soa&codec=orjson``); labs read it to run
every value side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from labkit.errors import BadInputError

__all__ = ["VARIANTS", "DEFAULTS", "check_variant", "resolve_variants"]

#: switch name -> allowed values, the default (slow baseline) first.
VARIANTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "layout": ("aos", "soa"),  # quote pricing: per-line dicts vs numpy columns
        # quote pricing and statements: fresh containers vs reused per-thread buffers; pooled (statements
        # only) is a shared pool carrying lab 03's deliberate stale-state bug
        "buffers": ("grow", "prealloc", "pooled"),
        "codec": ("json", "orjson", "msgspec", "msgpack", "protobuf"),  # response encoding (pickle: core only)
        "compress": ("none", "gzip", "zstd"),  # response compression (Content-Encoding)
        "fields": ("full", "trimmed"),  # product fields per response item: ~30 vs 8
        "cache": ("none", "local"),  # config lookups: every time vs in-process snapshot
    }
)

#: switch name -> default value (the first allowed value).
DEFAULTS: Mapping[str, str] = MappingProxyType({name: values[0] for name, values in VARIANTS.items()})


def check_variant(switch: str, value: str) -> str:
    """Return ``value`` if it is an allowed value of ``switch``, else raise.

    Raises :class:`labkit.errors.BadInputError` naming the switch, the bad value and the allowed values.
    """
    allowed = VARIANTS.get(switch)
    if allowed is None:
        raise BadInputError(
            f"unknown variant switch {switch!r}: the performance core has no such switch; "
            f"use one of {', '.join(VARIANTS)}"
        )
    if value not in allowed:
        raise BadInputError(
            f"bad value {value!r} for variant switch {switch!r}: it is not one of the allowed values; "
            f"use one of {', '.join(allowed)} (default {allowed[0]!r})"
        )
    return value


def resolve_variants(choices: Mapping[str, str] | None = None, *, ignore_unknown: bool = False) -> dict[str, str]:
    """Validate ``choices`` and fill in the defaults: returns a dict with every switch of :data:`VARIANTS`.

    ``ignore_unknown=True`` skips keys that are not core switches (e.g. the service's other query
    parameters); otherwise an unknown key raises :class:`labkit.errors.BadInputError`.
    """
    resolved = dict(DEFAULTS)
    for switch, value in (choices or {}).items():
        if switch not in VARIANTS and ignore_unknown:
            continue
        resolved[switch] = check_variant(switch, value)
    return resolved
