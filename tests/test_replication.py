"""The room's replication study: synthetic rooms with a known effect and a known spread between machines."""

from __future__ import annotations

import math
import random

import pytest

from labkit.workshop.replication import replicate
from labkit.workshop.room import Entry, Room


def _room(n: int, effect: float, tau: float, se: float, seed: int, *, throttled: int = 0) -> Room:
    """``n`` machines, each with a true log effect drawn around ln(effect) with spread ``tau``, measured with
    standard error ``se``; the first ``throttled`` machines measured no effect at all (a quota paused them)."""
    rng = random.Random(seed)
    entries = []
    for i in range(n):
        if i < throttled:
            y, noise = rng.gauss(0.0, se), "throttled"
        else:
            y, noise = rng.gauss(rng.gauss(math.log(effect), tau), se), "quiet"
        ci = (math.exp(y - 1.959964 * se), math.exp(y + 1.959964 * se))
        verdict = "faster" if ci[1] < 1 else "slower" if ci[0] > 1 else "same"
        entries.append(Entry(f"learner{i:03d}", "orjson export", f"/h/{i}.json", 0.4, math.exp(y), ci, verdict,
                             "confirmed", noise, "", 0.95, "AMD EPYC"))
    return Room(tuple(entries), ())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_pooled_interval_holds_the_true_effect_and_i2_is_recovered(seed):
    # GIVEN 200 machines, true ratio 0.5, between-machine spread tau 0.1 and within-machine se 0.05:
    # I² = tau² / (tau² + se²) = 0.8
    [study] = replicate(_room(200, 0.5, 0.1, 0.05, seed))
    assert study.ci[0] <= 0.5 <= study.ci[1], study
    assert abs(study.i2 - 0.8) <= 0.1, study.i2
    assert study.direction == "faster" and len(study.machines) == 200


def test_one_effect_everywhere_reads_as_no_heterogeneity():
    [study] = replicate(_room(60, 0.7, 0.0, 0.05, 4))
    assert study.i2 <= 0.1 and study.ci[0] <= 0.7 <= study.ci[1]


def test_throttled_machines_are_named_as_the_exceptions():
    # GIVEN 30 machines of which 3 were throttled and measured nothing
    [study] = replicate(_room(30, 0.4, 0.02, 0.03, 5, throttled=3))
    # THEN those are the machines where it did not hold, and the summary says why
    assert {m.learner for m in study.exceptions} == {"learner000", "learner001", "learner002"}
    assert "held on 27 of 30 machines; 3 were throttled" in study.summary()
    chart = study.chart().to_dict()
    assert chart["layer"] and "pooled" in chart["title"]
    assert len(study.to_frame()) == 30


def test_a_learners_latest_record_stands_for_their_machine_and_unconcluded_ones_are_left_out():
    room = _room(3, 0.5, 0.0, 0.05, 6)
    first = room.entries[0]
    again = Entry(first.learner, first.title, "/h/later.json", 0.4, 0.9, (0.85, 0.95), "faster", "refuted", "quiet", "")
    plan = Entry("learner999", first.title, "/h/p.json", 0.4, None, None, None, None, "not measured", "")
    [study] = replicate(Room((*room.entries, again, plan), ()))
    assert len(study.machines) == 3 and any(m.ratio == 0.9 for m in study.machines)
    assert replicate(Room(room.entries[:1], ())) == ()   # one machine is not a replication
