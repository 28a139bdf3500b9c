"""Lab 05's grader passes the reference and fails the baseline, the cheats and a wrong answer."""

from __future__ import annotations

import json

import msgpack
import orjson
from graderkit import assert_grader, hard_coded, memoised

from labkit.exercises import lab05
from labkit.record import Experiment


def reference(order):
    return orjson.dumps(lab05.courier_view(order))


def wrong(order):
    """Forgets the product's weight: fewer bytes, fast, and wrong."""
    view = lab05.courier_view(order)
    for item in view["items"]:
        if item["product"] is not None:
            del item["product"]["weight_g"]
    return orjson.dumps(view)


def shown_orders():
    """The orders a learner sees in the notebook: what a hard-coded answer would be recorded for."""
    return [(lab05.load_order(i),) for i in (1, 2, 3, 10)]


GRADER_CASES = {
    "grade": lambda fn: lab05.check(fn, rounds=6, save=False),
    "reference": reference,
    "baseline": lab05.baseline,
    "wrong": wrong,
    "cheats": {"memoised": memoised(lab05.baseline),
               "hard-coded": hard_coded(reference, shown_orders(), key=lambda o: o["id"])},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_msgpack_is_graded_by_the_graders_own_decoder_and_the_record_is_concluded(tmp_path):
    exp = Experiment.plan("courier view", "Only 7 of ~45 values per item remain, and msgpack skips the text "
                          "escaping: the encode should take a fifth of the time.", predicted_ratio=0.2)
    grade = lab05.check(lambda o: msgpack.packb(lab05.courier_view(o)), "msgpack", exp, rounds=6, save=False, seed=11)
    assert grade.passed, str(grade)
    assert "seed 11" in str(grade) and "your prediction (0.2)" in grade.items[-1].message


def test_bytes_in_another_format_than_declared_are_not_readable():
    grade = lab05.check(lambda o: msgpack.packb(lab05.courier_view(o)), "json", rounds=6, save=False)
    assert not grade.passed and "cannot read your bytes as json" in str(grade)


def test_a_correct_but_bulky_answer_fails_the_bytes_budget():
    def padded(order):
        return json.dumps(lab05.courier_view(order), indent=40).encode()

    grade = lab05.check(padded, rounds=6, save=False)
    assert [i.ok for i in grade.items] == [True, False] and "over the budget" in str(grade)


def test_refusals_name_what_to_pass():
    assert "pass your function itself" in str(lab05.check(reference(lab05.load_order(1))))
    assert "'json' or 'msgpack'" in str(lab05.check(reference, "protobuf"))
    view = lab05.courier_view(lab05.load_order(1))
    assert set(view) == {"id", "status", "currency", "total_cents", "items"}
