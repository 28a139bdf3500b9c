"""One code path for every graded call: a worker thread that runs the learner's function, timed and metered.

A grader (see :mod:`labkit.grading.kit`) makes every call of the learner's function — correctness, budget, timing —
through one :class:`Caller`, so nothing in the call's stack, thread or frames tells one phase from another.

Each call is also held to leave the process as it found it:

* **no work left running** — threads the call started must have ended by the time it returns (after a short
  grace for a thread that is exiting); a call that leaves one alive fails with :class:`LeftRunning`, naming it.
  ``Caller(threads="idle")`` allows threads that a component keeps by design (a ledger's writer) as long as they
  are idle after the call: one still using the CPU is still doing the call's work;
* **the process state the timing depends on unchanged** — the switch interval, the garbage collector (on/off,
  thresholds, callbacks), the profile and trace hooks (``sys`` and ``threading``), the CPU affinity and
  priority of the grading threads, the recursion limit: a call that changes any of them is restored and fails
  with :class:`ChangedProcess`, saying what changed (a baseline run with gc thresholds of 1 or a profiler hook
  set is a slower baseline).

:func:`others_cpu_ns` is the CPU that the rest of the process (its other threads) and its child processes
used: :func:`labkit.grading.kit.timed` refuses a comparison during which something else in the process worked.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.grading.sealing import seal

__all__ = ["Outcome", "Meter", "Caller", "CLOCK", "CallBroke", "LeftRunning", "ChangedProcess", "Uncopyable",
           "others_cpu_ns", "thread_ids"]

#: the clock graded calls are timed with, bound at import: rebinding time.perf_counter_ns later changes nothing
CLOCK = time.perf_counter_ns
_CLOCK = CLOCK


@dataclass(frozen=True)
class Outcome:
    """One call of a graded function: its answer, or the exception it raised, and the call's own time (ns)."""

    value: Any
    error: BaseException | None
    ns: int
    #: the object the call returned, as it is now (``value`` is its copy taken at return, when the caller
    #: freezes answers): a difference between them is an answer changed after its call returned
    raw: Any = None


class Meter:
    """What a grader counts around one call: entered just before the call and left just after, in the thread
    that runs it (so a per-thread hook such as ``sys.settrace`` sees the call); ``amount`` holds the count once
    left. Subclass it; this base counts nothing (every unmetered call goes through it too: the same frames)."""

    amount: float = 0.0

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_METER = Meter()


class CallBroke(Exception):
    """A graded call that broke a rule of the grading rather than raising: its message is a sentence about the
    learner's function ("left a thread running …"), which a grader prints after "your function"."""


class LeftRunning(CallBroke):
    """The call returned with threads it started still running (or, under ``threads="idle"``, still working)."""


class ChangedProcess(CallBroke):
    """The call changed process state that timing depends on (it has been put back)."""


_TASKS = "/proc/self/task"
_LINUX = sys.platform.startswith("linux") and os.path.isdir(_TASKS)
_GETSWITCH, _SETSWITCH = sys.getswitchinterval, sys.setswitchinterval
_GETPROFILE, _SETPROFILE, _GETTRACE, _SETTRACE = sys.getprofile, sys.setprofile, sys.gettrace, sys.settrace
_T_GETPROFILE = getattr(threading, "getprofile", lambda: None)  # 3.10+
_T_GETTRACE = getattr(threading, "gettrace", lambda: None)
_T_SETPROFILE, _T_SETTRACE = threading.setprofile, threading.settrace
_GC_ENABLED, _GC_ENABLE, _GC_DISABLE = gc.isenabled, gc.enable, gc.disable
_GC_THRESHOLD, _GC_SET_THRESHOLD, _GC_CALLBACKS = gc.get_threshold, gc.set_threshold, gc.callbacks
_RECURSION, _SET_RECURSION = sys.getrecursionlimit, sys.setrecursionlimit
_AFFINITY = getattr(os, "sched_getaffinity", None)
_SET_AFFINITY = getattr(os, "sched_setaffinity", None)
_PRIORITY = getattr(os, "getpriority", None)
_SET_PRIORITY = getattr(os, "setpriority", None)
_SLEEP, _MONOTONIC, _ENUMERATE = time.sleep, time.monotonic, threading.enumerate
_NDARRAY, _DEEPCOPY = np.ndarray, copy.deepcopy
#: how long a call's threads may take to end once it returned (a thread on its way out), seconds
GRACE_S = 0.1
#: under ``threads="idle"``: a thread left behind may use at most this much CPU over the grace (ns)
IDLE_CPU_NS = 2_000_000


def thread_ids() -> frozenset[int]:
    """The native ids of this process's threads: every one on Linux (``/proc/self/task``, threads started by C
    code included), elsewhere those :mod:`threading` knows."""
    if _LINUX:
        try:
            return frozenset(int(t) for t in os.listdir(_TASKS))
        except OSError:  # /proc unreadable (a sandbox): what threading knows
            pass
    return frozenset(t.native_id for t in _ENUMERATE() if t.native_id is not None)


def _cpu_ns(tid: int) -> int:
    """A thread's CPU time so far (ns; 0 where it cannot be read): its scheduler run time on Linux."""
    try:
        with open(f"{_TASKS}/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _children_cpu_ns() -> int:
    """The CPU time of this process's live child processes (and theirs), ns; 0 where psutil cannot tell."""
    try:
        import psutil

        total = 0.0
        for child in psutil.Process().children(recursive=True):
            try:
                t = child.cpu_times()
                total += t.user + t.system
            except psutil.Error:  # a child that ended meanwhile
                continue
        return int(total * 1e9)
    except Exception:  # no psutil, or a platform it cannot read: nothing to add
        return 0


def others_cpu_ns(exclude: frozenset[int] | set[int], children: bool = True) -> tuple[int, dict[int, int]]:
    """The CPU used so far by this process's Python threads (those :mod:`threading` knows) other than
    ``exclude`` (native ids) plus its child processes (ns), and each such thread's share: read twice, the
    difference is what they did in between. Threads of C libraries (a BLAS pool spinning after a matrix
    product, a messaging library's I/O thread) are not counted: they are the grader's too; nor are child
    processes with ``children=False`` (a grader whose own service runs as one). Linux only (0 elsewhere:
    nothing can be told)."""
    if not _LINUX:
        return 0, {}
    python = frozenset(t.native_id for t in _ENUMERATE() if t.native_id is not None)
    per = {tid: _cpu_ns(tid) for tid in python - exclude}
    return sum(per.values()) + (_children_cpu_ns() if children else 0), per


class Uncopyable:
    """Stands for an answer that could not be copied the moment it was returned (why: ``why``)."""

    def __init__(self, why: str) -> None:
        self.why = why


def _frozen(value: Any) -> Any:
    """The answer as it is the moment it is returned — a copy of a container a thread could still fill — or an
    :class:`Uncopyable` when it cannot be copied."""
    if type(value) in (int, float, str, bytes, bool, complex, type(None)):
        return value
    if type(value) is _NDARRAY:
        return value.copy()
    try:
        return _DEEPCOPY(value)
    except Exception as e:  # an answer that cannot be copied cannot be checked either
        return Uncopyable(f"{type(e).__name__}: {str(e)[:120]}")


def _name(tid: int) -> str:
    for t in _ENUMERATE():
        if t.native_id == tid:
            return repr(t.name)
    try:
        with open(f"{_TASKS}/{tid}/comm") as f:
            return f"{f.read().strip()!r} (not a threading.Thread)"
    except OSError:
        return f"thread {tid}"


def _alive(tid: int) -> bool:
    if _LINUX:
        return os.path.exists(f"{_TASKS}/{tid}")
    return any(t.native_id == tid and t.is_alive() for t in _ENUMERATE())


def _left(before: frozenset[int], mode: str) -> str | None:
    """What the call left running (a sentence after "your function"), or None: threads started during the call
    that are still alive after the grace (``strict``), or still using the CPU over it (``idle``)."""
    new = thread_ids() - before
    if not new:
        return None
    running = [t for t in _ENUMERATE() if t.native_id in new and t.is_alive()]
    if running and mode == "strict":  # a Python thread still running its code: no grace for that
        names = ", ".join(repr(t.name) for t in running[:3])
        return (f"left {len(running)} thread(s) running after it returned ({names}): a graded call must finish its "
                "work before it returns — join the threads it starts (with ThreadPoolExecutor() as pool: … joins "
                "them)")
    if mode == "idle":
        cpu0 = {t: _cpu_ns(t) for t in new}
        _SLEEP(GRACE_S / 2)
        busy = [t for t in new if _alive(t) and _cpu_ns(t) - cpu0[t] > IDLE_CPU_NS]
        if not busy:
            return None
        names = ", ".join(_name(t) for t in busy[:3])
        return (f"left {len(busy)} thread(s) working after it returned ({names}: still using the CPU): the work of "
                "a call must be done when it returns — or handed to a thread that is waiting, not working")
    deadline = _MONOTONIC() + GRACE_S
    alive = [t for t in new if _alive(t)]
    while alive and _MONOTONIC() < deadline:
        _SLEEP(0.002)
        alive = [t for t in alive if _alive(t)]
    if not alive:
        return None
    names = ", ".join(_name(t) for t in alive[:3])
    return (f"left {len(alive)} thread(s) running after it returned ({names}): a graded call must finish its work "
            "before it returns — join the threads it starts (with ThreadPoolExecutor() as pool: … joins them)")


def _state(main: int, worker: int) -> dict[str, Any]:
    """The process state a timing depends on, read in the worker thread (the per-thread parts: this one's)."""
    s: dict[str, Any] = {
        "the switch interval (sys.setswitchinterval)": _GETSWITCH(),
        "the garbage collector (gc.enable/gc.disable)": _GC_ENABLED(),
        "the gc thresholds (gc.set_threshold)": _GC_THRESHOLD(),
        "the gc callbacks (gc.callbacks)": tuple(_GC_CALLBACKS),
        "the profile hook (sys.setprofile)": _GETPROFILE(),
        "the trace hook (sys.settrace)": _GETTRACE(),
        "threading's profile hook (threading.setprofile)": _T_GETPROFILE(),
        "threading's trace hook (threading.settrace)": _T_GETTRACE(),
        "the recursion limit (sys.setrecursionlimit)": _RECURSION(),
    }
    for who, tid in (("the grader's thread", main), ("the graded calls' thread", worker)):
        if _AFFINITY is not None:
            with contextlib.suppress(OSError):  # a thread that cannot be read: nothing to compare
                s[f"{who}'s CPU affinity (os.sched_setaffinity)"] = frozenset(_AFFINITY(tid))
        if _PRIORITY is not None and _LINUX:
            with contextlib.suppress(OSError):
                s[f"{who}'s priority (os.nice, os.setpriority)"] = _PRIORITY(os.PRIO_PROCESS, tid)
    return s


def _same(key: str, a: Any, b: Any) -> bool:
    if "callbacks" in key:  # the same objects, in order (a callback's own __eq__ is not asked)
        return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
    return a is b or a == b


def _restore(key: str, old: Any, main: int, worker: int) -> None:
    """Put one piece of state back (best effort: raising a priority needs privileges a learner may lack)."""
    try:
        if key.startswith("the switch"):
            _SETSWITCH(old)
        elif key.startswith("the garbage"):
            (_GC_ENABLE if old else _GC_DISABLE)()
        elif key.startswith("the gc thresholds"):
            _GC_SET_THRESHOLD(*old)
        elif key.startswith("the gc callbacks"):
            _GC_CALLBACKS[:] = list(old)
        elif key.startswith("the profile"):
            _SETPROFILE(old)
        elif key.startswith("the trace"):
            _SETTRACE(old)
        elif key.startswith("threading's profile"):
            _T_SETPROFILE(old)
        elif key.startswith("threading's trace"):
            _T_SETTRACE(old)
        elif key.startswith("the recursion"):
            _SET_RECURSION(old)
        else:
            tid = main if key.startswith("the grader's") else worker
            if "affinity" in key and _SET_AFFINITY is not None:
                _SET_AFFINITY(tid, old)
            elif "priority" in key and _SET_PRIORITY is not None:
                _SET_PRIORITY(os.PRIO_PROCESS, tid, old)
    except (OSError, ValueError, TypeError):
        pass


def _short(x: Any) -> str:
    if type(x) is frozenset:
        x = sorted(x)
    text = repr(x)
    return text if len(text) <= 60 else text[:59] + "…"


def _changed(before: dict[str, Any], main: int, worker: int) -> str | None:
    """What the call changed of ``before`` (put back now), as a sentence after "your function", or None."""
    after = _state(main, worker)
    diffs = [k for k, v in before.items() if k in after and not _same(k, v, after[k])]
    for k in diffs:
        _restore(k, before[k], main, worker)
    if not diffs:
        return None
    parts = "; ".join(f"{k}: {_short(before[k])} → {_short(after[k])}" for k in diffs[:3])
    return (f"changed the process the grader times in — {parts} (put back now): a graded function must leave the "
            "interpreter's settings as it found them")


def _timed(fn: Callable[..., Any], args: tuple[Any, ...], clock: Callable[[], int], meter: Meter
           ) -> tuple[Any, BaseException | None, int]:
    with meter:  # the do-nothing meter when nothing is counted: the same lines, the same frames, every phase
        t0 = clock()
        try:
            value = fn(*args)
        except BaseException as e:  # the learner's code: reported by the grader, never raised here
            return None, e, clock() - t0
        return value, None, clock() - t0


def _serve(jobs: queue.SimpleQueue[Any], done: queue.SimpleQueue[Any], clock: Callable[[], int], main: int,
           threads: str, freeze: bool) -> None:
    worker = threading.get_native_id()
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, args, meter = job
        job = None
        before, state = thread_ids(), _state(main, worker)
        try:
            out = _timed(fn, args, clock, meter)
        except BaseException as e:  # the meter itself failed (or was unhooked): the call counts as failed
            out = (None, e, 0)
        raw = out[0]
        if freeze and out[1] is None:  # the answer as returned: nothing a thread does to it later is checked
            out = (_frozen(out[0]), None, out[2])
        fn = args = meter = None
        changed = _changed(state, main, worker)
        left = _left(before, threads)
        if (changed or left) and not isinstance(out[1], KeyboardInterrupt):
            broke = ChangedProcess(changed) if changed else LeftRunning(left)
            out = (None, broke, out[2])
            raw = None
        done.put((*out, raw))
        out = raw = None


class Caller:
    """Every call of a graded function, in every phase, made the same way: in one worker thread, two frames
    below its entry (``_serve`` → ``_timed`` → the function), timed with the clock bound at import.

    Args:
        timeout_s: a call that has not returned by then fails (and so does every later call of this caller).
        threads: ``"strict"`` — a call fails if a thread it started is still alive once it returned (after
            :data:`GRACE_S`); ``"idle"`` — such a thread may stay if it is idle (a component's own writer thread,
            waiting on its queue), and the call fails only if one is still using the CPU.
        freeze: each answer is copied the moment the call returns (before anything else runs), so a thread
            that fills or changes it afterwards changes nothing the grader checks; an answer that cannot be
            copied comes back as an :class:`Uncopyable`.

    Every call fails (:class:`LeftRunning`, :class:`ChangedProcess`) when it leaves work running or changes the
    process state that timing depends on (the module's docstring lists it). Use it as a context manager (the
    worker stops at the end), or call :meth:`close`.
    """

    def __init__(self, timeout_s: float = 300.0, threads: str = "strict", freeze: bool = True) -> None:
        if threads not in ("strict", "idle"):
            raise ValueError(f"threads must be 'strict' or 'idle', got {threads!r}")
        self.timeout_s = timeout_s
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._broken: BaseException | None = None
        self._thread = threading.Thread(target=_serve, args=(self._jobs, self._done, _CLOCK,
                                                             threading.get_native_id(), threads, freeze),
                                        daemon=True, name="labkit-graded-calls")
        self._thread.start()
        self.worker_id: int = self._thread.native_id or 0
        self.grader_id: int = threading.get_native_id()

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], meter: Meter | None = None) -> Outcome:
        """``fn(*args)`` in the worker, inside ``meter`` when given; never raises what ``fn`` raises."""
        if self._broken is not None:
            return Outcome(None, self._broken, 0)
        self._jobs.put((fn, args, _NO_METER if meter is None else meter))
        try:
            value, error, ns, raw = self._done.get(timeout=self.timeout_s)
        except queue.Empty:
            self._broken = TimeoutError(f"a call did not return within {self.timeout_s:g} s")
            return Outcome(None, self._broken, 0)
        if isinstance(error, KeyboardInterrupt):
            raise error  # the learner pressed stop: that is theirs to raise
        return Outcome(value, error, ns, raw)

    def close(self) -> None:
        """Stop the worker (after the call in progress, if any)."""
        self._jobs.put(None)
        if self._broken is None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Caller:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_SEALED = seal(globals())
