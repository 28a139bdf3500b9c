"""labkit.learner.guesses: a guess left empty is said once, loudly, when nobody was there to write it (Run All)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from labkit.errors import BadInputError
from labkit.learner import guesses


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def book(monkeypatch):
    """A fresh book on a fake clock, as if IPython's cell events were hooked."""
    clock = Clock()
    b = guesses._Book(clock)
    b.hooked = True
    monkeypatch.setattr(guesses, "_BOOK", b)
    return b, clock


def run_cell(book, clock, gap_s: float, body) -> None:
    """One notebook cell: it starts ``gap_s`` after the previous one ended, runs ``body``, then ends."""
    clock.now += gap_s
    book.pre_run_cell()
    body()
    clock.now += 0.01
    book.post_run_cell()


def test_run_all_shows_the_banner_once_and_the_summary_counts_the_skipped(book, capsys):
    # GIVEN cells started milliseconds apart, as Run All and papermill start them
    b, clock = book
    run_cell(b, clock, 0.0, lambda: None)
    run_cell(b, clock, 0.005, lambda: guesses.noted(my_guess_ms=None))
    run_cell(b, clock, 0.005, lambda: guesses.noted(my_guess_x=None, my_hypothesis=None))
    out = capsys.readouterr().out
    # THEN the banner comes once, at the first skipped guess
    assert out.count("PREDICTIONS SKIPPED") == 1
    # AND the summary says how many were skipped, by name, loudly
    s = guesses.summary()
    assert "0 of 3 written; 3 skipped (my_guess_ms, my_guess_x, my_hypothesis)" in s
    assert s.loud and "restart the kernel" in s and "border:3px solid" in s._repr_html_()


def test_a_learner_who_pauses_and_writes_a_guess_gets_no_banner(book, capsys):
    b, clock = book
    run_cell(b, clock, 0.0, lambda: None)
    run_cell(b, clock, 12.0, lambda: guesses.noted(my_guess_ms=4.0))
    assert capsys.readouterr().out == ""
    assert [(g.name, g.value, g.attended) for g in guesses.recorded()] == [("my_guess_ms", 4.0, True)]
    s = guesses.summary()
    assert str(s) == "Predictions: all 1 written before their measurements." and not s.loud


def test_a_guess_left_empty_on_purpose_is_one_quiet_line_not_the_banner(book, capsys):
    b, clock = book
    run_cell(b, clock, 0.0, lambda: None)
    run_cell(b, clock, 8.0, lambda: guesses.noted(my_guess_ms=None))
    out = capsys.readouterr().out
    assert "PREDICTIONS SKIPPED" not in out and "my_guess_ms left as None" in out
    s = guesses.summary()
    assert "0 of 1 written; 1 skipped (my_guess_ms)" in s and not s.loud


def test_a_cell_run_again_filled_in_replaces_the_skipped_note(book):
    b, clock = book
    run_cell(b, clock, 0.0, lambda: None)
    run_cell(b, clock, 0.002, lambda: guesses.noted(my_guess_ms=None))
    run_cell(b, clock, 30.0, lambda: guesses.noted(my_guess_ms=7))
    assert str(guesses.summary()) == "Predictions: all 1 written before their measurements."


def test_outside_a_notebook_every_guess_counts_as_attended(monkeypatch, capsys):
    b = guesses._Book(Clock())  # not hooked: a script, no cell events
    monkeypatch.setattr(guesses, "_BOOK", b)
    guesses.noted(my_guess_ms=None)
    assert "PREDICTIONS SKIPPED" not in capsys.readouterr().out
    assert guesses.recorded()[0].attended


def test_noted_needs_names_and_forget_starts_again(book):
    with pytest.raises(BadInputError, match="by name"):
        guesses.noted()
    guesses.noted(my_guess_ms=1)
    guesses.forget()
    assert guesses.recorded() == () and str(guesses.summary()) == "No guesses were noted in this run."


@pytest.mark.parametrize(("guess", "measured", "unit", "want"), [
    (None, 11.25, "ms", "your guess: skipped · measured 11.2 ms"),
    (4, 11.2, "ms", "your guess 4 ms · measured 11.2 ms (2.8× your guess)"),
    (2.0, 1.0, "", "your guess 2 · measured 1 (0.5× your guess)"),
    (0, 3.0, "µs", "your guess 0 · measured 3 µs"),
    ("fast", 3.0, "µs", "your guess 'fast' · measured 3 µs (a guess is a number: write one)"),
    (True, 3.0, "", "your guess True · measured 3 (a guess is a number: write one)"),
])
def test_beside_shows_guess_and_measurement_on_one_line(guess, measured, unit, want):
    assert guesses.beside(guess, measured, unit) == want


def test_every_lab_notes_each_guess_it_asks_for_and_counts_them_at_the_end():
    # every `my_… = None` a lab asks the learner to fill is noted in the same cell, and the lab's last cell counts
    import json
    import re
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        for c in cells:
            src = "".join(c["source"])
            for name in re.findall(r"^(my_\w+)\s*=\s*None\b", src, re.M):
                assert re.search(rf"guesses\.noted\([^)]*\b{name}={name}\b", src), \
                    f"{path.name}: the cell that asks for {name} must note it: guesses.noted({name}={name})"
        assert "guesses.summary()" in "".join(cells[-1]["source"]), \
            f"{path.name}: its last cell must count the predictions: guesses.summary()"
        sources = ["".join(c["source"]) for c in cells]
        first_use = next(i for i, src in enumerate(sources) if "guesses." in src)
        assert any(re.search(r"^from labkit import [\w, ]*\bguesses\b", src, re.M) for src in sources[:first_use + 1]), \
            f"{path.name}: import guesses before its first use (from labkit import guesses)"


@pytest.mark.slow
def test_in_a_real_kernel_run_all_shows_the_banner_and_the_count():
    # GIVEN a three-cell notebook run top to bottom by nbclient, as papermill and Run All run it
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from labkit import guesses"),
                nbformat.v4.new_code_cell("my_guess_ms = None\nguesses.noted(my_guess_ms=my_guess_ms)"),
                nbformat.v4.new_code_cell("guesses.summary()")]
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()

    def text(cell):
        return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs)

    # THEN the guess cell says it loudly, as HTML and as text, and the last cell counts the skipped guess
    assert "PREDICTIONS SKIPPED" in text(nb.cells[1])
    assert any("text/html" in o.get("data", {}) for o in nb.cells[1].outputs)
    assert "0 of 1 written; 1 skipped (my_guess_ms)" in text(nb.cells[2])


def test_against_puts_each_noted_guess_beside_its_measurement_and_plans_beside_theirs(book):
    from labkit import charts
    from labkit.learner.record import Experiment

    b, clock = book
    run_cell(b, clock, 5.0, lambda: guesses.noted(my_guess_ms=4.0, my_guess_x=None))
    plan = Experiment.plan("a plan", "one pass instead of two halves the time", predicted_ratio=0.5)
    concluded = dataclasses.replace(plan, measured_ratio=0.25, measured_ci=(0.23, 0.27))
    frame = guesses.against({"my_guess_ms": 12.0, "my_guess_x": 3.0}, units={"my_guess_ms": "ms"},
                            experiments=[plan, concluded])
    intervals = frame.pop("measured_lo"), frame.pop("measured_hi")
    assert [list(v.isna()) for v in intervals] == [[True, True, False]] * 2  # a plan's interval, none for a guess
    assert (intervals[0][2], intervals[1][2]) == (0.23, 0.27)
    assert frame.to_dict("records")[0] == {"name": "my_guess_ms", "kind": "guess", "predicted": 4.0, "measured": 12.0,
                                           "unit": "ms", "skipped": False, "factor": 3.0}
    skipped = frame.iloc[1]
    assert (skipped["name"], skipped["measured"], skipped["skipped"]) == ("my_guess_x", 3.0, True)
    assert math.isnan(skipped["predicted"]) and math.isnan(skipped["factor"])
    assert frame.to_dict("records")[2] == {"name": "a plan", "kind": "plan", "predicted": 0.5, "measured": 0.25,
                                           "unit": "ratio", "skipped": False, "factor": 0.5}
    assert len(frame) == 3  # the unmeasured plan is left out
    chart = charts.guesses_chart(frame.assign(measured_lo=intervals[0], measured_hi=intervals[1]))
    band = chart.layer[0].data  # the plan's interval widened by the napkin tolerance: where 0.5 would be confirmed
    assert list(band["name"]) == ["a plan"] and (band["band_lo"][2], band["band_hi"][2]) == (0.23 / 1.25, 0.27 * 1.25)
    chart = charts.guesses_chart(frame)
    svg = charts.to_svg(chart)
    assert "my_guess_ms (ms)" in svg and "my_guess_x — skipped" in svg
    dots = chart.layer[1].data
    assert sorted(dots[dots["name"] == "my_guess_ms"]["value"]) == [4.0, 12.0]  # the guess and the measurement
    assert list(dots[dots["name"] == "my_guess_x"]["what"]) == ["measured"]    # a skipped guess: measured alone


def test_against_refuses_a_guess_never_noted_and_a_measurement_that_is_not_a_number(book):
    from labkit import charts

    b, clock = book
    run_cell(b, clock, 5.0, lambda: guesses.noted(my_guess_ms=4.0))
    with pytest.raises(BadInputError, match=r"no guess named 'my_guess_typo'.*noted: my_guess_ms"):
        guesses.against({"my_guess_typo": 1.0})
    with pytest.raises(BadInputError, match="must be a number"):
        guesses.against({"my_guess_ms": "12 ms"})
    with pytest.raises(BadInputError, match="not a finite number"):
        guesses.against({"my_guess_ms": float("nan")})
    with pytest.raises(BadInputError, match="lacks"):
        charts.guesses_chart(guesses.against({"my_guess_ms": 1.0}).drop(columns=["unit"]))


@pytest.mark.parametrize("named, words", [
    ({"my_guess_speedup_x": "5x"}, ["my_guess_speedup_x = '5x' is not a number", "write 5, not '5x'"]),
    ({"my_predicted_ratio": -0.86}, ["my_predicted_ratio = -0.86", "number > 0"]),
    ({"my_guess_field_over_column": 0}, ["my_guess_field_over_column = 0", "number > 0"]),
    ({"my_guess_hit_pct": 120}, ["my_guess_hit_pct = 120", "from 0 to 100"]),
    ({"my_guess_gc_share": 5}, ["my_guess_gc_share = 5", "from 0 to 1", "5 % is 0.05"]),
    ({"my_naive_ms": "12 ms"}, ["my_naive_ms = '12 ms' is not a number", "a time in ms", "write 12"]),
    ({"my_guess_ms": float("inf")}, ["not a finite number"]),
    ({"my_guess_queries": -3}, ["my_guess_queries = -3", "≥ 0"]),
    ({"my_guess_join_x": True}, ["my_guess_join_x = True is not a number"]),
    ({"my_guess_ms": 4.0, "my_guess_cache_x": "ten"}, ["my_guess_cache_x = 'ten' is not a number"]),
])
def test_a_guess_that_cannot_be_what_its_name_asks_for_is_refused_where_it_is_typed(book, named, words):
    b, clock = book
    with pytest.raises(BadInputError) as caught:
        run_cell(b, clock, 5.0, lambda: guesses.noted(**named))
    message = str(caught.value)
    assert all(w in message for w in words), message
    assert "run it again" in message and guesses.recorded() == ()  # nothing of the refused cell is noted


def test_what_a_name_does_not_constrain_is_taken_as_written(book):
    import numpy as np

    b, clock = book
    run_cell(b, clock, 5.0, lambda: guesses.noted(my_guess_winner="orjson", my_ranking=["join", "cache"],
                                                  my_hypothesis="the JOIN removes twenty round trips",
                                                  my_guess_exponent=-1.5, my_guess_hit_pct=0,
                                                  my_guess_gc_share=0.05, my_guess_join_x=np.float64(7),
                                                  my_guess_queries=np.int64(41), my_guess_io_x=None))
    assert [g.name for g in guesses.recorded()][:2] == ["my_guess_winner", "my_ranking"]
    assert guesses.expects("my_guess_winner") is None and guesses.expects("my_guess_join_x")[0] == "ratio"
    assert guesses.expects("my_guess_dicts_over_columns")[0] == "ratio" and guesses.expects("my_naive_ms")[0] == "time"
