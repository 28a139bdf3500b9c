"""Process memory at its highest during one call: the RSS high-water mark, native memory included.

    peak = alloc.rss_peak(pyarrow_read, path)          # in this process: cheap, run it by default
    peak.added_bytes                                   # how far the call raised resident memory above its start
    alloc.rss_peak(read_csv, path, fresh=True)         # in a fresh process: nothing already resident to reuse

The allocation profile (:func:`labkit.alloc.count`, memray) counts what Python's allocators hand out; a
library with its own allocator (pyarrow's jemalloc/mimalloc pools, a C extension's ``mmap``) is invisible to
it. The kernel sees every page a process touches: on Linux, ``VmHWM`` in ``/proc/self/status`` is the peak
resident set size, and writing ``5`` to ``/proc/self/clear_refs`` resets it to the current size (Linux 4.0+,
``man 5 proc``), so the peak of one call is read in place, at no cost to the call. Elsewhere, or with
``fresh=True``, the call runs in a new process (``spawn``) and ``resource.getrusage(RUSAGE_SELF).ru_maxrss``
is read before and after it (kilobytes on Linux, bytes on macOS).

What it cannot see: memory the call reuses without touching new pages — freed blocks an allocator keeps
resident from earlier work. glibc's malloc keeps freed heap memory resident, so a warm call would show nothing
the second or third time: before each call, ``malloc_trim(0)`` hands that memory back to the kernel (glibc
only; ``tests/test_alloc.py`` shows a warm NumPy allocation seen every time). A library's own pools (pyarrow's
jemalloc/mimalloc) keep theirs, which makes ``added_bytes`` in a long-lived kernel a lower bound;
``fresh=True`` starts with nothing to reuse (the function and its arguments must then be picklable: defined in
a module, not in the notebook).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labkit.errors import BadInputError, ProbeUnavailable
from labkit.measure.machine import fingerprint
from labkit.results import Saveable

__all__ = ["RssPeak", "rss_peak"]

_STATUS = "/proc/self/status"
_CLEAR = "/proc/self/clear_refs"


@dataclass(frozen=True)
class RssPeak(Saveable):
    """The resident memory of the process around one call.

    Attributes:
        name: what was called.
        before_bytes: resident memory just before the call (in a fresh process: the highest point before it).
        peak_bytes: the highest resident memory during the call.
        method: how it was read (``VmHWM`` reset through ``clear_refs``, or ``ru_maxrss`` in a fresh process).
        fresh: True when the call ran in a new process.
    """

    KIND = "rss-peak"

    name: str
    before_bytes: int
    peak_bytes: int
    method: str
    fresh: bool
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def added_bytes(self) -> int:
        """How far the call raised resident memory above where it started (never below 0)."""
        return max(0, self.peak_bytes - self.before_bytes)

    def __str__(self) -> str:
        where = "a fresh process" if self.fresh else "this process"
        return (f"{self.name}: resident memory peaked {self.added_bytes / 2**20:,.1f} MiB above its start "
                f"({self.peak_bytes / 2**20:,.1f} MiB in all, {where}; {self.method})")


def _status() -> dict[str, int]:
    with open(_STATUS) as f:
        text = f.read()
    return {k: int(v) * 1024 for k, v in re.findall(r"^(VmHWM|VmRSS):\s+(\d+) kB", text, re.MULTILINE)}


def _can_reset() -> bool:
    """Whether the peak can be read in place: the ``proc memory`` facility (:mod:`labkit.measure.facilities`)."""
    from labkit.measure.facilities import available

    return available("proc memory")


def _maxrss() -> int:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def _trim() -> None:
    """Return the free memory glibc's malloc keeps to the kernel (a no-op without glibc)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _in_place(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[int, int, str]:
    _trim()
    before = _status()["VmRSS"]
    with open(_CLEAR, "w") as f:
        f.write("5")          # VmHWM := VmRSS now
    fn(*args)
    return before, _status()["VmHWM"], "VmHWM reset through /proc/self/clear_refs"


def _child(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[int, int, str]:
    if _can_reset():
        return _in_place(fn, args)
    before = _maxrss()
    fn(*args)
    return before, _maxrss(), "ru_maxrss (getrusage)"


def rss_peak(fn: Callable[..., Any], *args: Any, name: str | None = None, fresh: bool = False) -> RssPeak:
    """Call ``fn(*args)`` once and return how high the process's resident memory went during it.

    Args:
        fn: the call to measure.
        name: a label (default: the function's name).
        fresh: run it in a new process (see the module docstring); also the way where ``clear_refs`` is
            not available (not Linux, or not permitted).

    Raises:
        BadInputError: ``fn`` is not callable, or (fresh) it or its arguments cannot be sent to a process.
        ProbeUnavailable: the new process could not run it.
    """
    if not callable(fn):
        raise BadInputError(f"rss_peak needs a callable, got {type(fn).__name__}: pass the function itself")
    label = name or getattr(fn, "__name__", repr(fn))
    if not fresh and _can_reset():
        before, peak, method = _in_place(fn, args)
        return RssPeak(label, before, peak, method, False, fingerprint())
    import concurrent.futures as cf
    import multiprocessing as mp
    import pickle

    try:
        pickle.dumps((fn, args))
    except Exception as e:
        raise BadInputError(f"rss_peak(fresh=True) sends {label} and its arguments to a new process, and they "
                            f"cannot be pickled ({type(e).__name__}: {e}): define the function in a module "
                            "(a .py file), not in the notebook") from e
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        try:
            before, peak, method = pool.submit(_child, fn, args).result()
        except cf.process.BrokenProcessPool as e:
            raise ProbeUnavailable(f"the process measuring {label} died (out of memory?): {e}") from e
    return RssPeak(label, before, peak, f"{method} in a fresh process (pid ≠ {os.getpid()})", True, fingerprint())
