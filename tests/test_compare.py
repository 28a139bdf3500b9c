import numpy as np
import pytest

from labkit.errors import BadInputError
from labkit.measure.comparison import Comparison, compare, plan_looks, verdict_for


class Measured:
    """Stands in for any measured result (a load test): it only needs samples_ns."""

    def __init__(self, samples, name):
        self.samples_ns = samples
        self.name = name


def lognormal(median, sigma, n, seed):
    return np.random.default_rng(seed).lognormal(np.log(median), sigma, n)


@pytest.mark.parametrize("ci, p, verdict", [
    ((0.98, 1.03), 0.40, "same"),
    ((0.97, 1.02), 0.01, "same"),        # significant but smaller than min_effect: it does not matter
    ((0.70, 0.80), 0.001, "faster"),
    ((1.15, 1.25), 0.001, "slower"),
    ((0.90, 1.12), 0.30, "inconclusive"),
    ((0.80, 0.92), 0.20, "inconclusive"),  # interval and test disagree: too noisy to tell
])
def test_verdict_rule(ci, p, verdict):
    assert verdict_for(ci, p, min_effect=0.05, alpha=0.05) == verdict


@pytest.mark.parametrize("seed", range(5))
def test_measured_samples_same_distribution_is_same(seed):
    a = Measured(lognormal(1e6, 0.1, 2000, seed), "a")
    b = Measured(lognormal(1e6, 0.1, 2000, seed + 100), "b")
    assert compare(a, b).verdict == "same"


@pytest.mark.parametrize("seed", range(5))
def test_measured_samples_twenty_percent_slower_is_slower(seed):
    a = Measured(lognormal(1e6, 0.1, 500, seed), "a")
    b = Measured(lognormal(1.2e6, 0.1, 500, seed + 100), "b")
    c = compare(a, b)
    assert c.verdict == "slower" and c.ratio == pytest.approx(1.2, rel=0.03) and not c.paired


def test_measured_samples_faster_and_too_noisy():
    a = Measured(lognormal(1e6, 0.05, 300, 1), "a")
    assert compare(a, Measured(lognormal(0.5e6, 0.05, 300, 2), "b")).verdict == "faster"
    noisy_a = Measured(lognormal(1e6, 1.0, 8, 3), "a")
    noisy_b = Measured(lognormal(1.1e6, 1.0, 8, 4), "b")
    assert compare(noisy_a, noisy_b).verdict == "inconclusive"


def test_interleaved_callables_with_fake_clock(clock):
    order = []

    def base():
        order.append("A")
        clock.tick(1000)

    def cand():
        order.append("B")
        clock.tick(500)

    # one call a sample; one look (a fixed design): 6 rounds out of 6 is p = 0.031 < α = 0.05
    c = compare(base, cand, rounds=6, max_rounds=6, warmup=0, min_sample_time=1e-7, clock=clock)
    assert c.verdict == "faster" and c.confidence == 0.95 and (c.look, c.looks) == (1, 1)
    assert c.ratio == 0.5 and c.paired and c.baseline_ns == (1000.0,) * 6
    # after calibration (each side alone), rounds alternate who goes first: AB BA AB …
    rounds = "".join(order[-12:])
    assert rounds == "AB" "BA" "AB" "BA" "AB" "BA"


def test_paired_verdicts_with_jitter(clock):
    rng = np.random.default_rng(0)

    def make(cost):
        def fn():
            clock.tick(int(cost * rng.lognormal(0, 0.03)))
        return fn

    slower = compare(make(1000), make(1200), rounds=20, min_sample_time=1e-6, clock=clock)
    assert slower.verdict == "slower"
    same = compare(make(1000), make(1000), rounds=20, min_sample_time=1e-6, clock=clock)
    assert same.verdict == "same"


def test_mixed_inputs_and_bad_settings_are_refused():
    with pytest.raises(BadInputError, match="two callables or two measured results"):
        compare(lambda: None, Measured([1, 2], "x"))
    with pytest.raises(BadInputError, match="min_effect"):
        compare(Measured([1, 2], "a"), Measured([1, 2], "b"), min_effect=5)
    with pytest.raises(BadInputError, match="rounds must be"):
        compare(lambda: None, lambda: None, rounds=1)


def test_comparison_round_trips_and_reads_well(tmp_path):
    c = compare(Measured(lognormal(1e6, 0.05, 200, 1), "json"), Measured(lognormal(5e5, 0.05, 200, 2), "orjson"))
    assert c.summary().startswith("orjson is 2.0") and "faster than json" in c.summary()
    back = Comparison.load(c.save(tmp_path / "c.json"))
    assert back == c and back.ci == c.ci
    df = c.to_frame()
    assert set(df.role) == {"baseline", "candidate"} and len(df) == 400
    assert "FASTER" in c._repr_html_()


def test_plain_sample_lists_are_accepted():
    a = list(lognormal(1e6, 0.05, 300, 1))
    b = lognormal(1.5e6, 0.05, 300, 2)
    c = compare(a, b, names=("before", "after"))
    assert c.verdict == "slower" and c.baseline_name == "before" and not c.paired


def test_inconclusive_rounds_are_extended_within_the_budget(clock):
    # GIVEN two functions whose per-call times alternate wildly (a noisy machine), so 6 rounds cannot decide
    rng = np.random.default_rng(5)

    def noisy(cost):
        def fn():
            clock.tick(int(cost * rng.choice([1.0, 1.6])))
        return fn

    fixed = compare(noisy(1000), noisy(1000), rounds=6, max_rounds=6, min_sample_time=1e-7, clock=clock)
    grown = compare(noisy(1000), noisy(1000), rounds=6, max_rounds=60, min_sample_time=1e-7, clock=clock)
    # THEN a fixed count stops at 6 rounds, while the default keeps adding rounds until it can tell
    assert len(fixed.baseline_ns) == 6
    assert len(grown.baseline_ns) > 6 and len(grown.baseline_ns) % 6 == 0 and len(grown.baseline_ns) <= 60


def test_a_clear_difference_stops_at_the_first_rounds(clock):
    c = compare(lambda: clock.tick(1000), lambda: clock.tick(2000), rounds=8, min_sample_time=1e-7, clock=clock)
    assert c.verdict == "slower" and len(c.candidate_ns) == 8


def test_time_budget_bounds_the_extension(clock):
    rng = np.random.default_rng(1)
    c = compare(lambda: clock.tick(int(1e6 * rng.choice([1.0, 2.0]))), lambda: clock.tick(int(1e6 * rng.choice([1.0, 2.0]))),
                rounds=5, max_rounds=500, max_time=0.02, min_sample_time=1e-7, clock=clock)
    assert len(c.baseline_ns) <= 10  # 5 rounds take ~15 ms of fake time: one more batch at most


def test_long_comparisons_show_progress_short_ones_do_not(clock, capsys, monkeypatch):
    monkeypatch.setattr("labkit.progress.in_notebook", lambda: True)   # the rule's default shows bars in Jupyter
    compare(lambda: clock.tick(1000), lambda: clock.tick(2000), rounds=4, min_sample_time=1e-7, clock=clock)
    assert "A/B rounds" not in capsys.readouterr().err
    # rounds of ~1 s each on the fake clock: the bar appears on its own
    compare(lambda: clock.tick(10**9), lambda: clock.tick(2 * 10**9), rounds=4, min_sample_time=1e-7,
            warmup=0, clock=clock)
    assert "A/B rounds" in capsys.readouterr().err
    # outside a notebook (a script, a test) it stays quiet unless asked
    monkeypatch.setattr("labkit.progress.in_notebook", lambda: False)
    compare(lambda: clock.tick(10**9), lambda: clock.tick(2 * 10**9), rounds=4, min_sample_time=1e-7,
            warmup=0, clock=clock)
    assert "A/B rounds" not in capsys.readouterr().err


def test_a_round_longer_than_the_heartbeat_still_moves_the_bar(clock, monkeypatch):
    import threading

    from labkit import progress
    from labkit.measure import comparison

    # GIVEN a comparison's bar, and rounds that last until the bar has been redrawn during them
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.01)
    redrawn = threading.Event()

    class Bar:
        total, n = 4, 0

        def refresh(self):
            redrawn.set()

        def update(self, n=1):
            self.n += n

        def set_postfix_str(self, text, refresh=True):
            pass

        def close(self):
            pass

    monkeypatch.setattr(comparison, "steps_bar", lambda *a, **k: Bar())
    counted = []

    def slow_round():
        clock.tick(1000)
        if len(counted) > 4:  # past calibration and warm-up: a counted call waits for a redraw
            assert redrawn.wait(10), "the bar stood still during a long round"
            redrawn.clear()
        counted.append(1)

    compare(slow_round, lambda: clock.tick(2000), rounds=4, max_rounds=4, min_sample_time=1e-7, warmup=0,
            clock=clock, progress=True)
    assert len(counted) > 4


def test_a_slow_warm_up_already_shows_the_bar(clock, monkeypatch):
    import threading

    from labkit import progress

    # GIVEN calls so slow that calibrating and warming up outlast a heartbeat
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.01)
    shown: list[str] = []
    up = threading.Event()
    real_new_bar = progress.new_bar

    def recording_bar(total, desc, unit, **kw):
        bar = real_new_bar(total, desc, unit, **kw)
        shown.append(desc)
        up.set()
        return bar

    monkeypatch.setattr(progress, "new_bar", recording_bar)

    def slow():
        clock.tick(1000)
        assert up.wait(10), "no bar while warming up"

    # WHEN they are compared THEN the rounds' bar was up during the warm-up already, and only that one bar
    compare(slow, lambda: clock.tick(2000), rounds=4, max_rounds=4, min_sample_time=1e-7, clock=clock, progress=True)
    assert shown == ["A/B rounds"]


def test_fresh_inputs_give_every_call_an_unseen_input_and_both_sides_the_same_ones():
    # GIVEN a baseline and a memoised copy of it, and a factory of inputs
    seen_by: dict[str, list[tuple[int, ...]]] = {"base": [], "memo": []}
    cache: dict[tuple[int, ...], int] = {}
    made: list[int] = []

    def base(xs):
        seen_by["base"].append(tuple(xs))
        return sum(xs)

    def memo(xs):
        key = tuple(xs)
        seen_by["memo"].append(key)
        if key not in cache:
            cache[key] = sum(xs)
        return cache[key]

    def inputs(k):
        made.append(k)
        return ([k, k + 1, k + 2],)

    # WHEN they are compared on fresh inputs
    c = compare(base, memo, inputs=inputs, rounds=6, max_rounds=6, warmup=1)

    # THEN each side saw every round's input once, the same sequence, and the memo never had a hit to serve
    timed_b = [s for s in seen_by["base"] if s[0] >= 0]
    timed_m = [s for s in seen_by["memo"] if s[0] >= 0]
    assert timed_b == timed_m == [(r, r + 1, r + 2) for r in range(6)]
    assert len(cache) == len(seen_by["memo"])          # no input was ever answered from the cache
    assert len(c.baseline_ns) == len(c.candidate_ns) == 6 and c.paired
    assert all(k < 0 for k in made[:2])                 # warm-up inputs are never graded inputs


def test_fresh_inputs_refuse_args_too_and_non_tuples():
    with pytest.raises(BadInputError, match="not both"):
        compare(sum, sum, [1], inputs=lambda k: ([k],))
    with pytest.raises(BadInputError, match="tuple"):
        compare(sum, sum, inputs=lambda k: [k])


# -- the sequential design: α spent across the looks ------------------------------------------------------------


def test_the_plan_spends_alpha_across_the_looks():
    assert plan_looks(30, 120, 0.05) == ((30, 0.0125), (60, 0.0125), (90, 0.0125), (120, 0.0125))
    assert plan_looks(30, 30, 0.05) == ((30, 0.05),)                       # a fixed design: one look, all of α
    uneven = plan_looks(30, 100, 0.05)
    assert [n for n, _ in uneven] == [30, 60, 90, 100]
    assert [a for _, a in uneven] == pytest.approx([0.015, 0.015, 0.015, 0.005])
    # the time budget cuts the plan before the first counted round, never below the first look
    assert plan_looks(30, 120, 0.05, affordable=70.5) == ((30, 0.05 * 30 / 70), (60, 0.05 * 30 / 70),
                                                           (70, 0.05 * 10 / 70))
    assert plan_looks(30, 120, 0.05, affordable=3) == ((30, 0.05),)
    for rounds, most, alpha in ((7, 64, 0.01), (30, 100, 0.05), (5, 6, 0.2), (4, 16, 0.05)):
        plan = plan_looks(rounds, most, alpha)
        assert sum(a for _, a in plan) == pytest.approx(alpha)        # all of α, spread over the looks
        assert plan[0][0] >= rounds and plan[-1][0] == most
        for n, a in plan:  # every planned look can decide: n rounds all one way reach p < its α
            assert 2 * 0.5 ** n < a


def test_looks_too_early_to_decide_are_not_planned():
    # 4 rounds all one way give p = 0.125: never below the 0.0125 a first look of four may spend. That look is
    # dropped and its share goes to the next one, which can decide (8 rounds: p = 0.0078 < 0.025)
    assert plan_looks(4, 16, 0.05) == ((8, 0.025), (12, 0.0125), (16, 0.0125))
    # a single look (a fixed design, or the time budget allowing only the first look) gets enough rounds
    assert plan_looks(4, 16, 0.05, affordable=4) == ((6, 0.05),)
    assert plan_looks(3, 3, 0.05) == ((6, 0.05),)


def _false_verdict_rate(plan):
    """Exact chance, when A and B do not differ, that the paired sign test rejects at *some* look of *plan*:
    the count of rounds where B was slower is a fair ±1 random walk; each look removes its rejection region."""
    from scipy.stats import binomtest

    dist, done, total = np.array([1.0]), 0, 0.0
    for n, alpha in plan:
        for _ in range(n - done):
            dist = np.concatenate([dist, [0.0]]) * 0.5 + np.concatenate([[0.0], dist]) * 0.5
        done = n
        reject = np.array([binomtest(k, n, 0.5).pvalue < alpha for k in range(n + 1)])
        total += dist[reject].sum()
        dist = np.where(reject, 0.0, dist)
    return total


@pytest.mark.parametrize("rounds", [10, 30, 100])
def test_the_planned_looks_hold_alpha_where_retesting_at_alpha_does_not(rounds):
    # GIVEN the default plan (four looks) at α = 0.05, and the rule it replaced (α = 0.05 at every look)
    honest = _false_verdict_rate(plan_looks(rounds, 4 * rounds, 0.05))
    naive = _false_verdict_rate([(k * rounds, 0.05) for k in (1, 2, 3, 4)])
    # THEN over all four looks together the planned design stays within α, while re-testing exceeds it
    assert honest <= 0.05
    assert naive > 0.08


def test_the_interval_is_read_at_the_level_of_the_look_that_decided(clock, tmp_path):
    # a clear difference: decided at the first of four planned looks, on its 1 − 0.0125 interval
    c = compare(lambda: clock.tick(1000), lambda: clock.tick(2000), rounds=8, min_sample_time=1e-7, clock=clock)
    assert (c.look, c.looks, c.confidence) == (1, 4, pytest.approx(0.9875))
    assert "98.75% CI" in c.summary() and "look 1 of 4" in c.summary()
    assert Comparison.load(c.save(tmp_path / "c.json")).confidence == c.confidence
    # two measured results: one look, at α (and the interval at 1 − α, whatever α is)
    m = compare(Measured(lognormal(1e6, 0.05, 200, 1), "a"), Measured(lognormal(2e6, 0.05, 200, 2), "b"),
                alpha=0.01)
    assert (m.look, m.looks, m.confidence) == (1, 1, pytest.approx(0.99)) and "99% CI" in m.summary()
    assert "look" not in m.summary()


def test_six_rounds_are_not_a_look_when_four_share_alpha(clock):
    # 6 of 6 rounds faster is p = 0.031: enough for α = 0.05 once, never for the 0.0125 the first of four looks
    # would spend; so the first look is planned at 12 rounds (spending 0.025), where it decides
    c = compare(lambda: clock.tick(2000), lambda: clock.tick(1000), rounds=6, min_sample_time=1e-7, clock=clock)
    assert c.verdict == "faster" and (c.look, c.looks) == (1, 3) and len(c.baseline_ns) == 12
    assert c.confidence == pytest.approx(0.975)


def test_fresh_inputs_stay_fresh_across_looks(clock):
    # GIVEN a comparison too noisy to decide early, timed on fresh inputs
    rng = np.random.default_rng(3)
    timed: list[int] = []

    def noisy(k):
        if k >= 0:
            timed.append(k)
        clock.tick(int(1000 * rng.choice([1.0, 1.6])))

    c = compare(noisy, noisy, inputs=lambda k: (k,), rounds=5, min_sample_time=1e-7, warmup=0, clock=clock)
    # THEN it used every planned look (10, 15, 20 rounds), and each round's input was timed once per side
    assert (c.look, c.looks) == (3, 3) and len(c.baseline_ns) == 20
    assert sorted(timed) == sorted(list(range(20)) * 2)


# -- the garbage collector -------------------------------------------------------------------------------------


@pytest.fixture
def slow_collections(clock):
    """Every collection takes 50 µs on the fake clock (ticked as it ends, before compare's watcher reads it)."""
    import gc

    def tick(phase, info):
        if phase == "stop":
            clock.tick(50_000)

    gc.callbacks.insert(0, tick)
    yield clock
    gc.callbacks.remove(tick)


def test_a_wide_spread_the_collector_cannot_explain_is_not_blamed_on_it_and_each_warning_names_its_side(
        slow_collections):
    import gc
    import itertools

    clock = slow_collections
    jitter = itertools.cycle([1.0e6, 1.5e6, 2.0e6, 1.2e6, 1.8e6, 1.1e6])  # IQR / median ≈ 40 %, on both sides

    def base():
        clock.tick(next(jitter))

    def cand():
        clock.tick(next(jitter))
        gc.collect(0)    # 50 µs of collection in a 1–2 ms call: a few % of the time

    c = compare(base, cand, rounds=12, max_rounds=12, warmup=0, min_sample_time=1e-7, clock=clock)
    spreads = [w for w in c.warnings if "spread widely" in w]
    assert {w.split(":")[0] for w in spreads} <= {"base", "cand", "both sides"} and spreads
    assert not any("before blaming other programs" in w for w in spreads)  # the collector is not the suspect
    [warning] = [w for w in c.warnings if w.startswith("cand: the garbage collector ran")]
    assert "too small a share to explain the spread" in warning and "the collector, not other programs" not in warning


def test_collections_in_the_timed_calls_are_counted_per_sample_and_the_warning_names_the_collector(slow_collections,
                                                                                                   tmp_path):
    import gc

    clock = slow_collections

    def base():
        clock.tick(1000)

    def cand():
        clock.tick(1000)
        gc.collect(0)    # stands in for the collections an allocating call triggers

    c = compare(base, cand, rounds=6, max_rounds=6, warmup=0, min_sample_time=1e-7, clock=clock)
    assert len(c.candidate_gc) == len(c.candidate_ns) == 6 and all(n >= 1 for n in c.candidate_gc)
    assert all(ns >= 50_000 * n for ns, n in zip(c.candidate_gc_ns, c.candidate_gc, strict=True))
    assert c.verdict == "slower" and c.gc == "as-is"
    [warning] = [w for w in c.warnings if "garbage collector ran" in w]
    assert warning.startswith("cand: the garbage collector ran during 6 of 6 timed samples")
    assert "the collector, not other programs" in warning and "gc='frozen'" in warning and "gc='disabled'" in warning
    assert not any("repeat=" in w for w in c.warnings)           # compare() has no repeat=
    back = Comparison.load(c.save(tmp_path / "c.json"))
    assert back.candidate_gc == c.candidate_gc and back.gc == "as-is"


def _cycles():
    for _ in range(3000):
        a = []
        a.append(a)   # a cycle: only the collector frees it


def test_gc_disabled_hides_the_collections_frozen_keeps_the_old_objects_out_and_both_are_undone():
    import gc

    frozen_inside = []

    def cand():
        frozen_inside.append(gc.get_freeze_count())
        _cycles()

    kw = dict(rounds=6, max_rounds=6, warmup=0, progress=False)
    as_is = compare(_cycles, _cycles, **kw)
    off = compare(_cycles, _cycles, gc="disabled", **kw)
    frozen = compare(_cycles, cand, gc="frozen", **kw)
    assert sum(as_is.baseline_gc) > 0 and sum(off.baseline_gc) == sum(off.candidate_gc) == 0
    assert off.gc == "disabled" and frozen.gc == "frozen"
    assert min(frozen_inside) > 0 and gc.get_freeze_count() == 0 and gc.isenabled()
    with pytest.raises(BadInputError, match="gc must be one of 'as-is', 'frozen', 'disabled'"):
        compare(_cycles, _cycles, gc="off")
    assert gc.isenabled()


def test_max_time_caps_the_whole_comparison_calibration_and_warm_up_included(clock):
    # GIVEN calls of 100 ms and 50 ms, and 30 rounds asked for (6 s of rounds) within max_time=3 s
    c = compare(lambda: clock.tick(10**8), lambda: clock.tick(5 * 10**7), rounds=30, max_time=3.0,
                min_sample_time=1e-7, clock=clock, progress=False)
    # THEN no round started once the 3 s were spent (calibration + warm-up took 0.45 s), and it says so
    elapsed = clock() / 1e9
    assert 3.0 <= elapsed <= 3.0 + 0.15 + 1e-6 and len(c.baseline_ns) == 18
    assert any(w.startswith("max_time=3 s ran out after 18 of the 30 rounds planned") for w in c.warnings)
    assert c.verdict == "faster"       # 18 rounds all one way decide at the look's α
    # and the fewest rounds a verdict needs are always taken, however small the budget
    tiny = compare(lambda: clock.tick(10**8), lambda: clock.tick(5 * 10**7), rounds=30, max_time=0.01,
                   min_sample_time=1e-7, clock=clock, progress=False)
    assert len(tiny.baseline_ns) == 6


# -- fresh worker processes --------------------------------------------------------------------------------------

STATE = {"scale": 1}   # what this process has built up; a fresh worker process starts from the module as written


def _spin(n):
    total = 0
    for i in range(n):
        total += i
    return total


def spin_fixed():
    _spin(20_000)


def spin_stateful():   # depends on the process it runs in, as a call does on the kernel's heap and caches
    _spin(4_000 * STATE["scale"])


def test_processes_give_the_verdict_of_a_fresh_process_where_this_ones_state_decides_it(monkeypatch):
    # GIVEN a candidate whose cost depends on state built up in this process: here 2× the baseline's work,
    # in a fresh process a fifth of it
    monkeypatch.setitem(STATE, "scale", 10)
    # samples of 20 ms or more: on a shared machine a sample of a millisecond or two is either alone on a core
    # or sharing one (×2.5 apart here), which no number of 8–32 rounds averages out; 20 ms spans several of
    # the scheduler's time slices
    kw = dict(rounds=8, max_rounds=32, max_time=60.0, progress=False, min_sample_time=0.02)
    here = compare(spin_fixed, spin_stateful, **kw)
    fresh = compare(spin_fixed, spin_stateful, processes=True, **kw)
    # THEN in this process it is slower, in fresh workers faster — the verdict that carries over
    assert here.verdict == "slower", here
    assert fresh.verdict == "faster", fresh
    assert len(fresh.baseline_ns) == len(fresh.baseline_gc) >= 8 and fresh.paired
    with pytest.raises(BadInputError, match="cannot be pickled"):
        compare(spin_fixed, lambda: None, processes=True)
    with pytest.raises(BadInputError, match="pass no clock"):
        compare(spin_fixed, spin_fixed, processes=True, clock=lambda: 0)


def test_measured_results_taken_round_by_round_can_be_compared_as_pairs():
    # GIVEN two results taken interleaved through a load that drifts 1 ms → 3 ms, the candidate 10 % faster
    # in every round (plus a little jitter of its own)
    rng = np.random.default_rng(7)
    drift = np.linspace(1e6, 3e6, 40)
    base = drift * (1 + rng.normal(0, 0.01, 40))
    cand = drift * 0.9 * (1 + rng.normal(0, 0.01, 40))
    # WHEN compared as independent samples and as pairs
    apart = compare(base.tolist(), cand.tolist())
    pairs = compare(base.tolist(), cand.tolist(), paired=True)
    # THEN the drift widens the independent interval past "inconclusive"; the pairs cancel it and find the 10 %
    assert not apart.paired and apart.verdict == "inconclusive"
    assert pairs.paired and pairs.verdict == "faster" and pairs.ci[0] < 0.9 < pairs.ci[1]
    assert pairs.ci[1] - pairs.ci[0] < (apart.ci[1] - apart.ci[0]) / 5


def test_paired_needs_samples_of_equal_count_and_means_nothing_for_callables():
    with pytest.raises(BadInputError, match="has 5 samples and .* 4"):
        compare([1.0] * 5, [1.0] * 4, paired=True, names=("a", "b"))
    with pytest.raises(BadInputError, match="always timed in interleaved pairs"):
        compare(spin_fixed, spin_fixed, paired=False)


@pytest.mark.slow
def test_processes_from_a_script_without_the_main_guard_is_refused_naming_the_guard(tmp_path):
    import subprocess
    import sys

    body = ("import labkit\ndef a(): return sorted(range(200))\ndef b(): return list(range(200))\n")
    call = "print('verdict', labkit.compare(a, b, processes=True, rounds=6, max_time=2).verdict)\n"
    bare, guarded = tmp_path / "bare.py", tmp_path / "guarded.py"
    bare.write_text(body + call)
    guarded.write_text(body + "if __name__ == '__main__':\n    " + call)
    # GIVEN a script with no `if __name__ == "__main__":` THEN it is refused before a worker starts, naming the guard
    done = subprocess.run([sys.executable, str(bare)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and 'if __name__ == "__main__":' in done.stderr
    assert "bootstrapping phase" not in done.stderr and "out of memory" not in done.stderr
    # AND the same script with the guard compares in fresh processes
    done = subprocess.run([sys.executable, str(guarded)], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and "verdict " in done.stdout, done.stderr[-1500:]
