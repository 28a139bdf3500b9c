"""pytest fixture ``query_budget`` for keeping N+1 out of a test suite.

Enable it in a ``conftest.py``::

    pytest_plugins = ["labkit.nplusone.pytest_plugin"]

then::

    def test_export_is_batched(query_budget, conn, catalog):
        with query_budget(conn, catalog, max_queries=5):
            export_batched(conn, catalog, 42)

The test fails with the suspects (shape, count, call site) in the message when the block makes more than
``max_queries`` queries, or — with ``allow_suspects=False`` — sends any shape more than ``threshold`` times from
one line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from labkit.nplusone.budget import assert_max_queries
from labkit.nplusone.report import DEFAULT_THRESHOLD

__all__ = ["query_budget"]


@pytest.fixture
def query_budget() -> Callable[..., contextlib.AbstractContextManager[Any]]:
    """Factory: ``query_budget(*targets, max_queries=None, threshold=DEFAULT_THRESHOLD, allow_suspects=False)``
    → context manager failing the test when the block breaks the budget (by default: when it has any N+1
    suspect, a shape sent more than once from one line)."""

    def make(*targets: Any, max_queries: int | None = None, threshold: int = DEFAULT_THRESHOLD,
             allow_suspects: bool = False) -> contextlib.AbstractContextManager[Any]:
        return assert_max_queries(max_queries, *targets, threshold=threshold, allow_suspects=allow_suspects)

    return make
