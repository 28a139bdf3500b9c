"""labkit.alloc: allocation counts per call (tracemalloc + a memray census), their values, and bad input."""

from __future__ import annotations

import asyncio
import builtins
import functools
import tracemalloc

import pytest

import labkit
from labkit import alloc
from labkit.alloc import AllocationCount, AllocComparison, Census
from labkit.errors import BadInputError, ProbeUnavailable
from labkit.toyshop.core import encode_products, make_products

memray = pytest.importorskip("memray")


def keep() -> list[str]:
    return [str(i) * 3 for i in range(2_000)]  # 2,000 new strings alive at return


def churn() -> int:
    held = [{"i": i} for i in range(5_000)]  # 5,000 dicts alive at once: gen-0 collections fire
    return len(held)


def test_count_sees_survivors_peaks_and_collections():
    kept = alloc.count(keep, calls=3)
    assert kept.blocks >= 2_000 and kept.size_bytes > 2_000 * 50 and kept.peak_bytes > 2_000 * 50
    churned = alloc.count(churn, calls=3)
    assert churned.blocks < 50 and churned.peak_bytes > 200_000
    assert churned.gc_collections[0] >= 1
    assert kept.allocations >= 2_000 and churned.allocations >= 5_000
    assert "alive after the call" in str(churned) and "medians of 3 calls" in str(churned)


def test_census_counts_freed_temporaries_too():
    products = make_products(20)
    by_codec = {c: alloc.count(encode_products, products, codec=c, calls=3) for c in ("json", "orjson")}
    # json builds an intermediate str, escapes, then encodes; orjson writes bytes straight away
    assert by_codec["json"].allocations > 2 * by_codec["orjson"].allocations > 0
    assert by_codec["json"].bytes_allocated > by_codec["orjson"].bytes_allocated > 0
    assert all(a.blocks <= 20 for a in by_codec.values())  # but nearly nothing survives either call
    assert alloc.count(lambda: None, calls=3).allocations <= 5  # the tracker's own few are subtracted


def test_summaries_are_medians_and_per_call_values_are_kept():
    sizes = iter([10, 1_000, 100, 10, 10, 10])  # warm-up, then three counted calls: 1,000, 100, 10

    def varying() -> None:
        n = next(sizes)
        held = [str(i + 1_000) for i in range(n)]  # n new ints and n new strings, alive together
        assert held

    a = alloc.count(varying, calls=3, census=False)
    assert len(a.peak_bytes_per_call) == 3 and a.calls == 3
    assert a.peak_bytes_per_call[0] > a.peak_bytes_per_call[1] > a.peak_bytes_per_call[2]
    assert a.peak_bytes == a.peak_bytes_per_call[1]  # the middle one
    frame = a.to_frame()
    assert list(frame["call"]) == [0, 1, 2] and list(frame["peak_bytes"]) == list(a.peak_bytes_per_call)
    assert {"allocations", "bytes_allocated", "blocks", "size_bytes", "gc0", "gc1", "gc2"} <= set(frame.columns)


def test_warmup_calls_are_not_counted():
    cache: list[bytes] = []

    def fills_once() -> int:
        if not cache:
            cache.append(bytes(1_000_000))  # a one-time cost, like a lazily built buffer
        return len(cache[0])

    assert alloc.count(fills_once, calls=2, warmup=1).bytes_allocated < 10_000
    cache.clear()
    cold = alloc.count(fills_once, calls=1, warmup=0, census=False)
    assert cold.size_bytes >= 1_000_000


def test_results_save_and_load(tmp_path):
    c = alloc.compare(keep, lambda: None, calls=2, names=("keep", "nothing"))
    assert isinstance(c, AllocComparison) and c.ratio("allocations") < 0.01
    assert c.ratios["blocks"] == c.candidate.blocks / c.baseline.blocks
    back = AllocComparison.load(c.save(tmp_path / "c.json"))
    assert back == c and isinstance(back.baseline, AllocationCount)
    assert back.baseline.gc_collections_per_call == c.baseline.gc_collections_per_call
    one = AllocationCount.load(c.baseline.save(tmp_path / "a.json"))
    assert one == c.baseline and one.allocations == c.baseline.allocations
    frame = c.to_frame()
    assert list(frame["metric"][:2]) == ["allocations", "bytes_allocated"]
    assert "counts, not times" in str(c)
    with pytest.raises(BadInputError, match="unknown metric"):
        c.ratio("speed")


def test_counting_is_never_timing():
    a = alloc.count(list, calls=1, census=False)
    # WHEN a count is handed to the timing comparison THEN it says what to use instead
    with pytest.raises(BadInputError, match="no times.*labkit.bench"):
        labkit.compare(a, a)
    assert not any(f.endswith("_ns") or "time" in f for f in AllocationCount.__dataclass_fields__)


@pytest.mark.parametrize("fn, match", [(None, "fn must be a callable"), (42, "fn must be a callable"),
                                       ([1, 2], "fn must be a callable")])
def test_not_callable_is_a_clear_error(fn, match):
    with pytest.raises(BadInputError, match=match):
        alloc.count(fn)


def test_a_call_result_instead_of_the_function_says_so():
    with pytest.raises(BadInputError, match="did you call it"):
        alloc.count(keep())


def test_coroutine_function_is_refused_with_a_way_out():
    async def fetch() -> int:
        return 1

    with pytest.raises(BadInputError, match="coroutine function.*asyncio.run"):
        alloc.count(fetch)
    assert alloc.count(lambda: asyncio.run(fetch()), calls=1, census=False).calls == 1


@pytest.mark.parametrize("kw, match", [({"calls": 0}, "calls"), ({"warmup": -1}, "warmup"),
                                       ({"calls": 2.5}, "calls")])
def test_bad_counts_are_clear_errors(kw, match):
    with pytest.raises(BadInputError, match=match):
        alloc.count(list, **kw)


def test_census_steps_aside_for_another_memray_tracker(tmp_path):
    with memray.Tracker(str(tmp_path / "outer.bin")):
        counted = alloc.count(lambda: [str(i) for i in range(100)], calls=1)
    assert counted.allocations is None and counted.bytes_allocated is None
    assert "another memray tracker" in counted.census_note
    assert counted.blocks >= 100  # tracemalloc still counted
    assert "allocations not counted (another memray tracker" in str(counted)


def test_memray_missing_is_a_labelled_none(monkeypatch):
    real_import = builtins.__import__

    def no_memray(name, *args, **kwargs):
        if name == "memray" or name.startswith("memray."):
            raise ImportError("No module named 'memray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_memray)
    a = alloc.count(list, calls=1)
    assert a.allocations is None and "memray is not installed" in a.census_note
    with pytest.raises(ProbeUnavailable, match="pip install memray"):
        Census().start()
    assert alloc.count(list, calls=1, census=False).census_note == "census=False"


def test_tracers_stop_when_the_function_raises():
    def boom() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        alloc.count(boom, warmup=0)
    assert not tracemalloc.is_tracing()
    with Census() as c:  # a new census can start: nothing was left running
        [str(i) for i in range(50)]
    assert c.allocations >= 50


def test_a_tracemalloc_already_running_is_kept_running_and_noted():
    tracemalloc.start()
    try:
        a = alloc.count(keep, calls=1, census=False)
        assert tracemalloc.is_tracing() and a.blocks >= 2_000
        assert any("already tracing" in n for n in a.notes)
    finally:
        tracemalloc.stop()


def test_census_forms_and_misuse():
    c = Census().start()
    data = [bytes(100) for _ in range(300)]
    c.stop()
    assert c.allocations >= 300 and c.bytes_allocated >= 300 * 100 and data
    assert "allocations=" in repr(c)
    with pytest.raises(ProbeUnavailable, match="not started"):
        Census().stop()
    running = Census().start()
    try:
        with pytest.raises(ProbeUnavailable, match="another memray tracker"):
            Census().start()
    finally:
        running.stop()


def test_keyword_named_like_an_option_goes_through_partial():
    def f(calls: int) -> list[int]:
        return list(range(calls))

    assert alloc.count(functools.partial(f, calls=3), calls=1, census=False).calls == 1


# -- the process's resident memory (RSS high-water), which sees native allocations too ---------------------------


def test_rss_peak_sees_a_native_allocation_in_place_and_in_a_fresh_process(tmp_path):
    import numpy as np

    from labkit.alloc import RssPeak

    mib = 2**20
    # GIVEN numpy.ones, which allocates and fills (so touches) 80 MiB outside Python's object allocator
    here = alloc.rss_peak(np.ones, 10 * mib)
    assert not here.fresh and "VmHWM" in here.method and here.added_bytes >= 70 * mib
    assert alloc.rss_peak(np.ones, 10).added_bytes < 8 * mib             # a tiny call: no such peak
    fresh = alloc.rss_peak(np.ones, 10 * mib, fresh=True)
    assert fresh.fresh and fresh.added_bytes >= 70 * mib and "fresh process" in str(fresh)
    assert RssPeak.load(here.save(tmp_path / "rss.json")) == here
    with pytest.raises(BadInputError, match="cannot be pickled"):
        alloc.rss_peak(lambda: None, fresh=True)
    with pytest.raises(BadInputError, match="needs a callable"):
        alloc.rss_peak(np.ones(3))


def test_rss_peak_sees_a_warm_call_again_and_again():
    import numpy as np

    # GIVEN a call that allocates and fills 8 MiB, freed when it returns: glibc keeps such memory resident
    def fill() -> float:
        return float(np.ones(2**20).sum())

    # WHEN its peak is read four times in a row THEN each reading sees the 8 MiB (freed memory is handed back
    # to the kernel before each call, so a warm call touches its pages again)
    assert all(alloc.rss_peak(fill).added_bytes >= 6 * 2**20 for _ in range(4))


def _mapped(size: int = 32 * 2**20) -> int:
    import mmap

    m = mmap.mmap(-1, size)        # memory no Python allocator hands out: tracemalloc and memray cannot see it
    for i in range(0, size, 4096):
        m[i] = 1                   # touched, so resident
    m.close()
    return size


def test_count_puts_the_resident_memory_peak_beside_the_allocation_profile_by_default():
    # WHEN a call that maps and touches 32 MiB is counted
    a = alloc.count(_mapped, calls=2, census=False)
    # THEN tracemalloc's peak misses it and the resident-memory peak of one more, untraced call sees it
    assert a.peak_bytes < 2**20 and a.rss_added_bytes >= 24 * 2**20 and a.rss_note == ""
    assert "resident memory +" in str(a) and "native included" in str(a)
    c = alloc.compare(_mapped, lambda: 0, calls=1, census=False, names=("mapped", "nothing"))
    assert c.ratio("rss_added_bytes") < 0.25 and "rss_added_bytes" in str(c)
    # AND it can be left out, saying so
    off = alloc.count(_mapped, calls=1, census=False, rss=False)
    assert off.rss_added_bytes is None and off.rss_note == "rss=False" and "not read (rss=False)" in str(off)


def test_no_ratio_is_given_for_resident_memory_within_a_few_pages_of_noise():
    from labkit.alloc.counts import RSS_NOISE_BYTES, AllocationCount, AllocComparison

    def side(name, rss):
        return AllocationCount(name, (10,), (100,), (1,), (8,), (8,), ((0, 0, 0),), rss_added_bytes=rss)

    # GIVEN two calls whose resident memory moved by a few pages THEN no ratio, and the text says why
    small = AllocComparison(side("a", 86_016), side("b", 8_192))
    assert small.ratio("rss_added_bytes") is None and small.ratio("allocations") == 1.0
    assert "within a resident-memory reading's noise" in str(small) and "×0.0952" not in str(small)
    # AND above the noise the ratio is given as before
    big = AllocComparison(side("a", 4 * RSS_NOISE_BYTES), side("b", 2 * RSS_NOISE_BYTES))
    assert big.ratio("rss_added_bytes") == 0.5 and "×0.5" in str(big)


def _many(n):
    return [str(i) for i in range(n)]


def _few(n):
    return list(range(n))


def test_a_memory_verdict_concludes_an_experiment_and_the_report_says_so():
    from labkit.learner.record import Experiment
    from labkit.report.baseline import Concluded
    from labkit.report.summary import answer

    c = alloc.compare(_many, _few, 2_000, calls=5)
    m = c.verdict("allocations")
    assert m.verdict == "less" and m.ratio < 0.5 and m.ci[0] <= m.ratio <= m.ci[1]
    assert "less" in str(m) and "allocations per call" in str(m)
    exp = Experiment.plan("ints, not strings", "one str per item is one more allocation each; ints below 256 are "
                          "cached, the rest are one allocation too, so expect about half", predicted_ratio=0.5)
    done = exp.conclude(m)
    assert done.verdict == "less" and done.measured_ratio == m.ratio and done.outcome in ("confirmed", "refuted")
    line = answer(Concluded.of(done.to_dict()))
    assert "not measured" not in line and "less allocations" in line
    # the whole comparison is not a verdict: it says which metric to conclude on
    with pytest.raises(BadInputError, match=r"verdict\('allocations'\)"):
        exp.conclude(c)
    with pytest.raises(BadInputError, match="resident memory is one reading"):
        c.verdict("rss_added_bytes")


_CACHE: dict[int, str] = {}


def _refill(n):
    # the trap of the design review: clear the cache, then fill it again — net growth is about nothing
    _CACHE.clear()
    for i in range(n):
        _CACHE[i] = "x" * 100 + str(i)


def test_retained_counts_what_a_call_leaves_alive_even_when_it_freed_as_much():
    kept = alloc.retained(_refill, 2_000)
    per_entry = kept.bytes / 2_000
    assert 100 <= per_entry <= 400, per_entry                      # each entry's string is ~150 bytes
    assert kept.top and "test_alloc.py" in kept.top[0][0]
    fresh = alloc.retained(lambda: [bytes(1000) for _ in range(100)])
    assert 100_000 <= fresh.bytes <= 120_000 and "KiB alive" in str(fresh)


def _holds_a_megabyte() -> int:
    held = [bytes(1000) for _ in range(1000)]  # the peak's holder
    return len(held)


def test_census_peak_and_the_lines_that_allocated_and_held_it():
    with Census(sites=3) as c:
        _holds_a_megabyte()
    assert c.peak_bytes >= 1000 * 1000
    line = f"{__file__}:{_holds_a_megabyte.__code__.co_firstlineno + 1}"
    assert c.allocating_sites[0][0] == line and c.allocating_sites[0][1] >= 1000
    assert c.peak_sites[0][0] == line and c.peak_sites[0][2] >= 1000 * 1000
    with Census() as quiet:
        pass
    assert quiet.peak_bytes < c.peak_bytes and quiet.allocating_sites == () == quiet.peak_sites
