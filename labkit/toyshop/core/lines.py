"""Order lines in two layouts — AoS (a list of per-line dicts) and SoA (one NumPy array per field).

:class:`OrderLines` is the one input every pricing kernel takes (so the variants share one signature); it
validates its input once, when a view is built, and keeps the view. Money is integer cents, rates integer
basis points, and the bounds below keep every intermediate and sum inside int64, so NumPy and Python
agree exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from labkit.errors import BadInputError

__all__ = ["LINE_FIELDS", "DEFAULT_TAX_RATES_BP", "LineColumns", "OrderLines", "make_order_lines"]

#: The fields of one order line, in the order tuple rows carry them.
LINE_FIELDS: tuple[str, ...] = ("product_id", "qty", "unit_price", "discount_bp", "tax_class")
#: Tax rate per tax class, in basis points: 0 %, 5.5 %, 10 %, 20 %.
DEFAULT_TAX_RATES_BP: tuple[int, ...] = (0, 550, 1000, 2000)

# bounds that keep every intermediate and every sum inside int64
_MAX_LINES = 1_000_000
_LIMITS = {"product_id": 2**62, "qty": 100_000, "unit_price": 10_000_000, "discount_bp": 10_000}
_MAX_TAX_CLASSES = 64
_BP = 10_000
# what a line value may be: Python semantics, so True counts as 1 (np.array cannot tell it from 1 anyway)
_INTEGRAL = (int, np.integer, np.bool_)


class LineColumns(NamedTuple):
    """The SoA view: one contiguous int64 array per line field (``tax_class`` is ``intp``, an index)."""

    product_id: np.ndarray
    qty: np.ndarray
    unit_price: np.ndarray
    discount_bp: np.ndarray
    tax_class: np.ndarray


class OrderLines:
    """Order lines holding both layouts: ``.rows`` (AoS, list of dicts) and ``.columns`` (SoA, NumPy).

    Build with :meth:`from_rows` (what a database returns) or :meth:`from_columns`. Each view is built,
    and its input validated, on first access, the way that layout would do it: ``.columns`` with one
    ``np.array`` call and vectorised range checks, ``.rows`` with a Python pass that builds the dicts. So a
    service that prices rows pays for exactly one conversion, the one its variant needs — part of the
    lesson: converting to columns per request costs O(n), the layout pays best where the data *lives* in
    columns. Call :meth:`materialize` before timing kernels, so no conversion lands in a measurement.

    Bad input raises :class:`labkit.errors.BadInputError` naming the field, when the view is built: values
    must be integers (``bool`` counts as 0/1, as in Python) within the documented ranges.
    """

    __slots__ = ("_source", "_rows", "_columns", "tax_rates_bp", "_rates")

    def __init__(
        self,
        *,
        source: list[Any] | None = None,
        columns: LineColumns | None = None,
        tax_rates_bp: Sequence[int] = DEFAULT_TAX_RATES_BP,
    ) -> None:
        rates = list(tax_rates_bp)
        if not 1 <= len(rates) <= _MAX_TAX_CLASSES or any(
            isinstance(r, bool) or not isinstance(r, int | np.integer) or not 0 <= r <= _BP for r in rates
        ):
            raise BadInputError(
                f"tax_rates_bp={tax_rates_bp!r}: need 1–{_MAX_TAX_CLASSES} integer rates in basis points, "
                f"each 0–{_BP} (e.g. {DEFAULT_TAX_RATES_BP})"
            )
        self.tax_rates_bp: tuple[int, ...] = tuple(int(r) for r in rates)
        self._rates = np.array(self.tax_rates_bp, dtype=np.int64)
        self._source = source if source is not None else []
        self._columns = columns
        self._rows: list[dict[str, int]] | None = None
        n = len(columns.qty) if columns is not None else len(self._source)
        if n > _MAX_LINES:
            raise BadInputError(f"{n} order lines: at most {_MAX_LINES} per quote; split the order")

    @classmethod
    def from_rows(
        cls, rows: Iterable[Mapping[str, int] | Sequence[int]], *, tax_rates_bp: Sequence[int] = DEFAULT_TAX_RATES_BP
    ) -> OrderLines:
        """Lines from mappings keyed by :data:`LINE_FIELDS`, or from tuples in that order (e.g. SQL rows)."""
        return cls(source=list(rows), tax_rates_bp=tax_rates_bp)

    @classmethod
    def from_columns(
        cls,
        product_id: Any,
        qty: Any,
        unit_price: Any,
        discount_bp: Any,
        tax_class: Any,
        *,
        tax_rates_bp: Sequence[int] = DEFAULT_TAX_RATES_BP,
    ) -> OrderLines:
        """Lines from five equal-length integer sequences (arrays, lists, ``array.array``); validated now."""
        cols = [np.asarray(c) for c in (product_id, qty, unit_price, discount_bp, tax_class)]
        lengths = {len(c) if c.ndim == 1 else -1 for c in cols}
        if len(lengths) != 1 or -1 in lengths:
            raise BadInputError(
                f"order-line columns must be 1-D and of equal length; got shapes {[c.shape for c in cols]}"
            )
        lines = cls(tax_rates_bp=tax_rates_bp)
        lines._columns = _checked_columns(cols, len(lines.tax_rates_bp))
        return lines

    def __len__(self) -> int:
        return len(self._columns.qty) if self._columns is not None else len(self._source)

    def __repr__(self) -> str:
        return f"OrderLines(n={len(self)}, tax_rates_bp={self.tax_rates_bp})"

    @property
    def columns(self) -> LineColumns:
        """The SoA view (contiguous read-only arrays), built on first access."""
        if self._columns is None:
            self._columns = _columns_from_rows(self._source, len(self.tax_rates_bp))
        return self._columns

    @property
    def rows(self) -> list[dict[str, int]]:
        """The AoS view: one dict per line keyed by :data:`LINE_FIELDS`, built on first access."""
        if self._rows is None:
            if self._columns is not None:  # already validated: a straight copy out of the arrays
                lists = [c.tolist() for c in self._columns]
                self._rows = [dict(zip(LINE_FIELDS, t, strict=True)) for t in zip(*lists, strict=True)]
            else:
                self._rows = _rows_from_source(self._source, len(self.tax_rates_bp))
        return self._rows

    def materialize(self) -> OrderLines:
        """Build (and so validate) both views now; returns ``self``."""
        self.columns  # noqa: B018 - touching the properties builds the views
        self.rows  # noqa: B018
        return self


def _field_error(name: str, value: Any, high: int) -> BadInputError:
    if not isinstance(value, _INTEGRAL):
        return BadInputError(f"order-line field {name!r} must hold integers; got {value!r}")
    hint = "; add a rate to tax_rates_bp or fix the class" if name == "tax_class" else ""
    return BadInputError(f"order-line field {name!r} out of range: values must be 0–{high}, got {value}{hint}")


def _shape_error() -> BadInputError:
    return BadInputError(
        f"order lines must each have {len(LINE_FIELDS)} fields ({', '.join(LINE_FIELDS)}): pass mappings with "
        "those keys or tuples in that order"
    )


_GET_FIELDS = itemgetter(*LINE_FIELDS)


def _as_tuple(row: Any) -> tuple[Any, ...]:
    if isinstance(row, Mapping):
        try:
            return _GET_FIELDS(row)
        except KeyError as exc:
            raise BadInputError(f"an order line lacks field {exc}: every line needs {', '.join(LINE_FIELDS)}") from None
    try:
        values = tuple(row)
    except TypeError:
        raise _shape_error() from None
    if len(values) != len(LINE_FIELDS):
        raise _shape_error()
    return values


def _rows_from_source(source: list[Any], n_classes: int) -> list[dict[str, int]]:
    """The AoS build: one Python pass that checks each value and makes each line's dict."""
    p_max, q_max, u_max, d_max, k_max = (*_LIMITS.values(), n_classes - 1)
    out: list[dict[str, int]] = []
    append = out.append
    for row in source:
        if type(row) is tuple and len(row) == 5:
            pid, qty, price, disc, k = row
        else:
            pid, qty, price, disc, k = _as_tuple(row)
        # the fast path: exact ints in range (what SQLite hands back); anything else is checked slowly
        if (
            type(pid) is int and type(qty) is int and type(price) is int and type(disc) is int and type(k) is int
            and 0 <= pid <= p_max and 0 <= qty <= q_max and 0 <= price <= u_max and 0 <= disc <= d_max
            and 0 <= k <= k_max
        ):  # fmt: skip
            append({"product_id": pid, "qty": qty, "unit_price": price, "discount_bp": disc, "tax_class": k})
            continue
        values = []
        for name, value, high in zip(LINE_FIELDS, (pid, qty, price, disc, k), (p_max, q_max, u_max, d_max, k_max), strict=True):
            if not isinstance(value, _INTEGRAL) or not 0 <= value <= high:
                raise _field_error(name, value, high)
            values.append(int(value))
        append(dict(zip(LINE_FIELDS, values, strict=True)))
    return out


def _columns_from_rows(source: list[Any], n_classes: int) -> LineColumns:
    """The SoA build: one ``np.array`` over the rows, then vectorised checks per column."""
    if not source:
        return _checked_columns([np.zeros(0, dtype=np.int64)] * len(LINE_FIELDS), n_classes)
    tuples = source if type(source[0]) is tuple else [_as_tuple(r) for r in source]
    try:
        table = np.array(tuples)
    except (ValueError, TypeError):
        raise _shape_error() from None
    if table.ndim != 2 or table.shape[1] != len(LINE_FIELDS):
        raise _shape_error()
    return _checked_columns([table[:, i] for i in range(len(LINE_FIELDS))], n_classes)


def _checked_columns(cols: list[np.ndarray], n_classes: int) -> LineColumns:
    n = len(cols[0])
    limits = dict(_LIMITS, tax_class=n_classes - 1)
    out = []
    for name, col in zip(LINE_FIELDS, cols, strict=True):
        if col.dtype.kind == "O":
            for value in col.tolist():
                if not isinstance(value, _INTEGRAL):
                    raise _field_error(name, value, limits[name])
        elif n and col.dtype.kind not in "iub":
            raise BadInputError(f"order-line field {name!r} must hold integers; got dtype {col.dtype}")
        if n:
            low, high = int(col.min()), int(col.max())
            if low < 0 or high > limits[name]:
                raise _field_error(name, low if low < 0 else high, limits[name])
        # a private contiguous copy: the caller cannot mutate it under us
        col = np.array(col, dtype=np.intp if name == "tax_class" else np.int64, order="C", copy=True)
        col.flags.writeable = False
        out.append(col)
    return LineColumns(*out)


def make_order_lines(n: int, *, seed: int = 0, tax_rates_bp: Sequence[int] = DEFAULT_TAX_RATES_BP) -> OrderLines:
    """``n`` deterministic, realistic order lines (both views built), for labs and benchmarks.

    Quantities mostly 1–3, prices log-normal around $20, a discount on ~30 % of lines, classes skewed.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _MAX_LINES:
        raise BadInputError(f"n={n!r}: the number of order lines must be an integer 0–{_MAX_LINES}")
    rng = np.random.default_rng(seed)
    k = len(tax_rates_bp)
    weights = np.array([4.0, 1.0, 2.0, 6.0][:k] + [1.0] * max(0, k - 4))
    lines = OrderLines.from_columns(
        rng.integers(1, 100_000, n),
        np.minimum(rng.geometric(0.5, n), 1000),
        np.clip(rng.lognormal(7.6, 1.0, n).astype(np.int64), 1, 10_000_000),
        np.where(rng.random(n) < 0.3, rng.choice([500, 1000, 1500, 2500], n), 0),
        rng.choice(k, n, p=weights / weights.sum()),
        tax_rates_bp=tax_rates_bp,
    )
    return lines.materialize()
