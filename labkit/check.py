"""What exercise graders return: a verdict with one line per criterion, correctness first.

A grader (one per lab, in ``labkit.exercises``) stops at the first failed *correctness* item — a fast
wrong answer earns nothing — then checks the budget (time, queries, allocations).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

__all__ = ["CheckResult", "Item"]


@dataclass(frozen=True)
class Item:
    """One graded criterion: whether it held and a sentence saying what was checked or what to fix."""

    ok: bool
    message: str


@dataclass(frozen=True)
class CheckResult:
    """The grade of one exercise: ``passed`` only when every item holds."""

    title: str
    items: tuple[Item, ...]

    @property
    def passed(self) -> bool:
        """True when every item holds (and there is at least one)."""
        return bool(self.items) and all(i.ok for i in self.items)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = f"{'PASSED' if self.passed else 'NOT YET'} — {self.title}"
        return "\n".join([head, *(f"  {'✔' if i.ok else '✘'} {i.message}" for i in self.items)])

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        rows = "".join(
            f"<li style='color:{'#1a7f37' if i.ok else '#cf222e'}'>{'✔' if i.ok else '✘'} {escape(i.message)}</li>"
            for i in self.items)
        return (f"<div style='border-left:4px solid {colour};padding-left:8px'><b style='color:{colour}'>"
                f"{'PASSED' if self.passed else 'NOT YET'}</b> — {escape(self.title)}<ul>{rows}</ul></div>")
