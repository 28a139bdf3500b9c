"""One record type — an order line of five integer fields — held in eight layouts, and three operations on each.

The record is the line toyshop's ``/quote`` prices (:data:`labkit.toyshop.core.LINE_FIELDS`): ``product_id``,
``qty``, ``unit_price`` (cents), ``discount_bp`` and ``tax_class``, five int64 values, 40 bytes of payload.

Layouts (:data:`LAYOUTS`), from the most Python to the most columnar:

==============  =================================================================================
``dicts``       a list of dicts (what a JSON decoder or ``sqlite3.Row``-to-dict code produces)
``objects``     a list of instances of a plain class
``slots``       a list of instances of a class with ``__slots__``
``dataclass``   a list of ``@dataclass(slots=True)`` instances
``tuples``      a list of plain tuples (what ``cursor.fetchall()`` returns)
``structured``  a NumPy structured array: array-of-structs, but in one contiguous block of memory
``columns``     one contiguous NumPy array per field: struct-of-arrays
``pandas``      a pandas DataFrame (columns underneath)
==============  =================================================================================

Operations (:data:`OPERATIONS`), each written the idiomatic way for its layout (a plain ``for`` loop for the
Python containers, whole-array expressions for NumPy and pandas):

* ``sum`` — the total of one field (``unit_price``);
* ``filter_sum`` — the total of ``unit_price`` over the lines with ``tax_class == 3``;
* ``update`` — ``qty += 1`` on every line, in place. Tuples cannot change: their update *replaces* every
  tuple with a new one, which is what that layout really costs.

Every layout gives the same answer to every operation (tested), so their times compare like for like.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.errors import BadInputError
from labkit.inputs import integer
from labkit.toyshop.core.lines import LINE_FIELDS

__all__ = ["FIELDS", "LAYOUTS", "OPERATIONS", "PAYLOAD_BYTES", "make_columns", "build", "operation",
           "to_columns", "bytes_per_record", "check_choice"]

FIELDS: tuple[str, ...] = LINE_FIELDS
LAYOUTS: tuple[str, ...] = ("dicts", "objects", "slots", "dataclass", "tuples", "structured", "columns", "pandas")
OPERATIONS: tuple[str, ...] = ("sum", "filter_sum", "update")
#: bytes of useful data per record: five int64 fields
PAYLOAD_BYTES = 8 * len(FIELDS)
MAX_N = 20_000_000
_PRICE, _QTY, _CLASS = FIELDS.index("unit_price"), FIELDS.index("qty"), FIELDS.index("tax_class")
_FILTER_CLASS = 3
DTYPE = np.dtype([(f, np.int64) for f in FIELDS])


class Line:
    """An order line as a plain class (its attributes live in a per-instance dict)."""

    def __init__(self, product_id: int, qty: int, unit_price: int, discount_bp: int, tax_class: int) -> None:
        self.product_id = product_id
        self.qty = qty
        self.unit_price = unit_price
        self.discount_bp = discount_bp
        self.tax_class = tax_class


class SlotLine:
    """An order line as a class with ``__slots__`` (fixed attribute slots, no per-instance dict)."""

    __slots__ = FIELDS

    def __init__(self, product_id: int, qty: int, unit_price: int, discount_bp: int, tax_class: int) -> None:
        self.product_id = product_id
        self.qty = qty
        self.unit_price = unit_price
        self.discount_bp = discount_bp
        self.tax_class = tax_class


@dataclass(slots=True)
class DataLine:
    """An order line as a ``@dataclass(slots=True)``."""

    product_id: int
    qty: int
    unit_price: int
    discount_bp: int
    tax_class: int


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise BadInputError naming the argument."""
    if value not in allowed:
        raise BadInputError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return value


def _check_n(n: Any) -> int:
    return integer(n, "n", low=0, high=MAX_N, hint="n counts records, e.g. n=100_000")


def make_columns(n: int, *, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` deterministic, realistic order lines as one int64 array per field (the source every layout is
    built from): quantities mostly 1–3, prices log-normal around $20, a discount on ~30 % of lines."""
    n = _check_n(n)
    rng = np.random.default_rng(seed)
    weights = np.array([4.0, 1.0, 2.0, 6.0])
    cols = {
        "product_id": rng.integers(1, 100_000, n),
        "qty": np.minimum(rng.geometric(0.5, n), 1000),
        "unit_price": np.clip(rng.lognormal(7.6, 1.0, n), 1, 10_000_000).astype(np.int64),
        "discount_bp": np.where(rng.random(n) < 0.3, rng.choice([500, 1000, 1500, 2500], n), 0),
        "tax_class": rng.choice(4, n, p=weights / weights.sum()),
    }
    return {f: np.ascontiguousarray(cols[f], dtype=np.int64) for f in FIELDS}


def _source(columns: Mapping[str, Any]) -> dict[str, np.ndarray]:
    missing = [f for f in FIELDS if f not in columns]
    if missing:
        raise BadInputError(f"columns lack {missing}: pass one array per field of {FIELDS} (make_columns(n))")
    cols = {f: np.asarray(columns[f]) for f in FIELDS}
    if len({c.shape for c in cols.values()}) != 1 or cols[FIELDS[0]].ndim != 1:
        raise BadInputError(f"columns must be 1-D and of equal length; got shapes {[c.shape for c in cols.values()]}")
    return cols


def build(layout: str, columns: Mapping[str, Any]) -> Any:
    """The records of ``columns`` (one array per field, e.g. from :func:`make_columns`) in ``layout``.

    Python layouts get fresh int objects (as a database driver or JSON decoder would hand them over), the
    NumPy and pandas layouts their own copy of the data: nothing is shared with ``columns``.
    """
    check_choice("layout", layout, LAYOUTS)
    cols = _source(columns)
    if layout == "structured":
        out = np.empty(len(cols[FIELDS[0]]), dtype=DTYPE)
        for f in FIELDS:
            out[f] = cols[f]
        return out
    if layout == "columns":
        return {f: np.array(cols[f], dtype=np.int64, copy=True) for f in FIELDS}
    if layout == "pandas":
        import pandas as pd

        return pd.DataFrame({f: np.array(cols[f], dtype=np.int64, copy=True) for f in FIELDS})
    rows = zip(*(cols[f].tolist() for f in FIELDS), strict=True)
    if layout == "dicts":
        return [dict(zip(FIELDS, t, strict=True)) for t in rows]
    if layout == "tuples":
        return list(rows)
    cls = {"objects": Line, "slots": SlotLine, "dataclass": DataLine}[layout]
    return [cls(*t) for t in rows]


def to_columns(layout: str, data: Any) -> dict[str, np.ndarray]:
    """Back from ``layout`` to one int64 array per field (to check that every layout holds the same data)."""
    check_choice("layout", layout, LAYOUTS)
    if layout in ("structured", "columns", "pandas"):
        return {f: np.asarray(data[f], dtype=np.int64).copy() for f in FIELDS}
    if layout == "dicts":
        rows = [tuple(r[f] for f in FIELDS) for r in data]
    elif layout == "tuples":
        rows = list(data)
    else:
        rows = [tuple(getattr(r, f) for f in FIELDS) for r in data]
    table = np.array(rows, dtype=np.int64).reshape(len(rows), len(FIELDS))
    return {f: table[:, i].copy() for i, f in enumerate(FIELDS)}


# --- the operations: one function per (layout family, operation) ---------------------------------------

def _sum_dicts(rows: list[dict[str, int]]) -> int:
    s = 0
    for r in rows:
        s += r["unit_price"]
    return s


def _sum_attrs(rows: list[Any]) -> int:
    s = 0
    for r in rows:
        s += r.unit_price
    return s


def _sum_tuples(rows: list[tuple[int, ...]]) -> int:
    s = 0
    for r in rows:
        s += r[_PRICE]
    return s


def _sum_array(data: Any) -> int:
    return int(data["unit_price"].sum())


def _filter_dicts(rows: list[dict[str, int]]) -> int:
    s = 0
    for r in rows:
        if r["tax_class"] == _FILTER_CLASS:
            s += r["unit_price"]
    return s


def _filter_attrs(rows: list[Any]) -> int:
    s = 0
    for r in rows:
        if r.tax_class == _FILTER_CLASS:
            s += r.unit_price
    return s


def _filter_tuples(rows: list[tuple[int, ...]]) -> int:
    s = 0
    for r in rows:
        if r[_CLASS] == _FILTER_CLASS:
            s += r[_PRICE]
    return s


def _filter_array(data: Any) -> int:
    return int(data["unit_price"][data["tax_class"] == _FILTER_CLASS].sum())


def _filter_pandas(df: Any) -> int:
    return int(df.loc[df["tax_class"] == _FILTER_CLASS, "unit_price"].sum())


def _update_dicts(rows: list[dict[str, int]]) -> None:
    for r in rows:
        r["qty"] += 1


def _update_attrs(rows: list[Any]) -> None:
    for r in rows:
        r.qty += 1


def _update_tuples(rows: list[tuple[int, ...]]) -> None:
    for i, (pid, qty, price, disc, k) in enumerate(rows):
        rows[i] = (pid, qty + 1, price, disc, k)  # a tuple cannot change: build a new one


def _update_array(data: Any) -> None:
    data["qty"] += 1


_OPS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "sum": {"dicts": _sum_dicts, "tuples": _sum_tuples, "structured": _sum_array, "columns": _sum_array,
            "pandas": _sum_array},
    "filter_sum": {"dicts": _filter_dicts, "tuples": _filter_tuples, "structured": _filter_array,
                   "columns": _filter_array, "pandas": _filter_pandas},
    "update": {"dicts": _update_dicts, "tuples": _update_tuples, "structured": _update_array,
               "columns": _update_array, "pandas": _update_array},
}
for _layout in ("objects", "slots", "dataclass"):
    _OPS["sum"][_layout], _OPS["filter_sum"][_layout], _OPS["update"][_layout] = (
        _sum_attrs, _filter_attrs, _update_attrs)


def operation(layout: str, op: str) -> Callable[[Any], Any]:
    """The function doing ``op`` on data built in ``layout``: ``fn(data)`` returns an int (``sum``,
    ``filter_sum``) or None (``update``, which changes ``data``)."""
    check_choice("layout", layout, LAYOUTS)
    return _OPS[check_choice("operation", op, OPERATIONS)][layout]


def bytes_per_record(layout: str, n: int = 10_000, *, seed: int = 0) -> float:
    """Memory one record takes in ``layout``, measured: bytes still allocated after building ``n`` records,
    divided by ``n`` (tracemalloc, which NumPy reports its buffers to).

    It counts what the layout really holds on to: the container, each record's object and dict, each
    field's int object (small ints, −5…256, are shared singletons and cost nothing), the list's pointers.
    """
    n = _check_n(n)
    if n == 0:
        raise BadInputError("n=0: measure bytes per record over at least one record (10_000 is a good size)")
    cols = make_columns(n, seed=seed)
    build(layout, make_columns(8, seed=seed))  # first use fills caches (pandas, imports): not the records' cost
    # CPython keeps up to 2,000 freed tuples of each length for reuse; memory taken from that free list was
    # allocated before tracing began and would go uncounted. Hold enough 5-tuples to empty it first.
    drained = [tuple(range(k, k + len(FIELDS))) for k in range(4_000)]
    was_tracing, was_collecting = tracemalloc.is_tracing(), gc.isenabled()
    gc.disable()  # no collection inside the window: it could free unrelated garbage and hide the records' cost
    if not was_tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        data = build(layout, cols)
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        if not was_tracing:
            tracemalloc.stop()
        if was_collecting:
            gc.enable()
    del data, drained
    return retained / n
