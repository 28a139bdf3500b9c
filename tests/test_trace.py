import asyncio
import contextvars
import threading

import pytest

from labkit.errors import BadInputError
from labkit.trace import (
    ServerTimingMetric,
    Trace,
    add,
    collect,
    current,
    format_server_timing,
    parse_server_timing,
    span,
)


def test_spans_with_fake_clock_are_exact(clock):
    with collect(clock) as trace:
        with span("parse"):
            clock.tick(1_500)
        with span("db"):
            clock.tick(200_000)
        with span("db"):
            clock.tick(100_000)
    assert [s.dur_ns for s in trace.spans] == [1_500, 200_000, 100_000]
    assert trace.totals_ns() == {"parse": 1_500, "db": 300_000}
    trace.add("db", count=2)
    assert trace.server_timing() == "db;dur=0.300;count=2, parse;dur=0.002"


def test_add_accumulates_time_and_counts_from_many_threads_into_the_request_that_started_them(clock):
    # GIVEN a request's trace, and work that adds to it from the event loop and from worker threads
    with collect(clock) as trace:
        trace.add("db", 0, count=0)                     # declared up front: shown even if nothing happens
        trace.add("cache", count=0)

        def query():
            for _ in range(1000):
                add("db", 5, count=1)

        ctx = contextvars.copy_context()
        threads = [threading.Thread(target=ctx.copy().run, args=(query,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        add("gc", 1_000_000, count=2, desc="process-wide")
        with span("db"):
            clock.tick(10_000)
    # THEN every add landed, none was lost to a race, spans and adds of one name are summed
    m = {x.name: x for x in trace.metrics()}
    assert m["db"].count == 4000 and m["db"].dur_ms == (4000 * 5 + 10_000) / 1e6
    assert m["cache"].count == 0 and m["cache"].dur_ms is None
    assert (m["gc"].count, m["gc"].desc) == (2, "process-wide")
    assert trace.server_timing().startswith("db;dur=0.030;count=4000, cache;count=0, gc;dur=1.000;")


def test_add_outside_a_trace_is_a_no_op_and_checks_names():
    add("db", 5, count=1)  # no trace collecting: dropped
    with collect() as trace, pytest.raises(BadInputError, match="not a valid Server-Timing token"):
        trace.add("bad name", 1)


def test_span_as_decorator_sync_and_async(clock):
    @span("compute")
    def compute():
        clock.tick(7)

    @span("io")
    async def io():
        clock.tick(11)

    with collect(clock) as trace:
        compute()
        asyncio.run(io())
    assert trace.totals_ns() == {"compute": 7, "io": 11}
    assert compute.__name__ == "compute"


def test_spans_outside_a_trace_are_dropped():
    assert current() is None
    with span("lost"):
        pass
    assert current() is None


def test_concurrent_asyncio_requests_do_not_mix():
    async def request(name, delay):
        with collect() as trace:
            with span(name):
                await asyncio.sleep(delay)
            await asyncio.gather(child(f"{name}-child"))
        return trace

    async def child(name):
        with span(name):
            await asyncio.sleep(0)

    async def main():
        return await asyncio.gather(request("a", 0.01), request("b", 0.005))

    ta, tb = asyncio.run(main())
    assert [s.name for s in ta.spans] == ["a", "a-child"]
    assert [s.name for s in tb.spans] == ["b", "b-child"]


def test_threads_started_with_a_copied_context_record_into_the_trace():
    with collect() as trace:
        ctx = contextvars.copy_context()
        t = threading.Thread(target=ctx.run, args=(lambda: span("worker").__enter__().__exit__(),))
        t.start()
        t.join()
        with span("main"):
            pass
    names = {s.name for s in trace.spans}
    assert names == {"worker", "main"}
    assert len({s.thread_id for s in trace.spans}) == 2


def test_bad_span_names_are_refused():
    with pytest.raises(BadInputError, match="Server-Timing token"):
        span("two words")


def test_server_timing_round_trip_with_tricky_values():
    metrics = [ServerTimingMetric("db", 1.25, None, {"count": "12"}),
               ServerTimingMetric("cache", None, 'hit, "warm"', {}),
               ServerTimingMetric("total", 3.0)]
    header = format_server_timing(metrics)
    assert header == 'db;dur=1.250;count=12, cache;desc="hit, \\"warm\\"", total;dur=3.000'
    parsed = parse_server_timing(header)
    assert parsed["db"].dur_ms == 1.25 and parsed["db"].count == 12
    assert parsed["cache"].desc == 'hit, "warm"' and parsed["cache"].dur_ms is None
    assert list(parsed) == ["db", "cache", "total"]


def test_collect_into_a_declared_trace_keeps_the_declared_order():
    # a request declares its stages before its trace is current, so a garbage collection's callback (which adds
    # to the current trace) cannot put gc first while the request starts
    t = Trace()
    t.add("parse", 0)
    t.add("gc", 0, 0)
    add("gc", 5, 1)  # nothing collecting yet: dropped, not added to t
    with collect(into=t) as got:
        assert got is t and current() is t
        add("db", 3, 1)
        add("gc", 7, 1)
    assert current() is None
    assert [m.name for m in t.metrics()] == ["parse", "gc", "db"] and t.metrics()[1].count == 1


def test_a_traces_header_is_its_metrics_formatted(clock):
    # server_timing() takes a shortcut past ServerTimingMetric (it runs on every response): same text
    with collect(clock) as trace:
        trace.add("db", 0, 0)
        with span("parse"):
            clock.tick(2_000)
        add("db", 300_000, count=2)
        add("cache", count=5, desc='hit, "warm"')
        add("size", count=-1)
        with span("db"):
            clock.tick(1_000)
        with span("late"):
            clock.tick(10)
        add("only_desc", desc="x")
    header = trace.server_timing()
    assert header == format_server_timing(trace.metrics())
    assert header == ('db;dur=0.301;count=2, cache;desc="hit, \\"warm\\"";count=5, size;count=-1, only_desc;desc=x, '
                      'parse;dur=0.002, late;dur=0.000')


@pytest.mark.parametrize("header, expected", [
    ("miss, db;dur=53, app;dur=47.2", {"miss": None, "db": 53.0, "app": 47.2}),   # the W3C spec's example
    ("cpu;dur=2.4;desc=CPU", {"cpu": 2.4}),
    ("a;dur=x, b;dur=1", {"a": None, "b": 1.0}),                                     # bad dur is ignored
    ("a;dur=1, a;dur=2", {"a": 1.0}),                                               # first one wins
    ("", {}),
])
def test_parse_server_timing_spec_examples(header, expected):
    assert {k: v.dur_ms for k, v in parse_server_timing(header).items()} == expected


def test_add_can_be_reentered_from_the_same_thread_as_a_gc_callback_would():
    # a collection can start while this thread is inside Trace.add, and the GC log's callback adds to the
    # same trace: that must not deadlock (run in a thread so a regression fails instead of hanging the suite)
    done = threading.Event()

    def scenario():
        with collect() as trace:
            with trace._lock:              # as if inside add() when the collector's callback runs
                add("gc", 1_000, count=1)
            done.set()

    t = threading.Thread(target=scenario, daemon=True)
    t.start()
    t.join(10)
    assert done.is_set(), "Trace.add deadlocked when re-entered from the same thread"
