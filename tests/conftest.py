"""Shared fixtures: a fake nanosecond clock, a results folder per test, and the review template's report."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest


class FakeClock:
    """A clock that only moves when told: ``tick(ns)`` inside the function under test."""

    def __init__(self, start: int = 1_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def tick(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    # results written by a test land in its own temporary folder, never in the checkout
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path / "results"))


@pytest.fixture(scope="session")
def template_report(tmp_path_factory):
    """The design-review template's report, made once per session the way a user makes it: ``labkit new-review``
    then ``labkit report review.ipynb --quick``. test_report.py reads it; test_browser.py opens it in Chromium."""
    from labkit.cli import main
    from labkit.report.run import ReportRun

    work = tmp_path_factory.mktemp("review")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        mp.setenv("PERFLAB_RESULTS", str(work / "results"))
        made = main(["new-review", "review"])
        code = main(["report", "review.ipynb", "--quick", "--no-progress"])
    folders = sorted(p for p in (work / "results" / "reports").glob("review-*") if p.is_dir())
    run = ReportRun.find(folders[-1]) if folders else None
    return SimpleNamespace(made=made, code=code, work=work, run=run,
                           html=Path(run.html) if run is not None and run.html else None)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The notebooks' QUICK runs, slowest first, against their budgets (tests/test_notebooks.py: BUDGET_S)."""
    times = getattr(config, "perflab_notebook_times", None)
    if not times:
        return
    terminalreporter.section("notebook run times (QUICK; budget in brackets)")
    for name, (secs, budget) in sorted(times.items(), key=lambda kv: -kv[1][0]):
        mark = "   <-- OVER BUDGET: make its QUICK settings smaller" if secs > budget else ""
        terminalreporter.write_line(f"{secs:7.1f} s  [{budget:.0f} s]  {name}{mark}")
