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
    from labkit import alloc, latency, layout, load, queueing, report

    helpers = [labkit.compare, load.run, load.sweep, latency.table, layout.sweep, queueing.pool_study,
               queueing.tail_rounds, alloc.compare_processes, alloc.during_load, report.build, report.execute]
    for fn in helpers:
        assert inspect.signature(fn).parameters["progress"].default is None, fn.__qualname__
