"""Query budgets for test suites: fail a test when a block makes too many queries or repeats a shape."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from labkit.errors import BadInputError
from labkit.nplusone.recorder import Watch, watch
from labkit.nplusone.report import DEFAULT_THRESHOLD, Report

__all__ = ["QueryBudgetExceeded", "assert_max_queries", "check_budget"]


class QueryBudgetExceeded(AssertionError):
    """A block made more queries than its budget, or repeated a shape (an N+1 suspect) when forbidden.

    ``.report`` holds the full ``Report``.
    """

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def check_budget(report: Report, max_queries: int | None = None, *, allow_suspects: bool = True) -> None:
    """Raise ``QueryBudgetExceeded`` if *report* breaks the budget; the message lists the suspects.

    Args:
        report: a finished ``Report``.
        max_queries: most queries allowed (None: no count limit).
        allow_suspects: when False, any suspect (a shape sent more than the threshold times from one line)
            fails too.
    """
    from labkit.nplusone.render import render_text

    problems = []
    if max_queries is not None and report.count > max_queries:
        problems.append(f"{report.count} queries, budget {max_queries}")
    if not allow_suspects and report.suspects:
        problems.append(f"{len(report.suspects)} N+1 suspect(s)")
    if not problems:
        return
    lines = [f"query budget exceeded: {'; '.join(problems)}."]
    for s in report.suspects:
        lines.append(f"  suspect: {s.repeats}× {s.shape!r} from {s.site}")
    if report.suspects:
        lines.append("  Fix: fetch these in one query (WHERE id IN (...), a JOIN, or a batch endpoint) instead "
                     "of one per item.")
    lines.append("")
    lines.append(render_text(report))
    raise QueryBudgetExceeded("\n".join(lines), report)


@contextlib.contextmanager
def assert_max_queries(max_queries: int | None, *targets: Any, threshold: int = DEFAULT_THRESHOLD,
                       allow_suspects: bool = True, skip: tuple[str, ...] = ()) -> Iterator[Watch]:
    """Fail (``QueryBudgetExceeded``, an ``AssertionError``) if the block exceeds a query budget.

    Args:
        max_queries: most queries allowed in the block (None: only check suspects).
        *targets: what to watch (as for ``watch``).
        threshold: repeats of one shape from one line above which it is a suspect.
        allow_suspects: when False, any suspect fails the block even within the budget.
        skip: extra path prefixes to skip when finding call sites.

    Yields:
        The ``Watch``; ``.report`` is set when the block ends.

    Example:
        >>> with assert_max_queries(3, conn):     # doctest: +SKIP
        ...     export_batched(conn, catalog, 42)
    """
    if max_queries is not None and (not isinstance(max_queries, int) or max_queries < 0):
        raise BadInputError(f"max_queries={max_queries!r}: expected an int >= 0 or None.")
    w = watch(*targets, threshold=threshold, skip=skip)
    with w:
        yield w
    assert w.report is not None
    check_budget(w.report, max_queries, allow_suspects=allow_suspects)
