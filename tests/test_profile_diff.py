"""labkit.profile.diff: a changed frame is coloured, unchanged ones are grey whatever the rate or run length."""

import time

import pytest

from labkit import profile
from labkit.profile import ProfileDiff


def f1(s):
    time.sleep(s)


def f2():
    time.sleep(0.02)


def slow():
    f1(0.01)
    f2()


def slower():
    f1(0.03)
    f2()


def _row(df, name):
    return df[df.frame.str.startswith(name + " (")].iloc[0]


def test_slower_frame_is_red_unchanged_is_grey(tmp_path):
    d = profile.diff(slow, slower, rounds=5, duration_s=0.3, rate=500)
    df = d.to_frame()
    assert _row(df, "f1").verdict == "slower"
    r2 = _row(df, "f2")
    assert r2.verdict == "no change" and abs(r2.total_ratio - 1) <= 0.05
    assert "f1 slower" in str(d)
    before, after = d.per_call()                     # the whole of each side: what the frames' times are parts of
    assert abs(_row(df, "slow").total_before_s / before - 1) <= 0.05 and after > before
    again = ProfileDiff.load(d.save(tmp_path / "d.json"))
    assert again.to_frame().equals(df)
    profile.diff_chart(d).to_dict()


def test_sampling_rate_does_not_matter():
    d = profile.diff(slow, slow, rounds=5, duration_s=0.3, rate=1000, rate_after=100)
    assert (d.to_frame().verdict == "no change").all(), d.to_frame()


def test_a_a_run_colours_few_frames():
    df = profile.diff(slow, slow, rounds=5, duration_s=0.3).to_frame()
    assert (df.verdict != "no change").mean() <= 0.05, df


# -- a running toyshop under load (py-spy) -----------------------------------------------------------------------


def test_served_in_counts_the_responses_completed_inside_the_window():
    import types

    import numpy as np

    from labkit.profile.differential import _served_in

    # GIVEN responses sent at 0, 0.1, 0.2, 0.3 s after a start at t = 10 s, each taking 0.25 s
    load = types.SimpleNamespace(t0_ns=10_000_000_000, start_ns=np.array([0, 1, 2, 3]) * 100_000_000,
                                 samples_ns=np.full(4, 250_000_000))
    # THEN a window from 10.3 to 10.5 s holds those completed at 10.35 and 10.45 s, not those at 10.25 or 10.55
    assert _served_in(load, 10.3, 10.5) == 2
    assert _served_in(load, 11.0, 12.0) == 0


def test_a_side_must_be_a_service_or_a_path_on_one():
    from labkit.errors import BadInputError

    with pytest.raises(BadInputError, match="service=svc"):
        profile.diff_under_load("/customers/1/export", "/customers/1/export?n1=batched", load_rate=5)
    with pytest.raises(BadInputError, match="Service or a request path"):
        profile.diff_under_load(3, "/x", load_rate=5)


@pytest.mark.slow
def test_a_toyshop_under_load_diffs_two_request_switches(tmp_path):
    from labkit.service import start

    # GIVEN one toyshop process whose export runs its N+1 (one catalog call per item) or its batched version
    svc = start(size="small")
    try:
        # WHEN the two switch settings are profiled under the same light load, interleaved
        d = profile.diff_under_load("/customers/1/export?n1=naive", "/customers/1/export?n1=batched",
                                    service=svc, load_rate=10, duration_s=0.5, rate=1000, progress=False)
    finally:
        svc.stop()
    df = d.to_frame()
    # THEN the naive export's frame left (faster: its time is gone), the batched one arrived (slower: new time),
    # and the per-request busy time of the whole handler fell
    assert _row(df, "export_naive").verdict == "faster" and _row(df, "export_naive").total_after_s == 0
    assert _row(df, "export_batched").verdict == "slower" and _row(df, "export_batched").total_before_s == 0
    assert d.unit == "busy thread-seconds per request" and all(n > 0 for _s, _spc, n, _t in d.profiles)
    assert "export_naive faster" in str(d) and len(d.profiles) == 10
    assert ProfileDiff.load(d.save(tmp_path / "d.json")).to_frame().equals(df)


def test_profiles_without_samples_count_as_no_time_and_an_empty_diff_says_why():
    from labkit.errors import BadInputError

    # GIVEN a service diff where one profile of each side caught nothing (its threads never ran while sampled)
    text = "handler (app.py:1) 10\n"
    profiles = tuple((s, 0.01 if i else 0.0, 5, text if i else "") for i in range(5) for s in ("A", "B"))
    d = ProfileDiff("a", "b", profiles)
    # THEN the empty profiles weigh in as zero time, and the frame is unchanged between the sides
    row = _row(d.to_frame(), "handler")
    assert row.verdict == "no change" and abs(row.total_before_s - 0.008) < 1e-12
    # and a diff with no sample at all has no frames and no chart, saying why
    empty = ProfileDiff("a", "b", tuple((s, 0.0, 5, "") for _ in range(5) for s in ("A", "B")))
    assert empty.to_frame().empty and "no frame changed" in str(empty)
    with pytest.raises(BadInputError, match="no profile caught a sample"):
        profile.diff_chart(empty)
