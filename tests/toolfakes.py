"""Cheats that replace the tools a grader measures with (issue 36, item 5): a fake put where the tool lives and
where it is re-exported, on the cheat's first call, undone after its grading (``cheat.undo``, which
tests/graderkit.py's ``run_cases`` calls). A grader that bound its tools at import does not see the fakes.

    cheat = fewer_allocations(lab03.baseline, lab03)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Patch = tuple[Any, str, Any]


def patching(honest: Callable[..., Any], make: Callable[[], list[Patch]], name: str) -> Callable[..., Any]:
    """``honest`` behind the patches ``make()`` lists (object, attribute, fake), made on its first call."""
    saved: list[Patch] = []

    def cheat(*args: Any) -> Any:
        if not saved:
            for obj, attr, new in make():
                saved.append((obj, attr, getattr(obj, attr)))
                setattr(obj, attr, new)
        return honest(*args)

    def undo() -> None:
        for obj, attr, old in reversed(saved):
            setattr(obj, attr, old)
        saved.clear()

    cheat.undo = undo  # type: ignore[attr-defined]
    cheat.__name__ = cheat.__qualname__ = name
    return cheat


class entries:  # noqa: N801 — reads as what it wraps: entries(PROBES)
    """A mapping's entries as attributes, so :func:`patching` can replace (and restore) ``mapping[key]``."""

    def __init__(self, mapping: Any) -> None:
        object.__setattr__(self, "_mapping", mapping)

    def __getattr__(self, key: str) -> Any:
        return self._mapping[key]

    def __setattr__(self, key: str, value: Any) -> None:
        self._mapping[key] = value


def fewer_allocations(honest: Callable[..., Any], *labs: Any) -> Callable[..., Any]:
    """``honest`` behind a replaced allocation census (``labkit.alloc.census.Census``, ``labkit.alloc.Census`` and
    the labs' names for it): a census whose window holds a call of the cheat counts ten times fewer allocator
    calls than it saw — the learner's side of a metered pair, not the baseline's."""
    calls = [0]

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return honest(*args)

    def make() -> list[Patch]:
        import labkit.alloc

        home = sys.modules["labkit.alloc.census"]

        class Census(home.Census):
            def start(self) -> Any:
                self._calls_at_start = calls[0]
                return super().start()

            def stop(self) -> Any:
                out = super().stop()
                if calls[0] != getattr(self, "_calls_at_start", calls[0]) and self.allocations:
                    self.allocations = max(1, self.allocations // 10)
                return out

        return [(home, "Census", Census), (labkit.alloc, "Census", Census),
                *[(lab, n, Census) for lab in labs for n in ("Census", "_Census") if hasattr(lab, n)]]

    return patching(counted, make, "fakes_the_census")
