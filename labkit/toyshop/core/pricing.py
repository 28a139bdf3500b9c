"""Quote pricing: totals and per-tax-class aggregates over order lines, in four variants.

Money is integer cents and rates are integer basis points (1 bp = 0.01 %), rounded half-up per line, so
every variant returns *exactly* the same :class:`Quote` (no float summation-order drift). Per line::

    gross    = qty * unit_price
    discount = round_half_up(gross * discount_bp / 10_000)
    net      = gross - discount
    tax      = round_half_up(net * tax_rates_bp[tax_class] / 10_000)

The quote sums lines, quantity, gross, discount, net, tax and total (net + tax), overall and per tax class.

Two orthogonal switches (see :data:`labkit.toyshop.core.VARIANTS`), one signature ``kernel(lines) -> Quote``:

* ``layout="aos"`` (baseline): an interpreted loop over a list of per-line dicts. Every field read is a
  dict lookup, every arithmetic result a boxed Python int, every line a trip through the bytecode loop:
  a per-line cost of interpreter work, whatever the CPU cache does.
* ``layout="soa"``: the same arithmetic over contiguous int64 NumPy columns (one array per field). Each
  step is one C loop over all lines (streaming through memory that holds only the fields it needs), plus a
  fixed per-call overhead for the dozen NumPy calls. In CPython the win is
  mostly removed interpreter overhead and boxing, and only partly cache locality; it needs enough lines to
  pay back the fixed overhead (see the crossover printed by ``tests/benchmarks/bench_core.py``).
* ``buffers="grow"`` (baseline): fresh containers on every call. AoS appends one result dict per line to a
  growing list (each dict is a GC-tracked object: thousands of lines trigger gen-0 collections mid-call);
  SoA evaluates plain NumPy expressions, each of which asks for a new n-sized temporary array (big ones
  come from fresh pages that must be faulted in) — except that NumPy (≥ 1.13, on Linux) reuses in place a
  temporary of 256 KiB or more that nothing else refers to, so at large sizes part of that is already saved.
* ``buffers="prealloc"``: per-line intermediates go into buffers allocated once per thread and reused
  (a thread-local pool, like a ThreadLocal output buffer). AoS writes into preallocated lists of ints (no
  per-line dict, nothing GC-tracked per line); SoA passes ``out=`` to every ufunc, so a warm call allocates
  no n-sized array at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from labkit.errors import BadInputError

# re-exported: the service imports OrderLines and make_order_lines from here
from labkit.toyshop.core.lines import (  # _MAX_TAX_CLASSES: the reusable per-class accumulators' slots
    _MAX_TAX_CLASSES,
    DEFAULT_TAX_RATES_BP,
    LINE_FIELDS,
    LineColumns,
    OrderLines,
    make_order_lines,
)
from labkit.toyshop.core.variants import check_variant

__all__ = [
    "LINE_FIELDS",
    "DEFAULT_TAX_RATES_BP",
    "LineColumns",
    "OrderLines",
    "TaxClassTotal",
    "Quote",
    "quote",
    "quote_aos_grow",
    "quote_aos_prealloc",
    "quote_soa_grow",
    "quote_soa_prealloc",
    "QUOTE_KERNELS",
    "make_order_lines",
    "release_buffers",
]

_BP = 10_000
_HALF = 5_000


class TaxClassTotal(NamedTuple):
    """Aggregates of the lines of one tax class (cents; ``rate_bp`` in basis points). Immutable."""

    tax_class: int
    rate_bp: int
    lines: int
    quantity: int
    net: int
    tax: int


class Quote(NamedTuple):
    """A priced quote: sums over all lines (cents) and per tax class (only classes present, ascending).

    An immutable value (a NamedTuple: building it is cheap, which matters for 10-line quotes).
    """

    lines: int
    quantity: int
    gross: int
    discount: int
    net: int
    tax: int
    total: int
    by_tax_class: tuple[TaxClassTotal, ...]

    def to_dict(self) -> dict[str, Any]:
        """The quote as plain JSON-ready data (ints, lists, dicts)."""
        data = self._asdict()
        data["by_tax_class"] = [t._asdict() for t in self.by_tax_class]
        return data


# ---------------------------------------------------------------------------------------------- kernels


def _quote(
    n: int, qty: int, gross: int, discount: int, net: int, tax: int, rates: Sequence[int], per: Iterable[Sequence[int]]
) -> Quote:
    """Assemble a Quote; ``per`` yields (tax_class, lines, quantity, net, tax) for classes present."""
    by_class = tuple(
        TaxClassTotal(int(k), int(rates[k]), int(c), int(q), int(nt), int(t)) for k, c, q, nt, t in per if c
    )
    return Quote(int(n), int(qty), int(gross), int(discount), int(net), int(tax), int(net) + int(tax), by_class)


def quote_aos_grow(lines: OrderLines) -> Quote:
    """Baseline: loop over per-line dicts, append a fresh result dict per line, then aggregate.

    This is how the code usually starts life: readable, with interpreter work on every line, plus one
    GC-tracked dict per line that stays alive until the aggregation pass.
    """
    rates = lines.tax_rates_bp
    priced = []
    for row in lines.rows:
        gross = row["qty"] * row["unit_price"]
        discount = (gross * row["discount_bp"] + _HALF) // _BP
        net = gross - discount
        tax = (net * rates[row["tax_class"]] + _HALF) // _BP
        priced.append(
            {"tax_class": row["tax_class"], "qty": row["qty"], "gross": gross, "discount": discount, "net": net, "tax": tax}
        )
    qty_sum = gross_sum = discount_sum = net_sum = tax_sum = 0
    classes: dict[int, list[int]] = {}
    for p in priced:
        qty_sum += p["qty"]
        gross_sum += p["gross"]
        discount_sum += p["discount"]
        net_sum += p["net"]
        tax_sum += p["tax"]
        acc = classes.get(p["tax_class"])
        if acc is None:
            acc = classes[p["tax_class"]] = [0, 0, 0, 0]
        acc[0] += 1
        acc[1] += p["qty"]
        acc[2] += p["net"]
        acc[3] += p["tax"]
    per = ((k, *classes[k]) for k in sorted(classes))
    return _quote(len(priced), qty_sum, gross_sum, discount_sum, net_sum, tax_sum, rates, per)


class _AosBuffers:
    """Reusable per-thread lists for the AoS prealloc kernel (grown geometrically, never shrunk)."""

    __slots__ = ("capacity", "tax_class", "qty", "gross", "discount", "net", "tax")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        for name in self.__slots__[1:]:
            setattr(self, name, [0] * capacity)


class _SoaBuffers:
    """Reusable per-thread int64 arrays for the SoA prealloc kernel (grown geometrically, never shrunk)."""

    __slots__ = ("capacity", "gross", "discount", "net", "rate", "tax", "scratch", "per", "views_n", "views")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        for name in ("gross", "discount", "net", "rate", "tax", "scratch"):
            arr = np.empty(capacity, dtype=np.int64)
            arr.fill(0)  # touch every page now, not inside the first timed call
            setattr(self, name, arr)
        self.per = np.zeros((3, _MAX_TAX_CLASSES), dtype=np.int64)
        self.views_n = -1
        self.views: tuple[np.ndarray, ...] = ()

    def take(self, n: int) -> tuple[np.ndarray, ...]:
        """Length-n views of the six work arrays (cached: services repeat the same sizes)."""
        if n != self.views_n:
            self.views = tuple(getattr(self, a)[:n] for a in ("gross", "discount", "net", "rate", "tax", "scratch"))
            self.views_n = n
        return self.views


_local = threading.local()


def _buffers(kind: str, n: int) -> Any:
    pool = _local.__dict__
    buf = pool.get(kind)
    if buf is None or buf.capacity < n:
        capacity = max(n, 2 * buf.capacity if buf is not None else 64)
        buf = pool[kind] = (_AosBuffers if kind == "aos" else _SoaBuffers)(capacity)
    return buf


def release_buffers() -> None:
    """Drop this thread's reusable buffers (they are rebuilt on the next prealloc call)."""
    _local.__dict__.clear()


def quote_aos_prealloc(lines: OrderLines) -> Quote:
    """AoS loop, but per-line results go into this thread's preallocated lists instead of new dicts.

    Same arithmetic and the same two passes as :func:`quote_aos_grow`. It saves building one dict per line
    (and the GC work those dicts cause); the loop itself is still interpreted, so expect a modest gain.
    """
    rates = lines.tax_rates_bp
    rows = lines.rows
    n = len(rows)
    b = _buffers("aos", n)
    b_class, b_qty, b_gross, b_discount, b_net, b_tax = b.tax_class, b.qty, b.gross, b.discount, b.net, b.tax
    for i, row in enumerate(rows):
        gross = row["qty"] * row["unit_price"]
        discount = (gross * row["discount_bp"] + _HALF) // _BP
        net = gross - discount
        b_class[i] = row["tax_class"]
        b_qty[i] = row["qty"]
        b_gross[i] = gross
        b_discount[i] = discount
        b_net[i] = net
        b_tax[i] = (net * rates[row["tax_class"]] + _HALF) // _BP
    qty_sum = gross_sum = discount_sum = net_sum = tax_sum = 0
    classes: dict[int, list[int]] = {}
    for i in range(n):
        qty_sum += b_qty[i]
        gross_sum += b_gross[i]
        discount_sum += b_discount[i]
        net_sum += b_net[i]
        tax_sum += b_tax[i]
        acc = classes.get(b_class[i])
        if acc is None:
            acc = classes[b_class[i]] = [0, 0, 0, 0]
        acc[0] += 1
        acc[1] += b_qty[i]
        acc[2] += b_net[i]
        acc[3] += b_tax[i]
    per = ((k, *classes[k]) for k in sorted(classes))
    return _quote(n, qty_sum, gross_sum, discount_sum, net_sum, tax_sum, rates, per)


def quote_soa_grow(lines: OrderLines) -> Quote:
    """SoA: the arithmetic as plain NumPy expressions over the columns.

    One C loop per step instead of one bytecode trip per line; every expression asks for an n-sized
    temporary (the idiomatic way, and fine until n-sized arrays spill out of the cache or need fresh pages),
    though NumPy's temporary elision reuses a refcount-1 temporary of 256 KiB or more in place.
    """
    c = lines.columns
    rates = lines._rates
    k = len(rates)
    gross = c.qty * c.unit_price
    discount = (gross * c.discount_bp + _HALF) // _BP
    net = gross - discount
    tax = (net * rates[c.tax_class] + _HALF) // _BP
    count = np.bincount(c.tax_class, minlength=k)
    per_qty = np.zeros(k, dtype=np.int64)
    np.add.at(per_qty, c.tax_class, c.qty)
    per_net = np.zeros(k, dtype=np.int64)
    np.add.at(per_net, c.tax_class, net)
    per_tax = np.zeros(k, dtype=np.int64)
    np.add.at(per_tax, c.tax_class, tax)
    qs, nets, taxes = per_qty.tolist(), per_net.tolist(), per_tax.tolist()
    per = zip(range(k), count.tolist(), qs, nets, taxes, strict=True)
    # overall sums of qty/net/tax = sums of the k per-class sums: cheaper than three more n-long reductions
    return _quote(len(c.qty), sum(qs), gross.sum(), discount.sum(), sum(nets), sum(taxes), lines.tax_rates_bp, per)


def quote_soa_prealloc(lines: OrderLines) -> Quote:
    """SoA with every ufunc writing ``out=`` into this thread's reusable buffers: no n-sized allocation.

    Same steps as :func:`quote_soa_grow`; the gain is avoided allocation, page faults and cache pollution,
    so it can only show for big arrays, whose temporaries come from fresh mmap'd pages; for small ones malloc
    hands back the chunk just freed, and the ``out=`` calls cost a little more
    (``tests/benchmarks/bench_core.py`` prints where it helps and where it hurts). Preallocate where
    allocation is a measured cost, not by reflex.
    """
    c = lines.columns
    rates = lines._rates
    n, k = len(c.qty), len(rates)
    b = _buffers("soa", n)
    gross, discount, net, rate, tax, t = b.take(n)
    # the third positional argument of a ufunc is its output array
    np.multiply(c.qty, c.unit_price, gross)
    np.multiply(gross, c.discount_bp, t)
    np.add(t, _HALF, t)
    np.floor_divide(t, _BP, discount)
    np.subtract(gross, discount, net)
    np.take(rates, c.tax_class, out=rate, mode="clip")  # mode="raise" would copy through a temporary
    np.multiply(net, rate, t)
    np.add(t, _HALF, t)
    np.floor_divide(t, _BP, tax)
    count = np.bincount(c.tax_class, minlength=k)  # k-sized result: not an n-sized allocation
    per = b.per[:, :k]
    per.fill(0)
    np.add.at(per[0], c.tax_class, c.qty)
    np.add.at(per[1], c.tax_class, net)
    np.add.at(per[2], c.tax_class, tax)
    qs, nets, taxes = per.tolist()
    rows = zip(range(k), count.tolist(), qs, nets, taxes, strict=True)
    return _quote(n, sum(qs), gross.sum(), discount.sum(), sum(nets), sum(taxes), lines.tax_rates_bp, rows)


#: (layout, buffers) -> kernel; every kernel is ``kernel(lines: OrderLines) -> Quote``.
QUOTE_KERNELS = {
    ("aos", "grow"): quote_aos_grow,
    ("aos", "prealloc"): quote_aos_prealloc,
    ("soa", "grow"): quote_soa_grow,
    ("soa", "prealloc"): quote_soa_prealloc,
}


def quote(lines: OrderLines, *, layout: str = "aos", buffers: str = "grow") -> Quote:
    """Price ``lines`` with the kernel chosen by the ``layout`` and ``buffers`` switches.

    Raises :class:`labkit.errors.BadInputError` for an unknown switch value (naming the allowed values).
    """
    kernel = QUOTE_KERNELS.get((check_variant("layout", layout), check_variant("buffers", buffers)))
    if kernel is None:
        raise BadInputError(f"the quote kernels have no buffers={buffers!r} variant (it belongs to the statement "
                            "kernels); use buffers='grow' or 'prealloc'")
    return kernel(lines)
