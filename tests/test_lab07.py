"""Lab 07's grader passes the reference and fails the baseline, the cheats and a wrong answer.

Each grading run starts toyshop several times and load-tests it for seconds, so the grader is run once per
case here (the graders' benchmark runs each ten times); the cheap refusals are tested without any service.
"""

from __future__ import annotations

import math

import pytest
from graderkit import assert_grader, memoised

from labkit.exercises import lab07
from labkit.load import run


def reference(s):
    one = run(s.url, concurrency=1, duration_s=1.0, warmup_s=0.2, paths=s.paths, progress=False)
    w = float(one.service_ns.mean()) / 1e9
    return s.pool / w, min(s.max_pool, math.ceil(s.rate * w / 0.6))


def wrong(s):
    """One request at a time: the capacity ignores the pool (and so does the pool size, sized to the mean)."""
    w = float(run(s.url, concurrency=1, duration_s=1.0, paths=s.paths, progress=False).service_ns.mean()) / 1e9
    return 1 / w, max(1, math.ceil(s.rate * w))


def copied_from_an_earlier_draw():
    """The answer that passed on the first deployment it ever saw, handed in again for every later one."""
    kept = []

    def cheat(s):
        if not kept:
            kept.append(reference(s))
        return kept[0]

    return cheat


GRADER_CASES = {
    "grade": lambda fn: lab07.check(fn, capacity_s=1.5, objective_s=3.0),
    "reference": reference,
    "baseline": lab07.baseline,
    "wrong": wrong,
    "cheats": {"memoised": memoised(lab07.baseline), "hard-coded": copied_from_an_earlier_draw()},
}


@pytest.mark.slow
def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_the_two_deployments_come_from_bands_no_single_answer_fits():
    # GIVEN many draws
    for seed in range(200):
        a, b = lab07.draw(seed)
        # THEN one of each band, in either order
        assert {a.band, b.band} == set(lab07.BANDS)
    far = [d for s in range(200) for d in lab07.draw(s) if d.max_pool > 10]
    near = [d for s in range(200) for d in lab07.draw(s) if d.max_pool <= 10]
    # capacity ≈ pool / (delay + the request's own work): the bands stay more than 1.5² apart even if the
    # work were as long as 2 ms, so one capacity within 1.5× of both cannot exist
    far_most = max(d.pool / (d.catalog_delay_ms + 2) for d in far)
    near_least = min(d.pool / (d.catalog_delay_ms + 2) for d in near)
    assert near_least / far_most > 1.5**2
    # and the far band's load needs more threads than the near band's database allows
    assert min(math.ceil(d.busy) for d in far) > max(d.max_pool for d in near)
    assert lab07.draw(5) == lab07.draw(5) and lab07.draw(5) != lab07.draw(6)


def test_refusals_and_bad_answers_say_what_to_pass():
    assert "pass your function itself" in str(lab07.check(3))
    assert "factor must be > 1" in str(lab07.check(reference, factor=1))
    assert lab07._answer((100.0, 4)) == (100.0, 4)
    assert "pair" in lab07._answer(120.5)
    assert "positive number" in lab07._answer((float("nan"), 4))
    assert "integer >= 1" in lab07._answer((100, 2.5))
    assert "integer >= 1" in lab07._answer((100, True))


def test_solution_only_after_an_attempt_and_hints_exist(capsys):
    lab07.EXERCISE.attempts = 0
    assert "Try the exercise first" in lab07.solution()
    assert "Hint 1 of 3" in lab07.hint(1)
