"""The panel base: runs a measurement, redraws its chart, shows errors, cancels; the demo panel works."""

from __future__ import annotations

import threading

import altair as alt
import ipywidgets as w
import pytest

from labkit.errors import BadInputError, LabkitError
from labkit.widgets import Panel, noise_panel


def _chart(results):
    return alt.Chart(alt.Data(values=[{"x": r} for r in results])).mark_point().encode(x="x:Q")


def test_run_uses_the_controls_values_and_redraws_the_chart_from_every_result():
    seen = []

    def measure(params, progress):
        progress.update(1, 2)
        progress.update(2, 2, "half")
        seen.append(params)
        return params["n"] * 10

    panel = Panel("demo", {"n": w.IntSlider(value=3, min=1, max=9)}, measure, _chart)
    assert panel.run() == 30 and panel.run(n=5) == 50
    assert seen == [{"n": 3}, {"n": 5}] and panel.results == [30, 50]
    # the chart widget holds the latest chart, drawn from both results
    assert [v["x"] for v in panel._jchart.chart.data.values] == [30, 50]
    assert panel._bar.value == panel._bar.max and "2 results" in panel._status.value
    panel.clear()
    assert panel.results == [] and panel._chart_box.children == ()


def test_errors_show_in_the_panel_and_are_raised_by_run():
    def broken(params, progress):
        raise LabkitError("the service is not running: start it with labkit.service.start()")

    panel = Panel("demo", {}, broken, _chart)
    with pytest.raises(LabkitError):
        panel.run()
    assert "start it with" in panel.error and "start it with" in panel._error.value
    assert panel._bar.bar_style == "danger" and not panel._run_button.disabled

    def bug(params, progress):
        return 1 / 0

    panel = Panel("demo", {}, bug, _chart)
    panel.start()                      # the Run button: a background thread, errors land in the panel
    panel.wait(30)
    assert "ZeroDivisionError" in panel.error and "Traceback" in panel.error


def test_cancel_stops_a_background_measurement_and_keeps_what_it_measured():
    started = threading.Event()

    def endless(params, progress):
        steps = 0
        started.set()
        while not progress.cancelled:
            steps += 1
            started.wait()
        return steps

    panel = Panel("demo", {}, endless, _chart)
    panel.start()
    assert started.wait(30) and panel.running
    panel.cancel()
    panel.wait(30)
    assert not panel.running and len(panel.results) == 1 and "cancelled" in panel._status.value


def test_bad_controls_and_overrides_are_refused_with_what_to_do():
    with pytest.raises(BadInputError, match="not an ipywidgets control"):
        Panel("demo", {"n": 3}, lambda p, g: 1, _chart)
    with pytest.raises(BadInputError, match="callables"):
        Panel("demo", {}, None, _chart)
    panel = Panel("demo", {"n": w.IntSlider()}, lambda p, g: 1, _chart)
    with pytest.raises(BadInputError, match="this panel has"):
        panel.run(m=1)


def test_noise_panel_measures_and_draws_a_cdf_per_run_with_each_neighbour():
    import psutil

    panel = noise_panel()
    quiet = panel.run(n=1_000, samples=10)
    thread = panel.run(n=1_000, samples=10, neighbour="thread")
    before = {p.pid for p in psutil.Process().children()}
    procs = panel.run(n=1_000, samples=10, neighbour="processes")
    assert len(quiet.samples_ns) >= 10 and "quiet" in quiet.name
    assert "a thread in this process" in thread.name and "a program on every core" in procs.name
    assert panel._jchart is not None
    # the neighbour processes are gone when the run is over
    assert {p.pid for p in psutil.Process().children()} <= before
    with pytest.raises(BadInputError, match="neighbour must be one of"):
        panel.run(n=1_000, samples=10, neighbour="noisy")
