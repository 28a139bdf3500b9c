"""The cyclic garbage collector during a measurement: how often it ran, for how long, and how it was set.

    with collector("frozen", clock) as gcs:      # "as-is", "frozen" or "disabled" (see MODES)
        c0, t0 = gcs.count, gcs.ns
        timed_call()
        collections, in_collector_ns = gcs.count - c0, gcs.ns - t0

CPython calls every function in :data:`gc.callbacks` just before and just after each collection, whichever
code triggered it; the watcher counts them (all generations, and full ones — generation 2 — apart) and adds
up the time between the two calls on the measurement's own clock. A collection that lands inside a timed
call is charged to that call: a full one walks every tracked object the process holds (``gc.get_count()``
and ``len(gc.get_objects())`` say how many), so in a Jupyter kernel holding a few hundred thousand objects it
can dwarf the call it interrupts. :func:`labkit.compare` reports it per sample and lets you choose a mode.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import Any

from labkit.errors import BadInputError

__all__ = ["MODES", "Collections", "collector"]

#: each mode, and what measuring under it hides
MODES: dict[str, str] = {
    "as-is": "nothing of the collector, but its cost depends on every object the process holds (in a notebook, "
             "the kernel's): a full collection there costs more than in a small service process",
    "frozen": "the cost of full collections over the objects alive before the comparison (gc.freeze() puts "
              "them out of the collector's reach); the calls' own garbage is still collected and counted",
    "disabled": "all the collector's work, including the cost of the garbage the calls make (an allocating "
                "candidate looks cheaper than it is), and cycles pile up in memory until it is enabled again",
}


class Collections:
    """Running totals of the collections seen since the watcher started, on the given clock."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.count = 0
        self.full = 0
        self.ns = 0
        self._clock = clock
        self._started: int | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = self._clock()
            return
        self.count += 1
        self.full += info.get("generation") == 2
        if self._started is not None:
            self.ns += self._clock() - self._started
            self._started = None


def check_mode(mode: Any) -> str:
    """``mode`` if it is one of :data:`MODES`, else a :class:`BadInputError` listing them."""
    if mode not in MODES:
        raise BadInputError(f"gc must be one of {', '.join(map(repr, MODES))} (got {mode!r}): 'as-is' leaves "
                            "the collector as the program has it, 'frozen' keeps it off the objects alive "
                            "before the comparison, 'disabled' turns it off")
    return str(mode)


@contextlib.contextmanager
def collector(mode: str, clock: Callable[[], int]) -> Iterator[Collections]:
    """Set the collector to ``mode`` (see :data:`MODES`) and watch it; everything is restored on the way out."""
    mode = check_mode(mode)
    watch = Collections(clock)
    was_enabled, was_frozen = gc.isenabled(), gc.get_freeze_count()
    if mode == "frozen":
        gc.collect()   # garbage already made is freed, not frozen
        gc.freeze()
    elif mode == "disabled":
        gc.disable()
    gc.callbacks.append(watch)
    try:
        yield watch
    finally:
        gc.callbacks.remove(watch)
        if mode == "frozen" and not was_frozen:
            gc.unfreeze()   # a program that froze objects itself keeps them (and ours) frozen: unfreeze is all or nothing
        if was_enabled:
            gc.enable()
