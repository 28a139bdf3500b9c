"""labkit.layout: every layout holds the same records and gives the same answers; sweeps, cases and charts.

No test here asserts a speed: the benchmarks (tests/benchmarks/bench_layout.py) show those.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labkit import layout
from labkit.errors import BadInputError, ProbeUnavailable
from labkit.layout import locality, records


@pytest.mark.parametrize("n", [0, 1, 7, 1_000])
def test_every_layout_gives_the_same_answers(n):
    # GIVEN the same records in every layout
    cols = layout.make_columns(n, seed=n)
    price, klass = cols["unit_price"], cols["tax_class"]
    want = {"sum": int(price.sum()), "filter_sum": int(price[klass == 3].sum())}
    for name in layout.LAYOUTS:
        data = layout.build(name, cols)
        # THEN sum and filter_sum agree exactly, as Python ints
        for op, value in want.items():
            got = layout.operation(name, op)(data)
            assert got == value and type(got) is int, (name, op)
        # AND update adds one to qty in place, leaving the other fields alone
        assert layout.operation(name, "update")(data) is None
        after = layout.to_columns(name, data)
        for f in layout.FIELDS:
            np.testing.assert_array_equal(after[f], cols[f] + (1 if f == "qty" else 0), err_msg=f"{name}.{f}")


def test_built_layouts_share_nothing_with_the_source():
    cols = layout.make_columns(50, seed=1)
    built = {name: layout.build(name, cols) for name in layout.LAYOUTS}
    cols["unit_price"][:] = 0  # change the source afterwards
    for name, data in built.items():
        assert layout.operation(name, "sum")(data) > 0, name


def test_make_columns_is_deterministic_and_in_range():
    a, b = layout.make_columns(500, seed=3), layout.make_columns(500, seed=3)
    assert all(np.array_equal(a[f], b[f]) and a[f].dtype == np.int64 for f in layout.FIELDS)
    assert a["tax_class"].min() >= 0 and a["tax_class"].max() <= 3 and a["qty"].min() >= 1
    assert not np.array_equal(a["unit_price"], layout.make_columns(500, seed=4)["unit_price"])


@pytest.mark.parametrize("call, match", [
    (lambda: layout.build("rows", layout.make_columns(3)), "layout='rows' is not one of dicts"),
    (lambda: layout.operation("dicts", "mean"), "operation='mean' is not one of sum"),
    (lambda: layout.make_columns(-1), "n must be an integer 0–.*, got -1"),
    (lambda: layout.make_columns(True), "n must be an integer .*, got True"),
    (lambda: layout.build("dicts", {"qty": [1]}), "columns lack"),
    (lambda: layout.build("dicts", {f: np.arange(i + 1) for i, f in enumerate(layout.FIELDS)}), "equal length"),
    (lambda: layout.bytes_per_record("dicts", 0), "at least one record"),
])
def test_bad_input_says_what_to_pass(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


def test_bytes_per_record_counts_what_each_layout_holds():
    got = {name: layout.bytes_per_record(name, 2_000) for name in ("columns", "structured", "slots", "dicts")}
    # NumPy layouts hold the 40-byte payload and (almost) nothing else
    assert 40 <= got["columns"] < 42 and 40 <= got["structured"] < 42
    # Python layouts add an object (and a dict) per record and an int object per large field
    assert got["slots"] > 2 * layout.PAYLOAD_BYTES and got["dicts"] > got["slots"]


# --- sweep -------------------------------------------------------------------------------------------------

class _Progress:
    def __init__(self, stop_after=None):
        self.calls, self.stop_after = [], stop_after

    def update(self, done, total):
        self.calls.append((done, total))

    @property
    def cancelled(self):
        return self.stop_after is not None and len(self.calls) >= self.stop_after


def test_sweep_measures_every_cell_and_reports_progress():
    p = _Progress()
    s = layout.sweep(("dicts", "columns"), ("sum", "update"), (10, 100), repeat=2, min_sample_time=1e-4,
                     progress=p)
    assert s.complete and len(s.timings) == 8
    assert p.calls[-1] == (10, 10) and [d for d, _ in p.calls] == list(range(1, 11))
    df = s.to_frame()
    assert set(df.columns) >= {"layout", "operation", "n", "ns_per_element", "bytes_per_record"}
    assert (df.ns_per_element > 0).all() and set(s.bytes_per_record) == {"dicts", "columns"}
    rel = s.relative(100)
    assert list(rel.index) == ["dicts", "columns"] and list(rel.columns) == ["sum", "update"]
    assert (rel.loc["columns"] == 1).all()


def test_sweep_stops_when_cancelled_and_says_so():
    s = layout.sweep(("dicts", "tuples", "columns"), "sum", (10, 100), repeat=2, min_sample_time=1e-4,
                     progress=_Progress(stop_after=2))
    assert not s.complete and len(s.timings) == 2


def test_sweep_round_trips_through_json(tmp_path):
    s = layout.sweep("tuples", "sum", 10, repeat=2, min_sample_time=1e-4, measure_bytes=False)
    back = layout.LayoutSweep.load(s.save(tmp_path / "sweep.json"))
    assert back == s and back.timings[0].ns_per_element == s.timings[0].ns_per_element
    assert "tuples" in str(back)


@pytest.mark.parametrize("kwargs, match", [
    ({"sizes": (0,)}, "integer 1–10,000,000"),
    ({"sizes": "big"}, "integer 1–10,000,000"),
    ({"layouts": ("dicts", "json")}, "layouts='json'"),
    ({"operations": ()}, "at least one"),
    ({"progress": object()}, "update\\(done, total\\)"),
])
def test_sweep_rejects_bad_arguments(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        layout.sweep(**{"sizes": (10,), **kwargs})


def test_relative_names_what_was_measured():
    s = layout.sweep("dicts", "sum", 10, repeat=2, min_sample_time=1e-4, measure_bytes=False)
    with pytest.raises(BadInputError, match="n=99 was not measured"):
        s.relative(99)
    with pytest.raises(BadInputError, match="layout 'columns' was not measured"):
        s.relative(10)


def test_crossover_is_where_the_fast_side_starts_to_win():
    sizes = [10, 100, 1_000]
    assert layout.crossover(sizes, [1, 1, 1], [10, 0.1, 0.1]) == pytest.approx(10 ** 1.5)  # log-log halfway
    assert layout.crossover(sizes, [1, 2, 3], [0.5, 1, 1]) == 10
    assert layout.crossover(sizes, [1, 2, 3], [2, 3, 4]) is None
    with pytest.raises(BadInputError, match="increasing"):
        layout.crossover([10, 5], [1, 1], [1, 1])
    with pytest.raises(BadInputError, match="equal-length"):
        layout.crossover([10], [1, 1], [1])


# --- locality cases ----------------------------------------------------------------------------------------

def test_field_sum_case_and_its_napkin_math():
    case = layout.FieldSum(10_000, seed=2)
    assert case.field_sum() == case.column_sum() == int(layout.make_columns(10_000, seed=2)["unit_price"].sum())
    case.copy()
    np.testing.assert_array_equal(case._dst, case.column)
    assert case.record_bytes == 40 and case.field_bytes == 8
    assert case.bytes_moved() == {"column_sum": 8.0, "field_sum": 40.0, "copy": 16.0}
    assert case.predicted_ratio() == 5.0
    assert case.predicted_ratio(line=32) == 4.0  # records longer than a line: one line per element
    assert case.gb_per_s("column_sum", 8 * 10_000) == pytest.approx(1.0)
    with pytest.raises(BadInputError, match="call='sum'"):
        case.gb_per_s("sum", 1.0)


def test_scattered_holds_the_same_objects_in_another_order():
    s = layout.Scattered(2_000, seed=5)
    assert {id(o) for o in s.ordered} == {id(o) for o in s.shuffled}
    assert [id(o) for o in s.ordered] != [id(o) for o in s.shuffled]
    assert not {id(o) for o in s.regathered} & {id(o) for o in s.ordered}
    assert [o.unit_price for o in s.regathered] == [o.unit_price for o in s.shuffled]
    assert layout.total_price(s.ordered) == layout.total_price(s.shuffled) == layout.total_price(s.regathered)


def test_loads_visit_every_line_once_in_one_cycle():
    loads = layout.Loads(1 << 16, seed=3)
    assert loads.n == (1 << 16) // 64
    start = int(loads._order[0])
    assert loads.chase() == start  # n dependent steps around one cycle come back to the start
    assert sorted(loads._order.tolist()) == list(range(0, loads.n * 8, 8))
    assert loads.gather() == loads.sequential() == int(loads._nxt.sum())


def test_false_sharing_runs_both_placements():
    fs = layout.FalseSharing(writes=20_000)
    before = fs._counters.copy()
    assert fs.same_line() > 0 and fs.padded() > 0 and fs.alone() > 0
    assert fs._counters.sum() > before.sum()
    c = fs.compare(rounds=3)
    assert c.baseline_name.startswith("padded") and len(c.candidate_ns) == 3


def test_false_sharing_needs_two_cpus(monkeypatch):
    monkeypatch.setattr("labkit.measure.machine.usable_cpus", lambda: [0])
    with pytest.raises(ProbeUnavailable, match="two CPUs"):
        layout.FalseSharing()


def test_past_llc_is_well_past_the_largest_cache(monkeypatch):
    monkeypatch.setattr(locality, "cache_sizes", lambda: {1: 32 << 10, 3: 32 << 20})
    assert layout.past_llc() == 256 << 20
    monkeypatch.setattr(locality, "cache_sizes", lambda: {})
    assert layout.past_llc() == 64 << 20


@pytest.mark.parametrize("make", [lambda: layout.FieldSum(0), lambda: layout.Scattered(-1),
                                  lambda: layout.Loads(10), lambda: layout.FalseSharing(writes=1)])
def test_cases_reject_sizes_out_of_range(make):
    with pytest.raises(BadInputError):
        make()


# --- charts ------------------------------------------------------------------------------------------------

def test_charts_build_from_results_and_refuse_other_things():
    s = layout.sweep(("dicts", "columns"), ("sum",), (10, 100), repeat=2, min_sample_time=1e-4)  # bytes too
    for chart in (layout.per_element_chart(s), layout.bytes_chart(s), layout.relative_chart(s, 100)):
        spec = chart.to_dict()
        assert spec.get("data") or spec.get("datasets")
    q = pd.DataFrame({"lines": [10, 10, 100], "ms": [0.3, 0.4, 0.5], "layout": ["aos", "soa", "aos"]})
    spec = layout.quote_latency_chart(q, guess_lines=30).to_dict()
    assert len(spec["layer"]) == 4
    q["total ms"] = [0.1, 0.2, 0.3]
    assert layout.quote_latency_chart(q, value="total ms").to_dict()
    r = pd.DataFrame({"experiment": ["x", "x"], "source": ["your guess", "measured"], "ratio": [None, 4.2]})
    rows = [d for d in layout.ratios_chart(r).to_dict()["datasets"].values()][0]
    assert [row["label"] for row in rows] == ["skipped", "4.2"]  # a skipped guess is shown as such
    assert records.LAYOUTS
    with pytest.raises(BadInputError, match="per_element_chart needs"):
        layout.per_element_chart(pd.DataFrame({"a": [1]}))
    with pytest.raises(BadInputError, match="quote_latency_chart needs"):
        layout.quote_latency_chart(pd.DataFrame({"lines": [1]}))


# --- the panel -------------------------------------------------------------------------------------------

def test_panel_measures_every_size_up_to_n_and_redraws():
    from labkit.layout.panel import layout_panel

    panel = layout_panel(layout="tuples", operation="sum", n=100)
    first = panel.run()
    assert [t.n for t in first.timings] == [10, 100] and first.complete
    second = panel.run(layout="columns", n=1_000)
    assert [(t.layout, t.n) for t in second.timings] == [("columns", 10), ("columns", 100), ("columns", 1_000)]
    assert panel.error is None and len(panel.results) == 2 and panel._jchart is not None
    panel.run(layout="tuples", n=10)  # the same layout again: its line is replaced, not doubled
    spec = panel._jchart.chart.to_dict()
    rows = [r for d in spec["datasets"].values() for r in d]
    assert sorted((r["layout"], r["n"]) for r in rows) == [("columns", 10), ("columns", 100), ("columns", 1_000),
                                                           ("tuples", 10)]


def test_panel_cancelled_before_any_size_says_so():
    from labkit.layout import panel as lp

    class Cancelled:
        cancelled = True

        def update(self, *a):
            pass

    with pytest.raises(lp.LabkitError, match="cancelled before the first size"):
        lp.measure({"layout": "dicts", "operation": "sum", "n": 100}, Cancelled())
    p = lp.layout_panel()
    with pytest.raises(BadInputError, match="unknown control"):
        p.run(size=10)
