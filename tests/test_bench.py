import json

import pytest

import labkit
from labkit.errors import BadInputError, LabkitError
from labkit.measure.microbench import BenchResult, bench


def test_bench_with_fake_clock_gives_exact_numbers(clock):
    # GIVEN a function that "takes" 250 ns per call on the fake clock
    def work():
        clock.tick(250)

    # WHEN it is benchmarked with a fixed loop count
    r = bench(work, repeat=5, warmup=2, loops=100, clock=clock)

    # THEN every sample is exactly 250 ns per call, warm-up kept apart
    assert r.samples_ns == (250.0,) * 5
    assert r.warmup_ns == (250.0, 250.0)
    assert r.loops == 100 and r.median_ns == 250.0 and r.name == "work"
    assert "250 ns" in str(r)


def test_calibration_grows_loops_until_a_sample_is_long_enough(clock):
    def work():
        clock.tick(1_000)  # 1 µs per call

    r = bench(work, repeat=3, warmup=0, min_sample_time=0.001, clock=clock)  # 1 ms samples
    assert r.loops * 1_000 >= 1_000_000
    assert r.samples_ns == (1000.0,) * 3
    assert len(r.warmup_ns) >= 2  # the calibration runs count as warm-up, never as samples


def test_warmup_is_kept_apart_from_samples(clock):
    calls = {"n": 0}

    def cold_then_warm():
        calls["n"] += 1
        clock.tick(10_000 if calls["n"] <= 10 else 100)  # the first 10 calls are cold

    r = bench(cold_then_warm, repeat=4, warmup=1, loops=10, clock=clock)
    assert r.warmup_ns == (10_000.0,)
    assert r.samples_ns == (100.0,) * 4


def test_wide_spread_earns_a_warning_that_says_what_to_do(clock):
    durations = iter([100, 100, 100, 300, 100, 300, 100, 300, 100, 300])

    def jittery():
        clock.tick(next(durations))

    r = bench(jittery, repeat=8, warmup=2, loops=1, clock=clock)
    assert any("spread widely" in w and "repeat=" in w for w in r.warnings)


def test_short_samples_earn_a_warning(clock):
    r = bench(lambda: clock.tick(5), repeat=3, warmup=0, loops=1, clock=clock)
    assert any("close to the clock's resolution" in w for w in r.warnings)


@pytest.mark.parametrize("kwargs, message", [
    ({"repeat": -1}, "repeat must be an integer ≥ 2"),
    ({"repeat": 1.5}, "repeat must be an integer"),
    ({"warmup": -2}, "warmup must be an integer ≥ 0"),
    ({"loops": 0}, "loops must be an integer ≥ 1"),
    ({"min_sample_time": 0}, "min_sample_time must be a finite number > 0 seconds"),
])
def test_bad_arguments_raise_labkit_errors(kwargs, message):
    with pytest.raises(BadInputError, match=message):
        bench(lambda: None, **kwargs)


def test_a_called_function_is_caught_with_a_hint():
    with pytest.raises(LabkitError, match="did you call it"):
        bench(sum([1, 2]))


def test_result_round_trips_through_json(tmp_path, clock):
    r = bench(lambda: clock.tick(42), name="tick", repeat=3, warmup=1, loops=2, clock=clock)
    path = r.save(tmp_path / "r.json")
    data = json.loads(path.read_text())
    assert data["kind"] == "bench" and data["version"] == 1 and "cpu_model" in data["fingerprint"]
    back = BenchResult.load(path)
    assert back == r and isinstance(back.samples_ns, tuple)
    frame = r.to_frame()
    assert list(frame.columns) == ["name", "phase", "sample", "ns", "loops"]
    assert (frame[frame.phase == "measured"].ns == 42.0).all()


def test_real_clock_smoke():
    r = labkit.bench(sorted, list(range(100)), repeat=3, min_sample_time=0.001)
    assert len(r.samples_ns) == 3 and r.median_ns > 0


def test_a_result_shows_its_text_in_a_notebook(clock):
    # one text repr for every result whose view is its text (labkit.results.TextRepr): print() and the cell agree
    from html import escape

    r = bench(lambda: clock.tick(1000), repeat=3, warmup=0, loops=1, clock=clock)
    assert r._repr_html_() == "<pre>" + escape(str(r)) + "</pre>" and "µs" in str(r)


def test_a_busy_machine_is_named_and_the_advice_fits_whether_the_samples_were_interleaved():
    from labkit.measure.microbench import diagnose

    samples = [1_000_000.0] * 10
    alone = diagnose(samples, 1, [], 1.0, load=3.8, cores=2)
    paired = diagnose(samples, 1, [], 1.0, load=3.8, cores=2, interleaved=True)
    assert any("load average 3.8 on 2 cores" in w and "compare A and B interleaved" in w for w in alone)
    assert any("load average 3.8" in w and "interval holds it" in w for w in paired)
    assert not any("compare A and B interleaved" in w for w in paired)   # it already was
