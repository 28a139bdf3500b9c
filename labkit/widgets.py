"""Interactive panels for the labs: pick settings, press Run, watch progress, see the chart redrawn.

A :class:`Panel` is built from three things a lab supplies:

* ``controls`` — named ipywidgets (a dropdown, a slider…) whose values the measurement reads;
* ``measure(params, progress)`` — runs on a background thread, so the notebook stays responsive; it reads
  ``params`` (the controls' values), reports with ``progress.update(done, total)``, stops early when
  ``progress.cancelled`` turns true (the Cancel button), and returns a result value;
* ``chart(results)`` — draws every result so far as an Altair chart (pure: no measuring).

Errors raised by either appear in the panel itself — a :class:`labkit.errors.LabkitError` as its message,
anything else with its traceback — never only in a log. Charts are Altair's ``JupyterChart`` widget in offline
mode: the JavaScript ships inside the installed packages, nothing is fetched.

``panel.run(**overrides)`` runs one measurement synchronously and returns its result: what tests and
papermill use, since nothing clicks there. :func:`noise_panel` is the demo on the lab index.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Mapping
from html import escape
from typing import Any

from labkit.errors import BadInputError, LabkitError

__all__ = ["Panel", "Progress", "noise_panel"]

Measure = Callable[[dict[str, Any], "Progress"], Any]


class Progress:
    """What a measurement is handed: report progress, and learn whether the learner pressed Cancel."""

    def __init__(self, bar: Any = None, label: Any = None, cancel: threading.Event | None = None) -> None:
        self._bar, self._label = bar, label
        self._cancel = cancel or threading.Event()

    @property
    def cancelled(self) -> bool:
        """True once Cancel was pressed: stop soon and return what you have."""
        return self._cancel.is_set()

    def update(self, done: float, total: float | None = None, text: str | None = None) -> None:
        """Show ``done`` of ``total`` steps (and a short text) on the panel's progress bar."""
        if self._bar is not None:
            if total is not None and total > 0:
                self._bar.max = float(total)
            self._bar.value = min(float(done), self._bar.max)
        if self._label is not None and text is not None:
            self._label.value = escape(text)


class Panel:
    """An interactive measurement: controls, Run and Cancel, a progress bar, a chart, errors in view.

    Args:
        title: shown above the controls.
        controls: name → ipywidgets control; ``measure`` receives ``{name: control.value}``.
        measure: ``measure(params, progress) -> result``, run on a background thread.
        chart: ``chart(results) -> alt.Chart`` over every result so far (the latest last).
        description: a sentence under the title (what to try).
        keep: the most results kept (older ones drop off the chart).

    Display it by leaving it as a cell's last expression. ``panel.results`` holds the results (values: save or
    compare them), ``panel.error`` the last error's text, ``panel.clear()`` starts over.
    """

    def __init__(self, title: str, controls: Mapping[str, Any], measure: Measure,
                 chart: Callable[[list[Any]], Any], *, description: str = "", keep: int = 20) -> None:
        import ipywidgets as w

        if not callable(measure) or not callable(chart):
            raise BadInputError("Panel needs measure=fn(params, progress) and chart=fn(results), both callables")
        for name, control in controls.items():
            if not hasattr(control, "value"):
                raise BadInputError(f"control {name!r} is a {type(control).__name__}, not an ipywidgets control "
                                    "with a .value (use w.Dropdown, w.IntSlider, w.Checkbox …)")
        self.title, self.controls, self.measure, self.chart_of = title, dict(controls), measure, chart
        self.keep = keep
        self.results: list[Any] = []
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._run_button = w.Button(description="Run", button_style="primary", icon="play")
        self._cancel_button = w.Button(description="Cancel", icon="stop", disabled=True)
        self._clear_button = w.Button(description="Clear", icon="trash")
        self._status = w.HTML("press <b>Run</b> to measure")
        self._bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="320px"))
        self._chart_box = w.Box(layout=w.Layout(min_height="40px"))
        self._chart_box.add_class("labkit-panel-chart")
        self._error = w.HTML()
        self._run_button.on_click(lambda _: self.start())
        self._cancel_button.on_click(lambda _: self.cancel())
        self._clear_button.on_click(lambda _: self.clear())
        head = w.HTML(f"<b>{escape(title)}</b>" + (f"<br><span>{escape(description)}</span>" if description else ""))
        self.widget = w.VBox([
            head,
            w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap")),
            w.HBox([self._run_button, self._cancel_button, self._clear_button, self._bar, self._status]),
            self._error,
            self._chart_box,
        ])
        self.widget.add_class("labkit-panel")
        self._jchart: Any = None

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def params(self, **overrides: Any) -> dict[str, Any]:
        """The controls' current values, with ``overrides`` applied (unknown names are refused)."""
        unknown = set(overrides) - set(self.controls)
        if unknown:
            raise BadInputError(f"unknown control(s) {sorted(unknown)}; this panel has {sorted(self.controls)}")
        return {**{k: c.value for k, c in self.controls.items()}, **overrides}

    @property
    def running(self) -> bool:
        """True while a measurement runs in the background."""
        return self._thread is not None and self._thread.is_alive()

    def run(self, **overrides: Any) -> Any:
        """Run one measurement now, in this thread, with the controls' values (and ``overrides``); return the
        result, redraw the chart. Errors are shown in the panel *and* raised."""
        if self.running:
            raise BadInputError("a measurement is already running in this panel: wait for it or press Cancel")
        self._cancel.clear()
        return self._run(self.params(**overrides), raise_errors=True)

    def start(self) -> None:
        """What the Run button does: run one measurement on a background thread."""
        if self.running:
            return
        self._cancel.clear()
        try:
            params = self.params()
        except LabkitError as e:
            self._show_error(str(e))
            return
        self._thread = threading.Thread(target=self._run, args=(params,), name="labkit-panel", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Block until a background measurement finishes (for tests)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def cancel(self) -> None:
        """What the Cancel button does: ask the running measurement to stop early."""
        self._cancel.set()
        self._status.value = "cancelling…"

    def clear(self) -> None:
        """Forget every result and empty the chart."""
        self.results.clear()
        self._chart_box.children = ()
        self._jchart = None
        self._status.value = "cleared: press <b>Run</b> to measure"

    def _run(self, params: dict[str, Any], raise_errors: bool = False) -> Any:
        self._run_button.disabled, self._cancel_button.disabled = True, False
        self._error.value, self.error = "", None
        self._bar.value, self._bar.bar_style = 0.0, ""
        self._status.value = "running…"
        try:
            result = self.measure(params, Progress(self._bar, self._status, self._cancel))
            self.results.append(result)
            del self.results[: -self.keep]
            self._draw()
            self._bar.value = self._bar.max
            self._bar.bar_style = "success"
            self._status.value = ("cancelled: kept what was measured" if self._cancel.is_set() else
                                  f"done: {len(self.results)} result{'s' if len(self.results) != 1 else ''} on the chart")
            return result
        except Exception as e:  # shown in the panel: a background thread has no one else to tell
            self._bar.bar_style = "danger"
            self._status.value = "failed"
            self._show_error(str(e) if isinstance(e, LabkitError) else traceback.format_exc(), type(e).__name__)
            if raise_errors:
                raise
            return None
        finally:
            self._run_button.disabled, self._cancel_button.disabled = False, True

    def _draw(self) -> None:
        import altair as alt

        chart = self.chart_of(list(self.results))
        if self._jchart is None:
            alt.JupyterChart.enable_offline()
            self._jchart = alt.JupyterChart(chart)
            self._chart_box.children = (self._jchart,)
        else:
            self._jchart.chart = chart

    def _show_error(self, text: str, kind: str = "error") -> None:
        self.error = text
        self._error.value = (f"<div style='color:#cf222e;border-left:4px solid #cf222e;padding-left:8px'>"
                             f"<b>{escape(kind)}</b><pre style='white-space:pre-wrap'>{escape(text)}</pre></div>")


def noise_panel(repeat_max: int = 200) -> Panel:
    """The demo panel: time one small function, quiet or beside a busy neighbour, and compare the spreads.

    Each Run takes ``samples`` timings of ``sorted()`` on a list of ``n`` numbers (one sample per
    ``labkit.bench`` sample) and draws every run so far as a CDF: the same code, different curves when the
    machine is busy. A quick look at how quiet a workshop machine is before the labs start.

    The ``neighbour`` control names two different things a learner meets: *a thread in this process* spins
    Python code beside the benchmark, so the two take turns holding the GIL (contention inside one program);
    *programs on every core* starts one spinning process per usable core (what another learner's benchmark on
    a shared node does: the scheduler shares the cores). Neighbour processes stop when the run ends, and on
    their own within :data:`labkit.machine.NEIGHBOUR_MAX_S` seconds if this kernel dies first.
    """
    import ipywidgets as w

    from labkit import charts
    from labkit.measure.machine import NEIGHBOURS, Neighbour
    from labkit.measure.microbench import bench

    controls = {
        "n": w.Dropdown(options=[("1,000 items", 1_000), ("10,000 items", 10_000), ("100,000 items", 100_000)],
                        value=10_000, description="list"),
        "samples": w.IntSlider(value=40, min=10, max=repeat_max, step=10, description="samples"),
        "neighbour": w.Dropdown(options=[("none (quiet)", "none"), ("a thread in this process (GIL)", "thread"),
                                         ("programs on every core", "processes")],
                                value="none", description="neighbour"),
    }

    runs = iter(range(1, 10**9))

    def measure(params: dict[str, Any], progress: Progress) -> Any:
        import random

        from labkit.measure.microbench import BenchResult

        data = random.Random(0).sample(range(params["n"] * 10), params["n"])
        kind = params["neighbour"]
        neighbour = Neighbour(kind)
        chunks: list[BenchResult] = []
        try:
            neighbour.start()
            total = params["samples"]
            done = 0
            while done < total and not progress.cancelled:
                step = min(10, total - done)
                chunks.append(bench(sorted, data, repeat=max(2, step), warmup=2 if not chunks else 0))
                done += step
                progress.update(done, total, f"{done}/{total} samples")
        finally:
            neighbour.stop()
        if not chunks:
            raise LabkitError("cancelled before the first sample: press Run again")
        name = f"run {next(runs)}: n={params['n']:,} · {NEIGHBOURS[kind]}"
        return BenchResult(name, tuple(s for c in chunks for s in c.samples_ns), chunks[0].loops,
                           chunks[0].warmup_ns, chunks[-1].warnings, chunks[0].fingerprint)

    def chart(results: list[Any]) -> Any:
        return charts.cdf_chart(*results, log_x=True, title="sorted(): every run so far (curves further right = slower)")

    return Panel("How noisy is this machine?", controls, measure, chart,
                 description="Run it quiet, then with each neighbour: same code, another curve.")
