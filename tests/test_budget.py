"""labkit.budget.within: exact counters fail at one over, memory counts within their tolerance, clear misuse."""

from __future__ import annotations

import sqlite3

import pytest

from labkit.budget import BudgetExceeded, within
from labkit.errors import BadInputError


@pytest.fixture
def conn():
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT)")
    c.executemany("INSERT INTO item VALUES (?, ?)", [(i, f"n{i}") for i in range(20)])
    yield c
    c.close()


def per_item(conn, ids):
    return [conn.execute("SELECT name FROM item WHERE id = ?", (i,)).fetchone() for i in ids]  # per-item query


def test_one_query_over_fails_with_the_lines_and_at_the_budget_passes(conn):
    with within(conn, queries=3) as block:
        per_item(conn, [1, 2, 3])
    assert block.counted.values == {"queries": 3} and not block.counted.broken
    for _ in range(20):  # exact: every run
        with pytest.raises(BudgetExceeded) as e, within(conn, queries=3):
            per_item(conn, [1, 2, 3, 4])
        assert "queries = 4, limit 3" in str(e.value)
        assert "test_budget.py" in str(e.value) and "SELECT name FROM item WHERE id = ?" in str(e.value)


def test_memory_growth_inside_the_tolerance_passes_and_beyond_it_fails():
    def make(n):
        return [bytes(1000) for _ in range(n)]

    with within(allocated_bytes=10**9) as block:
        make(1000)
    figure = block.counted.values["allocated_bytes"]
    assert figure >= 1000 * 1000
    with within(allocated_bytes=figure, tolerance=0.15) as grown:
        make(1100)  # 10 % more
    assert figure < grown.counted.values["allocated_bytes"] <= grown.counted.limit("allocated_bytes")
    with pytest.raises(BudgetExceeded, match="allocated_bytes = .* tolerance") as e, \
            within(allocated_bytes=figure, tolerance=0.15):
        make(1500)
    assert "test_budget.py" in str(e.value)  # the allocating line is named


def test_misuse_is_refused_before_anything_runs(conn):
    with pytest.raises(BadInputError, match="no budget called querys"), within(conn, querys=3):
        pass
    with pytest.raises(BadInputError, match="pass it"), within(queries=3):
        pass
    with pytest.raises(BadInputError, match="whole number"), within(conn, queries=-1):
        pass
    with pytest.raises(BadInputError, match="at least one budget"), within(conn):
        pass
