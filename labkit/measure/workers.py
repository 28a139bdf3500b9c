"""Where one side of a comparison runs: in this process, or in a fresh worker process of its own.

:func:`labkit.compare` drives both sides round by round, the same way for either kind: ``warm()`` once
(calibrate the loop count, take the warm-up samples), then ``sample(r)`` for every round. A
:class:`WorkerSide` runs its side in a new interpreter started with ``spawn`` — nothing of the notebook's
heap, imports or caches — as pyperf runs every benchmark in fresh worker processes, so a verdict measured
that way is one that carries over to a program that only runs that code. The function, its arguments and
``inputs`` travel to the worker by pickle: define them in a module (a ``.py`` file), not in the notebook.
"""

from __future__ import annotations

import ast
import contextlib
import multiprocessing as mp
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.clock import Clock
from labkit.errors import BadInputError, ProbeUnavailable
from labkit.measure.collector import Collections, collector
from labkit.measure.microbench import calibrate, time_loop

__all__ = ["LocalSide", "WorkerSide"]


def _args_of(inputs: Callable[[int], Any], k: int) -> tuple[Any, ...]:
    args = inputs(k)
    if not isinstance(args, tuple):
        raise BadInputError(f"inputs({k}) must return a tuple of arguments, got {type(args).__name__}: "
                            "return (x,) for a single argument")
    return args


class LocalSide:
    """One side timed in this process, its collections counted by ``watch``."""

    def __init__(self, fn: Callable[..., Any], side: int, args: tuple[Any, ...],
                 inputs: Callable[[int], tuple[Any, ...]] | None, warmup: int, min_sample_time: float,
                 clock: Clock, watch: Collections) -> None:
        self.fn, self.side, self.args, self.inputs = fn, side, args, inputs
        self.warmup, self.min_sample_time, self.clock, self.watch = warmup, min_sample_time, clock, watch
        self.loops = 1

    def warm(self) -> tuple[int, list[float], float]:
        """Calibrate and warm up: the loop count, the warm-up's per-call samples, and this side's share of one
        round's time (ns)."""
        fn, clock = self.fn, self.clock
        if self.inputs is None:
            n, seen = calibrate(fn, self.args, self.min_sample_time * 1e9, clock)
            seen += [time_loop(fn, self.args, n, clock) / n for _ in range(self.warmup)]
            self.loops = n
            return n, seen, n * seen[-1]
        timed: list[float] = []
        for w in range(max(1, self.warmup)):
            t0 = clock()
            timed.append(float(time_loop(fn, _args_of(self.inputs, -1 - self.side - 2 * w), 1, clock)))
            built_and_timed = clock() - t0   # building an input is not timed, but it takes the budget's time
        return 1, timed, float(built_and_timed)

    def sample(self, r: int) -> tuple[float, int, int]:
        """Round ``r``'s sample: per-call ns, and the collections (count, ns) that landed in it."""
        call_args = self.args if self.inputs is None else _args_of(self.inputs, r)
        c0, t0 = self.watch.count, self.watch.ns
        ns = time_loop(self.fn, call_args, self.loops, self.clock) / self.loops
        return ns, self.watch.count - c0, self.watch.ns - t0

    @property
    def full(self) -> int:
        """Full (generation 2) collections seen so far."""
        return self.watch.full

    def close(self) -> None:
        """Nothing to stop in this process."""


def _serve(conn: Any, fn: Callable[..., Any], side: int, args: tuple[Any, ...],
           inputs: Callable[[int], tuple[Any, ...]] | None, warmup: int, min_sample_time: float, gc_mode: str) -> None:
    clock = time.perf_counter_ns
    with collector(gc_mode, clock) as watch:
        local = LocalSide(fn, side, args, inputs, warmup, min_sample_time, clock, watch)
        while True:
            what, r = conn.recv()
            try:
                if what == "warm":
                    conn.send(("ok", local.warm()))
                elif what == "sample":
                    conn.send(("ok", local.sample(r)))
                elif what == "full":
                    conn.send(("ok", local.full))
                else:
                    return
            except Exception as e:  # the measured code raised: the parent re-raises it, naming the side
                conn.send(("error", f"{type(e).__name__}: {e}"))


def _main_script() -> str | None:
    """The script this process runs as ``__main__`` (``python script.py``), or None (a notebook, ``-c``, ``-m``)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return path if path and getattr(main, "__spec__", None) is None and path.endswith(".py") else None


def _check_main_guard() -> None:
    """Refuse, before any worker starts, ``processes=True`` from a script with no ``if __name__ == "__main__":``
    guard: a ``spawn`` worker imports the script again, runs its top level — the comparison included — and dies
    starting workers of its own (multiprocessing's "bootstrapping phase" error, then a reset connection)."""
    path = _main_script()
    if path is None:
        return
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__name__" and \
                any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.comparators):
            return
    raise BadInputError(f"processes=True starts fresh worker processes, which import {Path(path).name} again and "
                        "would run its comparison there too: put the script's work under "
                        "`if __name__ == \"__main__\":` (the multiprocessing docs' 'safe importing of the main "
                        "module'), or compare in this process (processes=False)")


class WorkerSide:
    """One side timed in a fresh worker process (``spawn``), answering the parent round by round."""

    def __init__(self, fn: Callable[..., Any], side: int, args: tuple[Any, ...],
                 inputs: Callable[[int], tuple[Any, ...]] | None, warmup: int, min_sample_time: float,
                 gc_mode: str) -> None:
        name = getattr(fn, "__name__", repr(fn))
        try:
            pickle.dumps((fn, args, inputs))
        except Exception as e:
            raise BadInputError(f"processes=True runs {name} in a fresh process, and it (or its arguments, or "
                                f"inputs=) cannot be pickled ({type(e).__name__}: {e}): define it in a module "
                                "(a .py file) and import it, or compare in this process (processes=False)") from e
        _check_main_guard()
        ctx = mp.get_context("spawn")
        self.name = name
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, fn, side, args, inputs, warmup, min_sample_time, gc_mode),
                                daemon=True)
        self.proc.start()
        child.close()

    def _ask(self, what: str, r: int = 0) -> Any:
        try:
            self.conn.send((what, r))
            status, value = self.conn.recv()
        except (EOFError, OSError) as e:
            guard = (" — or, in a script, the call is not under `if __name__ == \"__main__\":` (a spawned worker "
                     "imports the script again, and starts its own workers)" if _main_script() else "")
            raise ProbeUnavailable(f"the worker process timing {self.name} died ({e}): out of memory, or the "
                                   f"function could not be imported there{guard}") from e
        if status == "error":
            raise BadInputError(f"{self.name} raised in its worker process: {value}")
        return value

    def warm(self) -> tuple[int, list[float], float]:
        """As :meth:`LocalSide.warm`, in the worker."""
        return self._ask("warm")  # type: ignore[no-any-return]

    def sample(self, r: int) -> tuple[float, int, int]:
        """As :meth:`LocalSide.sample`, in the worker."""
        return self._ask("sample", r)  # type: ignore[no-any-return]

    @property
    def full(self) -> int:
        """Full collections the worker saw."""
        return int(self._ask("full"))

    def close(self) -> None:
        """Stop the worker."""
        with contextlib.suppress(Exception):
            self.conn.send(("stop", 0))
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
