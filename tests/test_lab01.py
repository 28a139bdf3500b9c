"""Lab 01's grader: a careful napkin model passes; the published table's figures, numbers copied from a
measurement, a model fitted to the service's timings or reading them, the generic cheats of tests/graderkit.py
that apply, a wrong count and a missing prediction fail.

Two layers: exact tests against a fake service whose Server-Timing is fixed and a synthetic table (no
re-measuring), and GRADER_CASES against the real toyshop with a quickly measured table (bench_graders.py runs
those 10 times).
"""

from __future__ import annotations

import dataclasses
import http.server
import sys
import threading
from typing import Any

import pytest
from graderkit import (
    always_equal,
    assert_grader,
    count_gated,
    hard_coded,
    lazy,
    malformed,
    memoised,
    subclassed,
)
from toolfakes import entries, patching

from labkit.exercises import lab01
from labkit.latency import LatencyTable, Samples
from labkit.learner.record import Experiment

KIB = 4.4  # the fake order's JSON


def table(sqlite_ns: float = 20_000, http_ns: float = 700_000, json_ns: float = 25_000) -> LatencyTable:
    rows = (Samples("sqlite_point_query", "q", "work", (sqlite_ns,) * 3),
            Samples("http_health", "h", "io", (http_ns,) * 3),
            Samples("json_encode_1k", "j", "work", (json_ns,) * 3),
            Samples("orjson_encode_1k", "o", "work", (json_ns / 15,) * 3),
            Samples("disk_random_read_4k", "d", "io", (), note="no O_DIRECT"))
    return LatencyTable(rows)


def careful(t: LatencyTable, kib: float = KIB) -> dict[str, float]:
    ms = lambda key: t.median_ns(key) / 1e6  # noqa: E731
    return {"queries": 2, "catalog_calls": 1, "db_ms": 2 * ms("sqlite_point_query"),
            "catalog_ms": ms("http_health"), "serialize_ms": kib * ms("json_encode_1k")}


class _Shop(http.server.BaseHTTPRequestHandler):
    """A fake toyshop: every order answers the same Server-Timing (the careful model is 2–3× below it)."""

    protocol_version = "HTTP/1.1"
    timing = "parse;dur=0.04, db;dur=0.1;count=2, catalog;dur=1.4;count=1, serialize;dur=0.25, total;dur=2"

    def do_GET(self):  # http.server's naming
        body = b'{"pad": "' + b"x" * (round(KIB * 1024) - 11) + b'"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Server-Timing", self.timing)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def fake_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Shop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def planned(ratio: float = 0.4) -> Experiment:
    return Experiment.plan("the order's floor", "GET /health is the request without its stages: one loopback "
                           "round trip of the ~two the order costs", predicted_ratio=ratio)


def grade(napkin: Any, url: str, experiment: Any = "planned", **kw: Any):
    exp = planned() if experiment == "planned" else experiment
    return lab01.check(napkin, table(), exp, url=url, rounds=3, remeasure=False, save=False, **kw)


def test_a_careful_model_passes_every_item(fake_url):
    g = grade(careful, fake_url, seed=3)
    assert g.passed, str(g)
    assert [i.criterion for i in g.items] == ["correctness", "prediction", "budget", "speed", "prediction"]
    assert "seed 3" in g.title and "your prediction (0.4)" in g.items[-1].message
    df = g.items[3].detail
    assert list(df["stage"]) == ["db", "catalog", "serialize"]
    assert df["measured_ms"].tolist() == [0.1, 1.4, 0.25]
    assert df["yours_ms"].tolist() == pytest.approx([0.04, 0.7, 0.11])


@pytest.mark.parametrize("key,value", [("queries", 3), ("catalog_calls", 4), ("queries", 2.5)])
def test_a_wrong_count_fails_first_saying_what_the_server_made(fake_url, key, value):
    g = grade(lambda t: {**careful(t), key: value}, fake_url)
    assert not g.passed and len(g.items) == 1 and "the server made" in g.items[0].message


@pytest.mark.parametrize("bad,words", [
    (lambda t: None, "returned None"),
    (lambda t: 1.5, "returned a float"),
    (lambda t: {"queries": 2}, "has no 'catalog_calls'"),
    (lambda t: dict.fromkeys(lab01.KEYS), "still None"),
    (lambda t: {**careful(t), "db_ms": -1}, "≥ 0"),
    (lambda t: {**careful(t), "db_ms": True}, "≥ 0"),
    (lambda t: {**careful(t), "db_ms": "0.04"}, "≥ 0"),
    (lambda t: {**careful(t), "serialize_ms": 0}, "is 0 ms"),
    (lambda t: t.median_ns("no_such_row"), "raised KeyError"),
])
def test_a_breakdown_that_is_not_one_fails_at_the_first_item_saying_why(fake_url, bad, words):
    g = grade(bad, fake_url)
    assert not g.passed and len(g.items) == 1 and words in g.items[0].message, str(g)


def test_numbers_typed_in_fail_the_table_check_even_when_they_match_the_measurement(fake_url):
    copied = {"queries": 2, "catalog_calls": 1, "db_ms": 0.1, "catalog_ms": 1.4, "serialize_ms": 0.25}
    g = grade(lambda t: copied, fake_url)
    assert [i.ok for i in g.items] == [True, True, False] and "does not move with any row" in g.items[2].message
    # one stage typed in among priced ones is caught too, and named
    g = grade(lambda t: {**careful(t), "catalog_ms": 1.4}, fake_url)
    assert not g.passed and "catalog_ms does not move" in g.items[2].message


def test_a_model_fitted_to_the_measurement_moves_by_the_wrong_amount(fake_url):
    mine = table()
    ms0 = {k: mine.median_ns(k) / 1e6 for k in ("sqlite_point_query", "http_health", "json_encode_1k")}

    def fitted(t):  # the measured stage × (row ÷ the row in my own table): moves with the table, prices nothing
        ms = lambda key: t.median_ns(key) / 1e6  # noqa: E731
        return {"queries": 2, "catalog_calls": 1, "db_ms": 0.1 * ms("sqlite_point_query") / ms0["sqlite_point_query"],
                "catalog_ms": 1.4 * ms("http_health") / ms0["http_health"],
                "serialize_ms": 0.25 * ms("json_encode_1k") / ms0["json_encode_1k"]}

    g = grade(fitted, fake_url)
    assert not g.passed and "count × row" in g.items[2].message and "fitted" in g.items[2].message


@pytest.mark.parametrize("stage,row,coefficient", [("db_ms", "sqlite_point_query", 2.3),
                                                     ("db_ms", "sqlite_point_query", 1.9),
                                                     ("catalog_ms", "http_health", 1.1)])
def test_a_coefficient_near_the_count_is_not_a_count(fake_url, stage, row, coefficient):
    # what a fitted model gives on a run where the service's stage happens to sit near count × row (CI saw
    # db 2.3× the query row), and a learner's fudge factor: both within 25 % of the count, neither a count
    g = grade(lambda t: {**careful(t), stage: coefficient * t.median_ns(row) / 1e6}, fake_url)
    assert [i.ok for i in g.items] == [True, True, False], str(g)
    assert f"moves with {row} as {coefficient:.3g} × the row" in g.items[2].message


def test_a_model_that_answers_differently_later_fails_on_the_re_measured_table(fake_url):
    for honest in range(1, 6):  # a probe, a repeated probe or the re-measured table: each answer is checked
        g = grade(count_gated(careful, honest, fast=lambda t: {**careful(t), "db_ms": 0.1}), fake_url)
        assert not g.passed and g.items[-1].criterion in ("budget", "speed"), str(g)


def test_no_prediction_fails_saying_what_to_write(fake_url):
    g = grade(careful, fake_url, experiment=None)
    assert not g.passed and g.items[1].criterion == "prediction" and "Experiment.plan(" in g.items[1].message


def test_a_small_constant_beside_a_priced_stage_is_tolerated(fake_url):
    g = grade(lambda t: {**careful(t), "db_ms": careful(t)["db_ms"] + 0.002}, fake_url)
    assert g.passed, str(g)


@pytest.mark.parametrize("row,way", [("orjson_encode_1k", "too low"), ("http_health", "too high")])
def test_a_wrong_row_lands_outside_the_band_and_says_which_way(fake_url, row, way):
    def napkin(t):
        out = careful(t)
        if row == "orjson_encode_1k":  # the fast encoder, not the service's json
            out["serialize_ms"] = KIB * t.median_ns(row) / 1e6
        else:  # a query priced as a network round trip
            out["db_ms"] = 2 * t.median_ns(row) / 1e6
        return out
    g = grade(napkin, fake_url)
    assert [i.ok for i in g.items] == [True, True, True, False]
    assert way in g.items[-1].message and "outside the band" in g.items[-1].message
    assert g.items[-1].detail is not None


def test_the_band_is_the_factor_above_and_twice_that_below(fake_url):
    # the careful model is 2–3× below the fake's stages: inside twice 1.5, outside twice 1.2
    assert not grade(careful, fake_url, factor=1.2).passed
    assert grade(careful, fake_url, factor=1.5).passed
    # the same model on a table six times as dear is 2–3× above them: the factor itself is the limit there
    dear = table(sqlite_ns=120_000, http_ns=4_200_000, json_ns=150_000)
    g = lab01.check(careful, dear, planned(), url=fake_url, rounds=3, remeasure=False, save=False, factor=2)
    assert not g.passed and "too high" in g.items[-1].message
    assert lab01.check(careful, dear, planned(), url=fake_url, rounds=3, remeasure=False, save=False,
                       factor=3.5).passed


@pytest.mark.parametrize("args,words", [
    ((3.0, table()), "pass your function"),
    ((careful, "my table"), "pass the latency table"),
])
def test_wrong_arguments_are_refused_with_what_to_pass(fake_url, args, words):
    g = lab01.check(*args, url=fake_url)
    assert not g.passed and words in g.items[0].message
    assert "factor must be" in lab01.check(careful, table(), url=fake_url, factor=0.5).items[0].message


def test_the_solution_is_shown_only_after_an_attempt(fake_url):
    lab01.EXERCISE.attempts = 0
    assert "Try the exercise first" in lab01.solution()
    grade(lambda t: None, fake_url)
    assert "def my_napkin(t)" in lab01.solution()
    assert lab01.hint(2).startswith("Hint 2 of 3") and "sqlite_point_query" in lab01.hint(2)


# --- against the real service (GRADER_CASES; bench_graders.py runs each 10 times) ----------------------------

_ENV: dict[str, Any] = {}


def _env() -> dict[str, Any]:
    """One toyshop and one quick table per process, made on first use (the suite may never need them)."""
    if not _ENV:
        from labkit import latency, service
        from labkit.latency import network
        from labkit.toyshop import dataset, db, export
        from labkit.toyshop.catalog import FakeCatalog
        from labkit.toyshop.core.encoding import encode

        svc = service.start(size="small")
        quick = latency.table(quick=True, include={"json", "sqlite", "context_switch", "python"}, progress=False)
        t = LatencyTable((*quick.rows, network.http_health(quick=True, url=svc.url)))
        path = dataset.ensure("small")
        kib = len(encode(export.order_detail(db.connect(path), FakeCatalog.from_db(path), 1), "json")) / 1024
        measured = lab01.measure_order(svc.url, 1, rounds=20).extra["server_timing_ms"]
        # and three rows of the learner's own making, each the measured stage divided by its count: the rows a
        # model "priced" with them reads (the grader measures none of them)
        own = (Samples("my_query", "a query (mine)", "work", (measured["db"] / 2 * 1e6,) * 3),
               Samples("my_catalog_call", "a catalog call (mine)", "io", (measured["catalog"] * 1e6,) * 3),
               Samples("my_json_kib", "a KiB of JSON (mine)", "work", (measured["serialize"] / kib * 1e6,) * 3))
        _ENV.update(svc=svc, table=LatencyTable((*t.rows, *own)), kib=kib, measured=measured)
    return _ENV


def reference(t: LatencyTable) -> dict[str, float]:
    return careful(t, _env()["kib"])


def published(t: LatencyTable) -> dict[str, float]:
    """The baseline: counts right, priced with published figures instead of this machine's table (a networked
    query and a datacenter round trip, 0.5 ms each; JSON at 100 MiB/s — napkin-math's rows)."""
    return {"queries": 2, "catalog_calls": 1, "db_ms": 2 * 0.5, "catalog_ms": 0.5,
            "serialize_ms": _env()["kib"] * 1024 / (100 * 2**20) * 1e3}


def copied(t: LatencyTable) -> dict[str, float]:
    """The stages copied from a measurement of the same order (what a learner sees after one run)."""
    st = _env()["measured"]
    return {"queries": 2, "catalog_calls": 1, "db_ms": st["db"], "catalog_ms": st["catalog"],
            "serialize_ms": st["serialize"]}


def per_item(t: LatencyTable) -> dict[str, float]:
    """The export's naive counting applied to an order: a query and a catalog call per item."""
    return {**reference(t), "queries": 2 + 4, "catalog_calls": 4}


class _Lazy:
    """A cheat built on first call (hard_coded records its answers up front, which needs the service)."""

    def __init__(self, build):
        self.build, self.fn = build, None

    def __call__(self, t):
        self.fn = self.fn or self.build()
        return self.fn(t)


def fitted(t: LatencyTable) -> dict[str, float]:
    """A measured stage × (the row ÷ that row in the learner's own table): moves with a scaled table, prices
    nothing (the review's 'constant disguised as a row')."""
    mine, st = _env()["table"], _env()["measured"]
    row = {"db": "sqlite_point_query", "catalog": "http_health", "serialize": "json_encode_1k"}
    return {"queries": 2, "catalog_calls": 1,
            **{f"{s}_ms": st[s] * t.median_ns(k) / mine.median_ns(k) for s, k in row.items()}}


def reads_the_service(t: LatencyTable) -> dict[str, float]:
    """Ignores the table: measures the order on the running service and returns its stages."""
    st = lab01.measure_order(_env()["svc"].url, 1, rounds=3).extra["server_timing_ms"]
    return {"queries": 2, "catalog_calls": 1, "db_ms": st["db"], "catalog_ms": st["catalog"],
            "serialize_ms": st["serialize"]}


def own_rows(t: LatencyTable) -> dict[str, float]:
    """Count × row, with rows of its own: the learner's table holds rows it typed in (the measured stage over
    its count), and the model prices each stage with one of them."""
    ms = lambda key: t.median_ns(key) / 1e6  # noqa: E731
    kib = _env()["kib"]
    return {"queries": 2, "catalog_calls": 1, "db_ms": 2 * ms("my_query"), "catalog_ms": ms("my_catalog_call"),
            "serialize_ms": kib * ms("my_json_kib")}


def priced_as_a_dict_read(t: LatencyTable) -> dict[str, float]:
    """Count × row, with a wrong row: a query priced as a Python dict lookup (a thousand times too cheap)."""
    return {**reference(t), "db_ms": 2 * t.median_ns("python_dict") / 1e6}


def _faked_probes() -> list[tuple[Any, str, Any]]:
    """The grader's measuring tools replaced where they live and where they are re-exported: the HTTP probe
    (``labkit.latency.network.http_samples``) and the row probes (``labkit.latency.ladder.PROBES``), whose
    re-measured ``python_dict`` row comes back as long as half the order's measured db stage — what makes a
    query priced as a dict read look right."""
    from labkit import latency

    network, ladder = sys.modules["labkit.latency.network"], sys.modules["labkit.latency.ladder"]
    real_http, (produced, real_probe) = network.http_samples, ladder.PROBES["python"]
    half_db_ns = _env()["measured"]["db"] / 2 * 1e6

    def http_samples(url: str, *paths: str, **kwargs: Any) -> Any:
        return real_http(url, *paths, **kwargs)

    def probe(*args: Any) -> Any:
        rows = real_probe(*args)
        return tuple(dataclasses.replace(r, samples_ns=(half_db_ns,) * len(r.samples_ns)) if r.key == "python_dict"
                     else r for r in rows)

    return [(network, "http_samples", http_samples), (latency, "http_samples", http_samples),
            (entries(ladder.PROBES), "python", (produced, probe)),
            *[(lab01, n, http_samples) for n in ("http_samples", "_http_samples") if hasattr(lab01, n)]]


GRADER_CASES = {
    "grade": lambda fn, experiment: lab01.check(fn, _env()["table"], experiment, url=_env()["svc"].url, rounds=15,
                                                save=False),
    "experiment": planned,
    "reference": reference,
    "baseline": published,
    "wrong": per_item,
    "cheats": {"memoised": memoised(published),
               "hard-coded": _Lazy(lambda: hard_coded(copied, [(_env()["table"],)])),
               "fitted to the service's timings": fitted,
               "reads the service": reads_the_service,
               "call-count-gated": count_gated(reference, 8, fast=copied),
               "lazy answer": lazy(reference), "subclassed answer": subclassed(reference),
               "always-equal": always_equal(reference),
               "prices with rows of its own": own_rows,
               "replaces the row probes": patching(priced_as_a_dict_read, _faked_probes, "fakes_the_probes"), **malformed()},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_the_reference_still_passes_with_the_probes_replaced():
    cheat = patching(reference, _faked_probes, "reference_behind_fakes")
    try:
        g = GRADER_CASES["grade"](cheat, planned())
    finally:
        cheat.undo()
    assert g.passed, str(g)
    from labkit.latency.network import http_samples

    assert sys.modules["labkit.latency"].http_samples is http_samples


def test_a_row_the_check_did_not_measure_does_not_count(fake_url):
    # a row of the learner's own, priced count × row: it passes the table check, and fails where the rows are
    # re-measured, saying which stage and which row
    mine = LatencyTable((*table().rows, Samples("my_query", "mine", "work", (50_000,) * 3)))
    napkin = lambda t: {**careful(t), "db_ms": 2 * t.median_ns("my_query") / 1e6}  # noqa: E731
    g = lab01.check(napkin, mine, planned(), url=fake_url, rounds=3, save=False, seed=4)
    assert [i.ok for i in g.items] == [True, True, True, False], str(g)
    assert "db_ms priced with my_query, a row the check did not measure" in g.items[-1].message
