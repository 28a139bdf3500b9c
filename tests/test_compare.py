import numpy as np
import pytest

from labkit.compare import Comparison, compare, verdict_for
from labkit.errors import BadInputError


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

    c = compare(base, cand, rounds=6, warmup=0, min_sample_time=1e-7, clock=clock)  # one call a sample
    assert c.verdict == "faster"
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


def test_long_comparisons_show_progress_short_ones_do_not(clock, capsys):
    compare(lambda: clock.tick(1000), lambda: clock.tick(2000), rounds=4, min_sample_time=1e-7, clock=clock)
    assert "A/B rounds" not in capsys.readouterr().err
    # rounds of ~1 s each on the fake clock: the bar appears on its own
    compare(lambda: clock.tick(10**9), lambda: clock.tick(2 * 10**9), rounds=4, min_sample_time=1e-7,
            warmup=0, clock=clock)
    assert "A/B rounds" in capsys.readouterr().err


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
    c = compare(base, memo, inputs=inputs, rounds=5, max_rounds=5, warmup=1)

    # THEN each side saw every round's input once, the same sequence, and the memo never had a hit to serve
    timed_b = [s for s in seen_by["base"] if s[0] >= 0]
    timed_m = [s for s in seen_by["memo"] if s[0] >= 0]
    assert timed_b == timed_m == [(r, r + 1, r + 2) for r in range(5)]
    assert len(cache) == len(seen_by["memo"])          # no input was ever answered from the cache
    assert len(c.baseline_ns) == len(c.candidate_ns) == 5 and c.paired
    assert all(k < 0 for k in made[:2])                 # warm-up inputs are never graded inputs


def test_fresh_inputs_refuse_args_too_and_non_tuples():
    with pytest.raises(BadInputError, match="not both"):
        compare(sum, sum, [1], inputs=lambda k: ([k],))
    with pytest.raises(BadInputError, match="tuple"):
        compare(sum, sum, inputs=lambda k: [k])
