"""The grader kit itself (labkit.grading.kit): exact comparison, one code path for every call, meters, the prediction,
sealing — and a toy exercise built on it, graded against every generic cheat of tests/graderkit.py."""

from __future__ import annotations

import gc
import random
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from graderkit import assert_grader, hard_coded, mutating, run_cases, standard_cheats

import labkit.grading.kit as kit
from labkit.grading.calls import ChangedProcess, LeftRunning
from labkit.grading.kit import Caller, Meter, answers, difference, planned, prediction, timed
from labkit.learner.record import Experiment
from labkit.measure.comparison import compare

# ---- difference: exact types, compared by the kit -------------------------------------------------------------

class _AlwaysEqual:
    def __eq__(self, other):
        return True


def test_difference_needs_the_exact_type_at_every_node():
    assert difference([1, "a", (2.5, None)], [1, "a", (2.5, None)]) is None
    assert difference([1], [True]) == "the answer[0]: expected type int, got type bool"
    assert difference(3.0, 3) == "the answer: expected type float, got type int"
    assert difference({"a": 1}, {"a": 1.0}) == "the answer['a']: expected type int, got type float"
    assert "got type test_check._AlwaysEqual" in difference({"a": 1}, {"a": _AlwaysEqual()})
    assert difference({1: "x"}, {True: "x"}) == "the answer: unexpected key True"

    class MyList(list):
        pass

    class MyBytes(bytes):
        def __len__(self):
            return 0

    assert difference([1], MyList([1])) == "the answer: expected type list, got type test_check.MyList"
    assert "got type test_check.MyBytes" in difference(b"ab", MyBytes(b"ab"))


def test_difference_on_containers_arrays_and_floats():
    assert difference({"a": 1, "b": 2}, {"b": 2, "a": 1}) is None
    assert difference({"a": 1, "b": 2}, {"b": 2, "a": 1}, ordered=True).startswith("the answer: the keys must come")
    assert difference({"a": 1}, {}) == "the answer: missing key 'a'"
    assert difference([1, 2], [1]) == "the answer: expected 2 entries, got 1"
    assert difference({1, 2}, {1, 2}) is None and difference({1}, {True}) is not None
    assert difference(0.1 + 0.2, 0.3) is not None and difference(0.1 + 0.2, 0.3, rel=1e-12) is None
    assert difference(float("nan"), float("nan")) is None
    a = np.arange(6).reshape(2, 3)
    assert difference(a, a.copy()) is None
    assert difference(a, a.astype(float)) == "the answer: expected dtype int64, got float64"
    b = a.copy()
    b[1, 2] = 9
    assert difference(a, b) == "the answer[1, 2]: expected np.int64(5), got np.int64(9)"
    assert difference(a, a.reshape(3, 2)) == "the answer: expected shape (2, 3), got (3, 2)"
    assert "an array of Python objects" in difference(a, np.array([[1, 2, 3], [4, 5, 6]], dtype=object))
    assert difference(a, a.view(type("Sub", (np.ndarray,), {}))).startswith("the answer: expected type numpy.ndarray")


# ---- the caller: one code path, errors as values ---------------------------------------------------------------

def test_every_call_runs_in_one_worker_thread_through_the_same_frames():
    stacks = []

    def probe(x):
        f, names = sys._getframe(1), []
        while f is not None:
            names.append((f.f_code.co_name, f.f_lineno))
            f = f.f_back
        stacks.append((threading.current_thread().name, tuple(names)))
        return x

    class Counting(Meter):
        def __exit__(self, *exc):
            self.amount = 1.0

    with Caller() as r:
        assert r.call(probe, (1,)).value == 1
        m = Counting()
        assert r.call(probe, (2,), m).value == 2 and m.amount == 1.0
        bad = r.call(lambda: 1 / 0, ())
        assert bad.value is None and isinstance(bad.error, ZeroDivisionError)
        assert isinstance(r.call(lambda: sys.exit(2), ()).error, SystemExit)  # never raised at the grader
    assert stacks[0] == stacks[1] and stacks[0][0] == "labkit-graded-calls"
    assert [n for n, _ in stacks[0][1][:2]] == ["_timed", "_serve"]


def test_band_draws_a_size_around_n():
    rng = random.Random(1)
    sizes = {kit.band(rng, 1000, 0.2) for _ in range(200)}
    assert min(sizes) >= 800 and max(sizes) <= 1200 and len(sizes) > 50


# ---- the prediction -------------------------------------------------------------------------------------------

def test_the_prediction_is_required_and_says_what_to_write(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path))
    none = kit.planned(None)
    assert not none.ok and none.criterion == "prediction" and "Experiment.plan(" in none.message
    assert not kit.planned("0.5").ok and "must be a labkit Experiment" in kit.planned("0.5").message
    no_ratio = Experiment.plan("x", "the hypothesis in a sentence")
    assert "no predicted ratio" in kit.planned(no_ratio).message
    todo = Experiment.plan("x", "TODO: what will you change", predicted_ratio=0.5)
    assert "template" in kit.planned(todo).message
    c = compare([1e6 * (1 + 0.01 * (i % 7)) for i in range(60)], [0.46e6 * (1 + 0.01 * (i % 5)) for i in range(60)])
    item = kit.prediction(Experiment.plan("x", "halving the work halves the time", predicted_ratio=0.5), c)
    assert item.ok and "confirmed" in item.message and "predicted saving 50%" in item.message and "saved to" in item.message
    off = kit.prediction(Experiment.plan("x", "a small tweak saves a tenth", predicted_ratio=0.9), c, save=False)
    assert off.ok and "refuted" in off.message  # a refuted prediction is a result: it passes, shown as such
    assert not kit.prediction(None, c).ok


# ---- sealing --------------------------------------------------------------------------------------------------

def test_seal_keeps_what_a_module_runs_from_later_rebinding():
    mod = types.ModuleType("sealed_demo")
    exec("def helper():\n    return 'real'\n\ndef run():\n    return helper()\n", mod.__dict__)
    kit.seal(mod.__dict__)
    mod.helper = lambda: "fake"
    assert mod.run() == "real"
    mod.run.__code__ = (lambda: "swapped").__code__  # the public copy changes, not the grader's
    assert mod.__dict__["run"]() == "swapped"


# ---- a toy exercise on the kit, against every generic cheat ----------------------------------------------------

_TOY = """
import random
import sys

from labkit.grading.kit import Exercise, Meter, Caller, answers, band, fresh_seed, metered, planned, prediction, seal, timed


def baseline(items):
    seen = []
    for x in items:
        if x not in seen:
            seen.append(x)
    return seen


def _reference(items):
    return list(dict.fromkeys(items))


def make(n, seed):
    rng = random.Random(seed)
    return [rng.randrange(n // 2) for _ in range(n)]


class Lines(Meter):
    # Python line events of the call, in the worker thread (what lab 04 meters)
    def __enter__(self):
        self.amount, self._before = 0.0, sys.gettrace()

        def trace(frame, event, arg):
            if event == "line":
                self.amount += 1
            return trace
        self._trace = trace
        sys.settrace(trace)
        return self

    def __exit__(self, *exc):
        unhooked = sys.gettrace() is not self._trace
        sys.settrace(self._before)
        if unhooked:
            raise RuntimeError("the line meter was unhooked during the call (sys.settrace)")


EXERCISE = Exercise("Lab 99 — toy", ("a", "b", "c"), _reference)


def check(solution, experiment=None, seed=None):
    seed = fresh_seed() if seed is None else seed
    rng = random.Random(seed)
    n = band(rng, 1500, 0.2)
    cases = [([],), ([1],), ([3, 1, 3, 2, 1],), ([0, 0.0, False, 1, True],),
             *((make(rng.randrange(20, 300), rng.randrange(2**31)),) for _ in range(rng.randint(2, 4))),
             (make(n, rng.randrange(2**31)),)]
    unseen, base = rng.randrange(2**31), rng.randrange(2**31)
    with Caller() as caller:
        def fast():
            item = timed(caller, baseline, solution, inputs=lambda k: (make(n, base + k),), required_speedup=2.0,
                         rounds=6, rng=rng, what="toy")
            return item, prediction(experiment, item.detail, save=False)
        return EXERCISE.grade(
            lambda: answers(caller, solution, baseline, cases),
            lambda: planned(experiment),
            lambda: metered(caller, solution, baseline, lambda: (make(n, unseen),), meter=Lines, unit="lines",
                            what="an unseen input", max_fraction=0.5, floor=0),
            fast)


_SEALED = seal(globals())
"""
toy = types.ModuleType("toy_exercise")
exec(compile(_TOY, "toy_exercise.py", "exec"), toy.__dict__)
baseline = toy.baseline


def reference(items):
    return list(dict.fromkeys(items))


def wrong(items):
    return sorted(set(items))


GRADER_CASES = {
    "grade": lambda fn, experiment: toy.check(fn, experiment),
    "experiment": lambda: Experiment.plan("dict for membership", "a dict lookup replaces the list scan: "
                                          "O(n) instead of O(n²), far faster at 1,500 items", predicted_ratio=0.05),
    "reference": reference, "baseline": baseline, "wrong": wrong,
    "cheats": {**standard_cheats(baseline, toy, wrong=wrong, size=lambda items: len(items), at_least=1000,
                                  honest_calls=8),
               "hard-coded": hard_coded(baseline, [([3, 1, 3, 2, 1],)]),
               "walks around the meter": mutating(baseline, lambda items: sys.settrace(None))},
}


def test_the_toy_grader_passes_the_reference_and_fails_every_generic_cheat():
    assert_grader(**GRADER_CASES)


def test_nothing_the_cheats_patch_is_left_patched():
    import time

    import labkit

    compare_module = sys.modules["labkit.measure.comparison"]
    before = (compare_module.compare, labkit.compare, time.perf_counter_ns, kit.timed, toy.baseline.__code__)
    run_cases(GRADER_CASES["grade"], reference, baseline, wrong,
              {k: v for k, v in GRADER_CASES["cheats"].items() if "tamper" in k or "code" in k},
              GRADER_CASES["experiment"])
    assert (compare_module.compare, labkit.compare, time.perf_counter_ns, kit.timed, toy.baseline.__code__) == before


@pytest.mark.parametrize("name", ["malformed: None", "malformed: raising dunders", "malformed: contains itself",
                                  "malformed: unprintable error", "malformed: SystemExit"])
def test_a_malformed_answer_is_a_failed_item_never_a_crash(name):
    result = toy.check(GRADER_CASES["cheats"][name], GRADER_CASES["experiment"]())
    assert not result.passed and result.items[-1].criterion == "correctness"


def test_the_timed_and_the_metered_answers_are_checked_too():
    rng = random.Random(3)
    calls = [0]

    def sometimes_wrong(items):
        calls[0] += 1
        out = reference(items)
        return out[::-1] if calls[0] % 4 == 0 else out  # fast, and wrong on one timed call in four

    with Caller() as caller:
        item = kit.timed(caller, baseline, sometimes_wrong, inputs=lambda k: (toy.make(1200, k),),
                         required_speedup=2.0, rounds=6, rng=rng)
        assert not item.ok and item.criterion == "speed" and "wrong answer on a timed call" in item.message
        bad = kit.metered(caller, wrong, baseline, lambda: (toy.make(1200, 99),), meter=toy.Lines, unit="lines",
                          what="an unseen input", max_fraction=0.5, floor=0)
        assert not bad.ok and "wrong answer on an unseen input (the metered call)" in bad.message
        little = kit.metered(caller, reference, baseline, lambda: (toy.make(1200, 98),), meter=toy.Lines,
                             unit="lines", what="an unseen input", max_fraction=1.0, floor=0.01)
        assert not little.ok and "less than 1.0% of the baseline's work" in little.message
        with pytest.raises(ValueError, match="has no budget"):  # a grader without a cap would pass anything
            kit.metered(caller, reference, baseline, lambda: (toy.make(1200, 97),), meter=toy.Lines, unit="lines",
                        what="an unseen input")


def test_start_refuses_what_is_not_a_function_and_draws_a_seed_and_its_generator():
    from labkit.grading import Exercise

    ex = Exercise("t", ["a"], "s")
    # GIVEN something that is not a function: the refusal, before any criterion (not an attempt)
    refused, seed, rng = ex.start(3, None)
    assert refused is not None and not refused.passed and "not int" in str(refused) and ex.attempts == 0
    # GIVEN a function and a seed: no refusal, that seed, and a generator that reproduces the run
    refused, seed, rng = ex.start(len, 7)
    assert refused is None and seed == 7 and rng.random() == random.Random(7).random()
    # AND the grade's title names what was graded and the seed
    assert ex.grade(lambda: kit.passed("ok"), seed=7, about="order 3").title == "t (order 3, seed 7)"
    plain = ex.grade(lambda: kit.passed("ok"))
    assert plain.title == "t" and plain.passed


def test_every_grader_refuses_what_is_not_a_function_before_grading():
    # a refusal is a CheckResult, which is falsy: a grader must test it with `is not None`, never its truth
    import importlib

    from labkit.labs import LABS

    for x in LABS:
        source = importlib.import_module(x.grader).__file__
        text = Path(source).read_text(encoding="utf-8")
        assert "if refused:" not in text, f"{x.grader}: `if refused:` is never true (a refusal has not passed)"


# ---- what a graded call must leave as it found it (issue 36: the process, its threads, its inputs) ------------

def test_a_call_that_leaves_a_thread_running_fails_saying_which():
    def leaves(x):
        threading.Thread(target=time.sleep, args=(0.5,), name="still-here", daemon=True).start()
        return x

    with Caller() as r:
        out = r.call(leaves, (1,))
        assert isinstance(out.error, LeftRunning) and "'still-here'" in str(out.error)
        assert r.call(lambda x: x, (2,)).value == 2  # the next call is judged on its own


def test_joined_threads_pass_and_the_idle_mode_allows_a_waiting_thread_only():
    def joined(x):
        with ThreadPoolExecutor(2) as pool:
            return sum(pool.map(abs, range(x)))

    waiting = threading.Event()

    def keeps_a_waiter(x):
        threading.Thread(target=waiting.wait, daemon=True).start()
        return x

    def keeps_a_worker(x):
        def spin():
            end = time.perf_counter() + 0.4
            while time.perf_counter() < end:
                pass
        threading.Thread(target=spin, daemon=True).start()
        return x

    with Caller() as strict, Caller(threads="idle") as idle:
        assert strict.call(joined, (10,)).value == 45
        assert isinstance(strict.call(keeps_a_waiter, (1,)).error, LeftRunning)
        assert idle.call(keeps_a_waiter, (1,)).error is None
        out = idle.call(keeps_a_worker, (1,))
        assert isinstance(out.error, LeftRunning) and "still using the CPU" in str(out.error)
    waiting.set()


@pytest.mark.parametrize("change, what", [
    (lambda: sys.setswitchinterval(0.5), "switch interval"),
    (lambda: gc.set_threshold(1, 1, 1), "gc thresholds"),
    (lambda: gc.callbacks.append(lambda *a: None), "gc callbacks"),
    (lambda: gc.disable(), "garbage collector"),
    (lambda: sys.setprofile(lambda *a: None), "profile hook"),
    (lambda: threading.setprofile(lambda *a: None), "threading's profile hook"),
    (lambda: sys.setrecursionlimit(sys.getrecursionlimit() + 7), "recursion limit"),
])
def test_a_call_that_changes_the_process_fails_and_the_state_is_put_back(change, what):
    before = (sys.getswitchinterval(), gc.get_threshold(), list(gc.callbacks), gc.isenabled(),
              threading.getprofile(), sys.getrecursionlimit())

    def changes(x):
        change()
        return x

    with Caller() as r:
        out = r.call(changes, (1,))
    assert isinstance(out.error, ChangedProcess) and what in str(out.error) and "put back" in str(out.error)
    after = (sys.getswitchinterval(), gc.get_threshold(), list(gc.callbacks), gc.isenabled(),
             threading.getprofile(), sys.getrecursionlimit())
    assert after == before


def test_an_answer_is_copied_as_it_is_returned_and_a_later_change_is_seen():
    box = []

    def fills_later(x):
        def later():
            time.sleep(0.01)
            box.extend(range(x))
        threading.Thread(target=later, daemon=True).start()
        return box

    with Caller(threads="idle") as r:
        out = r.call(fills_later, (3,))
        time.sleep(0.05)
    assert out.value == [] and out.raw == [0, 1, 2]  # what was returned, and what it became


def test_others_cpu_sees_a_busy_thread_and_timed_refuses_a_comparison_it_ran_through():
    started, stop = threading.Event(), threading.Event()

    def busy():
        started.wait()
        while not stop.is_set():
            sum(range(50_000))

    hog = threading.Thread(target=busy, daemon=True, name="a busy neighbour")
    hog.start()
    calls = [0]

    def solution(items):  # honest and fast; after a few timed calls the neighbour wakes
        calls[0] += 1
        if calls[0] == 4:
            started.set()
        return sorted(set(items))

    def baseline(items):
        return sorted(set(items))

    try:
        with Caller() as r:
            item = timed(r, baseline, solution, inputs=lambda k: (list(range(3000, 0, -1)),), required_speedup=0.5,
                         rounds=12, rng=random.Random(1))
    finally:
        stop.set()
        hog.join(5)
    assert not item.ok and "other work in this process" in item.message and "a busy neighbour" in item.message


def test_inputs_written_or_handed_back_fail_unless_the_exercise_updates_in_place():
    def writes(xs):
        out = sorted(xs)
        xs.clear()
        return out

    def hands_back(xs):
        xs.sort()
        return xs

    def view(a):
        a *= 2
        return a[:]

    cases = [([3, 1, 2],)]
    with Caller() as r:
        got = answers(r, writes, sorted, cases)
        assert not got.ok and "wrote into its input" in got.message
        got = answers(r, hands_back, sorted, cases)
        assert not got.ok and "returned its input" in got.message
        assert answers(r, hands_back, sorted, cases, inplace=True).ok
        got = answers(r, view, lambda a: a * 2, [(np.arange(4),)])
        assert not got.ok and "view of its input" in got.message


def test_a_wrong_answer_is_said_before_a_broken_input_whatever_the_order_of_the_cases():
    """Handing back the input is right on an empty list and wrong where there are duplicates: the wrong answer is
    what the learner reads, whichever case comes first (the cases are drawn in a seeded order)."""
    same = lambda xs: xs  # noqa: E731
    dedup = lambda xs: list(dict.fromkeys(xs))  # noqa: E731
    with Caller() as r:
        for cases in ([([],), ([1, 1, 2],)], [([1, 1, 2],), ([],)]):
            got = answers(r, same, dedup, cases)
            assert not got.ok and got.message.startswith("wrong answer"), got.message
        got = answers(r, same, dedup, [([],), ([1, 2],)])
        assert not got.ok and "returned its input" in got.message


# ---- records: a plan for this check, in this lab ------------------------------------------------------------------

def _plan(**kw):
    return Experiment.plan("toy fix", "a set instead of a list scan: linear, so about a tenth", predicted_ratio=0.1,
                           **kw)


def test_planned_refuses_records_that_are_not_a_plan_for_this_check(monkeypatch):
    import dataclasses
    import datetime as dt

    from labkit.grading import kit

    assert planned(_plan()).ok
    c = compare(lambda: sum(range(200)), lambda: sum(range(100)), rounds=5)
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat(timespec="seconds")
    bad = {"already concluded": _plan().conclude(c),
           "dated in the future": dataclasses.replace(_plan(), planned_at=later),
           "not a date": dataclasses.replace(_plan(), planned_at="soon"),
           "not a plain str": dataclasses.replace(_plan(), hypothesis=type("S", (str,), {})("x" * 40))}
    shadowed = _plan()
    object.__setattr__(shadowed, "save", lambda *a: None)
    bad["altered"] = shadowed
    for why, record in bad.items():
        item = planned(record)
        assert not item.ok and item.criterion == "prediction", why
    grading = kit._SEALED["_GRADING"]
    grading[0] = "05"
    try:
        assert not planned(dataclasses.replace(_plan(), lab="03")).ok
        assert planned(dataclasses.replace(_plan(), lab="05")).ok and planned(_plan()).ok  # "": not known
    finally:
        grading[0] = ""


@pytest.mark.parametrize("name, lab", [("notebooks/05_serialization.ipynb", "05"), ("05_serialization-Copy1.ipynb", "05"),
                                       ("Copy of 07_tail_latency.ipynb", "07"), ("scratch.ipynb", ""), ("", "")])
def test_a_plan_knows_the_notebook_it_was_made_in(monkeypatch, name, lab):
    from labkit.learner.record import notebook_lab

    monkeypatch.setenv("JPY_SESSION_NAME", name)
    assert notebook_lab() == lab and _plan().lab == lab


def test_only_a_comparison_measured_in_this_process_counts_as_measured():
    import dataclasses

    from labkit.measure.comparison import Comparison, measured_here

    c = compare(lambda: sum(range(200)), lambda: sum(range(100)), rounds=5)
    assert measured_here(c)
    assert not measured_here(dataclasses.replace(c, ratio=0.01))
    assert not measured_here(dataclasses.replace(c, token="0" * 8))
    assert not measured_here(Comparison.from_dict(c.to_dict()) if c.token == "" else dataclasses.replace(c, verdict="slower"))
    assert not prediction(_plan(), dataclasses.replace(c, ratio=0.01), save=False).ok
    assert prediction(_plan(), c, save=False).ok


def test_a_call_that_raised_hands_back_the_input_it_raised_on_even_a_generated_one():
    """'Run it on this input yourself' is only advice when the learner can get the input: a drawn one too."""
    drawn = random.Random(7)

    def fragile(order):
        return order["product"]["weight"]  # forgets that a product can be missing

    def baseline(order):
        return None if order["product"] is None else order["product"]["weight"]

    cases = [({"product": {"weight": 3}},), ({"product": None, "id": drawn.randrange(10**6)},)]  # drawn per run
    with Caller() as r:
        got = answers(r, fragile, baseline, cases)
    assert not got.ok and "raised TypeError" in got.message and "result.items[-1].detail" in got.message
    (order,) = got.detail
    assert order["product"] is None and isinstance(order["id"], int)
    try:
        fragile(*got.detail)
    except TypeError:
        pass
    else:
        raise AssertionError("the input handed back does not reproduce the failure")
