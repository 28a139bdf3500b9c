import altair as alt
import numpy as np
import pytest

import labkit
from labkit import charts
from labkit.errors import BadInputError
from labkit.measure.comparison import compare
from labkit.measure.microbench import BenchResult


class Measured:
    def __init__(self, median, seed, name):
        self.samples_ns = np.random.default_rng(seed).lognormal(np.log(median), 0.1, 200)
        self.name = name


@pytest.fixture
def result():
    return BenchResult("f", tuple(np.linspace(1_000, 2_000, 50)), 10, (5_000.0,))


def test_enable_offline_never_picks_the_mimetype_renderer():
    assert charts.enable_offline() == "jupyter+svg"
    assert alt.JupyterChart._is_offline is True  # the widget's JavaScript from the package, not a CDN
    assert alt.renderers.get().args[0].keywords == {"offline": True}  # and Altair's renderer told so
    assert charts.enable_offline("svg") == "svg"
    with pytest.raises(BadInputError, match="'jupyter' or 'svg'"):
        charts.enable_offline("mimetype")
    charts.enable_offline()


def test_a_chart_is_a_widget_with_its_picture_beside_it():
    """JupyterLab draws the widget; a saved notebook opened where widgets cannot load shows the SVG."""
    charts.enable_offline()
    chart = alt.Chart(alt.Data(values=[{"x": 1, "y": 2}, {"x": 2, "y": 5}])).mark_point().encode(x="x:Q", y="y:Q")
    out = chart._repr_mimebundle_()
    bundle = out[0] if isinstance(out, tuple) else out
    assert "application/vnd.jupyter.widget-view+json" in bundle
    svg = bundle["image/svg+xml"]
    assert svg.lstrip().startswith("<svg") and "http" not in svg.replace("http://www.w3.org", "")
    assert svg.count("<path") >= 2  # the two points and the axes are drawn, not an empty frame


def test_a_chart_that_cannot_be_drawn_as_svg_keeps_its_widget_and_says_why(monkeypatch):
    import vl_convert as vlc

    def broken(spec):
        raise ValueError("no fonts")

    monkeypatch.setattr(vlc, "vegalite_to_svg", broken)
    charts.enable_offline()
    out = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")._repr_mimebundle_()
    bundle = out[0] if isinstance(out, tuple) else out
    assert "application/vnd.jupyter.widget-view+json" in bundle and "image/svg+xml" not in bundle
    assert "no static picture: ValueError: no fonts" in bundle["text/plain"]


def test_the_offline_bundle_is_built_once_and_then_read_from_disk(tmp_path, monkeypatch):
    import vl_convert as vlc

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = []
    monkeypatch.setattr(vlc, "javascript_bundle", lambda src=None, vl_version=None: built.append(src) or "/*js*/")
    with charts._bundle_cache():
        first = vlc.javascript_bundle("import x", vl_version="6")
    with charts._bundle_cache():
        again = vlc.javascript_bundle("import x", vl_version="6")
        other = vlc.javascript_bundle("import y", vl_version="6")  # another source is another bundle
    assert first == again == other == "/*js*/" and built == ["import x", "import y"]
    assert len(list((tmp_path / "labkit").glob("altair-offline-*.js"))) == 2
    assert vlc.javascript_bundle("z") == "/*js*/" and built[-1] == "z"  # the real builder is back after the block


def test_builders_render_to_svg_offline(result):
    c = compare(Measured(1e6, 1, "a"), Measured(8e5, 2, "b"))
    for chart in (charts.distribution_chart(result), charts.cdf_chart(result, log_x=True), charts.percentile_chart(result),
                  charts.percentile_chart(result, log_y=True)):
        svg = charts.to_svg(chart)
        assert svg.startswith("<svg") and "time (µs)" in svg   # samples of 1–2 µs
    assert "time (µs)" in charts.to_svg(charts.ab_chart(c))     # samples around 0.9 ms: 900 µs, not 0.9 ms


@pytest.mark.parametrize(("median_ns", "unit", "shown"), [
    (300, "ns", 300.0), (4_500, "µs", 4.5), (3e6, "ms", 3.0), (2.5e9, "s", 2.5)])
def test_time_axes_are_in_the_unit_a_reader_would_pick_from_the_data(median_ns, unit, shown):
    # GIVEN samples around a median of median_ns
    r = BenchResult("f", tuple(np.full(20, float(median_ns))), 10, ())
    c = compare(Measured(median_ns, 1, "a"), Measured(median_ns * 0.8, 2, "b"))
    # THEN every time axis is in that unit, the values drawn in it
    for chart in (charts.distribution_chart(r), charts.cdf_chart(r), charts.percentile_chart(r, log_y=True)):
        spec = chart.to_dict()
        enc = spec["encoding"]
        axis = (enc.get("x") if enc["x"]["field"] == "time" else enc["y"])["title"]
        assert axis.startswith(f"time ({unit})"), axis
        values = next(iter(spec["datasets"].values()))
        assert values[0]["time"] == pytest.approx(shown)
    assert f"time ({unit})" in charts.to_svg(charts.ab_chart(c))


def test_duration_unit_reads_the_median_of_what_it_is_given():
    from labkit.measure.stats import duration_unit

    assert duration_unit([999, 1_000, 1_001]) == (1e3, "µs")
    assert duration_unit([1e6, 2e6, 5e9]) == (1e6, "ms")          # one slow outlier does not set the unit
    assert duration_unit([]) == (1.0, "ns") and duration_unit([0, float("nan")]) == (1.0, "ns")


def test_warmup_samples_stay_out_of_charts(result):
    data = charts.cdf_chart(result).data
    assert len(data) == 50 and data["time"].max() == 2.0  # the 5 µs warm-up sample is not drawn (µs: 1–2 µs)


def test_bad_input_is_explained():
    with pytest.raises(BadInputError, match="to_frame"):
        charts.cdf_chart([1, 2, 3])


def test_the_revisited_labs_charts_render_offline_and_refuse_frames_without_their_columns():
    import pandas as pd

    sizes = pd.DataFrame([{"function": f, "pieces": n, "ns": n ** k} for f, k in (("+=", 2), ("join", 1))
                          for n in (100, 400)])
    svg = charts.to_svg(charts.loglog_chart(sizes, x="pieces"))
    assert "slope 1" in svg and "slope 2" in svg
    guides = charts.loglog_chart(sizes, x="pieces").layer[0].data
    assert guides[guides["guide"] == "slope 2"]["time"].tolist() == pytest.approx([10.0, 160.0])  # µs, anchored at +=
    stages = pd.DataFrame([{"variant": "naive", "kind": k, "stage": s, "ms": 1.0} for k in ("napkin", "measured")
                           for s in ("db", "catalog")])
    assert "naive · napkin" in charts.to_svg(labkit.latency.napkin_chart(stages))
    calls = pd.DataFrame([{"variant": v, "start_ms": i, "end_ms": i + 0.5, "kind": "sql"} for v, n in
                          (("naive", 30), ("batched", 3)) for i in range(n)])
    svg = charts.to_svg(labkit.nplusone.calls_chart(calls))
    assert "naive: 30 calls" in svg and "batched: 3 calls" in svg
    sweep = pd.DataFrame([{"delay_ms": d, "variant": "naive", "ms": 1 + d, "kind": k} for d in (0, 1)
                          for k in ("measured", "napkin")])
    assert "dashed: napkin" in charts.to_svg(labkit.nplusone.distance_chart(sweep))
    for build in (lambda f: charts.loglog_chart(f, x="pieces"), labkit.latency.napkin_chart, labkit.nplusone.calls_chart,
                  labkit.nplusone.distance_chart):
        with pytest.raises(BadInputError, match="needs columns"):
            build(pd.DataFrame({"x": [1]}))


def test_predicted_vs_measured_draws_the_time_saved_with_the_measured_interval():
    import pandas as pd

    frame = pd.DataFrame([{"experiment": "dict", "kind": "your guess", "ratio": 0.9},
                          {"experiment": "dict", "kind": "measured", "ratio": 0.46, "ratio_lo": 0.43, "ratio_hi": 0.49}])
    spec = charts.predicted_vs_measured(frame).to_dict()
    values = next(iter(spec["datasets"].values()))
    assert [round(v["saving"], 2) for v in values] == [0.1, 0.54]
    assert [round(v["saving_lo"], 2) for v in values if v["kind"] == "measured"] == [0.51]
    # the band a prediction must end in to be confirmed: the interval widened by the napkin tolerance (25 %)
    measured = next(v for v in values if v["kind"] == "measured")
    assert (measured["band_lo"], measured["band_hi"]) == pytest.approx((1 - 0.49 * 1.25, 1 - 0.43 / 1.25))
    marks = [layer["mark"]["type"] for layer in spec["spec"]["layer"]]
    assert marks == ["rect", "bar", "rule", "text"] and spec["spec"]["layer"][1]["encoding"]["x"]["field"] == "saving"
    assert "±25%" in spec["title"]["subtitle"]
    # each bar says its factor (the % axis squeezes 5x and 13x together), right of the bar and of its interval
    assert [v["says"] for v in values] == ["1.11× faster", "2.17× faster"]
    assert measured["says_at"] == pytest.approx(0.57)
    # without an interval: the bars and their factors alone
    plain = charts.predicted_vs_measured(frame.drop(columns=["ratio_lo", "ratio_hi"])).to_dict()
    assert [layer["mark"]["type"] for layer in plain["spec"]["layer"]] == ["bar", "text"]


def test_log_ticks_label_every_decade_the_data_spans_from_where_it_starts():
    from labkit.charts.samples import log_ticks

    assert log_ticks(0.3, 40) == [0.3, 0.5, 1, 2, 5, 10, 20]
    assert log_ticks(0.6, 20) == [0.6, 1, 2, 5, 10, 20]  # the data's start, where the next tick is far above it
    assert log_ticks(0.63, 20) == [1, 2, 5, 10, 20]  # 0.7 would crowd 1
    assert log_ticks(1, 1e7) == [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7]  # a wide range: decades only
    assert log_ticks(1, 20, signed=True) == [-20, -10, -5, -2, -1, 0, 1, 2, 5, 10, 20]


def test_the_crossover_and_a_log_cdf_label_the_small_values_that_matter():
    import pandas as pd

    frame = pd.DataFrame({"items": [1, 10, 100, 1000], "saved µs": [-2.0, 15.0, 160.0, 1700.0], "format": "orjson"})
    y = charts.crossover_chart(frame, floor_us=480).to_dict()["layer"][0]["encoding"]["y"]
    assert {1, 10, 100} <= set(y["axis"]["values"])  # a symlog axis left everything below 1,000 blank
    assert min(y["axis"]["values"]) == -2  # no negative ticks far below the data's -2
    # two codecs that save alike: each line is named at its end (one hidden under the other is still read), and
    # the floor's label sits at the left, where small payloads keep the lines far below it
    alike = pd.concat([frame, frame.assign(format="msgspec")])
    spec = charts.crossover_chart(alike, floor_us=480).to_dict()
    named = [layer for layer in spec["layer"][1]["layer"]]
    assert sorted(spec["datasets"][n["data"]["name"]][0]["format"] for n in named) == ["msgspec", "orjson"]
    assert spec["layer"][3]["encoding"]["x"] == {"value": 0}
    fast = BenchResult("f", tuple(np.geomspace(0.6e6, 20e6, 200)), 1, (1.0,))
    x = charts.cdf_chart(fast, log_x=True).to_dict()["encoding"]["x"]
    assert x["axis"]["values"][0] < 1 <= x["axis"]["values"][1]  # labelled from below 1 ms (the data's start)


def test_the_format_map_keeps_labels_of_formats_on_one_spot_apart():
    import pandas as pd

    frame = pd.DataFrame({"format": ["json", "orjson", "msgspec (json)", "msgspec (msgpack)"],
                          "KiB": [858.0, 794.0, 794.0, 677.8], "round trip µs": [16442.0, 5147.0, 5102.0, 4124.0]})
    spec = charts.format_map_chart(frame).to_dict()
    texts = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"]
    where = {row["format"]: (t["mark"]["dx"], t["mark"]["dy"]) for t in texts
             for row in spec["datasets"][t["data"]["name"]]}
    assert sorted(where) == sorted(frame["format"])  # every format labelled, once
    assert where["orjson"] != where["msgspec (json)"]  # the two on one spot: one label each, apart
