"""labkit.queueing: Little's law from the client's numbers and the service's count, pool studies, the panel.

Exact numbers on synthetic load results; the measuring functions once against a real toyshop (slow).
"""

from __future__ import annotations

import numpy as np
import pytest

from labkit.errors import BadInputError
from labkit.load import LoadResult
from labkit.load._options import Settings
from labkit.queueing import (
    Observation,
    OrderPaths,
    PoolStudy,
    TailRounds,
    in_flight_chart,
    little_chart,
    points_chart,
    pool_chart,
    pool_study,
    runs_table,
    tail_rounds,
)


def synthetic(rate: float | None, latencies_ms: list[float], *, achieved: float | None = None,
              statuses: list[int] | None = None, lag_ms: float = 0.0, name: str = "",
              others_cores: float | None = None) -> LoadResult:
    n = len(latencies_ms)
    settings = Settings(url="http://127.0.0.1:1/", mode="open" if rate else "closed", rate=rate,
                        concurrency=None if rate else 4, arrivals="poisson", duration_s=1.0, max_requests=10**6,
                        timeout_s=1.0, connections=8, warmup_s=0.0, seed=0, paths=None, picker=None)
    service = np.asarray(latencies_ms, dtype=float) * 1e6
    st = np.asarray(statuses or [200] * n, dtype=np.int16)
    errors = {f"http_{c}": int((st == c).sum()) for c in set(st.tolist()) if not 200 <= c < 300}
    fp = {"cpu": {"others_cores": others_cores, "cores": 2.0}} if others_cores is not None else {}
    return LoadResult(settings=settings, samples_ns=(service + lag_ms * 1e6).astype(np.int64),
                      service_ns=service.astype(np.int64), start_ns=np.arange(n, dtype=np.int64),
                      statuses=st, path_ids=np.zeros(n, dtype=np.int32), paths=("/",),
                      status_counts={}, errors=errors, error_examples={}, offered_rate=rate,
                      achieved_rate=achieved if achieved is not None else float(n), duration_s=1.0,
                      fingerprint=fp, name=name)


def observation(load, t_s, in_flight, served, w_app_ns, mean_in_flight):
    """An Observation whose service reports ``served`` running totals, each request ``w_app_ns`` inside the app,
    and a count whose time average over the samples is ``mean_in_flight``."""
    t_s = np.asarray(t_s, dtype=float)
    now = np.round(t_s * 1e9).astype(np.int64) + 10**12
    return Observation(result=load, t_s=t_s, in_flight=np.asarray(in_flight), served=np.asarray(served),
                       time_in_app_ns=np.asarray(served) * w_app_ns, now_ns=now,
                       in_flight_ns=np.round((now - now[0]) * mean_in_flight).astype(np.int64))


def test_littles_law_from_the_clients_numbers_and_the_services_own():
    # GIVEN 200 req/s, each request 5 ms from send to last byte, 4 ms of it inside the app, and a service whose
    # count averaged 0.8 over the run (its random samples happened to read lower)
    obs = observation(synthetic(200, [5.0] * 200), np.linspace(0, 1, 5), [0, 1, 0, 1, 1], [0, 50, 100, 150, 200],
                      4_000_000, 0.8)
    # THEN L = λ W from the client predicts 1.0, the app's own W gives 0.8, and the service counted 0.8
    assert obs.arrival_rate == 200 and obs.time_in_system_s == pytest.approx(0.005)
    assert obs.predicted_in_flight == pytest.approx(1.0)
    assert obs.time_in_app_s == pytest.approx(0.004)
    assert obs.measured_in_flight == pytest.approx(0.8) and obs.ratio == pytest.approx(0.8)
    assert obs.sampled_in_flight == pytest.approx(0.6)
    assert "L predicted 1.00" in obs.summary() and "Inside the app W = 4.00 ms" in obs.summary()
    assert list(obs.to_frame().columns) == ["t_s", "in_flight", "name"]


def test_an_observation_saves_and_loads(tmp_path):
    obs = observation(synthetic(100, [2.0] * 100), [0.1, 0.5], [0, 3], [10, 60], 1_500_000, 0.15)
    back = Observation.load(obs.save(tmp_path / "obs.json"))
    assert back.measured_in_flight == pytest.approx(0.15) and back.time_in_app_s == pytest.approx(0.0015)
    assert np.allclose(back.t_s, obs.t_s) and back.result.responses == 100


def test_one_sample_gives_no_average_and_no_app_time():
    obs = observation(synthetic(10, [1.0] * 10), [0.1], [0], [5], 100, 0.0)
    assert np.isnan(obs.time_in_app_s) and np.isnan(obs.measured_in_flight)


def test_runs_table_reads_every_run_at_a_glance():
    ok = synthetic(100, [1.0] * 98 + [9.0, 9.0], achieved=99.0, lag_ms=0.5, name="quiet", others_cores=0.1)
    shed = synthetic(300, [1.0] * 90 + [0.2] * 10, statuses=[200] * 90 + [503] * 10, name="shedding")
    df = runs_table(ok, shed)
    assert df["name"].tolist() == ["quiet", "shedding"]
    assert df.loc[0, "kept_up"] == pytest.approx(0.99) and df.loc[0, "lag_p99_ms"] == pytest.approx(0.5)
    assert df.loc[0, "others_cores"] == pytest.approx(0.1) and np.isnan(df.loc[1, "others_cores"])
    assert df.loc[1, "shed"] == 10 and df.loc[1, "other_errors"] == 0 and df.loc[1, "ok_per_s"] == 90
    assert df.loc[1, "p99_ok_ms"] == pytest.approx(1.0)
    with pytest.raises(BadInputError):
        runs_table()
    with pytest.raises(BadInputError, match="LoadResults"):
        runs_table(object())


def _study() -> PoolStudy:
    cap = {40: 400.0, 1: 250.0, 4: 420.0}
    p99 = {40: [9.0, 30.0], 1: [4.0, 200.0], 4: [3.0, 8.0]}
    return PoolStudy(
        pools=(40, 1, 4), reference=40, fractions=(0.3, 0.8),
        capacity=tuple(synthetic(None, [1.0] * 10, achieved=cap[p]) for p in (40, 1, 4)),
        runs=tuple(tuple(synthetic(r, [1.0] * 98 + [p99[p][j]] * 2, name=f"pool={p}") for j, r in
                         enumerate((120.0, 320.0))) for p in (40, 1, 4)))


def test_a_pool_study_reads_by_pool_and_fraction(tmp_path):
    s = _study()
    assert s.rates == (120.0, 320.0) and s.capacity_of(1) == 250.0
    assert s.best() == 4 and s.best(0.3) == 4
    assert s.at(1, 0.8).percentiles((99,))[99] == pytest.approx(200e6)
    df = s.to_frame()
    assert len(df) == 6 and set(df.columns) >= {"pool", "capacity", "fraction", "offered", "p99_ms", "p99_ok_ms"}
    with pytest.raises(BadInputError, match="fractions"):
        s.at(2, 0.8)
    back = PoolStudy.load(s.save(tmp_path / "study.json"))
    assert back.pools == s.pools and back.best() == 4
    assert pool_chart(s).to_dict()["hconcat"]


@pytest.mark.parametrize("pools, kw, match", [([], {}, "pools"), ([0], {}, "pools"), ([2, 2], {}, "twice"),
                                              ([1], {"reference": 0}, "reference"),
                                              ([1], {"fractions": (0,)}, "fractions"),
                                              ([1], {"reference_rate": 0}, "reference_rate")])
def test_pool_study_refuses_bad_settings(pools, kw, match):
    with pytest.raises(BadInputError, match=match):
        pool_study(pools, paths=["/health"], **kw)


def test_tail_rounds_gives_each_side_its_own_paths(monkeypatch):
    # GIVEN one service and two request switches, WHEN the sides take turns, THEN each side sends its own paths
    from labkit.queueing import pools

    sent = []

    def fake_run(url, *, paths, name, **kw):
        sent.append((name.split(" round")[0], url, paths(0)))
        return synthetic(10, [1.0] * 10, name=name)

    monkeypatch.setattr(pools, "run", fake_run)
    t = tail_rounds({"json": "http://127.0.0.1:1", "orjson": "http://127.0.0.1:1"}, rate=10, rounds=2, pause_s=0,
                    paths={"json": lambda i: "/o", "orjson": lambda i: "/o?codec=orjson"}, progress=False)
    assert sent == [("json", "http://127.0.0.1:1", "/o"), ("orjson", "http://127.0.0.1:1", "/o?codec=orjson"),
                    ("orjson", "http://127.0.0.1:1", "/o?codec=orjson"), ("json", "http://127.0.0.1:1", "/o")]
    assert t.names == ("json", "orjson") and len(t.to_frame()) == 4


def test_tail_rounds_compare_p99s_as_samples(tmp_path):
    a = tuple(synthetic(100, [1.0] * 98 + [20.0 + k] * 2) for k in range(6))
    b = tuple(synthetic(100, [1.0] * 98 + [5.0 + k] * 2) for k in range(6))
    t = TailRounds(names=("pool=40", "pool=4"), rate=100.0, runs=(a, b))
    assert t.p99s_ns("pool=4")[0] == pytest.approx(5e6)
    c = t.compare("pool=40", "pool=4")
    assert c.verdict == "faster" and c.ratio == pytest.approx(7.5 / 22.5)
    assert c.candidate_name == "pool=4 P99"
    assert len(t.to_frame()) == 12
    assert TailRounds.load(t.save(tmp_path / "t.json")).p99s_ns("pool=40") == t.p99s_ns("pool=40")
    with pytest.raises(BadInputError, match="no side"):
        t.p99s_ns("pool=2")
    with pytest.raises(BadInputError, match="at least two"):
        tail_rounds({"a": "http://127.0.0.1:1"}, rate=10, paths=["/"])
    with pytest.raises(BadInputError, match="rounds"):
        tail_rounds({"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:2"}, rate=10, paths=["/"], rounds=1)
    with pytest.raises(BadInputError, match="one entry per side"):   # per-side paths name exactly the sides
        tail_rounds({"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:1"}, rate=10, paths={"a": ["/"]})


def test_charts_build_from_values():
    obs = observation(synthetic(200, [5.0] * 200), np.linspace(0, 1, 50), np.arange(50) % 3, np.arange(50) * 4,
                      4_000_000, 1.0)
    assert little_chart([obs, obs]).to_dict()["mark"]["type"] == "bar"
    assert len(in_flight_chart(obs).to_dict()["layer"]) == 3
    pts = [{"pool": 4, "offered": 100, "p99_ms": 3.0, "achieved": 100}, {"pool": 40, "offered": 100, "p99_ms": 9.0,
                                                                         "achieved": 99}]
    assert len(points_chart(pts, knee=300).to_dict()["layer"]) == 2
    with pytest.raises(BadInputError):
        points_chart([])
    with pytest.raises(BadInputError):
        little_chart([object()])


def test_order_paths_spread_requests_over_every_order():
    pick = OrderPaths(100)
    ids = [int(pick(i).rsplit("/", 1)[1]) for i in range(100)]
    assert sorted(ids) == list(range(1, 101)) and ids[:3] == [1, 20, 39]


@pytest.mark.slow
def test_on_a_real_service_the_law_the_probes_the_study_and_the_panel_work():
    from labkit.queueing import observe, order_paths, pool_panel, stages_under_load
    from labkit.service import start

    orders = order_paths()
    with start() as svc:
        # Little's law: samples come only from the measured window, and the law's two sides are both there
        obs = observe(svc.url, rate=50, paths=orders, duration_s=1.0, warmup_s=0.2, every_s=0.01)
        assert obs.in_flight.size > 20 and (obs.t_s >= 0).all() and (obs.t_s <= 1.2).all()
        assert obs.predicted_in_flight > 0 and obs.measured_in_flight > 0 and obs.time_in_app_s > 0
        # the service's exact average and λ × (its own W) describe the same requests: they agree closely
        assert obs.measured_in_flight == pytest.approx(obs.arrival_rate * obs.time_in_app_s, rel=0.5)
        # Server-Timing of probes, with and without background load
        alone, none = stages_under_load(svc.url, [orders(i) for i in range(5)])
        assert none is None and set(alone["stage"]) >= {"wait", "db", "catalog", "other"} and alone.probe.nunique() == 5
        loaded, bg = stages_under_load(svc.url, [orders(i) for i in range(5)], rate=50, paths=orders,
                                       duration_s=1.0, warmup_s=0.2)
        assert bg is not None and bg.responses > 0 and len(loaded)
    # a tiny pool study: the reference first, every pool at every fraction
    study = pool_study([1], paths=orders, reference=2, fractions=(0.3,), capacity_s=0.5, step_s=0.5, warmup_s=0.1,
                       reference_rate=200.0)
    assert study.pools == (2, 1) and len(study.runs[1]) == 1 and study.capacity_of(2) > 0
    assert study.rates == (60.0,) and study.at(1, 0.3).offered_rate == 60.0  # 30 % of the capacity given
    # the panel: one bounded step, the service kept for the next step of the same pool
    panel = pool_panel(orders, pools=(1, 2), pool=2, rate_max=200, rate=50, step_s=0.5)
    try:
        p = panel.run()
        assert p["pool"] == 2 and p["offered"] == 50 and p["p99_ms"] > 0 and panel.error is None
        first = panel._service
        panel.run(rate=60)
        assert panel._service is first and len(panel.results) == 2
        panel.run(pool=1)
        assert panel._service is not first and not first.alive
    finally:
        panel.stop()
    with pytest.raises(BadInputError):
        pool_panel(orders, pools=(1, 2), pool=40)


def test_erlang_c_matches_the_textbook_and_bounds_where_a_pool_matters():
    from labkit.queueing import erlang_c, rate_where_pool_fills

    assert erlang_c(1, 0.5) == pytest.approx(0.5)            # M/M/1: an arrival waits with chance ρ
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(4, 2.0) == pytest.approx(0.17391, abs=1e-5)
    assert erlang_c(3, 3.0) == 1.0 and erlang_c(5, 0.0) == 0.0
    # one thread holding each request 5 ms: waits happen more than 1 % of the time above 2 req/s
    assert rate_where_pool_fills(1, 0.005) == pytest.approx(2.0, rel=1e-6)
    r4 = rate_where_pool_fills(4, 0.005)
    assert erlang_c(4, r4 * 0.005) == pytest.approx(0.01, rel=1e-4) and r4 > 4 * rate_where_pool_fills(1, 0.005)
    for bad in ((0, 1.0), (2, -1.0)):
        with pytest.raises(BadInputError):
            erlang_c(*bad)
    with pytest.raises(BadInputError):
        rate_where_pool_fills(2, 0.0)


@pytest.mark.parametrize(("duration_s", "expected"), [(5.0, False), (30.0, None)])
def test_observe_shows_progress_on_long_runs_only(monkeypatch, duration_s, expected):
    # a run of 20 s or more keeps load.run's default bar (inside a notebook): the learner and the hub's culler
    # both see it is alive; short ones inside helpers stay quiet
    import importlib

    obs = importlib.import_module("labkit.queueing.observation")

    seen = {}

    class Sampler:
        error = None

        def __init__(self, *a, **k): ...
        def start(self): return self
        def stop(self): return np.zeros((0, 1 + len(obs.FIELDS)))

    def fake_run(url, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(obs, "StatsSampler", Sampler)
    monkeypatch.setattr(obs, "run", fake_run)
    with pytest.raises(RuntimeError, match="stop here"):
        obs.observe("http://127.0.0.1:9/x", duration_s=duration_s)
    assert seen["progress"] is expected
