"""Lab 05's grader passes the reference and fails the baseline, every cheat category and a wrong answer."""

from __future__ import annotations

import json

import msgpack
import orjson
from graderkit import (
    assert_grader,
    hard_coded,
    input_cheats,
    standard_cheats,
)
from toolfakes import patching

from labkit.exercises import lab05
from labkit.learner.record import Experiment


def reference(order):
    return orjson.dumps(lab05.courier_view(order))


def wrong(order):
    """Forgets the product's weight: fewer bytes, fast, and wrong."""
    view = lab05.courier_view(order)
    for item in view["items"]:
        if item["product"] is not None:
            del item["product"]["weight_g"]
    return orjson.dumps(view)


def slow_but_right(order):
    """The right bytes at the baseline's cost and more: what the generic cheats wrap (the baseline's own bytes
    are not the courier view, so a cheat built on them would fail at correctness and test nothing)."""
    json.dumps(order).encode()  # the baseline's work, not a call of lab05.baseline (which the tamperings slow)
    return reference(order)


def every_dataset_order():
    """Every order the small dataset holds: what an answer precomputed for the dataset would be recorded for."""
    conn, _, big, single = lab05._source()
    return [(lab05.load_order(i),) for i in (*big, *single)[:400]]


class Lies(bytes):
    """Bytes that say one thing to len() and another to bytes(): the work done when the grader reads them."""

    def __new__(cls, order):
        out = super().__new__(cls, b"{}")
        out.order = order
        return out

    def __bytes__(self):
        return orjson.dumps(lab05.courier_view(self.order))


def _experiment():
    return Experiment.plan("courier view", "Only 8 of ~45 values per item remain and orjson writes bytes "
                           "directly: the encode should take about a tenth of the time.", predicted_ratio=0.1)


def _padded_for_the_baseline():
    """The tool that builds the graded orders replaced where it lives (``labkit.toyshop.export.order_detail``) and
    under the lab's names: every other order it builds from then on — the first of a pair, the baseline's —
    carries a long note in each product, a field the courier view drops: the baseline's side of a pair looks
    bigger and slower than it is."""
    import sys

    export = sys.modules["labkit.toyshop.export"]
    real, made = export.order_detail, [0]

    def order_detail(*args, **kwargs):
        order = real(*args, **kwargs)
        made[0] += 1
        if made[0] % 2:
            for item in order["items"]:
                if item["product"] is not None:
                    item["product"] = {**item["product"], "note": "x" * 20_000}
        return order

    return [(export, "order_detail", order_detail),
            *[(lab05, n, order_detail) for n in ("order_detail", "_order_detail") if hasattr(lab05, n)]]


GRADER_CASES = {
    "grade": lambda fn, experiment: lab05.check(fn, "json", experiment, rounds=6, save=False),
    "experiment": _experiment,
    "reference": reference,
    # the bar is set for the fields: the courier view by stdlib json passes too (the codec is the prediction's)
    "others": {"stdlib json, fields trimmed": lambda o: json.dumps(lab05.courier_view(o)).encode()},
    "baseline": lab05.baseline,
    "wrong": wrong,
    "cheats": {**input_cheats(reference, returns=False),
               "honest, not faster": slow_but_right,
               **standard_cheats(lab05.baseline, lab05, honest=slow_but_right, wrong=wrong, size=lambda o: len(o["items"]), at_least=5,
                                 honest_calls=10),
               "precomputed for the dataset": hard_coded(reference, every_dataset_order(), key=lambda o: o["id"],
                                                         fallback=slow_but_right),
               "bytes that lie": Lies,
               "replaces the order builder": patching(slow_but_right, _padded_for_the_baseline, "fakes_order_detail")},
}


def test_grader_passes_the_reference_and_fails_the_baseline_cheats_and_wrong_answers():
    assert_grader(**GRADER_CASES)


def test_msgpack_is_graded_by_the_graders_own_decoder_and_the_record_is_concluded():
    grade = lab05.check(lambda o: msgpack.packb(lab05.courier_view(o)), "msgpack", _experiment(), rounds=6,
                        save=False, seed=11)
    assert grade.passed, str(grade)
    assert "seed 11" in str(grade) and "your prediction (0.1)" in grade.items[-1].message
    assert "timed answers checked" in grade.items[-2].message


def test_bytes_in_another_format_than_declared_are_not_readable():
    grade = lab05.check(lambda o: msgpack.packb(lab05.courier_view(o)), "json", _experiment(), rounds=6, save=False)
    assert not grade.passed and "cannot read your bytes as json" in str(grade)


def test_true_is_not_one_and_a_float_is_not_an_int():
    def as_float(order):
        view = lab05.courier_view(order)
        view["total_cents"] = float(view["total_cents"])
        return orjson.dumps(view)

    grade = lab05.check(as_float, "json", _experiment(), rounds=6, save=False)
    assert [i.ok for i in grade.items] == [False] and "expected type int, got type float" in str(grade)


def test_a_correct_but_bulky_answer_fails_the_bytes_budget():
    def padded(order):
        return json.dumps(lab05.courier_view(order), indent=40).encode()

    grade = lab05.check(padded, "json", _experiment(), rounds=6, save=False)
    assert [i.ok for i in grade.items] == [True, True, False] and "over the budget" in str(grade)


def test_graded_orders_are_generated_for_the_grading():
    # GIVEN a dataset order and two seeds
    catalog = lab05._source()[1]
    a, b, again = lab05._fresh(catalog, 3, 1), lab05._fresh(catalog, 3, 2), lab05._fresh(catalog, 3, 1)
    # THEN the courier view differs from the dataset's and between seeds, and a seed reproduces its order
    assert lab05.courier_view(a) != lab05.courier_view(lab05.load_order(3)) != lab05.courier_view(b)
    assert a == again and set(a) == set(lab05.load_order(3))


def test_refusals_name_what_to_pass_and_hint_3_is_not_the_answer():
    assert "pass your function itself" in str(lab05.check(reference(lab05.load_order(1))))
    assert "'json' or 'msgpack'" in str(lab05.check(reference, "protobuf"))
    view = lab05.courier_view(lab05.load_order(1))
    assert set(view) == {"id", "status", "currency", "total_cents", "items"}
    assert "orjson.dumps(courier_view" not in lab05.hint(3)


def test_the_reference_still_passes_with_the_order_builder_replaced():
    cheat = GRADER_CASES["cheats"]["replaces the order builder"]
    try:
        grade = lab05.check(cheat, "json", _experiment(), rounds=6, save=False)
    finally:
        cheat.undo()
    bad = [i for i in grade.items if not i.ok]
    assert bad and bad[0].criterion == "speed", str(grade)  # timed on the orders the grader built
    cheat = patching(reference, _padded_for_the_baseline, "reference_behind_fakes")
    try:
        grade = lab05.check(cheat, "json", _experiment(), rounds=6, save=False)
    finally:
        cheat.undo()
    assert grade.passed, str(grade)
    assert all(len(o["items"]) >= 4 for o in (lab05.load_order(i) for i in lab05._source()[2][:3]))
