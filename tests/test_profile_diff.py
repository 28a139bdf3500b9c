"""labkit.profile.diff: a changed frame is coloured, unchanged ones are grey whatever the rate or run length."""

import time

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
    again = ProfileDiff.load(d.save(tmp_path / "d.json"))
    assert again.to_frame().equals(df)
    profile.diff_chart(d).to_dict()


def test_sampling_rate_does_not_matter():
    d = profile.diff(slow, slow, rounds=5, duration_s=0.3, rate=1000, rate_after=100)
    assert (d.to_frame().verdict == "no change").all(), d.to_frame()


def test_a_a_run_colours_few_frames():
    df = profile.diff(slow, slow, rounds=5, duration_s=0.3).to_frame()
    assert (df.verdict != "no change").mean() <= 0.05, df
