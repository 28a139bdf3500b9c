"""The function review template's example: two CSV parsers to review, defined in a module (as your own code is)
so that ``labkit.compare(..., processes=True)`` can run each in a fresh process.

Replace the template's ``from labkit.report.review_example import …`` with your own module's functions.
"""

from __future__ import annotations

import csv
import io

__all__ = ["make_input", "baseline", "candidate"]


def make_input(rows: int) -> str:
    """An export of ``rows`` lines: id, customer, amount, date."""
    return "\n".join(f"{i},customer-{i % 97},{i * 0.25:.2f},2026-11-{1 + i % 28:02d}" for i in range(rows))


def baseline(text: str) -> list[list[str]]:
    """Today's parser: the standard library's ``csv.reader``."""
    return list(csv.reader(io.StringIO(text)))


def candidate(text: str) -> list[list[str]]:
    """The proposal: split each line on commas (correct only because these fields hold no quotes or commas)."""
    return [line.split(",") for line in text.splitlines()]
