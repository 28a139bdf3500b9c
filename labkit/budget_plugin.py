"""pytest fixture ``budget``: :func:`labkit.budget.within` in a test, each block's counts kept in a drift ledger.

Enable it in a ``conftest.py``::

    pytest_plugins = ["labkit.budget_plugin"]

then::

    def test_export_is_batched(budget, conn):
        with budget(conn, queries=2, allocated_bytes=400_000):
            export(conn, 42)

``pytest --budget-ledger=perf/ledger.jsonl`` appends every block's counts (passed or not) to that file, one JSON
line per budget, with the commit; ``labkit budget history perf/ledger.jsonl`` reads it back. Keep the file in
the repository, and a raised figure shows its history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from labkit.budget import append, within

__all__ = ["budget"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--budget-ledger", default=None, metavar="PATH",
                     help="append every budget block's counts to this drift ledger (JSON lines)")


@pytest.fixture
def budget(request: pytest.FixtureRequest) -> Callable[..., within]:
    """Factory: ``budget(*targets, tolerance=0.10, **budgets)`` → :class:`labkit.budget.within`, its counts
    appended to ``--budget-ledger`` when given (named by the test's node id)."""
    ledger = request.config.getoption("--budget-ledger")
    name = request.node.nodeid

    def make(*targets: Any, **kwargs: Any) -> within:
        record = None if ledger is None else (lambda counted: append(ledger, name, counted))
        return within(*targets, record=record, **kwargs)

    return make
