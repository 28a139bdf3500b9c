"""When a progress bar shows — one rule for every long-running helper — and the bar over a helper's steps.

Every helper that can take long takes ``progress: bool | None = None``: ``True`` or ``False`` is obeyed;
``None`` (the default) shows a bar only inside a Jupyter kernel (a script or a test stays quiet) and, when the
helper can tell how long the work should take, only if that is over :data:`QUICK_S` seconds (a bar that
flashes by is noise). The bars are ``tqdm.auto``: a widget in Jupyter, text on stderr in a terminal — and, inside
a ``labkit report`` run, text written to the file ``PERFLAB_PROGRESS_TO`` names, which ``labkit report`` copies to
its own terminal as it grows: never into the executed notebook (the kernel's stderr is captured into the cells'
outputs, where stale bars read as errors on the review's page). ``PERFLAB_PROGRESS_TO=stderr`` writes them to the
process's own stderr instead.

Every bar comes from :func:`new_bar` (:func:`steps_bar` applies the rule first; :class:`LazySteps` applies it
once the first step shows how long the work is). A long run shows progress at least every :data:`BEAT_S`
seconds — what a learner waits before wondering, and what a hub's idle culler counts as activity
(docs/workshop.md). A bar over steps moves when a step ends; when one step can last longer than that (a load
step, a round, a notebook cell, a profile's sampling), a :class:`Heartbeat` redraws the bar from a thread
meanwhile (:func:`refreshing`, :func:`step_beat`), and :func:`timed_bar` is a bar over seconds moved that way.
A heartbeat never runs inside a call whose allocations are being counted: drawing allocates.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["BEAT_S", "HEARTBEAT_S", "QUICK_S", "Heartbeat", "LazySteps", "in_notebook", "new_bar", "pulse",
           "refreshing", "show_progress", "step_beat", "steps_bar", "terminal", "timed_bar"]

#: work expected to take less than this many seconds shows no bar by default
QUICK_S = 2.0
#: a long run shows progress at least this often (seconds)
BEAT_S = 30.0
#: how often a :class:`Heartbeat` beats by default: well within :data:`BEAT_S`
HEARTBEAT_S = 10.0


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (ipykernel is loaded)."""
    return "ipykernel" in sys.modules


def show_progress(progress: bool | None, *, expected_s: float | None = None) -> bool:
    """Apply the progress rule: ``progress`` when given, else inside a notebook and not expected to be quick.

    Args:
        progress: the caller's ``progress=`` argument (True, False or None).
        expected_s: how long the work should take, when the helper can tell (e.g. rounds × a round's time).
    """
    if progress is not None:
        return bool(progress)
    return in_notebook() and (expected_s is None or expected_s >= QUICK_S)


_TERMINAL: dict[str, Any] = {}


def terminal() -> Any:
    """Where bars and progress lines go inside a ``labkit report`` run (the file ``PERFLAB_PROGRESS_TO`` names,
    opened once, line-buffered; the process's stderr for ``stderr``), or None outside one."""
    to = os.environ.get("PERFLAB_PROGRESS_TO")
    if not to:
        return None
    if to == "stderr":
        return sys.__stderr__
    if to not in _TERMINAL:
        try:
            _TERMINAL[to] = open(to, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 — kept for the process
        except OSError:
            return None  # the report's folder went away: no bars rather than a failed measurement
    return _TERMINAL[to]


def _to_terminal() -> bool:
    return terminal() is not None


def ipython() -> Any:
    """The running IPython shell (a notebook's kernel), or None (a script, a test, no IPython installed)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def notes() -> Any:
    """Where a long helper's lines about its progress go (a probe done, a dataset built): the terminal's stderr
    inside a ``labkit report`` run, as its bars; the cell's output in a notebook (JupyterLab draws stderr red,
    as if the cell had failed); elsewhere stderr, so that stdout carries only results."""
    if _to_terminal():
        return terminal()
    return sys.stdout if ipython() is not None else sys.stderr


def new_bar(total: float, desc: str, unit: str, **options: Any) -> Any:
    """A tqdm bar, shown: text on the terminal's stderr inside a ``labkit report`` run, else ``tqdm.auto`` (a
    widget in Jupyter). For a helper that decided to show one (:func:`show_progress`); ``options`` go to tqdm."""
    if _to_terminal():
        from tqdm import tqdm as text_bar

        return text_bar(total=total, desc=desc, unit=unit, leave=False, file=terminal(), mininterval=1.0,
                        **options)
    from tqdm.auto import tqdm
    from tqdm.notebook import tqdm_notebook

    if not issubclass(tqdm, tqdm_notebook):
        return tqdm(total=total, desc=desc, unit=unit, leave=False, **options)
    return _notebook_bar(tqdm(total=total, desc=desc, unit=unit, leave=False, display=False, **options))


def _notebook_bar(bar: Any) -> Any:
    """A notebook bar shown under a display id, its output emptied when it closes: the widget goes (as
    ``leave=False`` means), and a notebook saved without its widgets' state shows no text of a bar stuck at its
    first draw ("0%") where the bar was."""
    from IPython.display import display

    if getattr(bar, "container", None) is None:  # a disabled bar draws nothing
        return bar
    handle = display(bar.container, display_id=True)
    close, closed = bar.close, []

    def close_and_clear() -> None:
        close()
        if not closed and handle is not None:
            closed.append(True)
            handle.update({"text/plain": ""}, raw=True)

    bar.close = close_and_clear
    return bar


def steps_bar(progress: bool | None, total: int, desc: str, unit: str, *,
              expected_s: float | None = None) -> Any:
    """A tqdm bar over ``total`` steps when :func:`show_progress` says so (always inside a ``labkit report``
    run, unless ``progress=False``), else None.

    Call ``bar.update()`` after each step and ``bar.close()`` at the end (both only when it is not None).
    """
    if (_to_terminal() and progress is not False) or show_progress(progress, expected_s=expected_s):
        return new_bar(total, desc, unit)
    return None


def refreshing(bar: Any) -> contextlib.AbstractContextManager[Any]:
    """While a loop of steps runs, a :class:`Heartbeat` redraws ``bar`` (its elapsed time moves), so a step that
    outlasts :data:`BEAT_S` is not silent; one thread for the whole loop. Nothing when ``bar`` is None."""
    return contextlib.nullcontext() if bar is None else Heartbeat(lambda _elapsed: bar.refresh())


def step_beat(bar: Any, label: str, step_s: float | None = None) -> contextlib.AbstractContextManager[Any]:
    """While one step runs, a :class:`Heartbeat` writes ``label: 40 s`` (``of 60 s`` when ``step_s`` is known) as
    the bar's postfix, so a step longer than :data:`BEAT_S` is not silent; nothing when ``bar`` is None."""
    if bar is None:
        return contextlib.nullcontext()

    def beat(elapsed: float) -> None:
        shown = elapsed if step_s is None else min(elapsed, step_s)
        bar.set_postfix_str(f"{label}: {shown:.0f} s" + ("" if step_s is None else f" of {step_s:.0f} s"))

    return Heartbeat(beat)


def pulse(beat: Callable[[float], object], stopped: Callable[[float], bool], *, every_s: float = HEARTBEAT_S,
          clock: Callable[[], float] = time.monotonic) -> int:
    """Call ``beat(elapsed_s)`` every ``every_s`` seconds until ``stopped(every_s)`` (which waits up to that long)
    returns True; return how many beats there were. The loop a :class:`Heartbeat`'s thread runs; tests drive it
    with a fake clock and a fake wait.

    A beat that raises (a bar closed meanwhile, a widget gone with its kernel's front end) ends the pulse: a
    progress display must never break the measurement it decorates.
    """
    t0 = clock()
    beats = 0
    while not stopped(every_s):
        try:
            beat(clock() - t0)
        except Exception:
            return beats
        beats += 1
    return beats


class Heartbeat:
    """While its ``with`` block runs, ``beat(elapsed_s)`` is called from a daemon thread every ``every_s`` seconds
    (default :data:`HEARTBEAT_S`).

    For one long step that has no loop of its own to show progress from::

        with Heartbeat(lambda s: bar.set_postfix_str(f"this step: {s:.0f} s")):
            result = long_step()

    The thread only sleeps between beats, and stops (joined) when the block ends, however it ends.
    """

    def __init__(self, beat: Callable[[float], object], every_s: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.beat, self.clock = beat, clock
        self.every_s = HEARTBEAT_S if every_s is None else every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        self._stop.clear()
        self._thread = threading.Thread(target=pulse, args=(self.beat, self._stop.wait),
                                        kwargs={"every_s": self.every_s, "clock": self.clock},
                                        name="labkit.progress.heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.every_s + 5)
            self._thread = None


@contextlib.contextmanager
def timed_bar(progress: bool | None, seconds: float, desc: str, *, every_s: float = 1.0,
              clock: Callable[[], float] = time.monotonic) -> Iterator[Any]:
    """A bar over the ``seconds`` a step should take (work with no steps to count: sampling for a fixed time),
    moved by a :class:`Heartbeat` every ``every_s``; yields the bar, or None when :func:`show_progress` says no.
    """
    total = max(1, math.ceil(seconds))
    bar = steps_bar(progress, total, desc, "s", expected_s=seconds)
    if bar is None:
        yield None
        return

    def beat(elapsed: float) -> None:
        bar.n = min(total, int(elapsed))
        bar.refresh()

    try:
        with Heartbeat(beat, every_s, clock=clock):
            yield bar
        beat(total)  # the step is done: a bar left on the page reads full, not at its last beat
    finally:
        bar.close()


class LazySteps:
    """A bar over ``total`` steps for work whose length is known only once it runs (the first step's time).

    The rule of :func:`show_progress` is applied when the first step ends (expected: its time × ``total``) or,
    if that step is slow, at the first heartbeat during it (:meth:`during`) — so quick work shows no bar and
    a long first step is not silent::

        steps = LazySteps(progress, 6, "counting", "call")
        with steps.during("warm-up"):
            fn()
        steps.done("warm-up")
        ...
        steps.close()
    """

    def __init__(self, progress: bool | None, total: int, desc: str, unit: str, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.progress, self.total, self.desc, self.unit, self.clock = progress, total, desc, unit, clock
        self.t0 = clock()
        self.steps = 0
        self.bar: Any = None
        self._decided = False
        self._lock = threading.Lock()

    def _decide(self, steps_s: float, steps: int) -> Any:
        with self._lock:
            if not self._decided:
                self._decided = True
                self.bar = steps_bar(self.progress, self.total, self.desc, self.unit,
                                     expected_s=steps_s / max(steps, 1) * self.total)
                if self.bar is not None and self.steps:
                    self.bar.update(self.steps)
            return self.bar

    def done(self, what: str) -> None:
        """One step ended (``what`` is shown beside the bar)."""
        bar = self._decide(self.clock() - self.t0, self.steps + 1)   # a new bar catches up the steps before
        self.steps += 1
        if bar is not None:
            bar.set_postfix_str(what, refresh=False)
            bar.update(1)

    def during(self, label: str) -> contextlib.AbstractContextManager[Any]:
        """Around a step that may be slow: every :data:`HEARTBEAT_S` the bar (made now if the rule allows work
        this long) says ``label: 20 s``. Not for a step being measured in a way a drawing thread disturbs."""
        def beat(elapsed: float) -> None:
            bar = self._decide(self.clock() - self.t0, self.steps + 1)
            if bar is not None:
                bar.set_postfix_str(f"{label}: {elapsed:.0f} s")

        return Heartbeat(beat, clock=self.clock)

    def close(self) -> None:
        """Close the bar, if one was shown."""
        if self.bar is not None:
            self.bar.close()
