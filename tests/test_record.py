import numpy as np
import pytest

import labkit
from labkit.errors import BadInputError, ResultsError, ResultsWarning
from labkit.learner.record import Experiment, experiments
from labkit.measure.comparison import compare
from labkit.results import write_json_atomic


class Measured:
    def __init__(self, median, seed, name):
        self.samples_ns = np.random.default_rng(seed).lognormal(np.log(median), 0.05, 200)
        self.name = name


def test_plan_then_conclude_records_the_outcome(tmp_path):
    exp = Experiment.plan("orjson", "orjson encodes about twice as fast, so the ratio should be 0.5",
                          predicted_ratio=0.5)
    assert exp.concluded_at is None and exp.expected_verdict() == "faster"
    first = exp.save(tmp_path)
    done = exp.conclude(compare(Measured(1e6, 1, "json"), Measured(0.5e6, 2, "orjson")))
    assert done.verdict == "faster" and done.outcome == "confirmed"
    assert done.planned_at <= done.concluded_at and len(done.measurements) == 1
    assert done.save(tmp_path) == first  # the same record, now complete
    back = Experiment.load(first)
    assert back == done


def test_a_wrong_prediction_is_refuted(tmp_path):
    exp = Experiment.plan("cache", "a cache should make it four times faster", predicted_ratio=0.25)
    done = exp.conclude(compare(Measured(1e6, 1, "a"), Measured(1e6, 2, "b")))
    assert done.verdict == "same" and done.outcome == "refuted"
    assert "refuted" in str(done)


def test_experiments_lists_records_and_names_every_file_it_could_not_read(tmp_path):
    # GIVEN two good records, a result of another kind, and five files that cannot be read as records
    Experiment.plan("one", "first hypothesis written down", predicted_ratio=1.0).save(tmp_path)
    good = Experiment.plan("two", "second hypothesis written down").save(tmp_path)
    write_json_atomic(tmp_path / "other.json", {"kind": "bench", "version": 1})
    bad = {
        "junk.json": "{not json",
        "truncated.json": good.read_text()[:40],
        "list.json": "[1, 2]",
        "nokind.json": '{"title": "x"}',
        "fields.json": '{"kind": "experiment", "version": 1, "hypothesis": "no title"}',
        "newer.json": '{"kind": "experiment", "version": 99, "title": "t", "hypothesis": "h"}',
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
    # WHEN they are listed
    with pytest.warns(ResultsWarning) as caught:
        df = experiments(tmp_path)
    # THEN the good records are all there, and each unreadable file is named once, with its reason
    assert list(df.title) == ["one", "two"]
    messages = [str(w.message) for w in caught]
    for name in bad:
        assert sum(str(tmp_path / name) in m for m in messages) == 1, (name, messages)
    assert not any("other.json" in m for m in messages)          # another kind of result is not a failure
    assert any("not a readable JSON result" in m for m in messages if "junk.json" in m)
    assert any("newer" in m for m in messages if "newer.json" in m)
    assert any("TypeError" in m and "title" in m for m in messages if "fields.json" in m)
    assert experiments(tmp_path / "missing").empty


def test_loading_a_damaged_result_names_the_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"kind": "experiment", "version": 1, "hypothesis": "no title"}')
    with pytest.raises(ResultsError, match=f"{path}.*damaged experiment.*title"):
        Experiment.load(path)
    path.write_text('{"kind": "experiment", "version": 7}')
    with pytest.raises(ResultsError, match=f"{path}: .*version 7"):
        Experiment.load(path)


def test_default_folder_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path / "r"))
    p = Experiment.plan("env", "records land in PERFLAB_RESULTS").save()
    assert p.parent == tmp_path / "r"
    assert len(labkit.experiments()) == 1


def test_bad_input_says_what_to_do(tmp_path):
    with pytest.raises(BadInputError, match="write the hypothesis out"):
        Experiment.plan("x", "faster")
    with pytest.raises(BadInputError, match="must be > 0"):
        Experiment.plan("x", "a proper sentence of hypothesis", predicted_ratio=-1)
    with pytest.raises(BadInputError, match="labkit.compare"):
        Experiment.plan("x", "a proper sentence of hypothesis").conclude("fast")


def test_a_target_that_cannot_be_replaced_raises_results_error_and_leaves_no_temp_file(tmp_path):
    # a folder sits where the file should go: renaming over it fails for every user, root included
    (tmp_path / "r.json").mkdir()
    with pytest.raises(ResultsError, match=r"writing .*r\.json failed"):
        write_json_atomic(tmp_path / "r.json", {"kind": "x"})
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_file_where_a_folder_should_be_raises_results_error(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(ResultsError, match="writable folder"):
        Experiment.plan("x", "a proper sentence of hypothesis").save(blocker / "sub")


def test_atomic_write_leaves_no_partial_file_on_failure(tmp_path):
    target = tmp_path / "r.json"
    write_json_atomic(target, {"kind": "x", "n": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"kind": "x", "bad": object()})
    assert target.read_text().count('"n": 1') == 1  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind


def test_right_direction_but_wrong_size_is_refuted():
    exp = Experiment.plan("big win", "predicting a ten-fold speed-up from this change", predicted_ratio=0.1)
    done = exp.conclude(compare(Measured(1e6, 1, "a"), Measured(0.5e6, 2, "b")))
    assert done.verdict == "faster" and done.outcome == "refuted"  # 0.5 is 5× off the predicted 0.1
    assert done.judgement.startswith("refuted: 0.1 outside ") and "refuted: 0.1 outside" in str(done)


def test_judge_confirms_inside_the_widened_interval_and_refutes_outside_it_whatever_the_verdict():
    from labkit.learner.record import NAPKIN_TOLERANCE, accepted_range, judge, judgement

    assert NAPKIN_TOLERANCE == 0.25
    # lab 08's first step: measured 0.143 (interval 0.133–0.152) accepts 0.1064–0.19
    step1 = (0.133, 0.152)
    assert accepted_range(step1) == pytest.approx((0.1064, 0.19))
    assert judge(0.02, step1) == "refuted" and judge(0.38, step1) == "refuted"  # 50× and 2.6× predicted, 7× measured
    assert judge(0.16, step1) == "confirmed" and judge(0.14, step1) == "confirmed"
    assert judge(0.105, step1) == "refuted" and judge(0.191, step1) == "refuted"  # just outside the band
    assert judgement(0.14, step1) == "confirmed: 0.14 within 0.11–0.19"
    assert judgement(0.38, step1) == "refuted: 0.38 outside 0.11–0.19"
    # an inconclusive comparison (the interval straddles 1) still refutes a prediction far outside it
    noisy = (0.992, 1.139)
    assert judge(0.5, noisy) == "refuted" and judgement(0.5, noisy) == "refuted: 0.5 outside 0.79–1.42"
    assert judge(1.0, noisy) == "confirmed"
    # a slow-down is judged alike; a "same" measurement confirms a prediction within the napkin's quarter
    assert judge(2.0, (1.8, 2.4)) == "confirmed" and judge(1.1, (1.8, 2.4)) == "refuted"
    assert judge(1.02, (0.98, 1.03)) == "confirmed" and judge(0.5, (0.98, 1.03)) == "refuted"
    # the measurement cannot tell: no interval, or one too wide to confirm anything (it still refutes)
    wide = (0.412, 0.835)  # lab 08's step 2 under QUICK: more than 2× from end to end
    assert judge(0.5, None) == "inconclusive" and judge(0.5, (float("nan"), 1.0)) == "inconclusive"
    assert judge(0.5, wide) == "inconclusive" and judge(1.0, wide) == "inconclusive"
    assert judge(0.2, wide) == "refuted" and judge(1.2, wide) == "refuted"
    assert judge(0.35, (0.26, 0.47)) == "confirmed"  # 1.8× wide: a grader's interval on a busy machine still tells
    assert "too wide to tell" in judgement(0.5, wide) and "measure longer" in judgement(0.5, wide)
    assert "no measured interval" in judgement(0.5, None) and judgement(None, step1) == ""
    # the printed band never contradicts the word: a prediction on the edge shows inside, a hair off shows outside
    assert judgement(0.19, step1).startswith("confirmed: 0.19 within")
    edge = judgement(0.1063, step1)
    assert edge.startswith("refuted: 0.1063 outside") and float(edge.split()[-1].split("–")[0]) > 0.1063
    with pytest.raises(BadInputError, match="fraction"):
        judge(0.5, step1, tolerance=2.0)
    with pytest.raises(BadInputError, match="must be > 0"):
        judge(-0.86, step1)


def test_a_concluded_record_keeps_its_interval_and_shows_the_range_it_was_judged_by(tmp_path):
    exp = Experiment.plan("orjson", "orjson encodes about twice as fast, so the ratio should be 0.5",
                          predicted_ratio=0.5)
    done = exp.conclude(compare(Measured(1e6, 1, "json"), Measured(0.5e6, 2, "orjson")))
    assert done.measured_ci is not None and done.measured_ci[0] < done.measured_ratio < done.measured_ci[1]
    assert done.judgement.startswith("confirmed: 0.5 within ") and done.judgement in str(done)
    back = Experiment.load(done.save(tmp_path))
    assert back.measured_ci == done.measured_ci and back.judgement == done.judgement
    # a record saved before the interval was kept still loads, and says its outcome alone
    old = {k: v for k, v in done.to_dict().items() if k != "measured_ci"}
    assert Experiment.from_dict(old).judgement == "confirmed"


def test_a_template_still_saying_todo_is_not_saved_as_a_result(tmp_path):
    todo = Experiment.plan("orjson", "TODO: your napkin math, e.g. serialize is S of T ms", predicted_ratio=0.8)
    assert todo.is_template
    with pytest.warns(ResultsWarning, match="not saved: its hypothesis still says TODO"):
        assert todo.save(tmp_path) is None
    assert list(tmp_path.iterdir()) == []
    written = Experiment.plan("orjson", "serialize is a third of the request; orjson is 10x faster", predicted_ratio=0.7)
    assert not written.is_template and written.save(tmp_path).exists()


def test_in_a_notebook_the_unsaved_template_is_an_amber_notice_not_a_red_stderr_warning(tmp_path, monkeypatch):
    # GIVEN a notebook kernel (JupyterLab draws anything on stderr red, as if the cell had failed)
    import warnings

    import labkit.learner.guesses

    shown = []
    monkeypatch.setattr(labkit.learner.guesses, "ipython", lambda: object())  # a kernel's shell
    monkeypatch.setattr(labkit.learner.guesses, "notice", lambda text, tone="alarm": shown.append((text, tone)))
    todo = Experiment.plan("orjson", "TODO: your napkin math", predicted_ratio=0.8)
    # WHEN the template is saved THEN nothing is written, no warning is raised, and the notice says what to do
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert todo.save(tmp_path) is None
    assert list(tmp_path.iterdir()) == []
    assert [tone for _, tone in shown] == ["todo"] and "still says TODO — write yours" in shown[0][0]


def test_the_todo_notice_renders_amber_html_beside_its_text():
    from labkit.learner.guesses import _html

    html = _html("experiment 'x' not saved: <TODO>", "todo")
    assert "#fff8c5" in html and "&lt;TODO&gt;" in html and "#cf222e" not in html


def test_a_saved_record_shows_its_short_name_in_a_notebook_not_the_machines_path(tmp_path, monkeypatch):
    import IPython.lib.pretty as pretty

    from labkit.learner.record import Experiment

    monkeypatch.chdir(tmp_path)
    exp = Experiment.plan("t", "a hypothesis long enough to be a plan of its own words", predicted_ratio=0.5)
    path = exp.save(tmp_path / "results")
    assert path.is_file() and path.parent == tmp_path / "results"           # still a Path in every way
    assert pretty.pretty(path) == f"saved results/{path.name}" and str(tmp_path) not in pretty.pretty(path)
