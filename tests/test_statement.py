"""Statement kernels: grow and prealloc agree on any sequence of calls; pooled carries its stale-state trap."""

from __future__ import annotations

import csv
import io
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.errors import BadInputError
from labkit.toyshop.core import (
    RED_ZONE,
    SENTINEL,
    STATEMENT_KERNELS,
    BufferPool,
    make_order_lines,
    make_statement_rows,
    quote,
    statement_grow,
    statement_pooled,
    statement_prealloc,
)

ALICE = (8, "Customer 8", "customer8@example.invalid")
BOB = (2, "Customer 2", "customer2@example.invalid")


def test_the_statement_is_csv_with_a_header_a_line_per_row_and_a_footer():
    rows = make_statement_rows(6, seed=3)
    body = statement_grow(BOB, rows).decode()
    lines = body.splitlines()
    assert lines[0] == "# statement,customer 2,Customer 2,customer2@example.invalid"
    table = list(csv.DictReader(io.StringIO("\n".join(lines[1:-1]))))
    assert len(table) == 6 and table[0]["sku"] == rows[0][5]
    assert int(table[0]["line_total_cents"]) == rows[0][8] * rows[0][9]
    total = sum(r[8] * r[9] for r in rows)
    assert lines[-1] == f"# end of statement,customer 2,customer2@example.invalid,6 lines,total {total}"


def test_fields_with_commas_and_quotes_are_quoted():
    row = (1, "2024-01-01T00:00:00Z", "paid", "EUR", 1, "SKU-1", 'Mug, "big"', "a, b", 1, 100)
    line = statement_grow(BOB, [row]).decode().splitlines()[2]
    assert next(csv.reader([line]))[5:7] == ['Mug, "big"', "a, b"]


def test_every_kernel_agrees_on_a_fresh_buffer():
    rows = make_statement_rows(40, seed=1)
    expected = statement_grow(ALICE, rows)
    assert statement_prealloc(ALICE, rows) == expected
    assert statement_pooled(ALICE, rows, BufferPool()) == expected
    assert statement_grow(ALICE, []).count(b"\n") == 3  # header, column names, footer


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 120), min_size=1, max_size=8))
def test_prealloc_never_leaks_whatever_the_order_of_requests(sizes):
    # GIVEN requests of different sizes, one after another on the same thread (so the same reused buffer)
    for i, n in enumerate(sizes):
        customer = (i + 1, f"Customer {i + 1}", f"customer{i + 1}@example.invalid")
        rows = make_statement_rows(n, seed=i)
        # THEN each answer is exactly what a fresh build gives
        assert statement_prealloc(customer, rows) == statement_grow(customer, rows)


def test_pooled_leaks_the_tail_of_a_longer_earlier_statement():
    pool = BufferPool()
    long_rows, short_rows = make_statement_rows(50, seed=1), make_statement_rows(3, seed=2)
    assert statement_pooled(ALICE, long_rows, pool) == statement_grow(ALICE, long_rows)  # first use: right
    leaked = statement_pooled(BOB, short_rows, pool)
    right = statement_grow(BOB, short_rows)
    assert leaked != right and leaked.startswith(right)
    # the extra bytes are Alice's: her lines and, at the very end, her e-mail address
    assert leaked.endswith(statement_grow(ALICE, long_rows)[len(right):])
    assert b"customer8@example.invalid" in leaked
    # a statement at least as long as every earlier one comes out right: why the bug hides in simple tests
    assert statement_pooled(ALICE, long_rows, pool) == statement_grow(ALICE, long_rows)


def test_scribble_makes_every_reuse_show_sentinel_bytes_instead_of_data():
    pool = BufferPool(scribble=True)
    rows = make_statement_rows(5, seed=1)
    first = statement_pooled(ALICE, rows, pool)
    assert first == statement_grow(ALICE, rows)  # nothing to leak on a fresh buffer
    # WHEN the same statement is built again from the released buffer (no longer one before it)
    again = statement_pooled(ALICE, rows, pool)
    # THEN the red zone shows: sentinel bytes past what was written, never another user's data
    assert again == first + bytes([SENTINEL]) * RED_ZONE
    shorter = statement_pooled(BOB, rows[:1], pool)
    tail = shorter[len(statement_grow(BOB, rows[:1])):]
    assert tail and set(tail) == {SENTINEL} and b"customer8" not in shorter


def test_scribble_costs_correct_code_nothing_but_time():
    pool = BufferPool(scribble=True)

    def correct(customer, rows):  # the fixed pooled kernel: the first `pos` bytes only
        buf = pool.acquire()
        pos = 0
        for line in statement_grow(customer, rows).splitlines(keepends=True):
            buf[pos:pos + len(line)] = line
            pos += len(line)
        out = bytes(memoryview(buf)[:pos])
        pool.release(buf, pos)
        return out

    for n in (30, 2, 30, 0, 7):
        rows = make_statement_rows(n, seed=n)
        assert correct(BOB, rows) == statement_grow(BOB, rows)


def test_prealloc_buffers_are_per_thread():
    rows = {n: make_statement_rows(n, seed=n) for n in (80, 3)}
    expected = {n: statement_grow(ALICE, r) for n, r in rows.items()}
    errors = []

    def worker(order):
        for n in order * 20:
            if statement_prealloc(ALICE, rows[n]) != expected[n]:
                errors.append(n)

    threads = [threading.Thread(target=worker, args=(o,)) for o in ((80, 3), (3, 80), (80,), (3,))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_pool_misuse_and_the_switch_registry():
    with pytest.raises(BadInputError, match="bytearray"):
        BufferPool().release(b"abc", 3)
    with pytest.raises(BadInputError, match="max_idle"):
        BufferPool(max_idle=0)
    pool = BufferPool(max_idle=1)
    a, b = pool.acquire(), pool.acquire()
    pool.release(a, 0)
    pool.release(b, 0)
    assert pool.acquire() is a and pool.acquire() is not b  # only one kept idle
    assert set(STATEMENT_KERNELS) == {"grow", "prealloc", "pooled"}
    with pytest.raises(BadInputError, match="n must be"):
        make_statement_rows(-1)


def test_quote_has_no_pooled_variant():
    with pytest.raises(BadInputError, match="no buffers='pooled' variant.*grow.*prealloc"):
        quote(make_order_lines(3), buffers="pooled")
