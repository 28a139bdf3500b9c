"""Napkin math with your own table: price each count of an operation with a measured row, add them up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labkit.latency.ladder import LatencyTable

__all__ = ["napkin"]


def napkin(table: LatencyTable, terms: Mapping[str, tuple[float, str]]) -> Any:
    """A cost estimate as a DataFrame: one line per term, ``count × median of a row``, and a total line.

    Args:
        table: the measured :class:`LatencyTable` the unit costs come from.
        terms: what the operation does, as ``{"what": (count, row_key)}``, e.g.
            ``{"queries": (252, "sqlite_point_query"), "catalog calls": (200, "http_health")}``.

    Returns:
        Columns ``term``, ``count``, ``row``, ``unit_us`` and ``subtotal_ms``; the last line is the total.

    Raises:
        BadInputError: a term's row is not in the table or was not measured here (its note says why).
    """
    import pandas as pd

    from labkit.errors import BadInputError

    lines = []
    for term, spec in terms.items():
        try:
            count, key = spec
            count = float(count)
        except (TypeError, ValueError):
            raise BadInputError(f"term {term!r} must be (count, row_key), got {spec!r}") from None
        try:
            row = table.row(key)
        except KeyError as e:
            raise BadInputError(f"term {term!r}: {e.args[0]}") from None
        if not row.available:
            raise BadInputError(f"term {term!r}: the row {key!r} was not measured here ({row.note}); "
                                "price it with another row or a labelled reference")
        lines.append({"term": term, "count": count, "row": key, "unit_us": row.median_ns / 1e3,
                      "subtotal_ms": count * row.median_ns / 1e6})
    df = pd.DataFrame(lines, columns=["term", "count", "row", "unit_us", "subtotal_ms"])
    total = pd.DataFrame([{"term": "total", "count": float("nan"), "row": "", "unit_us": float("nan"),
                           "subtotal_ms": df["subtotal_ms"].sum()}])
    return pd.concat([df, total], ignore_index=True)
