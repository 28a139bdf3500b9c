"""labkit.capstone: waterfalls from Server-Timing (exact, with a fake endpoint), the kept baseline's diff,
the build-cost proxy, and the charts built from them."""

from __future__ import annotations

import numpy as np
import pytest

from labkit import capstone
from labkit.client import Reply
from labkit.errors import BadInputError, ServiceError
from labkit.load.result import LoadResult
from labkit.trace import parse_server_timing


class FakeShop:
    """An Endpoint stand-in answering every GET with the same Server-Timing and a fixed client time."""

    def __init__(self, header: str, elapsed_ns: int, status: int = 200) -> None:
        self.header, self.elapsed_ns, self.status, self.calls = header, elapsed_ns, status, 0

    def get(self, path, headers=None):
        self.calls += 1
        return Reply(self.status, self.elapsed_ns, {}, b"{}", parse_server_timing(self.header))


HEADER = ("parse;dur=0.010, db;dur=0.200;count=2, catalog;dur=0.000;count=0, compute;dur=0.005, "
          "serialize;dur=0.100, wait;dur=0.050, cache_hit;count=20, cache_miss;count=0, size;count=22000, "
          "log;dur=0.020, total;dur=0.500")


def test_a_waterfall_lays_the_median_stages_end_to_end_with_what_no_stage_names():
    shop = FakeShop(HEADER, 800_000)
    w = capstone.stage_times(shop, "/x", "all fixes", n=5, warmup=2)
    assert shop.calls == 7 and w.n == 5 and w.label == "all fixes"
    assert w.stage_ms == pytest.approx({"parse": 0.010, "wait": 0.050, "db": 0.200, "catalog": 0.0, "compute": 0.005,
                                        "serialize": 0.100, "log": 0.020, "other": 0.115, "outside": 0.300})
    assert w.counts == {"db": 2, "catalog": 0, "cache_hit": 20, "cache_miss": 0, "size": 22000}
    frame = w.to_frame()
    assert list(frame.stage) == [*capstone.STAGES, "other", "outside"]
    assert frame.end_ms.iloc[-1] == pytest.approx(0.8) and (frame.start_ms.iloc[1:].values == frame.end_ms.iloc[:-1].values).all()


def test_a_waterfall_gives_each_stage_and_the_client_a_middle_half_taken_request_by_request():
    samples = {s: (0.0,) * 5 for s in capstone.STAGES}
    samples |= {"db": (1.0, 2.0, 3.0, 4.0, 5.0), "total": (2.0, 3.0, 4.0, 5.0, 6.0), "client": (3.0, 3.5, 6.0, 9.0, 12.0)}
    w = capstone.StageTimes("s", "/x", samples)
    spread = w.spread_ms
    assert spread["db"] == (2.0, 4.0) and spread["client"] == (3.5, 9.0)
    assert spread["other"] == (1.0, 1.0) and spread["outside"] == (1.0, 4.0)  # client − total, per request
    frame = w.to_frame()
    assert (frame.client_p25_ms == 3.5).all() and frame.set_index("stage").loc["db", "p75_ms"] == 4.0
    one = capstone.StageTimes("s", "/x", {k: v[:1] for k, v in samples.items()})
    assert one.spread_ms["client"] == (3.0, 3.0)  # one request: no spread to draw, and no error


def test_a_waterfall_is_a_value_that_saves_and_loads(tmp_path):
    w = capstone.stage_times(FakeShop(HEADER, 800_000), "/x", n=3)
    back = capstone.StageTimes.load(w.save(tmp_path / "w.json"))
    assert back == w and back.stage_ms == w.stage_ms


def test_a_waterfall_refuses_a_bad_count_and_a_failed_request():
    with pytest.raises(BadInputError, match="at least 1"):
        capstone.stage_times(FakeShop(HEADER, 1), "/x", n=0)
    with pytest.raises(ServiceError, match="answered 500"):
        capstone.stage_times(FakeShop(HEADER, 1, status=500), "/x", n=2)


def _load(ms: list[float], name: str) -> LoadResult:
    from labkit.load._options import make_settings

    settings = make_settings("http://127.0.0.1:1/x", rate=10, concurrency=None, arrivals="constant", duration_s=1,
                             max_requests=100, timeout_s=1, connections=None, warmup_s=0, seed=0, paths=None,
                             picker=None)
    n = len(ms)
    ns = np.asarray([m * 1e6 for m in ms], dtype=np.int64)
    return LoadResult(settings, ns, ns, np.arange(n, dtype=np.int64), np.full(n, 200, dtype=np.int16),
                      np.zeros(n, dtype=np.int32), ("/x",), {200: n}, {}, {}, 10.0, 10.0, 1.0, name=name)


def test_kept_diff_reads_percentile_by_percentile():
    kept, now = _load([10.0] * 99 + [50.0], "kept"), _load([1.0] * 99 + [5.0], "now")
    diff = capstone.kept_diff(kept, now, qs=(50, 99.9))
    assert list(diff.percentile) == ["P50", "P99.9"]
    assert diff.loc[0, "kept baseline (ms)"] == pytest.approx(10) and diff.loc[0, "× faster"] == pytest.approx(10)
    assert diff.attrs["runs"]["now"]["responses"] == 100
    # 100 responses put none beyond P99.9: that row is the slowest response, and the diff says so
    assert list(diff.beyond) == [50, 0] and diff.attrs["thin"] == ["P99.9"]


def test_source_lines_counts_non_blank_lines_and_skips_what_has_none():
    def two():
        return 2

    assert capstone.source_lines(two) == 2 and capstone.source_lines(two, two) == 4 and capstone.source_lines(3) == 0


def test_the_charts_build_from_the_values():
    import pandas as pd

    steps = [capstone.stage_times(FakeShop(HEADER.replace("0.500", str(t)), int(t * 2e6)), "/x", s, n=2)
             for s, t in (("baseline", 15.0), ("all", 0.5))]
    spec = capstone.waterfall_chart(steps).to_dict()
    assert spec["resolve"]["scale"]["x"] == "independent"
    assert [layer["mark"]["type"] for layer in spec["spec"]["layer"]] == ["bar", "text", "errorbar"]
    rows = {r["row"] for r in spec["datasets"][spec["data"]["name"]]}
    assert rows == {"baseline — 30.0 ms (middle half 30.0–30.0 ms, 2 requests)",
                    "all — 1.000 ms (middle half 1.000–1.000 ms, 2 requests)"}
    payoff = pd.DataFrame({"fix": ["a", "b"], "bought_ms": [1.0, 3.0], "cost_lines": [10, 200],
                           "worth_at_end_ms": [0.5, 2.0]})
    assert capstone.payoff_chart(payoff).to_dict()["hconcat"]
    ranged = capstone.payoff_chart(payoff.assign(bought_lo_ms=[0.5, 2.5], bought_hi_ms=[1.5, 3.5])).to_dict()
    assert [layer["mark"]["type"] for layer in ranged["hconcat"][0]["layer"]] == ["bar", "errorbar", "tick"]
    assert capstone.micro_vs_e2e_chart(pd.DataFrame({"fix": ["a"], "micro_ms": [1.0]}), 3.0).to_dict()
    with pytest.raises(BadInputError, match="bought_ms"):
        capstone.payoff_chart(pd.DataFrame({"fix": ["a"]}))
    with pytest.raises(BadInputError, match="at least one"):
        capstone.waterfall_chart([])


def test_a_waterfall_ratio_far_outside_its_ab_interval_is_called_disturbed():
    from types import SimpleNamespace

    def w(label, ms):
        return capstone.StageTimes(label, "/x", {"client": (ms * 0.95, ms, ms * 1.05), "total": (ms * 0.9,) * 3})

    before, disturbed, fine = w("2. product cache", 1.163), w("3. orjson", 3.485), w("3. orjson", 1.05)
    ab = SimpleNamespace(ratio=0.914, ci=(0.844, 0.986))  # the lab 08 walk's step 3: 1.09x faster, interleaved
    warning = capstone.disagreement(before, disturbed, ab)
    assert warning is not None and "3. orjson" in warning and "3.00× the time of 2. product cache's" in warning
    assert "0.844–0.986" in warning and "disturbed" in warning
    assert capstone.disagreement(before, fine, ab) is None             # 0.90: inside the interval
    assert capstone.disagreement(before, w("3", 1.163 * 0.6), ab) is None  # within 1.5x of it: no alarm
    assert capstone.disagreement(before, w("3", 1.163 * 0.55), ab) is not None
    with pytest.raises(BadInputError, match="two stage_times"):
        capstone.disagreement(1.0, fine, ab)


def test_a_waterfall_bar_carries_its_count_where_the_label_fits_and_no_label_where_nothing_fits():
    samples = {s: (0.0, 0.0) for s in capstone.STAGES}
    samples |= {"db": (1.0, 1.0), "catalog": (8.0, 8.0), "log": (0.05, 0.05), "total": (9.05, 9.05),
                "client": (10.0, 10.0)}
    w = capstone.StageTimes("baseline", "/x", samples, {"db": 41.0, "catalog": 20.0})
    spec = capstone.waterfall_chart([w]).to_dict()
    labels = {r["stage"]: r["label"] for r in spec["datasets"][spec["data"]["name"]]}
    assert labels["catalog"] == "catalog 8.0 ms · 20 calls"  # a wide bar: the count a loop shows itself by
    assert labels["db"] == "db 1.0 ms"  # 56 px: room for the time, not the count (the tooltip has it)
    assert labels["log"] == ""  # 3 px: nothing written over its neighbours
