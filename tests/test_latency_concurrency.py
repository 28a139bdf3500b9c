"""The latency table's concurrency rows (lab 09 prices its models with them): each probe returns positive samples of
what it names, the rows order as their mechanisms must (a wake-up through the kernel costs more than an atomic, a
fresh interpreter more than a fork, a join more than the child's first line), and nothing is left running.
Never a speed threshold: only orderings that follow from what each row contains."""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import threading
import time

import numpy as np
import pytest

from labkit.latency import PROBES, concurrency, network, osprobes, table


def _positive(r):
    assert r.available, r.note
    assert len(r.samples_ns) > 1 and min(r.samples_ns) > 0, r
    return r


def test_a_contended_hand_off_costs_more_than_an_uncontended_acquire():
    # GIVEN the same threading.Lock operations with and without a thread blocked on the lock
    free = osprobes.lock_uncontended(number=2_000, repeats=7)
    contended = _positive(concurrency.lock_contended(rounds=200))
    # THEN the hand-off (a wake-up through the kernel) is dearer than the acquire nobody waits on
    assert contended.median_ns > free.median_ns
    # AND both directions of the ping-pong are kept, the warm-up dropped; the cores are named
    assert len(contended.samples_ns) == 2 * 200
    assert contended.extra["cpus"] and set(contended.extra["cpus"]) <= set(range(256))
    assert not [t for t in threading.enumerate() if t.name == "labkit-latency-peer"]


def test_gil_hand_off_is_positive_and_keeps_its_settings():
    r = _positive(concurrency.gil_handoff(rounds=100))
    assert len(r.samples_ns) == 100
    assert r.extra["switch_interval_s"] == sys.getswitchinterval()
    assert 0 < r.extra["settle_ns"] <= sys.getswitchinterval() * 1e9 / 4  # never long enough to force a switch
    assert not [t for t in threading.enumerate() if t.name == "labkit-latency-peer"]


def test_gil_settle_time_follows_a_short_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.0004)
    try:
        r = concurrency.gil_handoff(rounds=20)
    finally:
        sys.setswitchinterval(old)
    assert r.extra["settle_ns"] == pytest.approx(100_000)


def test_without_a_gil_the_hand_off_row_says_why(monkeypatch):
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)  # a free-threaded 3.13+ build
    r = concurrency.gil_handoff(rounds=10)
    assert not r.available and "without the GIL" in r.note


@pytest.mark.parametrize("probe", ["lock_contended", "gil_handoff"])
def test_ctrl_c_in_a_hand_off_leaves_no_thread_behind(monkeypatch, probe):
    # GIVEN a clock that raises KeyboardInterrupt in this thread after 50 reads (as Ctrl-C would, mid-run)
    me, reads = threading.get_ident(), [0]

    def clock():
        if threading.get_ident() == me:
            reads[0] += 1
            if reads[0] > 50:
                raise KeyboardInterrupt
        return time.perf_counter_ns()

    monkeypatch.setattr(concurrency, "_clock", clock)
    # WHEN the probe is interrupted THEN the interrupt reaches the caller and the peer thread has ended
    with pytest.raises(KeyboardInterrupt):
        getattr(concurrency, probe)(rounds=10_000)
    assert not [t for t in threading.enumerate() if t.name == "labkit-latency-peer"]


def test_asyncio_switch_runs_even_inside_a_running_loop():
    # GIVEN a caller whose thread already runs an event loop (a notebook's does)
    async def from_a_loop():
        return concurrency.asyncio_switch(batch=200, repeats=3)

    r = _positive(asyncio.run(from_a_loop()))
    # THEN the probe ran its own loop in a helper thread and says which loop it was
    assert len(r.samples_ns) == 3 and "EventLoop" in r.extra["loop"]


def test_starting_a_thread_costs_more_than_an_uncontended_lock_and_leaves_none_behind():
    before = threading.active_count()
    r = _positive(concurrency.thread_start(repeats=30))
    free = osprobes.lock_uncontended(number=2_000, repeats=7)
    assert r.median_ns > free.median_ns  # clone + the new thread's first run + two wake-ups, not an atomic
    assert threading.active_count() == before


def test_the_table_runs_the_concurrency_probes_in_order():
    names = ["asyncio", "lock_contended", "gil", "thread"]
    t = table(quick=True, progress=False, include=names)
    assert [r.key for r in t.rows] == ["asyncio_switch", "lock_contended", "gil_handoff", "thread_start"]
    assert all(r.available and r.family == "concurrency" for r in t.rows)
    # the keys each probe declares are the keys it produces (a failed probe's n/a rows are named from them)
    assert [k for n in names for k in PROBES[n][0]] == [r.key for r in t.rows]


@pytest.mark.slow
def test_spawn_costs_more_than_fork_and_join_more_than_the_first_line():
    rows = {r.key: r for r in concurrency.process_start(repeats={"fork": 5, "spawn": 2})}
    assert list(rows) == ["process_fork", "process_fork_join", "process_spawn", "process_spawn_join"]
    for r in rows.values():
        _positive(r)
    for how in ("fork", "spawn"):
        first, joined = (np.asarray(rows[k].samples_ns) for k in (f"process_{how}", f"process_{how}_join"))
        assert (joined > first).all()  # each start's join comes after its child's first line
    # a fresh interpreter is a fork plus an exec and the interpreter's start-up: never cheaper
    assert rows["process_spawn"].median_ns > rows["process_fork"].median_ns
    assert rows["process_spawn"].extra["start_method"] == "spawn"
    if sys.platform == "linux":  # a child writes to pages it shares with us: every start counts page faults
        assert all(r.extra["child_minor_faults"] > 0 for r in rows.values())
    assert multiprocessing.active_children() == []


@pytest.mark.slow
def test_an_unknown_start_method_is_a_labelled_row():
    rows = concurrency.process_start(methods=("teleport",))
    assert [r.key for r in rows] == ["process_teleport", "process_teleport_join"]
    assert all(not r.available and "teleport" in r.note and "fork" in r.note for r in rows)


@pytest.mark.slow
def test_a_new_connection_costs_more_than_a_system_call_and_leaves_no_listener():
    r = _positive(network.tcp_connect(rounds=50))
    assert len(r.samples_ns) == 50
    assert r.median_ns > osprobes.syscall(number=2_000, repeats=7).median_ns  # a handshake is several syscalls' work
    assert multiprocessing.active_children() == []
