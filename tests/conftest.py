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
