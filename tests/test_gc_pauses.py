"""The GC pause recorder, its result value, toyshop's gc stage and GET /gc, and the charts over them."""

from __future__ import annotations

import gc
import time
import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # Starlette 1.x nudges towards httpx2; httpx still works for TestClient
    warnings.filterwarnings("ignore", message="Using `httpx`")
    from starlette.testclient import TestClient

from labkit import alloc, trace
from labkit.alloc import GCPauses, PauseRecorder
from labkit.errors import BadInputError
from labkit.toyshop import gclog
from labkit.toyshop.app import create_app
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.dataset import ensure


def _make_garbage(n: int = 3000) -> None:
    junk = []
    for i in range(n):
        a: dict = {"i": i}
        a["self"] = a  # a reference cycle: only the collector frees it
        junk.append([a])


def test_recorder_sees_each_collection_with_its_generation_and_what_it_freed():
    # GIVEN cycles that only the collector can free, WHEN collections run inside the block
    _make_garbage()
    with PauseRecorder() as rec:
        gc.collect(0)
        gc.collect(2)
    pauses = rec.result
    # THEN both are recorded, in order, with their generation, a duration, and the cycles collected
    gens = [p[2] for p in pauses.pauses]
    assert gens[-2:] == [0, 2] and pauses.count >= 2
    assert all(p[1] >= 0 for p in pauses.pauses) and pauses.column("collected").sum() >= 3000
    assert pauses.window_ns > 0 and 0 <= pauses.share <= 1
    assert pauses.python and pauses.threshold == tuple(gc.get_threshold())
    assert gc_callbacks_clean(rec)


def gc_callbacks_clean(rec: PauseRecorder) -> bool:
    return rec._callback not in gc.callbacks


def test_a_fake_clock_gives_exact_durations_and_the_buffer_stays_bounded():
    ticks = iter(range(0, 10**9, 1000))
    rec = PauseRecorder(limit=3, clock=lambda: next(ticks)).start()
    for _ in range(5):
        gc.collect(0)
    pauses = rec.stop()
    assert pauses.count == 3 and pauses.dropped == 2          # the oldest two went, and are counted
    assert {p[1] for p in pauses.pauses} == {1000}            # start and stop one tick apart
    assert "dropped" in str(pauses)


def test_the_three_forms_and_the_refusals():
    @PauseRecorder()
    def work():
        gc.collect(0)
    work()
    rec = PauseRecorder()
    with pytest.raises(BadInputError, match="not recording"):
        rec.stop()
    rec.start()
    with pytest.raises(BadInputError, match="already recording"):
        rec.start()
    rec.stop()
    with pytest.raises(BadInputError, match="limit"):
        PauseRecorder(limit=0)


def test_an_exception_in_on_pause_never_escapes_into_the_allocation_that_triggered_it():
    def boom(*_):
        raise RuntimeError("observer bug")
    with PauseRecorder(on_pause=boom) as rec:
        gc.collect(0)
    assert rec.result.count >= 1


def test_pauses_value_round_trips_and_slices(tmp_path):
    p = GCPauses(((0, 5_000, 0, 1, 0), (2_000_000, 30_000_000, 2, 40, 0), (3_000_000, 10_000, 1, 0, 0)), t0_ns=10,
                 window_ns=10_000_000, threshold=(700, 10, 10), python="3.11")
    assert p.max_ns == 30_000_000 and p.generation(2).count == 1 and p.total_ns == 30_015_000
    late = p.between(1_000_000, 5_000_000)
    assert [x[0] for x in late.pauses] == [1_000_000, 2_000_000] and late.t0_ns == 1_000_010
    frame = p.to_frame()
    assert list(frame.columns) == ["t_s", "ms", "generation", "collected", "uncollectable"] and frame["ms"].max() == 30
    s = p.by_generation()
    assert s.loc["gen 2", "max_ms"] == 30 and s.loc["all", "collections"] == 3
    assert p.summary() == str(p) and p.summary().startswith("3 GC pauses")
    back = GCPauses.load(p.save(tmp_path / "p.json"))
    assert back == p
    with pytest.raises(BadInputError):
        p.generation(3)


def test_charts_draw_pauses_beside_latency_and_a_histogram():
    import pandas as pd

    p = GCPauses(((0, 500_000, 0, 1, 0), (1_000_000_000, 30_000_000, 2, 40, 0)), t0_ns=0, window_ns=2 * 10**9)
    load = pd.DataFrame({"t_s": [0.1, 0.9, 1.0], "ns": [1e6, 2e6, 4e7], "status": [200, 200, 200]})
    spec = alloc.pauses_chart(load, p, min_gen=1).to_dict()
    assert len(spec["vconcat"]) == 2
    assert alloc.pause_histogram_chart(p).to_dict()["mark"]["type"] == "rect"
    with pytest.raises(BadInputError, match="no collections"):
        alloc.pause_histogram_chart(GCPauses((), 0))


@pytest.fixture(scope="module")
def client():
    db = ensure("small", quiet=True)
    with TestClient(create_app(db, FakeCatalog.from_db(db)), raise_server_exceptions=False) as c:
        yield c


def test_every_response_declares_the_gc_stage_with_its_caveat(client):
    st = trace.parse_server_timing(client.get("/health").headers["server-timing"])
    assert st["gc"].count is not None and "concurrency 1" in st["gc"].desc


def test_a_collection_inside_a_request_is_counted_in_its_header():
    # GIVEN the process's recorder and a request's trace, WHEN that request's code triggers collections
    gclog.recorder()
    with trace.collect() as t:
        gclog.declare(t)
        gc.collect(0)
        gc.collect(0)
    m = trace.parse_server_timing(t.server_timing())["gc"]
    # THEN the header counts them and their time; outside a request nothing is counted anywhere
    assert m.count == 2 and m.dur_ms > 0
    gc.collect(0)


def test_gc_log_answers_pauses_on_the_shared_clock(client):
    before = time.perf_counter_ns()
    gc.collect(1)
    body = client.get(f"/gc?since_ns={before}&objects=1").json()
    assert body["clock_shared"] is True and before <= body["now_ns"] <= time.perf_counter_ns()
    assert any(p[2] == 1 for p in body["pauses"]) and body["tracked_objects"] > 1000
    assert body["threshold"] == list(gc.get_threshold()) and body["python"]


@pytest.mark.parametrize("query, parameter", [("since_ns=-5", "since_ns"), ("since_ns=abc", "since_ns"),
                                              ("since_ns=32589158477190044729", "since_ns"),  # > int64: was a 500
                                              ("objects=2", "objects"), ("when=now", "when")])
def test_gc_log_refuses_bad_parameters_naming_them(client, query, parameter):
    r = client.get(f"/gc?{query}")
    assert r.status_code == 400 and r.json()["parameter"] == parameter


def test_overlapping_marks_the_requests_in_flight_during_a_long_pause_only():
    from types import SimpleNamespace

    # GIVEN requests at 0, 10, 20, 30 ms lasting 5 ms, a 4 ms pause at 12 ms and a 0.5 ms one at 31 ms
    load = SimpleNamespace(start_ns=np.array([0, 10, 20, 30]) * 1_000_000, samples_ns=np.full(4, 5_000_000))
    pauses = GCPauses(((12_000_000, 4_000_000, 2, 0, 0), (31_000_000, 500_000, 0, 0, 0)), 0, 40_000_000,
                      (700, 10, 10), 0, "3.11", True)
    # THEN only the request in flight during the long one counts; with min_ms below 0.5, the short one too
    assert alloc.overlapping(load, pauses).tolist() == [False, True, False, False]
    assert alloc.overlapping(load, pauses, min_ms=0.1).tolist() == [False, True, False, True]


@pytest.mark.slow
def test_during_load_puts_the_service_pauses_on_the_load_axis_and_compare_processes_pairs_rounds():
    from labkit import alloc
    from labkit.service import start

    with start(size="small") as a, start(size="small", variants={"gc": "tuned"}) as b:
        load, pauses = alloc.during_load(a, "/customers/1/export", rate=20, duration_s=1.0)
        assert load.responses >= 10 and pauses.source == f"toyshop pid {a.pid}"
        assert all(0 <= p[0] <= pauses.window_ns for p in pauses.pauses)
        assert abs(pauses.window_ns / 1e9 - load.duration_s) < 0.5
        cmp = alloc.compare_processes(a, b, "/health", rate=50, duration_s=0.5, rounds=3, warmup_s=0.1)
        assert cmp.names == ("gc=default", "gc=tuned") and cmp.rounds == 3
        assert cmp.p99.paired and "process-level" in str(cmp)
        assert set(cmp.to_frame()["process"]) == {"gc=default", "gc=tuned"}
        with pytest.raises(BadInputError, match="rounds"):
            alloc.compare_processes(a, b, "/health", rate=50, rounds=2)
        # several candidates in one run: one comparison each, all paired with the baseline's same rounds
        both = alloc.compare_processes(a, [b, a], "/health", rate=50, duration_s=0.3, rounds=3, warmup_s=0.1,
                                       names=("base", "tuned", "again"))
        assert [c.names for c in both] == [("base", "tuned"), ("base", "again")]
        assert both[0].p50_ns[0] == both[1].p50_ns[0] and both[0].p90.paired
        assert all(n >= 5 for n in both[0].requests[1]) and all(0 <= s <= 1 for s in both[0].overlap[1])
        with pytest.raises(BadInputError, match="one label per service"):
            alloc.compare_processes(a, [b], "/health", rate=50, rounds=3, names=("only",))
