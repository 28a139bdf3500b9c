"""Lab 07's grader passes the reference and fails the baseline, the cheats and a wrong answer.

Each grading run starts toyshop several times and load-tests it for seconds, so the grader is run once per
case here (the graders' benchmark runs each ten times); the cheap refusals are tested without any service.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import sys

import pytest
from graderkit import always_equal, assert_grader, lazy, malformed, subclassed
from toolfakes import patching

from labkit.exercises import lab07
from labkit.learner.record import Experiment
from labkit.load import run


def reference(s):
    one = run(s.url, concurrency=1, duration_s=0.6, max_requests=60, warmup_s=0.1, paths=s.paths, progress=False)
    w = float(one.service_ns.mean()) / 1e9
    return s.pool / w, min(s.max_pool, math.ceil(s.rate * w / 0.6))


def wrong(s):
    """One request at a time: the capacity ignores the pool (and so does the pool size, sized to the mean)."""
    w = float(run(s.url, concurrency=1, duration_s=0.5, paths=s.paths, progress=False).service_ns.mean()) / 1e9
    return 1 / w, max(1, math.ceil(s.rate * w))


def copied_from_an_earlier_draw():
    """The answer that passed on the first deployment it ever saw, handed in again for every later one."""
    kept = []

    def cheat(s):
        if not kept:
            kept.append(reference(s))
        return kept[0]

    return cheat


def load_tested_and_the_most_allowed(s):
    """No model: a short load test flat out gives the capacity, and the most threads allowed "to be safe"."""
    flat = run(s.url, concurrency=3 * s.pool, duration_s=0.5, paths=s.paths, progress=False)
    return flat.achieved_rate, s.max_pool


def over_provisioned(s):
    """The right capacity, and a pool far bigger than the target needs (still within the database's limit)."""
    capacity, pool = reference(s)
    return capacity, min(s.max_pool, 4 * pool + 4)


def as_a_list(s):
    """A malformed answer: a list, and a pool of type bool."""
    capacity, _ = reference(s)
    return [capacity, True]


def _faked_load_generator():
    """The tools the grader measures with, replaced (``labkit.load.run`` where it lives and where it is re-exported,
    ``busy_note``): a run of single requests reports them ten times slower (the grader's W, which bounds the pool
    and sets the objective), a run at the target rate ten times faster — what makes an over-provisioned pool look
    sized."""
    import labkit.load

    runner, render = sys.modules["labkit.load._runner"], sys.modules["labkit.load.render"]
    real = runner.run

    def run_(url, *args, **kwargs):
        r = real(url, *args, **kwargs)
        if kwargs.get("rate"):
            return dataclasses.replace(r, samples_ns=r.samples_ns / 10, service_ns=r.service_ns / 10)
        if (kwargs.get("concurrency") or 1) == 1:
            return dataclasses.replace(r, samples_ns=r.samples_ns * 10, service_ns=r.service_ns * 10)
        return r

    targets = [(runner, "run", run_), (labkit.load, "run", run_), (render, "busy_note", lambda r: None),
               (labkit.load, "busy_note", lambda r: None)]
    return targets + [(lab07, n, run_) for n in ("run", "_run") if hasattr(lab07, n)]


class _Loud:
    def __repr__(self):
        raise RuntimeError("no repr")


def _experiment():
    return Experiment.plan("Pool for the target", "Little's law: rate × W threads busy; at 60 % busy a request "
                           "rarely waits for a thread, so at the target rate it takes about 1.2 × its time alone",
                           predicted_ratio=1.2)


GRADER_CASES = {
    "grade": lambda fn, experiment: lab07.check(fn, experiment, capacity_s=1.0, objective_s=2.5, save=False),
    "experiment": _experiment,
    "reference": reference,
    "baseline": lab07.baseline,
    "wrong": wrong,
    "cheats": {"copied": copied_from_an_earlier_draw(), "load-tested": load_tested_and_the_most_allowed,
               "over-provisioned": over_provisioned, "a list and a bool": as_a_list,
               "lazy answer": lazy(reference), "subclassed answer": subclassed(reference),
               "always-equal": always_equal(reference),
               "replaces the load generator": patching(over_provisioned, _faked_load_generator, "fakes_labkit_load"),
               **{k: v for k, v in malformed().items() if k in ("malformed: raising dunders", "malformed: SystemExit")}},
}


@pytest.mark.slow
def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_the_two_deployments_come_from_two_bands_drawn_per_grading_no_single_answer_fits():
    # GIVEN many draws
    draws = [lab07.draw(seed) for seed in range(300)]
    pairs = {(a.band, b.band) for a, b in draws}
    # THEN two different bands each time, and every ordered pair of bands occurs: not always one near, one far
    assert all(a != b for a, b in pairs) and len(pairs) == len(lab07.BANDS) * (len(lab07.BANDS) - 1)
    # one pool for both deployments; capacity ≈ pool / (delay + the request's own work): adjacent bands stay
    # more than 1.5² apart even if the work were 0 or as long as 3 ms, so one capacity within 1.5× of two
    # deployments of a check cannot exist
    for a, b in draws:
        assert a.pool == b.pool
        for work in (0.0, 2.0, 3.0):
            ratio = (a.catalog_delay_ms + work) / (b.catalog_delay_ms + work)
            assert max(ratio, 1 / ratio) > 1.5**2, (a, b, work)
    assert lab07.draw(5) == lab07.draw(5) and lab07.draw(5) != lab07.draw(6)
    # the check draws from its grading's generator: the same stream a seed gives
    assert lab07.draw(random.Random(5)) == lab07.draw(5)


def test_what_the_plan_is_told_names_neither_the_band_nor_the_single_request_time():
    draws = [d for seed in range(400) for d in lab07.draw(seed)]
    for band in lab07.BANDS:
        mine = [d for d in draws if d.band == band]
        # the pool and the rate come from the same ranges in every band
        assert {d.pool for d in mine} == set(lab07.POOLS)
        assert lab07.RATES[0] <= min(d.rate for d in mine) < max(d.rate for d in mine) <= lab07.RATES[1]
        assert abs(statistics.mean(d.rate for d in mine) - sum(lab07.RATES) / 2) < 3
    # and the scenario has no field that carries W or the band: the objective is a multiple of W, not ms
    fields = {f.name for f in dataclasses.fields(lab07.Scenario)}
    assert fields == {"url", "paths", "pool", "cores", "max_pool", "rate", "p99_over_w"}


@pytest.mark.slow
def test_the_reference_still_passes_with_the_load_generator_replaced():
    # the grader measures with the tools it bound at import: faking them changes no verdict
    cheat = patching(reference, _faked_load_generator, "reference_behind_fakes")
    try:
        g = lab07.check(cheat, _experiment(), capacity_s=1.0, objective_s=2.5, save=False)
    finally:
        cheat.undo()
    assert g.passed, str(g)
    assert sys.modules["labkit.load._runner"].run is run


def test_refusals_and_bad_answers_say_what_to_pass():
    exp = _experiment()
    assert "pass your function itself" in str(lab07.check(3))
    assert "factor must be > 1" in str(lab07.check(reference, exp, factor=1))
    no_exp = lab07.check(reference)  # the prediction first: nothing is started without it
    assert not no_exp.passed and no_exp.items[0].criterion == "prediction" and len(no_exp.items) == 1
    no_ratio = lab07.check(reference, Experiment.plan("x", "a hypothesis here"))
    assert "no predicted ratio" in str(no_ratio) and len(no_ratio.items) == 1
    assert lab07._answer((100.0, 4)) == (100.0, 4)
    assert "tuple" in lab07._answer(120.5) and "tuple" in lab07._answer([100.0, 4])
    assert "positive number" in lab07._answer((float("nan"), 4))
    assert "int >= 1" in lab07._answer((100, 2.5)) and "int >= 1" in lab07._answer((100, True))
    # the answer's form is read exactly: no subclass, proxy or object whose repr raises gets through, or crashes
    assert "positive number" in lab07._answer((type("F", (float,), {})(100.0), 4))
    assert "tuple" in lab07._answer(type("T", (tuple,), {})((100.0, 4)))
    assert "whose repr raised" in lab07._answer(_Loud()) and "whose repr raised" in lab07._answer((_Loud(), 4))
    for name, fn in malformed().items():
        if "raises" not in fn.__name__ and "exits" not in fn.__name__:
            assert isinstance(lab07._answer(fn()), str), name


def test_solution_only_after_an_attempt_and_hints_do_not_give_the_formula():
    lab07.EXERCISE.attempts = 0
    assert "Try the exercise first" in lab07.solution()
    assert "Hint 1 of 3" in lab07.hint(1)
    assert "s.pool /" not in lab07.hint(3) and "ceil" not in lab07.hint(3)
