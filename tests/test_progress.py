"""The one progress rule: asked for wins; by default a bar shows inside a notebook, unless the work is quick."""

from __future__ import annotations

import pytest

from labkit import progress


@pytest.mark.parametrize(("asked", "notebook", "expected_s", "shown"), [
    (True, False, None, True),       # asked for: shown anywhere, however short
    (True, True, 0.1, True),
    (False, True, 60.0, False),      # refused: never
    (None, False, 60.0, False),      # default in a script or a test: quiet
    (None, True, None, True),        # default in a notebook, length unknown: shown
    (None, True, 60.0, True),
    (None, True, 0.5, False),        # ... but not for work known to be quick
])
def test_the_rule(monkeypatch, asked, notebook, expected_s, shown):
    monkeypatch.setattr(progress, "in_notebook", lambda: notebook)
    assert progress.show_progress(asked, expected_s=expected_s) is shown


def test_steps_bar_is_none_when_not_shown_and_a_bar_when_asked(capsys):
    assert progress.steps_bar(False, 3, "runs", "run") is None
    bar = progress.steps_bar(True, 3, "runs", "run")
    bar.update()
    bar.close()
    assert "runs" in capsys.readouterr().err


def test_every_helper_takes_the_rule_as_its_default():
    import inspect

    import labkit
    from labkit import alloc, latency, layout, load, profile, queueing, report

    helpers = [labkit.compare, load.run, load.sweep, latency.table, layout.sweep, queueing.pool_study,
               queueing.tail_rounds, alloc.compare_processes, alloc.during_load, report.build, report.execute,
               profile.attach, profile.call, profile.under_load, labkit.sweep_sizes, alloc.count, alloc.compare]
    for fn in helpers:
        assert inspect.signature(fn).parameters["progress"].default is None, fn.__qualname__


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_pulse_beats_every_interval_until_stopped():
    # GIVEN a fake clock and a wait that lets 95 s pass, 10 s at a time
    clock, beats = FakeClock(), []

    def stopped(timeout: float) -> bool:
        clock.now += timeout
        return clock.now > 95

    # WHEN a pulse runs
    n = progress.pulse(beats.append, stopped, every_s=10, clock=clock)
    # THEN it beat at 10, 20, … 90 s: never more than the house's 30 s apart, nothing after it was stopped
    assert beats == [10, 20, 30, 40, 50, 60, 70, 80, 90] and n == 9
    assert max(b - a for a, b in zip([0, *beats], beats, strict=False)) <= progress.BEAT_S


def test_a_beat_that_raises_ends_the_pulse_not_the_measurement():
    clock = FakeClock()

    def stopped(timeout: float) -> bool:
        clock.now += timeout
        return False

    def beat(elapsed: float) -> None:
        if elapsed >= 20:
            raise RuntimeError("the bar's widget is gone")

    assert progress.pulse(beat, stopped, every_s=10, clock=clock) == 1


def test_a_heartbeat_beats_from_its_thread_and_stops_with_its_block():
    import threading

    beat_seen = threading.Event()
    beats: list[float] = []

    def beat(elapsed: float) -> None:
        beats.append(elapsed)
        beat_seen.set()

    with progress.Heartbeat(beat, every_s=0.01) as hb:
        assert beat_seen.wait(10), "no beat during the block"
    n = len(beats)
    assert hb._thread is None  # joined
    threading.Event().wait(0.05)
    assert len(beats) == n, "it beat after its block ended"


def test_a_timed_bar_moves_over_seconds_and_is_none_when_not_shown(capsys):
    import threading

    clock = FakeClock()
    with progress.timed_bar(False, 60, "sampling") as bar:
        assert bar is None
    with progress.timed_bar(True, 60, "sampling", every_s=0.01, clock=clock) as bar:
        clock.now = 42.7
        for _ in range(1000):
            if bar.n == 42:
                break
            threading.Event().wait(0.01)
        assert bar.n == 42 and bar.total == 60
        clock.now = 100
        for _ in range(1000):
            if bar.n == 60:
                break
            threading.Event().wait(0.01)
        assert bar.n == 60, "a bar never runs past its total"
    assert "sampling" in capsys.readouterr().err
    with progress.timed_bar(True, 4, "sampling", every_s=60, clock=FakeClock()) as bar:
        pass  # done before its first beat
    assert bar.n == 4, "a step that ended leaves its bar full, not at its last beat"


def test_lazy_steps_show_a_bar_only_for_work_that_turns_out_long(monkeypatch):
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    clock = FakeClock()
    # GIVEN ten steps whose first takes 0.1 s: 1 s expected, quick
    quick = progress.LazySteps(None, 10, "quick", "call", clock=clock)
    clock.now = 0.1
    quick.done("one")
    clock.now = 60
    quick.done("two")              # decided once: a slow second step does not bring a bar back
    assert quick.bar is None
    # GIVEN ten steps whose first takes 1 s: 10 s expected
    slow = progress.LazySteps(None, 10, "slow", "call", clock=clock)
    clock.now = 61
    slow.done("one")
    slow.done("two")
    assert slow.bar is not None and slow.bar.n == 2 and slow.bar.total == 10
    slow.close()
    never = progress.LazySteps(False, 10, "refused", "call", clock=clock)
    clock.now = 1_000
    never.done("one")
    assert never.bar is None


def test_a_slow_first_step_shows_its_bar_at_the_first_heartbeat(monkeypatch):
    import threading

    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.01)
    clock = FakeClock()
    steps = progress.LazySteps(None, 3, "counting", "call", clock=clock)
    # WHEN the first step has run for 30 s and is not done
    with steps.during("warm-up"):
        clock.now = 30
        for _ in range(1000):
            if steps.bar is not None and "warm-up: 30 s" in str(steps.bar.postfix):
                break
            threading.Event().wait(0.01)
        # THEN the bar is up, saying which step and for how long
        assert steps.bar is not None and "warm-up: 30 s" in steps.bar.postfix
    steps.done("warm-up")
    assert steps.bar.n == 1
    steps.close()


def test_inside_a_report_run_the_bars_are_text_on_the_terminal(monkeypatch, capfd):
    import labkit
    from labkit import alloc

    # GIVEN the kernel of a `labkit report` run (its bars go to the terminal's stderr)
    monkeypatch.setenv("PERFLAB_PROGRESS_TO", "stderr")
    # WHEN an allocation count and a size sweep run, quick as they are
    alloc.count(sorted, [3, 1, 2], calls=2, census=False)
    labkit.sweep_sizes({"sorted": sorted}, (10, 20), lambda n: list(range(n)), repeat=2)
    # THEN the terminal saw both bars
    err = capfd.readouterr().err
    assert "counting sorted" in err and "size sweep" in err, err


def test_inside_a_report_run_bars_go_to_the_file_the_report_copies_to_its_terminal(tmp_path, monkeypatch, capsys):
    # GIVEN a labkit report run's kernel: PERFLAB_PROGRESS_TO names a file (not the kernel's captured stderr)
    import labkit.progress as progress

    log = tmp_path / ".progress.log"
    monkeypatch.setenv("PERFLAB_PROGRESS_TO", str(log))
    monkeypatch.setattr(progress, "_TERMINAL", {})
    # WHEN a helper draws a bar and writes a progress line
    bar = progress.steps_bar(None, 3, "A/B rounds", "round")
    for _ in range(3):
        bar.update()
    bar.close()
    print("probe done", file=progress.notes())
    # THEN both went to the file, and nothing to the process's own stdout or stderr (the cell's output)
    text = log.read_text()
    assert "A/B rounds" in text and "probe done" in text
    out = capsys.readouterr()
    assert "A/B rounds" not in out.err + out.out and "probe done" not in out.err + out.out


def test_the_report_copies_the_kernels_progress_file_to_its_own_stderr_and_removes_it(tmp_path, capsys):
    from labkit.report.run import PROGRESS_FILE, _kernel_env

    with _kernel_env(tmp_path, progress=True):
        with open(tmp_path / PROGRESS_FILE, "a") as f:
            f.write("size sweep: 3/6\n")
        import time

        time.sleep(0.6)
    assert "size sweep: 3/6" in capsys.readouterr().err
    assert not (tmp_path / PROGRESS_FILE).exists()


@pytest.mark.slow
def test_a_closed_bar_leaves_no_text_of_its_first_draw_in_a_saved_notebook():
    """A notebook saved without its widgets' state shows a widget's text instead: a bar's, drawn once at 0 %,
    read "0%" for a run that finished (lab 08's walk). Closed, the bar's output is emptied, widget and text."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from labkit.progress import new_bar\nbar = new_bar(3, 'demo', 'step')\nfor _ in range(3):\n"
        "    bar.update()\nbar.close()\nbar.close()\nnew_bar(3, 'off', 'step', disable=True).close()\nprint('done')")]
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    outputs = nb.cells[0].outputs
    assert [o.get("text") for o in outputs if o.output_type == "stream"] == ["done\n"]
    shown = [o["data"] for o in outputs if o.output_type == "display_data"]
    assert shown == [{"text/plain": ""}], shown  # not "demo: 0%|…", and no widget left behind
