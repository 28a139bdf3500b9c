"""Which cyclic garbage collector this interpreter runs, and what that changes for a GC lab.

CPython's collector is not one thing across the versions learners run (3.11–3.14 and later); what a lab may
say about *when* a collection runs, *how many generations* there are and *what a collection stops* depends on
the running interpreter. :func:`interpreter_gc` reads it off the running process, so a lab prints the facts that
hold here instead of stating one version's as if they held everywhere:

    from labkit import alloc
    alloc.interpreter_gc()     # version, build, kind of collector, generations, thresholds, where it runs

The facts, with their sources (CPython's documentation and changelog):

* **where a collection starts** — up to 3.11, inside the allocation of the container that crossed the
  threshold (any C function that allocates); from 3.12, a crossing only *schedules* a collection, which runs at
  the next "eval breaker" check of the bytecode loop (or in ``PyErr_CheckSignals``), never in the middle of a
  long C call (What's New in Python 3.12; gh-97922);
* **generations** — three (young, middle, old) with a full collection only when the objects waiting to be
  examined exceed a quarter of the long-lived ones (``Modules/gcmodule.c`` / ``Python/gc.c`` and the
  garbage-collector design notes); 3.14.0–3.14.4 shipped an incremental collector with two generations (young
  and old, the old one scanned in increments, ``get_threshold()`` → ``(2000, 10, 0)``), which 3.14.5 replaced
  by 3.13's generational collector again, as 3.15 did (What's New in Python 3.14; gh-148726); 3.13's
  incremental collector was reverted before 3.13.0 (gh-108362);
* **what a collection stops** — with the GIL, every thread that needs the GIL: a thread inside C code that
  released it (``sqlite3_step``, a socket ``recv``, zlib) runs on; the free-threaded build (3.13t, 3.14t) has
  its own non-generational collector that stops every thread (PEP 703).
"""

from __future__ import annotations

import gc
import sys
import sysconfig
from dataclasses import dataclass

__all__ = ["InterpreterGC", "interpreter_gc"]


@dataclass(frozen=True)
class InterpreterGC:
    """The cyclic collector of one interpreter.

    Attributes:
        version: ``sys.version_info[:3]``.
        free_threaded: True on a free-threaded build (``Py_GIL_DISABLED``).
        kind: ``generational``, ``incremental`` or ``free-threaded``.
        generations: how many generations the collector keeps.
        threshold: ``gc.get_threshold()`` as read.
        runs_at: ``allocation`` (≤ 3.11: inside the allocating call) or ``eval breaker`` (3.12+).
        stops: which threads a collection stops.
    """

    version: tuple[int, int, int]
    free_threaded: bool
    kind: str
    generations: int
    threshold: tuple[int, ...]
    runs_at: str
    stops: str

    def summary(self) -> str:
        """A few lines: what this interpreter's collector does, in the terms the GC lab uses."""
        v = ".".join(map(str, self.version)) + ("t" if self.free_threaded else "")
        where = ("inside the allocation that crossed the threshold, so its time lands on whichever line allocated"
                 if self.runs_at == "allocation" else
                 "at the next eval-breaker check of the bytecode loop, between two bytecodes, not inside a C call")
        gens = {"generational": "3 generations; a full (gen-2) collection only when the objects waiting exceed a "
                                "quarter of the long-lived ones",
                "incremental": "2 generations (young, old); each collection takes the young one and an increment "
                               "of the old one",
                "free-threaded": "no generations: every collection examines the whole heap"}[self.kind]
        return "\n".join([f"Python {v}: {self.kind} collector, thresholds {self.threshold}",
                          f"  a collection runs {where}",
                          f"  {gens}",
                          f"  it stops {self.stops}"])

    __str__ = summary

    def _repr_html_(self) -> str:
        from html import escape

        return f"<pre>{escape(self.summary())}</pre>"


def _kind(version: tuple[int, int, int], free_threaded: bool) -> str:
    if free_threaded:
        return "free-threaded"
    if version[:2] == (3, 14) and version[2] < 5:
        return "incremental"
    return "generational"


def interpreter_gc(version: tuple[int, int, int] | None = None, free_threaded: bool | None = None,
              threshold: tuple[int, ...] | None = None) -> InterpreterGC:
    """The collector of the running interpreter (or of the one described by the arguments, for what another
    version does: ``interpreter_gc((3, 14, 2))``)."""
    v = tuple(sys.version_info[:3]) if version is None else tuple(version)
    ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED")) if free_threaded is None else free_threaded
    kind = _kind(v, ft)  # type: ignore[arg-type]
    stops = ("every thread (a stop-the-world collection)" if ft else
             "every thread that needs the GIL; threads inside C code that released it run on")
    return InterpreterGC(version=v, free_threaded=ft, kind=kind,  # type: ignore[arg-type]
                     generations={"generational": 3, "incremental": 2, "free-threaded": 1}[kind],
                     threshold=tuple(gc.get_threshold()) if threshold is None else tuple(threshold),
                     runs_at="allocation" if v < (3, 12) else "eval breaker", stops=stops)
