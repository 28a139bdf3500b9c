import numpy as np
import pytest

from labkit.errors import BadInputError, LabkitError
from labkit.measure.stats import format_duration, percentiles, ratio_of_medians, spread


@pytest.mark.parametrize("ns, text", [
    (0, "0 ns"), (12.34, "12.3 ns"), (999, "999 ns"), (1_000, "1 µs"), (1_234, "1.23 µs"),
    (56_700_000, "56.7 ms"), (2.5e9, "2.5 s"), (float("nan"), "n/a"),
])
def test_format_duration_picks_the_unit(ns, text):
    assert format_duration(ns) == text


def test_percentiles_match_known_values():
    data = list(range(1, 101))  # 1..100
    p = percentiles(data, (0, 50, 90, 99, 100))
    assert p == pytest.approx({0: 1.0, 50: 50.5, 90: 90.1, 99: 99.01, 100: 100.0})


def test_percentiles_reject_fractions_and_empty_input():
    with pytest.raises(BadInputError, match="99.9, not 0.999"):
        percentiles([1, 2, 3], (150,))
    with pytest.raises(LabkitError, match="empty"):
        percentiles([])
    with pytest.raises(BadInputError, match="NaN"):
        percentiles([1.0, float("nan")])


def test_spread_is_iqr_over_median():
    assert spread([1, 2, 3, 4, 5]) == pytest.approx((4 - 2) / 3)


def test_ratio_of_identical_samples_is_one_with_p_one():
    a = np.array([10.0, 11, 12, 13, 14])
    est = ratio_of_medians(a, a.copy(), paired=True)
    assert est.ratio == 1.0 and est.ci == (1.0, 1.0) and est.p_value == 1.0


def test_ratio_detects_a_clear_shift_independent_samples():
    rng = np.random.default_rng(1)
    a = rng.lognormal(np.log(100), 0.05, 400)
    b = rng.lognormal(np.log(120), 0.05, 400)
    est = ratio_of_medians(a, b, seed=3)
    assert est.ratio == pytest.approx(1.2, rel=0.02)
    assert est.ci[0] < est.ratio < est.ci[1] and est.ci[0] > 1.15 and est.ci[1] < 1.25
    assert est.p_value < 1e-10
    assert ratio_of_medians(a, b, seed=3) == est  # the seed makes it reproducible


def test_ratio_needs_positive_samples_and_equal_pairs():
    with pytest.raises(BadInputError, match="positive"):
        ratio_of_medians([1, 2, 0], [1, 2, 3])
    with pytest.raises(BadInputError, match="equal length"):
        ratio_of_medians([1, 2, 3], [1, 2], paired=True)


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"), (512, "512 B"), (1024, "1 KiB"), (16 * 1024, "16 KiB"), (1536, "1.5 KiB"),
    (3 * 2**20 // 2, "1.5 MiB"), (2**30, "1 GiB"), (-2048, "-2 KiB"), (None, "? B"),
])
def test_format_bytes_in_binary_units(n, text):
    from labkit.measure.stats import format_bytes

    assert format_bytes(n) == text
