"""Operating-system costs: a syscall, an uncontended lock, a thread hand-off (context switch), a page fault."""

from __future__ import annotations

import mmap
import os
import threading
import time

import numpy as np

from labkit.latency._harness import Samples, method_of, pipe_pair, python_cost, run_pair, unavailable
from labkit.measure.machine import UNPINNED, can_pin, usable_cpus

__all__ = ["syscall", "lock_uncontended", "context_switch", "page_fault"]

PAGE = mmap.PAGESIZE


def syscall(*, quick: bool = False, number: int | None = None, repeats: int | None = None) -> Samples:
    """A cheap system call: ``os.getppid()``, timed in a loop and net of the empty loop.

    Method: ``timeit`` runs ``getppid()`` (bound to a local name) many times; a sample is the time per call
    minus an empty loop's. ``getppid`` does no work in the kernel, so what remains is the user→kernel→user
    transition (with this kernel's speculative-execution mitigations) *plus one Python builtin call*
    (compare the ``python_call`` row): the call overhead is part of this row, not subtracted.
    """
    number = number or (2_000 if quick else 5_000)
    repeats = repeats or (21 if quick else 51)
    samples, loop = python_cost("g()", "from os import getppid as g", number=number, repeats=repeats)
    return Samples("syscall", "system call (getppid)", "os", samples, method_of(syscall), None,
                   {"loop_ns_subtracted": loop})


def lock_uncontended(*, quick: bool = False, number: int | None = None, repeats: int | None = None) -> Samples:
    """Acquire and release a ``threading.Lock`` nobody else holds.

    Method: ``timeit`` runs ``a(); r()`` (the lock's bound ``acquire``/``release``) in a loop, net of an
    empty loop. No other thread touches the lock, so this is the atomic instruction plus *two Python
    builtin calls* — the calls are most of it, and they are left in because Python code always pays them.
    A lock another thread is blocked on costs a wake-up instead: the ``lock_contended`` row.
    """
    number = number or (2_000 if quick else 5_000)
    repeats = repeats or (21 if quick else 51)
    ns = {"lock": threading.Lock()}
    samples, loop = python_cost("a(); r()", "a = lock.acquire; r = lock.release", number=number,
                                repeats=repeats, namespace=ns)
    return Samples("lock_uncontended", "lock acquire + release (uncontended)", "os", samples,
                   method_of(lock_uncontended), None, {"loop_ns_subtracted": loop})


def _ping_pong(cpu_a: int | None, cpu_b: int | None, rounds: int, warm: int) -> tuple[float, ...]:
    out: list[float] = []
    with pipe_pair() as (r1, w1, r2, w2, unblock):

        def pong() -> None:
            for _ in range(rounds + warm):
                if not os.read(r1, 1):
                    return
                os.write(w2, b"x")

        def ping() -> None:
            for i in range(rounds + warm):
                t0 = time.perf_counter_ns()
                os.write(w1, b"x")
                os.read(r2, 1)
                if i >= warm:
                    out.append((time.perf_counter_ns() - t0) / 2)

        run_pair(ping, pong, cpu_a, cpu_b, unblock)  # the pong thread reads EOF when ping ends early
    return tuple(out)


def context_switch(*, quick: bool = False, rounds: int | None = None) -> tuple[Samples, ...]:
    """Thread hand-off through a pipe, both threads pinned to one core, then to two different cores.

    Method: thread A writes one byte to a pipe and blocks reading a second pipe; thread B wakes, reads,
    and writes the byte back. A sample is one round trip divided by two (one hand-off each way). Each
    thread pins itself with ``os.sched_setaffinity``. On one core every hand-off is a real context switch;
    across cores it is a cross-CPU wake-up (an inter-processor interrupt, or waking an idle core).
    Overhead: two pipe syscalls per hand-off, the GIL changing hands, and the Python lines around them —
    this is what a hand-off costs *Python* threads, larger than a bare kernel context switch.
    """
    method = method_of(context_switch)
    rounds = rounds or (1000 if quick else 3000)
    cpus = usable_cpus()
    if not can_pin():  # the same core and another core cannot be chosen: one unpinned row, said so
        return (unavailable("context_switch_pinned", "thread hand-off, same core (context switch)", "os",
                            f"{UNPINNED}: no same-core row (the row below is unpinned)", method),
                Samples("context_switch_cross", "thread hand-off, unpinned (the scheduler's choice of cores)", "os",
                        _ping_pong(None, None, rounds, 100), method, UNPINNED, {"cpus": None}))
    out = [Samples("context_switch_pinned", "thread hand-off, same core (context switch)", "os",
                   _ping_pong(cpus[0], cpus[0], rounds, 100), method, None, {"cpus": [cpus[0]]})]
    if len(cpus) < 2:
        out.append(unavailable("context_switch_cross", "thread hand-off, across cores", "os",
                               "only one CPU is usable by this process, so there is no second core", method))
    else:
        out.append(Samples("context_switch_cross", "thread hand-off, across cores", "os",
                           _ping_pong(cpus[0], cpus[1], rounds, 100), method, None,
                           {"cpus": [cpus[0], cpus[1]]}))
    return tuple(out)


def page_fault(*, quick: bool = False, pages: int | None = None, repeats: int | None = None) -> Samples:
    """First touch of fresh private anonymous memory: the page fault that maps and zeroes a 4 KiB page — what a
    fresh ``malloc``'d block above glibc's mmap threshold pays.

    Method: each sample maps a fresh private anonymous region (``mmap`` with ``MAP_PRIVATE``: Python's default,
    ``MAP_SHARED``, would make it shared memory, whose faults take the heavier page-cache path), transparent
    huge pages switched off with
    ``madvise`` where possible, so each 4 KiB page faults on its own), then writes one byte per page with a
    strided numpy store, and divides the elapsed time by the pages. The store itself costs a few ns per
    page; the rest is the kernel allocating, zeroing and mapping the page. Unmapping is not timed.
    """
    pages = pages or 128
    repeats = repeats or (15 if quick else 41)
    samples, huge_off = [], True
    for _ in range(repeats):
        m = mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_PRIVATE)
        try:
            try:
                m.madvise(mmap.MADV_NOHUGEPAGE)
            except (AttributeError, OSError):
                huge_off = False
            view = np.frombuffer(m, dtype=np.uint8)
            t0 = time.perf_counter_ns()
            view[::PAGE] = 1
            samples.append((time.perf_counter_ns() - t0) / pages)
            del view
        finally:
            m.close()
    note = None if huge_off else ("could not switch off transparent huge pages: some touches may map 2 MiB at "
                                  "once, making the per-page figure too low")
    return Samples("page_fault", "page fault on first touch (4 KiB, private anonymous)", "os", tuple(samples),
                   method_of(page_fault), note, {"pages": pages})
