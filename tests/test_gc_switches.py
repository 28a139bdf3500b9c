"""toyshop's gc and heap process switches, each value doing what docs/switches.md says, on real services."""

from __future__ import annotations

import gc
import json
import time
import urllib.request

import pytest

from labkit import alloc
from labkit.toyshop import app as app_mod
from labkit.toyshop import heap as heap_mod
from labkit.toyshop import state
from labkit.toyshop.heap import StockHeap
from labkit.toyshop.switches import SWITCHES


def _get(svc, path: str) -> dict:
    with urllib.request.urlopen(svc.url + path, timeout=30) as r:
        return json.loads(r.read())


def _wait_reloads(svc, at_least: int, timeout_s: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        heap = _get(svc, "/health")["heap"]
        if heap["reloads"] >= at_least or time.monotonic() > deadline:
            return heap
        time.sleep(0.1)


def test_the_switch_table_states_the_figures_the_code_uses():
    gc_does, heap_does = SWITCHES["gc"].does, SWITCHES["heap"].does
    assert f"{state.FREEZE_AFTER} requests" in gc_does and f"{state.GEN0_THRESHOLD:,}" in gc_does
    assert f"{heap_mod.ROWS:,} rows" in heap_does and "every second" in heap_does and heap_mod.RELOAD_S == 1.0


def test_objects_rows_are_tracked_containers_and_flat_columns_are_not_and_a_reload_swaps_the_snapshot():
    objects, flat = StockHeap("objects", rows=1000), StockHeap("flat", rows=1000)
    objects.reload()
    flat.reload()
    assert gc.is_tracked(objects._data) and all(gc.is_tracked(row) for row in objects._data)
    assert not any(gc.is_tracked(col) for col in flat._data) and len(flat._data) == 3
    assert objects.stock(999) == flat.stock(999) == 1
    objects.reload()
    assert objects.stock(999) == 2 and objects.stats()["reloads"] == 2
    with pytest.raises(KeyError):
        StockHeap("none").stock(0)
    with pytest.raises(ValueError, match="none, objects, flat"):
        StockHeap("json")


def test_apply_gc_raises_only_the_young_threshold_for_threshold_and_tuned():
    saved = gc.get_threshold()
    try:
        for mode in ("default", "frozen"):
            state.apply_gc(mode)
            assert gc.get_threshold() == saved
        for mode in ("threshold", "tuned"):
            state.apply_gc(mode)
            assert gc.get_threshold() == (state.GEN0_THRESHOLD, *saved[1:])
            gc.set_threshold(*saved)
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize("mode, after", [("default", None), ("frozen", state.FREEZE_AFTER),
                                         ("threshold", None), ("tuned", state.FREEZE_AFTER)])
def test_only_frozen_and_tuned_wait_for_the_warm_up_to_freeze(mode, after):
    from labkit.toyshop.catalog import FakeCatalog
    from labkit.toyshop.dataset import ensure

    db = ensure("small", quiet=True)
    svc = app_mod.create_app(db, FakeCatalog.from_db(db), variants={"gc": mode}).state.service
    try:
        assert svc.freeze_after == after and svc.served == 0 and svc.heap.mode == "none"
    finally:
        svc.close()


@pytest.mark.slow
def test_each_gc_and_heap_value_on_a_real_service():
    from labkit.service import start

    default = gc.get_threshold()  # a fresh interpreter's (this test process does not change them)
    with start(size="small") as plain, start(size="small", variants={"gc": "frozen", "heap": "objects"}) as frozen, \
            start(size="small", variants={"gc": "threshold", "heap": "flat"}) as threshold:
        base = alloc.tracked_objects(plain)
        # heap=objects: its rows are containers the collector tracks; flat: nothing more than no heap at all
        assert _get(frozen, "/gc?objects=1")["tracked_objects"] >= base + heap_mod.ROWS - 1000  # its rows, give or take
        assert _get(threshold, "/gc?objects=1")["tracked_objects"] < base + heap_mod.ROWS // 100
        # gc=frozen: nothing frozen and CPython's thresholds until the warm-up is over
        h = _get(frozen, "/health")
        assert h["gc"]["frozen"] == 0 and tuple(h["gc"]["threshold"]) == default
        assert h["gc"]["freeze_after"] == state.FREEZE_AFTER
        for _ in range(state.FREEZE_AFTER):
            for svc in (plain, frozen, threshold):
                _get(svc, "/health")
        h = _get(frozen, "/health")
        # after it: everything alive then is frozen (the snapshot of the moment too, until the next reload frees
        # it: frozen objects are still freed by reference counting); thresholds untouched
        assert h["gc"]["frozen"] >= base // 2 and h["gc"]["served"] > state.FREEZE_AFTER
        assert tuple(h["gc"]["threshold"]) == default
        # gc=threshold: the young generation's threshold alone, nothing frozen; gc=default: neither
        t = _get(threshold, "/health")["gc"]
        assert tuple(t["threshold"]) == (state.GEN0_THRESHOLD, *default[1:]) and t["frozen"] == 0
        p = _get(plain, "/health")
        assert tuple(p["gc"]["threshold"]) == default and p["gc"]["frozen"] == 0 and p["heap"]["rows"] == 0
        # both heaps are reloaded in the background, about once a second
        for svc in (frozen, threshold):
            first = _get(svc, "/health")["heap"]["reloads"]
            assert _wait_reloads(svc, first + 2)["reloads"] >= first + 2
        assert _get(plain, "/health")["heap"]["reloads"] == 0
