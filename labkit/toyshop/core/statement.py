"""A customer's statement as CSV bytes: three ways to build the body, one signature, one answer — almost.

    body = statement_grow(customer, rows)       # baseline: body += line, a new bytes object every time
    body = statement_prealloc(customer, rows)   # lines written in place into this thread's reused bytearray
    statement_lines(customer, rows)             # the encoded lines every kernel writes, one at a time
    body = statement_pooled(customer, rows)     # a shared buffer pool — with the stale-state trap (see below)
    STATEMENT_KERNELS[buffers]                  # the three, keyed by the ``buffers`` switch
    make_statement_rows(n, seed=0)              # synthetic rows, no database needed

``customer`` is ``(id, name, email)``; each row is ``(order_id, created_at, status, currency, line_no, sku,
product, description, quantity, unit_price_cents)``, in statement order. The body is a comment line naming
the customer, a header, one line per row, and a footer with the line count, the total and the customer's
e-mail address — so a leaked tail is somebody else's purchase history *and* address.

* ``grow``: ``bytes`` are immutable, so ``body += line`` allocates a new object and copies everything built so
  far: n lines copy about n²/2 lines' worth of bytes. The cost grows with the square of the statement.
* ``prealloc``: one ``bytearray`` per thread, kept between calls and overwritten in place (``buf[pos:end] =
  line``; it grows only past its longest use); the answer is the first ``pos`` bytes, copied out once.
  ``bytearray.clear()`` would give the memory back (CPython shrinks a bytearray that falls below half its
  capacity), which is why the code overwrites instead of clearing. In CPython the reuse is not free: a
  write through a slice costs more per line than ``bytearray +=`` into a fresh buffer, so this variant can
  lose to the plain ways (``b"".join``); ``tests/benchmarks/bench_prealloc.py`` prints both.
* ``pooled``: buffers taken from a shared :class:`BufferPool` and returned after use, filled the same way —
  but the answer is ``bytes(buf)``, the *whole* buffer. The first use of a buffer, and every statement at
  least as long as all before it, come out right; a shorter one carries the tail of a longer, earlier
  statement — another customer's lines. This is a **deliberate bug** (lab 03's stale-state trap), reachable
  only with ``buffers=pooled``; never copy it. The fix is one slice: ``bytes(memoryview(buf)[:pos])``.

A pool made with ``BufferPool(scribble=True)`` fills every released buffer with :data:`SENTINEL` and adds a
red zone of :data:`RED_ZONE` sentinel bytes past what its user wrote (as debug allocators do — CPython's
``PYTHONMALLOC=debug`` fills freed memory with 0xDD, macOS has ``MallocScribble``): any code that reads past
what it wrote then gets sentinel bytes on every reuse, not another user's data once in a while.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from labkit.errors import BadInputError

__all__ = ["statement_grow", "statement_prealloc", "statement_pooled", "STATEMENT_KERNELS", "BufferPool",
           "POOL", "SENTINEL", "RED_ZONE", "HEADER", "make_statement_rows", "statement_lines", "Customer",
           "Row"]

#: the byte a scribbling pool fills released buffers with (CPython's debug allocator uses it for freed memory).
SENTINEL = 0xDD
#: sentinel bytes a scribbling pool leaves past what a buffer's user wrote.
RED_ZONE = 64
#: the CSV header line.
HEADER = (b"order_id,created_at,status,line_no,sku,product,description,quantity,unit_price_cents,"
          b"line_total_cents,currency\n")

Customer = tuple[int, str, str]
Row = tuple[Any, ...]


def _field(value: Any) -> str:
    s = str(value)
    if "," in s or '"' in s or "\n" in s:
        return '"' + s.replace('"', '""') + '"'
    return s


def statement_lines(customer: Customer, rows: Sequence[Row]) -> Iterator[bytes]:
    """The statement, one encoded line at a time: what every kernel writes, so all agree byte for byte."""
    cid, name, email = customer
    yield f"# statement,customer {cid},{_field(name)},{_field(email)}\n".encode()
    yield HEADER
    total = 0
    for oid, created, status, currency, line_no, sku, product, description, qty, unit in rows:
        line_total = qty * unit
        total += line_total
        yield (f"{oid},{created},{status},{line_no},{_field(sku)},{_field(product)},{_field(description)},"
               f"{qty},{unit},{line_total},{currency}\n").encode()
    yield f"# end of statement,customer {cid},{_field(email)},{len(rows)} lines,total {total}\n".encode()


def statement_grow(customer: Customer, rows: Sequence[Row]) -> bytes:
    """Baseline: ``body += line`` — each step copies the whole body so far (quadratic in the statement)."""
    body = b""
    for line in statement_lines(customer, rows):
        body += line
    return body


_local = threading.local()


def statement_prealloc(customer: Customer, rows: Sequence[Row]) -> bytes:
    """Lines written in place into this thread's reused ``bytearray``; the first ``pos`` bytes copied out once."""
    buf = _local.__dict__.get("statement")
    if buf is None:
        buf = _local.statement = bytearray()
    pos = 0
    for line in statement_lines(customer, rows):
        end = pos + len(line)
        buf[pos:end] = line  # overwrites in place; grows the buffer only past its longest use
        pos = end
    return bytes(memoryview(buf)[:pos])


class BufferPool:
    """A shared free list of ``bytearray`` buffers: :meth:`acquire` one, :meth:`release` it after use.

    Thread-safe (one lock). A released buffer keeps its contents — whoever takes it next sees them unless it
    overwrites or truncates — except with ``scribble=True``, which fills it with :data:`SENTINEL` and leaves
    a :data:`RED_ZONE` of sentinel bytes past what its user wrote, so stale reads show on every reuse.

    Args:
        scribble: the debug fill on release (costs a write of the whole buffer per release).
        max_idle: buffers kept for reuse; more are dropped on release.
    """

    def __init__(self, *, scribble: bool = False, max_idle: int = 8) -> None:
        if isinstance(max_idle, bool) or not isinstance(max_idle, int) or max_idle < 1:
            raise BadInputError(f"max_idle must be an integer >= 1 (buffers kept for reuse), got {max_idle!r}")
        self.scribble = bool(scribble)
        self.max_idle = max_idle
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def acquire(self) -> bytearray:
        """A buffer from the pool (the one released last), or a new empty one."""
        with self._lock:
            if self._free:
                return self._free.pop()
        return bytearray()

    def release(self, buf: bytearray, used: int) -> None:
        """Give ``buf`` back; ``used`` is how many bytes its user wrote (where a scribble's red zone starts)."""
        if not isinstance(buf, bytearray):
            raise BadInputError(f"release() takes the bytearray acquire() gave, got {type(buf).__name__}")
        if self.scribble:
            buf[:] = bytes([SENTINEL]) * max(len(buf), used + RED_ZONE)
        with self._lock:
            if len(self._free) < self.max_idle:
                self._free.append(buf)

    def __repr__(self) -> str:
        return f"BufferPool(scribble={self.scribble}, idle={len(self._free)})"


#: the process's default pool (the service makes its own, with its ``scribble`` switch).
POOL = BufferPool()


def statement_pooled(customer: Customer, rows: Sequence[Row], pool: BufferPool | None = None) -> bytes:
    """Lines written into a pooled buffer — **with a deliberate stale-state bug**: see the module docstring.

    ``pool`` defaults to :data:`POOL`.
    """
    pool = POOL if pool is None else pool
    buf = pool.acquire()
    pos = 0
    try:
        for line in statement_lines(customer, rows):
            end = pos + len(line)
            buf[pos:end] = line
            pos = end
        return bytes(buf)  # the trap: the whole buffer, not its first `pos` bytes
    finally:
        pool.release(buf, pos)


#: ``buffers`` switch value -> kernel; every kernel is ``kernel(customer, rows) -> bytes``.
STATEMENT_KERNELS = {"grow": statement_grow, "prealloc": statement_prealloc, "pooled": statement_pooled}

_WORDS = "red blue green steel oak linen wool cotton compact deluxe classic modern travel kids pro mini".split()
_NOUNS = "kettle lamp chair mug backpack jacket clock speaker kite puzzle robot train drum scarf".split()


def make_statement_rows(n: int, seed: int = 0) -> list[Row]:
    """``n`` deterministic synthetic statement rows (four lines per order), shaped like the service's."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise BadInputError(f"n must be an integer >= 0 (rows in the statement), got {n!r}")
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        words = " ".join(rng.choices(_WORDS, k=rng.randint(12, 22)))
        noun = rng.choice(_NOUNS)
        rows.append((1_000 + i // 4, f"2024-{1 + i // 400 % 12:02d}-{1 + i // 16 % 28:02d}T10:00:00Z",
                     rng.choice(("paid", "shipped", "delivered")), "EUR", i % 4 + 1, f"SKU-{rng.randrange(10**7):07d}",
                     f"{rng.choice(_WORDS).title()} {noun}", f"A {words} {noun}.", rng.randint(1, 5),
                     rng.randint(199, 99_999)))
    return rows
