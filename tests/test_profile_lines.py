"""labkit.profile.lines: one slow line, one allocating line and one query-in-a-loop line each top exactly one
column, in the function form and in the cell form (issue 41's test)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from labkit.errors import BadInputError
from labkit.profile import lines, lines_of_cell


def _db():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(50)])
    return conn


def three_costs(conn):
    time.sleep(0.1)                                         # the slow line
    junk = [str(i) * 3 for i in range(20_000)]              # the allocating line
    rows = [conn.execute("SELECT v FROM t WHERE id = ?", (i,)).fetchone() for i in range(40)]  # a query per item
    return len(junk), len(rows)


def test_each_cost_tops_its_own_column_in_a_function():
    conn = _db()
    view = lines(three_costs, conn, watch=[conn])
    assert view.result == (20_000, 40)
    top = {c: view.top(c).line for c in ("ms", "bytes", "sql")}
    assert len(set(top.values())) == 3, (top, view.to_frame())  # three columns, three different lines
    by_line = {r.line: r for r in view.rows}
    assert "sleep" in by_line[top["ms"]].source and "junk" in by_line[top["bytes"]].source
    assert "SELECT" in by_line[top["sql"]].source and by_line[top["sql"]].sql == 40
    assert by_line[top["bytes"]].allocations >= 20_000
    assert "<table" in view._repr_html_() and "three_costs" in repr(view)


def test_each_cost_tops_its_own_column_in_a_cell():
    conn = _db()
    cell = ("time.sleep(0.1)\n"
            "junk = [str(i) * 3 for i in range(20_000)]\n"
            "rows = [conn.execute('SELECT v FROM t WHERE id = ?', (i,)).fetchone() for i in range(40)]\n")
    namespace = {"time": time, "conn": conn}
    view = lines_of_cell(cell, namespace, watch=[conn])
    assert {c: view.top(c).line for c in ("ms", "bytes", "sql")} == {"ms": 1, "bytes": 2, "sql": 3}
    assert len(namespace["junk"]) == 20_000 and view.rows[2].sql == 40  # the cell ran in the notebook's names


def test_what_it_cannot_profile_says_why():
    with pytest.raises(BadInputError, match="Python function"):
        lines(len, [1])
    with pytest.raises(BadInputError, match="does not compile"):
        lines_of_cell("x = (", {})
    with pytest.raises(BadInputError, match="one of"):
        lines(three_costs, _db(), allocations=False).top("cpu")
    view = lines(three_costs, _db(), allocations=False)
    assert view.rows[0].allocations is None and view.top("sql") is None  # nothing watched: no queries counted


@pytest.mark.slow
def test_the_cell_magic_in_a_real_kernel():
    """``%load_ext labkit`` then ``%%lines --watch conn``: the cell runs in the notebook's names and its view is
    the cell's output."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext labkit\nimport sqlite3, time\nconn = sqlite3.connect(':memory:')\n"
                                          "conn.execute('CREATE TABLE t (id INTEGER PRIMARY KEY)')"),
                nbformat.v4.new_code_cell("%%lines --watch conn\ntime.sleep(0.1)\n"
                                          "ids = [conn.execute('SELECT id FROM t WHERE id = ?', (i,)).fetchone() "
                                          "for i in range(30)]"),
                nbformat.v4.new_code_cell("print(len(ids))"),
                nbformat.v4.new_code_cell("%%lines --watch nobody\nx = 1")]
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True).execute()
    shown = nb.cells[1].outputs[0]["data"]
    assert "<table" in shown["text/html"] and "most ms line 1" in shown["text/plain"] and "sql line 2" in shown["text/plain"]
    assert nb.cells[2].outputs[0]["text"] == "30\n"
    assert "nobody not defined in this notebook" in str(nb.cells[3].outputs)


def test_an_error_of_the_profiled_code_is_its_own_not_a_tracker_conflict():
    calls = []

    def broken():  # fails on its second run: the allocation pass, under memray
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the learner's own error")

    with pytest.raises(RuntimeError, match="the learner's own error"):
        lines(broken)
