"""What waiting and starting cost: a contended lock, the GIL changing hands, an asyncio task switch, a thread
and a process started — the rows lab 09 (contention) prices its models with.

Each probe names the mechanism it times: a contended acquire is a *wake-up* of a blocked thread through the
kernel (a futex), not an atomic instruction; a GIL hand-off is the waiting thread woken on the interpreter's
condition variable; a process start is a fork (or a fresh interpreter) up to the child's first line. The
hand-offs between two threads pin them to two different cores (``os.sched_setaffinity``), as two busy threads
of a service usually run, and say so in ``extra["cpus"]``; with one usable CPU they share it, and the row's note
says the figure is then a context switch.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from labkit.latency._harness import Samples, method_of, pipe_pair, run_pair, time_each, unavailable
from labkit.measure.machine import UNPINNED, can_pin, pinned, usable_cpus

__all__ = ["lock_contended", "gil_handoff", "asyncio_switch", "thread_start", "process_start"]

_clock: Callable[[], int] = time.perf_counter_ns


def _two_cores() -> tuple[int | None, int | None, str | None]:
    """The CPUs the two threads of a hand-off pin to, and a note when there is no second core."""
    if not can_pin():
        return None, None, f"{UNPINNED}: the two threads ran wherever the scheduler put them"
    cpus = usable_cpus()
    if len(cpus) >= 2:
        return cpus[0], cpus[1], None
    return cpus[0], cpus[0], ("only one CPU is usable by this process, so both threads ran on it: each hand-off "
                              "is a context switch on one core, not a wake-up across cores")


def _lock_handoffs(rounds: int, warm: int, cpu_a: int | None, cpu_b: int | None) -> tuple[float, ...]:
    ab, ba = threading.Lock(), threading.Lock()
    ab.acquire()
    ba.acquire()
    stamp = [0]
    seen: list[float] = []
    stop = [False]
    n = rounds + warm

    def peer() -> None:
        for _ in range(n):
            ab.acquire()                       # blocked in the kernel until the other thread releases it
            if stop[0]:
                return
            seen.append(_clock() - stamp[0])   # released → this thread runs Python again
            stamp[0] = _clock()
            ba.release()                       # the other thread is blocked on ba: a contended release

    def main() -> None:
        for _ in range(n):
            stamp[0] = _clock()
            ab.release()
            ba.acquire()
            seen.append(_clock() - stamp[0])

    def unblock() -> None:  # the peer's next acquire returns, and it stops
        stop[0] = True
        if ab.locked():
            ab.release()

    run_pair(main, peer, cpu_a, cpu_b, unblock)
    return tuple(seen[2 * warm:])


def lock_contended(*, quick: bool = False, rounds: int | None = None) -> Samples:
    """Release a ``threading.Lock`` that another thread is blocked on, until that thread runs again.

    Method: two threads pinned to two cores pass the turn back and forth through two locks: each releases the
    lock the other is blocked in ``acquire()`` on, then blocks on the other lock. A sample is the time from
    just before ``release()`` to the woken thread's first clock read after its ``acquire()`` returns. A blocked
    acquire sleeps in the kernel (on Linux a futex: CPython 3.11–3.12 use a POSIX semaphore, newer versions
    their own ``PyMutex``, which parks the waiter after a short spin); the release wakes it. So this row is a
    **wake-up of a sleeping thread through the kernel** — the release's futex wake system call, the scheduler
    waking the other core, and the woken thread taking the GIL — not the atomic instruction of the
    uncontended row. The releaser blocks right after releasing, so the GIL is free when the waiter wakes: this
    is the floor of a hand-off. A releaser that keeps running Python makes the waiter wait for the GIL as well
    (the ``gil_handoff`` row, or up to ``sys.getswitchinterval()`` behind a busy thread). The time the lock was
    *held* is not in the row: a waiter's total wait is the holder's remaining hold time plus this hand-off.
    """
    rounds = rounds or (500 if quick else 2000)
    a, b, note = _two_cores()
    samples = _lock_handoffs(rounds, 50, a, b)
    return Samples("lock_contended", "lock hand-off to a blocked thread (contended)", "concurrency", samples,
                   method_of(lock_contended), note, {"cpus": sorted({a, b} - {None}), "rounds": rounds})


def _gil_handoffs(rounds: int, warm: int, cpu_a: int | None, cpu_b: int | None,
                  settle_ns: int) -> tuple[float, ...]:
    stamp = [0]
    seen: list[float] = []
    n = rounds + warm
    with pipe_pair() as (r1, w1, r2, w2, unblock):

        def peer() -> None:
            for _ in range(n):
                if not os.read(r1, 1):             # woken by the other thread's write, then waits for its GIL
                    return
                seen.append(_clock() - stamp[0])   # the GIL arrived
                os.write(w2, b"x")

        def main() -> None:
            for _ in range(n):
                os.write(w1, b"x")
                until = _clock() + settle_ns       # hold the GIL while the peer wakes and queues for it
                while _clock() < until:
                    pass
                stamp[0] = _clock()
                os.read(r2, 1)                     # releases the GIL (and blocks): the waiting peer takes it

        run_pair(main, peer, cpu_a, cpu_b, unblock)  # the peer reads EOF when main ends early
    return tuple(seen[warm:])


def gil_handoff(*, quick: bool = False, rounds: int | None = None) -> Samples:
    """The GIL passing from a thread that blocks to a thread that was waiting for it, on another core.

    Method: the peer thread sleeps in ``os.read`` on a pipe; this thread writes a byte (the peer wakes in the
    kernel and queues for the GIL, which this thread holds), keeps the GIL for a settle time (200 µs, or a
    quarter of ``sys.getswitchinterval()`` if that is shorter, so the interpreter never forces a switch) by
    spinning, then reads the clock and blocks in ``os.read`` on a second pipe — releasing the GIL. A sample is
    that clock read to the peer's first clock read once it holds the GIL. The wake-up is on the GIL's condition
    variable (a futex on Linux): the releasing thread signals it, the kernel wakes the waiting core, the peer
    takes the GIL and returns to Python. Two pipe system calls are outside the timed part. A thread that holds
    the GIL and does *not* block keeps it up to the switch interval before it must hand over
    (``sys.getswitchinterval()``, 5 ms by default) — that is a wait, and not this row.
    On a free-threaded interpreter (CPython 3.13+ built with ``--disable-gil``, GIL off) there is nothing to
    hand over: the row is n/a.
    """
    method = method_of(gil_handoff)
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()  # 3.13+; older interpreters always have the GIL
    if not gil:
        return unavailable("gil_handoff", "GIL hand-off to a waiting thread", "concurrency",
                           "this interpreter runs without the GIL (free-threaded build), so no GIL changes hands",
                           method)
    rounds = rounds or (300 if quick else 1000)
    settle_ns = round(min(200e3, sys.getswitchinterval() * 1e9 / 4))
    a, b, note = _two_cores()
    samples = _gil_handoffs(rounds, 30, a, b, settle_ns)
    return Samples("gil_handoff", "GIL hand-off to a waiting thread", "concurrency", samples, method, note,
                   {"cpus": sorted({a, b} - {None}), "rounds": rounds, "settle_ns": settle_ns,
                    "switch_interval_s": sys.getswitchinterval()})


async def _spin(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def _pair(n: int) -> None:
    await asyncio.gather(_spin(n), _spin(n))


def asyncio_switch(*, quick: bool = False, batch: int | None = None, repeats: int | None = None) -> Samples:
    """One switch between two ready asyncio tasks: a task yields with ``await asyncio.sleep(0)``, the other runs.

    Method: a fresh event loop (``asyncio.new_event_loop()``, the default policy's loop) runs two tasks that
    each ``await asyncio.sleep(0)`` ``batch`` times; a sample is one run's time divided by the number of
    awaits. ``sleep(0)`` is asyncio's bare yield: the task is put back on the loop's ready queue and the loop
    steps the next ready task. So one switch is a task step (resuming a coroutine), the ready queue, and half
    a pass of the loop, which polls its selector once per pass with a zero timeout (an ``epoll_wait`` system
    call on Linux) — shared here by two tasks, by more in a busy server. No thread and no kernel wake-up is
    involved: compare the thread hand-off rows. The loop runs in a helper thread, because a notebook's own
    thread already runs one (``asyncio.run`` refuses to start a second there).
    """
    batch = batch or (1000 if quick else 2000)
    repeats = repeats or (11 if quick else 31)
    out: list[Any] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(_pair(batch // 10))  # warm-up
                out.append(f"{type(loop).__module__}.{type(loop).__name__}")
                for _ in range(repeats):
                    t0 = _clock()
                    loop.run_until_complete(_pair(batch))
                    out.append((_clock() - t0) / (2 * batch))
            finally:
                loop.close()
        except BaseException as e:  # reported below
            err.append(e)

    t = threading.Thread(target=run, name="labkit-latency-asyncio", daemon=True)
    t.start()
    t.join()
    if err:
        raise err[0]
    return Samples("asyncio_switch", "asyncio task switch (await sleep(0))", "concurrency",
                   tuple(float(x) for x in out[1:]), method_of(asyncio_switch), None,
                   {"loop": out[0], "batch": batch})


def _noop() -> None:
    pass


def _start_and_join() -> None:
    t = threading.Thread(target=_noop)
    t.start()
    t.join()


def thread_start(*, quick: bool = False, repeats: int | None = None) -> Samples:
    """Start a ``threading.Thread`` running an empty function and join it.

    Method: each sample is ``Thread(target=f)``, ``start()`` and ``join()`` of a function that returns at once,
    timed one by one after a warm-up. ``start()`` creates the OS thread (``clone``; glibc reuses cached thread
    stacks) and waits until the new thread has signalled that it runs; ``join()`` waits for it to finish. So
    the row holds the thread's creation, its first run (on another core, or after a context switch) and two
    wake-ups of this thread, plus CPython's thread state set-up and tear-down — what a thread started per task
    costs, which a pool pays once. This thread is pinned to one core for the probe and the new thread inherits
    it, so both wake-ups are context switches on that core: unpinned, the scheduler may start the thread on
    another core, and each wake-up becomes a cross-core one (the ``context_switch_cross`` row), which on a
    virtual machine can double the row from run to run.
    """
    repeats = repeats or (100 if quick else 400)
    cpu = usable_cpus()[0]
    with pinned({cpu}) as on_core:
        samples = time_each(_start_and_join, repeats, warmup=10)
    return Samples("thread_start", "thread start + join (empty function, one core)", "concurrency", samples,
                   method_of(thread_start), None if on_core else UNPINNED, {"repeats": repeats, "cpus": [cpu]})


_CHILD_LINE = "import time; w.send_bytes(time.clock_gettime_ns(time.CLOCK_MONOTONIC).to_bytes(8, 'little'))"


@contextlib.contextmanager
def _main_hidden(hide: bool) -> Iterator[None]:
    """While a spawn child is launched, show multiprocessing a bare ``__main__`` so the child does not re-run ours.

    ``spawn`` reads ``sys.modules["__main__"]`` once, inside ``start()``, to tell the child which script or
    module to re-run ("safe importing of the main module"). Re-running it would time this program's own
    imports (and re-run all of an unguarded script, probes included) instead of a process start.
    """
    if not hide:
        yield
        return
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _main_reimported() -> str | None:
    """What a spawned child would re-run of this process's ``__main__`` (multiprocessing's "safe importing of main")."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return None if name == "__main__" or name.endswith(".__main__") else f"module {name}"
    path = getattr(main, "__file__", None)
    return f"script {path}" if path else None


def _child_faults() -> int | None:
    """Minor page faults of this process's reaped children so far (getrusage), None where there is no such count."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt


def _one_process(ctx: Any, timeout: float) -> tuple[float, float]:
    mono = time.CLOCK_MONOTONIC
    r, w = ctx.Pipe(duplex=False)
    # the target is the builtin exec of one line, so the child imports nothing of labkit (a spawned child
    # imports the module its target lives in); its first line reads the system-wide monotonic clock
    p = ctx.Process(target=exec, args=(_CHILD_LINE, {"w": w}), daemon=True, name="labkit-latency-child")
    how = ctx.get_start_method()
    try:
        with _main_hidden(how == "spawn"):
            t0 = time.clock_gettime_ns(mono)
            p.start()
        w.close()
        try:
            if not r.poll(timeout):
                raise TimeoutError(f"the {how} child sent nothing in {timeout:.0f} s")
            first = int.from_bytes(r.recv_bytes(), "little")
        except EOFError:
            p.join(5)
            raise RuntimeError(f"the {how} child exited (code {p.exitcode}) before its first line ran; its "
                               "error is on this process's stderr") from None
        p.join(timeout)
        joined = time.clock_gettime_ns(mono)
        if p.exitcode != 0:
            raise RuntimeError(f"the {how} child exited with code {p.exitcode}; its error is on stderr")
        return float(first - t0), float(joined - t0)
    finally:
        if p.is_alive():
            p.kill()
            p.join(5)
        r.close()


def process_start(*, quick: bool = False, methods: tuple[str, ...] = ("fork", "spawn"),
                  repeats: dict[str, int] | None = None, timeout: float = 60.0) -> tuple[Samples, ...]:
    """Start a ``multiprocessing.Process``: to the child's first line, and to ``join()`` after it returns.

    Method: for each start method, ``Process(target=...)``, ``start()``, then wait for the child and
    ``join()`` it, one start at a time after one uncounted start. The child's first line reads
    ``CLOCK_MONOTONIC`` (system-wide, so the two processes' clocks agree) and sends it back through a pipe;
    the parent read the same clock just before ``start()``. Two rows per method:

    - *to first line*: ``start()`` → the child's first line. ``fork`` copies this process's page tables
      (copy-on-write: the bigger the parent, the longer; a notebook kernel with numpy and pandas loaded is
      hundreds of MiB) and schedules the child; then the child runs multiprocessing's bootstrap, and every page
      either process writes afterwards — a reference count is a write, so touching an object is one — is
      copied on a page fault (``extra["child_minor_faults"]``: the child's page faults per start, from
      ``getrusage``). ``spawn`` starts a fresh interpreter (fork + exec of
      ``sys.executable``, its start-up and ``site`` imports), imports ``multiprocessing`` there and unpickles
      the target. A program's own spawned children also re-run its ``__main__`` script or module
      (multiprocessing's "safe importing of the main module"; a notebook has none): that import time is the
      program's, not a process start's, so the probe does not let the child re-run it, and
      ``extra["main_not_rerun"]`` names what a child of this process would have re-run.
    - *to join*: the same start → the child has returned, flushed, exited, and the parent has reaped it.

    Since CPython 3.14 the default start method on Linux is ``forkserver``, not ``fork`` (Python docs,
    ``multiprocessing``, "Contexts and start methods"); pools pay the start once per worker. On CPython 3.12+
    ``fork`` in a process with threads (a notebook kernel has several) warns that the child may deadlock; the
    child here runs one line and no locks, and the warning is silenced for this probe only.
    """
    repeats = repeats or ({"fork": 12, "spawn": 4} if quick else {"fork": 40, "spawn": 12})
    method = method_of(process_start)
    out: list[Samples] = []
    available = multiprocessing.get_all_start_methods()
    for how in methods:
        labels = (f"process start, {how}: to the child's first line", f"process start + join, {how} (empty child)")
        keys = (f"process_{how}", f"process_{how}_join")
        if how not in available:
            out += [unavailable(k, lab, "concurrency", f"start method {how!r} does not exist on this platform "
                                f"(it has {', '.join(available)})", method) for k, lab in zip(keys, labels, strict=True)]
            continue
        ctx = multiprocessing.get_context(how)
        first, joined = [], []
        faults = _child_faults()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            for i in range(repeats.get(how, 4) + 1):
                f, j = _one_process(ctx, timeout)
                if i:  # the first start warms the parent's multiprocessing machinery (and the page cache)
                    first.append(f)
                    joined.append(j)
                else:
                    faults = _child_faults()
        after = _child_faults()
        extra = {"start_method": how, "repeats": len(first),
                 "child_minor_faults": None if after is None or faults is None else (after - faults) / len(first),
                 "main_not_rerun": _main_reimported() if how == "spawn" else None}
        out.append(Samples(keys[0], labels[0], "concurrency", tuple(first), method, None, dict(extra)))
        out.append(Samples(keys[1], labels[1], "concurrency", tuple(joined), method, None, dict(extra)))
    return tuple(out)

