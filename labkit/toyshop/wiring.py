"""The service's calls into the performance core: encoding, field trimming, quote pricing, config cache.

One thin seam, so the HTTP layer (:mod:`labkit.toyshop.app`) stays the same whichever kernel a switch picks,
and so every switch value is reachable from a request. Pricing comes from
:mod:`labkit.toyshop.core.pricing`; the other pieces use the core's implementation when it provides one and
a straightforward local one otherwise (the config cache, until the core has one).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from labkit.toyshop.core.encoding import MEDIA_TYPES, TRIMMED_FIELDS, encode, select_fields

__all__ = ["encode", "MEDIA_TYPES", "trim_export", "TRIMMED_FIELDS", "quote_payload", "ConfigCache"]


def trim_export(payload: dict[str, Any], fields: str) -> dict[str, Any]:
    """Apply ``fields`` to an export/order payload: ``full`` returns it unchanged, ``trimmed`` keeps the
    core's :data:`TRIMMED_FIELDS` of each item's product (in place)."""
    if fields != "trimmed":
        return payload
    orders = payload["orders"] if "orders" in payload else [payload]
    for order in orders:
        for item in order["items"]:
            if item["product"] is not None:
                item["product"] = select_fields(item["product"], "trimmed")
    return payload


@lru_cache(maxsize=16)
def _synthetic_lines(n: int, seed: int) -> Any:
    from labkit.toyshop.core.pricing import make_order_lines

    return make_order_lines(n, seed=seed)


_TAX = {"zero": 0, "reduced": 1, "standard": 3}


def quote_payload(rows: list[tuple] | None, n_lines: int | None, seed: int, layout: str,
                  buffers: str) -> dict[str, Any]:
    """Price either SQL rows ``(product_id, qty, unit_price, discount_pct, tax_class_name)`` or ``n_lines``
    synthetic lines with the core kernel chosen by ``layout``/``buffers``; returns JSON-ready data."""
    from labkit.toyshop.core.pricing import OrderLines, quote

    if rows is not None:
        lines = OrderLines.from_rows([(pid, qty, unit, pct * 100, _TAX[tax]) for pid, qty, unit, pct, tax in rows])
    else:
        lines = _synthetic_lines(n_lines or 0, seed)
    return quote(lines, layout=layout, buffers=buffers).to_dict()


class ConfigCache:
    """An in-process read-through cache of config values, shared by all threads of the service.

    Unbounded (the config table is small) and never invalidated (the dataset is immutable). A single dict
    get/set is atomic under CPython's GIL, so readers take no lock. Misses go to ``load(key)``.
    """

    def __init__(self, load: Callable[[str], str | None]) -> None:
        self._load = load
        self._data: dict[str, str | None] = {}
        self.hits = self.misses = 0

    def lookup(self, key: str) -> tuple[bool, str | None]:
        """``(True, value)`` if ``key`` is cached (counts a hit), else ``(False, None)`` without loading."""
        try:
            value = self._data[key]
        except KeyError:
            return False, None
        self.hits += 1
        return True, value

    def get(self, key: str) -> str | None:
        """The value of ``key`` (None if unknown), loading it on a miss."""
        try:
            value = self._data[key]
        except KeyError:
            self.misses += 1
            value = self._data[key] = self._load(key)
            return value
        self.hits += 1
        return value
