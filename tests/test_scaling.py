"""labkit.measure.scaling: a size sweep on a fake clock — exact medians, time per item, bytes/s and the crossover."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.errors import BadInputError
from labkit.measure.scaling import SizeSweep, size_in_bytes, sweep_sizes


def test_the_sweep_gives_time_per_item_throughput_and_where_two_candidates_cross(clock, tmp_path):
    # GIVEN a linear candidate (1 µs per item) and one with a 20 µs fixed cost and 0.1 µs per item
    def linear(data):
        clock.tick(1000 * len(data))

    def setup_heavy(data):
        clock.tick(20_000 + 100 * len(data))

    made = []

    def make(n):
        made.append(n)
        return b"x" * n

    sw = sweep_sizes({"linear": linear, "setup": setup_heavy}, (100, 10, 1000), make, repeat=3,
                     min_sample_time=1e-7, clock=clock)
    # THEN sizes are timed smallest first, each input made once, and the numbers are exact
    assert made == [10, 100, 1000] and sw.sizes == (10, 100, 1000) and sw.nbytes == (10, 100, 1000)
    assert list(sw.medians_ns("linear")) == [10_000, 100_000, 1_000_000]
    assert list(sw.ns_per_item("setup")) == [2100, 300, 120]
    assert list(sw.bytes_per_s("linear")) == pytest.approx([1e6, 1e6, 1e6])
    # 1000 n = 20000 + 100 n at n = 22.2: between 10 and 100, found exactly for linear costs
    assert sw.crossover("linear", "setup") == pytest.approx(200 / 9)
    assert "linear and setup cross near size 22" in str(sw)
    df = sw.to_frame()
    assert list(df.columns) == ["name", "size", "median_ns", "ns_per_item", "bytes", "bytes_per_s"] and len(df) == 6
    assert SizeSweep.load(sw.save(tmp_path / "sw.json")) == sw


def test_no_crossover_when_one_is_faster_everywhere_and_bad_input_is_refused(clock):
    sw = sweep_sizes([lambda xs: clock.tick(len(xs)), lambda xs: clock.tick(2 * len(xs))], (10, 100),
                     lambda n: list(range(n)), repeat=2, min_sample_time=1e-7, clock=clock)
    assert sw.crossover(*sw.names) is None and np.isnan(sw.bytes_per_s(sw.names[0])).all()
    with pytest.raises(BadInputError, match="positive whole numbers"):
        sweep_sizes(len, (0, 10), list)
    with pytest.raises(BadInputError, match="no candidate 'x'"):
        sw.crossover("x", sw.names[0])


def test_size_in_bytes_knows_the_obvious_cases(tmp_path):
    f = tmp_path / "export.csv"
    f.write_bytes(b"a,b\n" * 10)
    assert size_in_bytes(b"abc") == 3 and size_in_bytes("é") == 2 and size_in_bytes(np.zeros(4)) == 32
    assert size_in_bytes(f) == 40 and size_in_bytes((str(f),)) == 40 and size_in_bytes([1, 2]) is None
