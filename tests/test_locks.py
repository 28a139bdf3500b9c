"""labkit.locks (a lock that measures itself) and labkit.looplag (an event-loop lag monitor)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from labkit.errors import BadInputError
from labkit.locks import LockStats, MeteredLock
from labkit.looplag import LagMonitor, LagReport
from labkit.trace import collect


def test_an_uncontended_lock_counts_its_holds_exactly(clock):
    lock = MeteredLock("stats", clock=clock)
    with collect() as trace:
        with lock:
            clock.tick(300)
        assert lock.acquire()
        clock.tick(200)
        lock.release()
    s = lock.stats()
    assert s == LockStats("stats", acquisitions=2, contended=0, wait_s=0.0, hold_s=500e-9)
    assert s.mean_hold_s == 250e-9 and s.utilisation(1e-6) == pytest.approx(0.5)
    # THEN the request's trace has one metric: no wait, one count per acquisition
    assert trace.server_timing() == "stats;dur=0.000;count=2"


def test_a_contended_acquisition_times_its_wait_and_adds_it_where_it_waited():
    lock = MeteredLock()
    lock.acquire()
    traces = []

    def taker():
        with collect() as trace, lock:
            pass
        traces.append(trace)

    t = threading.Thread(target=taker)
    t.start()
    time.sleep(0.05)  # the taker is blocked on the lock meanwhile
    lock.release()
    t.join()
    s = lock.stats()
    assert (s.acquisitions, s.contended) == (2, 1) and 0.04 < s.wait_s < 5 and s.hold_s >= 0.04
    metric = traces[0].metrics()[0]
    assert metric.name == "lock" and metric.count == 1 and metric.dur_ms == pytest.approx(s.wait_s * 1e3)


def test_many_threads_keep_exact_counts_and_a_failed_try_counts_nothing():
    lock = MeteredLock()
    counter = [0]

    def work():
        for _ in range(2000):
            with lock:
                counter[0] += 1
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter[0] == 16_000 and lock.stats().acquisitions == 16_000
    lock.acquire()
    assert lock.acquire(blocking=False) is False and lock.acquire(timeout=0.01) is False and lock.locked()
    lock.release()
    assert lock.stats().acquisitions == 16_001 and not lock.locked()
    lock.reset()
    assert lock.stats() == LockStats("lock", 0, 0, 0.0, 0.0)
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()  # and the totals are untouched
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(blocking=False, timeout=1)
    assert lock.stats() == LockStats("lock", 0, 0, 0.0, 0.0) and repr(lock).startswith("MeteredLock('lock': 0")


def test_bad_names_and_elapsed_are_refused_with_what_to_do():
    with pytest.raises(BadInputError, match="Server-Timing token"):
        MeteredLock("my lock")
    with pytest.raises(BadInputError, match="> 0"):
        LockStats("x", 0, 0, 0.0, 0.0).utilisation(0)


def test_the_lag_monitor_sees_a_blocking_call_and_when():
    async def main():
        async with LagMonitor(interval_s=0.002) as mon:
            await asyncio.sleep(0.03)
            before = time.time()
            time.sleep(0.05)  # a blocking call on the loop: the timer cannot fire meanwhile
            await asyncio.sleep(0.03)
        return mon, before
    mon, before = asyncio.run(main())
    r = mon.report()
    assert r.samples >= 5 and r.worst_ms >= 40 and before <= r.worst_at <= before + 1
    assert r.over(40) >= 1 and r.over(0) == r.samples and r.p99_ms <= r.worst_ms
    assert not mon.running
    # THEN the report is a value that survives JSON
    back = LagReport.from_dict(r.to_dict())
    assert back == r and back.worst_at == r.worst_at
    assert set(r.to_dict(raw=False)) == {"interval_s", "samples", "worst_ms", "worst_at", "p99_ms", "dropped"}


def test_the_lag_monitor_runs_on_a_loop_in_another_thread_and_resets():
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever)
    t.start()
    try:
        mon = LagMonitor(interval_s=0.001).start(loop)
        time.sleep(0.05)
        assert mon.report().samples > 0
        mon.reset()
        assert mon.report().samples <= 2 and mon.running
        with pytest.raises(BadInputError, match="already running"):
            mon.start(loop)
        mon.stop()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join()
        loop.close()


def test_the_lag_monitor_says_what_it_needs():
    with pytest.raises(BadInputError, match="needs a loop"):
        LagMonitor().start()
    with pytest.raises(BadInputError, match="interval_s"):
        LagMonitor(interval_s=0)
    empty = LagReport(0.005, (), ())
    assert (empty.samples, empty.worst_ms, empty.worst_at, empty.p99_ms) == (0, 0.0, None, 0.0)
    assert "no sample" in str(empty)
