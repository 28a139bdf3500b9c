"""A load run in the background, while the caller measures something else (a profile, probe requests…).

    with labkit.load.background(svc.url + "/orders/1", rate=50, duration_s=30, warmup_s=0.5) as bg:
        bg.warm()                          # returns once the warm-up is over: the service is busy now
        profile = measure_something()      # … while the load runs
    bg.result                              # the LoadResult of what ran (stopped early at the block's end)

The run is the same as :func:`labkit.load.run`'s (same knobs, same engine, on its own uvloop thread); only
the caller's thread is free meanwhile. Nothing here draws a progress bar: the caller's measurement is the
thing to watch.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from labkit.load._runner import _drive, _with_cpu, build_result, prepare
from labkit.load.result import LoadResult
from labkit.measure.machine import CpuWatch

__all__ = ["Background", "background"]


class Background:
    """A running background load: :meth:`warm`, then :meth:`stop` (early) or :meth:`wait` (to its end).

    A context manager too: leaving the block stops the run, and :attr:`result` holds what it measured.
    """

    def __init__(self, url: str, *, name: str = "", **knobs: Any) -> None:
        self._engine = prepare(url, **knobs)
        self._name = name
        self._box: dict[str, Any] = {}
        self._watch = CpuWatch()
        self._result: LoadResult | None = None
        self._thread = threading.Thread(target=self._drive, name="labkit.load background", daemon=True)
        self._thread.start()

    def _drive(self) -> None:
        try:
            self._box["raw"] = _drive(self._engine, None, False, "")
        except BaseException as e:  # handed to the caller by wait()
            self._box["error"] = e

    @property
    def running(self) -> bool:
        """Whether the load is still being sent."""
        return self._thread.is_alive()

    def warm(self, timeout_s: float = 60.0) -> None:
        """Block until the warm-up is over and the measured window has begun (or the run has ended)."""
        deadline = time.monotonic() + timeout_s
        e = self._engine
        while self.running and time.monotonic() < deadline:
            if e.measure_ns and time.perf_counter_ns() >= e.measure_ns:
                return
            time.sleep(0.01)

    def stop(self) -> LoadResult:
        """End the run now (requests in flight finish) and return its :class:`LoadResult`."""
        self._engine.stop()
        return self.wait()

    def wait(self) -> LoadResult:
        """Wait for the run to end on its own (``duration_s`` or ``max_requests``) and return its result;
        re-raises what stopped the run, if anything did."""
        self._thread.join()
        if "error" in self._box:
            raise self._box.pop("error")
        if self._result is None:
            self._result = build_result(self._engine.s, self._box["raw"], name=self._name,
                                        fingerprint=_with_cpu(self._watch))
        return self._result

    @property
    def result(self) -> LoadResult:
        """The run's result, once it has ended (:meth:`stop` or :meth:`wait` first, or leave the ``with``)."""
        if self._result is None:
            raise RuntimeError("the background load has not ended yet: call stop() or wait() first")
        return self._result

    def __enter__(self) -> Background:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.stop()
        else:  # the block's own error is the one to see; the load is still stopped and joined
            self._engine.stop()
            self._thread.join()


def background(url: str, *, name: str = "", **knobs: Any) -> Background:
    """Start a load run in the background and return its :class:`Background` handle.

    Args:
        url: a loopback URL, as for :func:`labkit.load.run`.
        name: a label for the result.
        knobs: ``rate=`` or ``concurrency=``, ``duration_s``, ``warmup_s``, ``paths`` … as for
            :func:`labkit.load.run` (not ``progress`` or ``cpus``). ``duration_s`` bounds the run: make it
            long enough for what you measure meanwhile, and :meth:`Background.stop` it when you are done.

    Raises:
        BadInputError: a bad URL or knob, before anything is sent.
    """
    return Background(url, name=name, **knobs)
