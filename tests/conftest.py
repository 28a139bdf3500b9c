"""Shared fixtures: a fake nanosecond clock, and a results folder per test."""

from __future__ import annotations

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


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The notebooks' QUICK runs, slowest first, against their budgets (tests/test_notebooks.py: BUDGET_S)."""
    times = getattr(config, "perflab_notebook_times", None)
    if not times:
        return
    terminalreporter.section("notebook run times (QUICK; budget in brackets)")
    for name, (secs, budget) in sorted(times.items(), key=lambda kv: -kv[1][0]):
        mark = "   <-- OVER BUDGET: make its QUICK settings smaller" if secs > budget else ""
        terminalreporter.write_line(f"{secs:7.1f} s  [{budget:.0f} s]  {name}{mark}")
