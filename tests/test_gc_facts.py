"""labkit.alloc.interpreter_gc: the facts a GC lab states, as the running (or a named) interpreter has them."""

from __future__ import annotations

import gc
import sys

import pytest

from labkit import alloc


def test_the_running_interpreter_is_described_as_it_is():
    c = alloc.interpreter_gc()
    assert c.version == tuple(sys.version_info[:3]) and c.threshold == gc.get_threshold()
    assert f"Python {sys.version_info[0]}.{sys.version_info[1]}" in c.summary()


@pytest.mark.parametrize(("version", "ft", "kind", "gens", "runs_at"), [
    ((3, 11, 7), False, "generational", 3, "allocation"),
    ((3, 12, 4), False, "generational", 3, "eval breaker"),
    ((3, 13, 1), False, "generational", 3, "eval breaker"),
    ((3, 13, 1), True, "free-threaded", 1, "eval breaker"),
    ((3, 14, 0), False, "incremental", 2, "eval breaker"),
    ((3, 14, 4), False, "incremental", 2, "eval breaker"),
    ((3, 14, 5), False, "generational", 3, "eval breaker"),
    ((3, 15, 0), False, "generational", 3, "eval breaker"),
])
def test_each_version_gets_its_own_collector(version, ft, kind, gens, runs_at):
    c = alloc.interpreter_gc(version, free_threaded=ft, threshold=(2000, 10, 0))
    assert (c.kind, c.generations, c.runs_at) == (kind, gens, runs_at)
    text = c.summary()
    assert kind in text and ("released it run on" in text) is (not ft)
    assert ("inside the allocation" in text) is (runs_at == "allocation")
