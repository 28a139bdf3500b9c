"""labkit.load: exact counts, errors by kind, loopback only, intended-time latency, save/load, the knee rule.

Two kinds of test: the engine replayed on a fake clock with a fake connection (exact numbers, no sockets),
and short runs against a tiny in-test asyncio HTTP server (behaviour: counts, errors, reconnects).
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import threading
import time

import numpy as np
import pytest

import labkit
from labkit.errors import BadInputError, ResultsError
from labkit.load import LoadResult, Sweep, run, sweep
from labkit.load._options import Settings
from labkit.load._runner import build_result, prepare

# -- a tiny HTTP server in a thread ------------------------------------------------------------------------------


class TinyServer:
    """HTTP/1.1 on 127.0.0.1 with one behaviour per path; counts requests per path."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.stall_s = 0.0  # /stall: the first request freezes the whole server this long
        self._stalled = False
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.base_events.Server | None = None
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait()
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                self.counts[path] = self.counts[path] + 1
                route = path.split("?", 1)[0]
                if route == "/hang":
                    await asyncio.sleep(30)
                    return
                if route == "/stall" and not self._stalled and self.counts[path] == 10:
                    self._stalled = True
                    time.sleep(self.stall_s)  # freezes every connection, like a GC pause
                if route == "/503":
                    writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
                elif route == "/chunked":
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
                elif route == "/close":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                elif route == "/eof":  # body delimited by the server closing the connection
                    writer.write(b"HTTP/1.0 200 OK\r\n\r\nbody until close")
                elif route == "/drop":  # says keep-alive, then closes while idle
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()
                    writer.close()
                    return
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
                if route in ("/close", "/eof"):
                    await writer.drain()
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()

    def close(self) -> None:
        async def shutdown() -> None:
            assert self.server is not None
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def server():
    s = TinyServer()
    yield s
    s.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the engine on a fake clock: exact numbers ---------------------------------------------------------------------


class FakeConn:
    """Each request takes ``service[i]`` ns of fake time (default 1 ms) and returns ``status``."""

    def __init__(self, clock, service: dict[int, int], log: list, status: int = 200) -> None:
        self.clock, self.service, self.log, self.status, self.opens = clock, service, log, status, 1

    async def request(self, path: str) -> int:
        i = len(self.log)
        self.log.append((path, self.clock.now))
        self.clock.tick(self.service.get(i, 1_000_000))
        return self.status

    def close(self) -> None:
        pass


def _replay(clock, service: dict[int, int], **kw) -> tuple[LoadResult, list]:
    log: list = []

    async def fake_sleep(seconds: float) -> None:
        clock.tick(round(seconds * 1e9))

    engine = prepare("http://127.0.0.1:9/x", clock=clock, sleep=fake_sleep, spin_ns=0,
                     connect=lambda: FakeConn(clock, service, log), **kw)
    raw = asyncio.run(engine.run())
    return build_result(engine.s, raw, fingerprint={}), log


def test_open_loop_times_queued_requests_from_their_intended_send(clock):
    # GIVEN 100 req/s on one connection (a slot every 10 ms), 1 ms per request, except request 3 takes 55 ms
    r, log = _replay(clock, {3: 55_000_000}, rate=100, duration_s=0.1, connections=1)
    ms = (r.samples_ns / 1e6).tolist()
    # THEN the requests that queued behind the slow one carry their wait: 46, 37, 28, 19, 10 ms, then back to 1
    assert ms == [1, 1, 1, 55, 46, 37, 28, 19, 10, 1]
    # AND the time from the actual send (what a closed loop would report) hides that wait
    assert (r.service_ns / 1e6).tolist() == [1, 1, 1, 55, 1, 1, 1, 1, 1, 1]
    assert (r.lag_ns / 1e6).tolist() == [0, 0, 0, 0, 45, 36, 27, 18, 9, 0]
    assert (r.start_ns / 1e6).tolist() == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert r.responses == 10 and r.errors == {} and r.offered_rate == 100
    assert r.duration_s == 0.1 and r.achieved_rate == pytest.approx(100.0)  # the planned window


def test_closed_loop_reports_time_from_send_and_obeys_the_cap(clock):
    r, log = _replay(clock, {3: 55_000_000}, concurrency=1, duration_s=10, max_requests=6)
    assert (r.samples_ns / 1e6).tolist() == [1, 1, 1, 55, 1, 1]
    assert len(log) == 6 and r.mode == "closed" and r.offered_rate is None
    assert r.duration_s == pytest.approx(0.060) and r.achieved_rate == pytest.approx(100.0)  # cut short by the cap


def test_warmup_requests_are_sent_but_not_counted(clock):
    r, log = _replay(clock, {}, rate=100, duration_s=0.05, warmup_s=0.03, connections=1)
    assert len(log) == 8 and r.warmup_requests == 3 and r.responses == 5
    assert (r.start_ns / 1e6).tolist() == [0, 10, 20, 30, 40]


def test_poisson_arrivals_are_seeded_and_average_the_rate(clock):
    a, _ = _replay(clock, {0: 0}, rate=1000, duration_s=2, connections=4, arrivals="poisson", seed=7)
    b, _ = _replay(type(clock)(), {0: 0}, rate=1000, duration_s=2, connections=4, arrivals="poisson", seed=7)
    assert np.array_equal(a.start_ns, b.start_ns)
    gaps = np.diff(np.sort(a.start_ns))
    assert 1800 < a.responses < 2200 and gaps.std() / gaps.mean() > 0.8  # exponential gaps: CV ≈ 1


def test_slots_that_wait_longer_than_the_timeout_are_counted_unsent(clock):
    # one connection, 100 req/s for 0.1 s, and the first request takes 1 s: its 9 followers waited more than
    # timeout_s (0.2 s) for the connection, so they are never sent -- and counted
    r, log = _replay(clock, {0: 1_000_000_000}, rate=100, duration_s=0.1, connections=1, timeout_s=0.2)
    assert r.errors == {"unsent": 9} and r.responses == 1 and r.requests == 10


# -- input checks --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://10.0.0.1/", "http://192.168.1.5:8000/x", "http://example.com/",
                                 "http://[2001:db8::1]/", "https://127.0.0.1/", "ftp://127.0.0.1/"])
def test_only_loopback_http_is_targeted(url):
    with pytest.raises(BadInputError, match="loopback|http"):
        run(url, rate=10, duration_s=1)


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/", "http://127.8.9.10:1/", "http://localhost:1/",
                                 "http://[::1]:1/"])
def test_loopback_forms_are_accepted(url):
    from labkit.load._options import parse_target

    target = parse_target(url)
    assert target.port == 1 and target.host.strip("[]") in {"127.0.0.1", "127.8.9.10", "localhost", "::1"}
    assert prepare(url, rate=10, duration_s=1).s.url == url


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rate": 10, "concurrency": 2}, "exactly one"),
    ({}, "exactly one"),
    ({"rate": -5}, "rate"),
    ({"rate": float("nan")}, "rate"),
    ({"concurrency": 0}, "concurrency"),
    ({"concurrency": 1.5}, "integer"),
    ({"rate": 10, "duration_s": 0}, "duration_s"),
    ({"rate": 10, "duration_s": 10**6}, "duration_s"),
    ({"rate": 10, "max_requests": 0}, "max_requests"),
    ({"rate": 10, "timeout_s": -1}, "timeout_s"),
    ({"rate": 10, "arrivals": "bursty"}, "arrivals"),
    ({"concurrency": 2, "arrivals": "poisson"}, "open loop"),
    ({"concurrency": 2, "connections": 5}, "connections"),
    ({"rate": 10, "paths": ["no-slash"]}, "paths"),
    ({"rate": 10, "cpus": [9999]}, "cpus"),
])
def test_bad_knobs_say_how_to_fix(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        run("http://127.0.0.1:1/", **{"duration_s": 1, **kwargs})


# -- against a real (tiny) server ----------------------------------------------------------------------------------


def test_counts_are_exact_with_warmup(server):
    r = run(server.url + "/ok", rate=500, duration_s=0.2, warmup_s=0.1)
    assert r.responses == 100 and r.warmup_requests == 50 and r.status_counts == {200: 100}
    assert server.counts["/ok"] == 150 and r.errors == {}


def test_progress_bar_and_pinning(server, capsys):
    import os

    cpu = min(os.sched_getaffinity(0))
    r = run(server.url + "/ok", rate=200, duration_s=0.3, progress=True, cpus={cpu})
    assert r.responses == 60
    assert "req/s" in capsys.readouterr().err  # tqdm writes to stderr outside notebooks
    assert os.sched_getaffinity(0) != {cpu} or len(os.sched_getaffinity(0)) == 1  # only the generator was pinned


def test_pinning_where_the_platform_cannot_is_refused_saying_what_to_do(server, monkeypatch):
    import os

    from labkit.errors import BadInputError

    monkeypatch.delattr(os, "sched_setaffinity")  # macOS, Windows
    with pytest.raises(BadInputError, match="this platform does not have .*leave cpus out"):
        run(server.url + "/ok", rate=200, duration_s=0.3, cpus={0})


def test_a_background_load_runs_while_the_caller_measures_and_stops_when_told(server):
    import time

    from labkit.load import background

    # GIVEN a long open loop in the background
    with background(server.url + "/ok", rate=200, duration_s=30, warmup_s=0.1, name="bg") as bg:
        bg.warm()
        # WHEN the caller does its own work meanwhile
        before = server.counts.get("/ok", 0)
        time.sleep(0.25)
        during = server.counts.get("/ok", 0) - before
        assert bg.running
    # THEN the load ran during it, and leaving the block stopped it early with a result
    assert not bg.running and during >= 20
    assert bg.result.label == "bg" and 20 <= bg.result.responses < 200 and bg.result.errors == {}
    assert bg.result.warmup_requests == 20 and bg.result.t0_ns > 0


def test_a_background_load_can_run_to_its_end_and_says_what_went_wrong(server):
    from labkit.load import background

    bg = background(server.url + "/ok", rate=100, duration_s=0.2)
    with pytest.raises(RuntimeError, match="not ended yet"):
        _ = bg.result
    assert bg.wait().responses == 20 and bg.result is bg.wait()
    with pytest.raises(BadInputError, match="loopback"):
        background("http://10.0.0.1:80/", rate=10)


def test_request_cap_ends_the_run(server):
    r = run(server.url + "/ok", rate=1000, duration_s=30, max_requests=30)
    assert r.responses == 30 and server.counts["/ok"] == 30
    assert r.duration_s < r.settings.duration_s  # measured to its last response: cut short, not the planned 30 s


@pytest.mark.parametrize("path", ["/chunked", "/close", "/eof", "/drop"])
def test_body_framings_and_reconnects(server, path):
    r = run(server.url + path, concurrency=2, duration_s=5, max_requests=10)
    assert r.status_counts == {200: 10} and r.errors == {} and server.counts[path] == 10
    if path != "/chunked":
        assert r.connections_opened == 10  # the server closed each connection: one per request
    else:
        assert r.connections_opened == 2


def test_non_2xx_are_counted_as_errors_and_kept_apart_by_path(server):
    r = run(server.url, concurrency=1, duration_s=5, max_requests=20, paths=["/ok", "/503"])
    assert r.status_counts == {200: 10, 503: 10} and r.errors == {"http_503": 10}
    assert r.ok == 10 and r.error_rate == 0.5
    assert r.select("/503").responses == 10 and set(r.select("/ok").statuses.tolist()) == {200}
    assert r.percentiles((50,), ok_only=True)[50] > 0
    assert "http_503 10" in r.summary()


def test_timeouts_are_counted_not_dropped(server):
    r = run(server.url + "/hang", concurrency=2, duration_s=0.3, timeout_s=0.1)
    # each of the two connections sent at least its first request, and every request sent timed out
    assert r.responses == 0 and r.errors["timeout"] == server.counts["/hang"] >= 2
    assert "timeout" in r.summary()


def test_open_loop_budget_counts_every_slot_as_timeout_or_unsent(server):
    # two connections stuck on a server that never answers: each slot either timed out or never got sent
    r = run(server.url + "/hang", rate=100, duration_s=0.3, connections=2, timeout_s=0.1)
    assert r.responses == 0 and r.requests == 30
    timeouts, unsent = r.errors.get("timeout", 0), r.errors.get("unsent", 0)
    assert timeouts == server.counts["/hang"] and timeouts + unsent == 30


class HangingConn:
    """A connection whose every request gets no answer: it lets ``hold_ns`` of fake time pass, then waits
    until the engine's watchdog cancels it."""

    def __init__(self, clock, hold_ns: int, log: list) -> None:
        self.clock, self.hold_ns, self.log, self.opens = clock, hold_ns, log, 1

    async def request(self, path: str) -> int:
        self.log.append(self.clock.now)
        self.clock.tick(self.hold_ns)
        await asyncio.Event().wait()
        return 200

    def close(self) -> None:
        pass


def test_open_loop_drains_within_twice_the_timeout(clock):
    # GIVEN 100 req/s for 0.3 s on two connections to a server that never answers, timeout_s = 0.1
    log: list = []

    async def fake_sleep(seconds: float) -> None:
        clock.tick(round(seconds * 1e9))

    engine = prepare("http://127.0.0.1:9/x", clock=clock, sleep=fake_sleep, spin_ns=0, rate=100, duration_s=0.3,
                     connections=2, timeout_s=0.1, connect=lambda: HangingConn(clock, 100_000_000, log))
    r = build_result(engine.s, asyncio.run(engine.run()), fingerprint={})
    # THEN every slot is accounted for (timed out, or never sent after waiting timeout_s for a connection)
    assert r.responses == 0 and r.errors.get("timeout", 0) == len(log)
    assert r.errors.get("timeout", 0) + r.errors.get("unsent", 0) == 30
    # AND the run ended within duration + 2 × timeout_s of fake time: queued ≤ timeout_s, then ≤ timeout_s in flight
    assert r.duration_s <= 0.3 + 2 * 0.1


def test_select_by_predicate_splits_an_interleaved_run(server):
    paths = [f"/ok?id={i}&v={v}" for i in range(3) for v in ("a", "b")]
    r = run(server.url, concurrency=1, duration_s=5, max_requests=12, paths=paths)
    a, b = r.select(lambda p: p.endswith("v=a"), name="A"), r.select(lambda p: p.endswith("v=b"))
    assert a.responses == b.responses == 6 and all(p.endswith("v=a") for p in a.paths)
    assert a.label == "A" and r.select(paths[0]).label == paths[0]
    assert set(a.to_frame()["path"]) == {p for p in paths if p.endswith("v=a")}
    with pytest.raises(BadInputError, match="predicate"):
        r.select("/nope")


def test_connection_refused_is_counted():
    r = run(f"http://127.0.0.1:{_free_port()}/", concurrency=1, duration_s=5, max_requests=5)
    assert r.errors == {"connect": 5} and r.responses == 0 and r.requests == 5
    assert "no response at all" in r.summary()


def test_a_server_stall_shows_in_every_request_queued_behind_it(server):
    # GIVEN one connection at 200 req/s (a slot every 5 ms) and a server that freezes for 150 ms once
    server.stall_s = 0.15
    r = run(server.url + "/stall", rate=200, duration_s=0.5, connections=1)
    lat_ms, svc_ms = r.samples_ns / 1e6, r.service_ns / 1e6
    lag_ms = lat_ms - svc_ms
    # THEN every slot is answered, and the request that hit the stall took at least the stall
    assert r.responses == 100 and svc_ms.max() >= 150
    # AND the k-th slot after it (5k ms later) could not be sent before the stall ended: it waited at least
    # 150 - 5k ms, which its latency from the intended send carries and the time from its actual send hides.
    # (Lower bounds only: a busy machine makes the waits longer, never shorter.)
    assert np.count_nonzero(lag_ms > 50) >= 19
    assert lag_ms.sum() >= sum(150 - 5 * k for k in range(1, 30))
    assert np.all(lat_ms >= svc_ms)


def test_run_works_inside_a_running_event_loop(server):
    # Jupyter runs an event loop in the kernel's thread; run() must still work from a cell
    async def cell() -> LoadResult:
        return run(server.url + "/ok", concurrency=1, duration_s=2, max_requests=5)

    assert asyncio.run(cell()).responses == 5


def test_run_async_on_the_callers_loop(server):
    r = asyncio.run(labkit.load.run_async(server.url + "/ok", concurrency=1, duration_s=2, max_requests=7))
    assert r.responses == 7


# -- values: frames, files, compare, sweeps ------------------------------------------------------------------------


def test_save_load_round_trip(server, tmp_path):
    before = time.perf_counter_ns()
    r = run(server.url, concurrency=1, duration_s=5, max_requests=20, paths=["/ok", "/503"])
    # the measured start on the machine-wide clock: after the call began, before its first response arrived
    assert before < r.t0_ns and r.t0_ns + int(r.start_ns[0]) + int(r.samples_ns[0]) < time.perf_counter_ns()
    back = LoadResult.load(r.save(tmp_path / "run.json"))
    assert back.t0_ns == r.t0_ns and r.select("/ok").t0_ns == r.t0_ns
    old = json.loads((tmp_path / "run.json").read_text())
    del old["t0_ns"]  # a file saved before t0_ns was recorded
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert LoadResult.load(tmp_path / "old.json").t0_ns == 0
    for name in ("samples_ns", "service_ns", "start_ns", "statuses", "path_ids"):
        assert np.array_equal(getattr(back, name), getattr(r, name))
    assert back.settings == r.settings and back.paths == r.paths and back.errors == r.errors
    assert back.status_counts == r.status_counts and back.achieved_rate == r.achieved_rate
    assert back.fingerprint == r.fingerprint and back.percentiles() == r.percentiles()
    with pytest.raises(ResultsError):
        Sweep.load(tmp_path / "run.json")


def test_frame_histogram_and_compare(server):
    r = run(server.url + "/ok", concurrency=1, duration_s=5, max_requests=50)
    df = r.to_frame()
    assert list(df.columns) == ["t_s", "ns", "service_ns", "status", "ok", "path", "name"] and len(df) == 50
    assert set(df["name"]) == {"closed c=1"}
    assert r.histogram.get_total_count() == 50
    c = labkit.compare(r, r)  # compare() reads samples_ns (and warnings) of any measured result
    assert c.ratio == pytest.approx(1.0)


def _synthetic(rate: float, achieved: float, p99_ms: float, errors: int = 0) -> LoadResult:
    settings = Settings(url="http://127.0.0.1:1/", mode="open", rate=rate, concurrency=None, arrivals="constant",
                        duration_s=1.0, max_requests=10**6, timeout_s=1.0, connections=8, warmup_s=0.0, seed=0,
                        paths=None, picker=None)
    # every request due in the 1-s window is answered, the last ones late when the service could not keep up
    n = round(rate) - errors
    samples = np.full(n, 1_000_000, dtype=np.int64)
    samples[-max(2, n // 50):] = int(p99_ms * 1e6)
    return LoadResult(settings=settings, samples_ns=samples, service_ns=samples.copy(),
                      start_ns=np.arange(n, dtype=np.int64), statuses=np.full(n, 200, dtype=np.int16),
                      path_ids=np.zeros(n, dtype=np.int32), paths=("/",), status_counts={200: n},
                      errors={"timeout": errors} if errors else {}, error_examples={}, offered_rate=rate,
                      achieved_rate=achieved, duration_s=n / achieved)


def test_knee_rule():
    flat = [_synthetic(100, 100, 2), _synthetic(200, 199, 2.5)]
    assert Sweep(tuple(flat)).knee() is None
    bent = Sweep(tuple(flat + [_synthetic(300, 299, 7), _synthetic(400, 300, 50)]))
    k = bent.knee()
    assert k is not None and k.rate == 300 and k.last_good_rate == 200 and "P99" in k.reason
    sat = Sweep((_synthetic(100, 100, 2), _synthetic(200, 150, 2)))
    assert sat.knee().rate == 200 and "saturated" in sat.knee().reason
    failing = Sweep((_synthetic(100, 100, 2), _synthetic(200, 200, 2, errors=50)))
    assert "failing" in failing.knee().reason
    df = bent.to_frame()
    assert df["offered"].tolist() == [100, 200, 300, 400] and "p99_ns" in df.columns


def test_in_a_report_run_the_load_bar_is_text_on_the_terminal(server, monkeypatch, capfd):
    from labkit import progress

    # GIVEN the kernel of a `labkit report` run: a notebook whose bars go to the terminal's stderr
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setenv("PERFLAB_PROGRESS_TO", "stderr")
    # WHEN a load runs THEN its bar over seconds is drawn there, with the rate
    run(server.url + "/ok", rate=100, duration_s=0.5)
    err = capfd.readouterr().err
    assert "100 req/s" in err and "/0.5 s" in err, err


def test_sweep_runs_each_rate_and_round_trips(server, tmp_path):
    sw = sweep(server.url + "/ok", [100, 200], duration_s=0.2, warmup_s=0.05, pause_s=0)
    assert [s.responses for s in sw.steps] == [20, 40]
    back = Sweep.load(sw.save(tmp_path / "sweep.json"))
    assert [s.responses for s in back.steps] == [20, 40]
    assert "knee" in sw.summary()
    with pytest.raises(BadInputError):
        sweep(server.url, [])


def test_charts_build_from_results(server):
    import labkit.charts as charts

    r = run(server.url + "/ok", rate=200, duration_s=0.3)
    assert labkit.load.timeline_chart(r, window_s=0.1).to_dict()["mark"]["type"] == "line"
    assert charts.cdf_chart(r).to_dict()  # the generic builders read to_frame()'s ns/name columns
    bent = Sweep((_synthetic(100, 100, 2), _synthetic(200, 199, 2.5), _synthetic(300, 200, 50)))
    assert "knee at 300" in str(labkit.load.knee_chart(bent).to_dict()["title"])
    with pytest.raises(BadInputError):
        labkit.load.timeline_chart(r, window_s=0)


def test_poisson_steps_are_judged_against_their_own_schedule(clock):
    # GIVEN a Poisson run whose window happened to hold fewer arrivals than the nominal rate promises
    r, _ = _replay(clock, {}, rate=100, duration_s=0.5, connections=4, arrivals="poisson", seed=3)
    # THEN it kept up with what was actually scheduled, whatever the nominal rate says
    assert r.scheduled_rate == pytest.approx(r.requests / 0.5)
    assert r.achieved_rate == pytest.approx(r.scheduled_rate)
    assert Sweep((r,)).knee() is None
    closed, _ = _replay(type(clock)(), {}, concurrency=1, duration_s=0.01)
    assert closed.scheduled_rate is None


def test_sweep_stops_once_clearly_past_the_knee(monkeypatch):
    from labkit.load import ratesweep as sweep_mod

    # GIVEN a service that keeps up to 300 req/s and saturates beyond
    def fake_run(url, *, rate, **kw):
        return _synthetic(rate, min(rate, 300), 2 if rate <= 300 else 40)

    monkeypatch.setattr(sweep_mod, "run", fake_run)
    # WHEN swept from 100 to 1000 by 100, stopping after two steps past the knee
    sw = sweep_mod.sweep("http://127.0.0.1:1/", range(100, 1001, 100), pause_s=0, progress=False)
    # THEN it ran 400 and 500 (both broke a rule) and no further
    assert [s.offered_rate for s in sw.steps] == [100, 200, 300, 400, 500]
    assert sw.knee().rate == 400 and sw.knee().last_good_rate == 300
    # AND it suggests a finer sweep between the last good rate and the knee
    assert sw.next_rates(4) == (320.0, 340.0, 360.0, 380.0)
    everything = sweep_mod.sweep("http://127.0.0.1:1/", range(100, 1001, 100), pause_s=0, progress=False,
                                 stop_after=None)
    assert len(everything.steps) == 10
    with pytest.raises(BadInputError, match="stop_after"):
        sweep_mod.sweep("http://127.0.0.1:1/", [100], stop_after=0)


def test_a_long_sweep_step_shows_how_far_it_is_while_it_runs(monkeypatch):
    import threading

    from labkit import progress
    from labkit.load import ratesweep as sweep_mod

    # GIVEN a sweep's bar, and steps that last until the bar has said how far the step is
    said: list[str] = []
    heard = threading.Event()

    class Bar:
        def set_postfix_str(self, text, refresh=True):
            said.append(text)
            if text.startswith("step"):
                heard.set()

        def update(self, n=1):
            pass

        def close(self):
            pass

    def slow_run(url, *, rate, **kw):
        assert heard.wait(10), "no progress during the step"
        heard.clear()
        return _synthetic(rate, rate, 2)

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.01)
    monkeypatch.setattr(sweep_mod, "steps_bar", lambda *a, **k: Bar())
    monkeypatch.setattr(sweep_mod, "run", slow_run)
    # WHEN two steps of 40 s each (warm-up included) run
    sweep_mod.sweep("http://127.0.0.1:1/", [100, 200], duration_s=39, warmup_s=1, pause_s=0, progress=True)
    # THEN during each one the bar said which step, at which rate, and how far of its 40 s
    assert any(t.startswith("step 1 at 100 req/s: ") and t.endswith(" of 40 s") for t in said), said
    assert any(t.startswith("step 2 at 200 req/s: ") for t in said), said


def test_a_sweep_without_a_knee_says_so_and_suggests_higher_rates():
    sw = Sweep((_synthetic(100, 100, 2), _synthetic(200, 200, 2.2), _synthetic(400, 400, 2.5)))
    assert sw.knee() is None
    assert sw.next_rates(4) == (600.0, 800.0, 1000.0, 1200.0)
    assert any("no knee between 100 and 400 req/s" in w and "[600.0, 800.0" in w for w in sw.warnings)
    assert "no knee between" in sw.summary()
    # the lowest rate already broke a rule: sweep lower
    low = Sweep((_synthetic(100, 60, 2), _synthetic(200, 90, 40)))
    assert low.knee().last_good_rate is None and low.next_rates(3) == (25.0, 50.0, 75.0)
    assert "sweep lower" in low.summary()


def test_a_busy_machine_is_flagged_on_the_run_and_the_sweep():
    from dataclasses import replace

    quiet = replace(_synthetic(100, 100, 2), fingerprint={"cpu": {"others_cores": 0.05, "cores": 2.0}})
    busy = replace(_synthetic(200, 200, 2), fingerprint={"cpu": {"others_cores": 0.9, "cores": 2.0,
                                                                 "cpu_pressure": 0.6}})
    assert not any("busy" in w for w in quiet.warnings)
    assert any("other programs used 0.90 of 2 cores" in w and "60 %" in w for w in busy.warnings)
    assert any("1 of 2 steps ran on a busy machine" in w for w in Sweep((quiet, busy)).warnings)


def test_runs_record_the_cpu_of_the_machine_meanwhile(server):
    r = run(server.url + "/ok", rate=100, duration_s=0.2)
    cpu = r.fingerprint["cpu"]
    assert set(cpu) >= {"wall_s", "cores", "ours_cores", "others_cores", "steal_cores"}
    # the window covers the run (its last arrival may fall a little short of duration_s): never a speed
    assert cpu["wall_s"] > 0.1 and cpu["ours_cores"] >= 0 and cpu["others_cores"] >= 0
