"""The one place that knows the platform's facilities: each probe sees a facility taken away, doctor names what
that costs, and a section that needs a missing one refuses with what to do (issue 44)."""

from __future__ import annotations

import os
import resource

import pytest

from labkit.errors import BadInputError
from labkit.measure import facilities


def test_this_linux_has_the_facilities_the_labs_use():
    # GIVEN the reference machine (Linux, root or not): affinity, per-thread rusage and /proc's memory files exist
    got = {f.name: f for f in facilities.survey()}
    assert tuple(got) == facilities.NAMES
    for name in ("affinity", "thread rusage", "proc memory"):
        assert got[name].available and facilities.available(name), got[name]
    assert all(f.costs for f in got.values())


def test_a_facility_taken_away_is_seen_as_missing_and_doctor_says_what_it_costs(monkeypatch):
    from labkit.workshop import doctor

    # GIVEN a platform without CPU affinity or per-thread counts (macOS: both absent from the modules)
    monkeypatch.delattr(os, "sched_setaffinity")
    monkeypatch.delattr(resource, "RUSAGE_THREAD")
    # THEN the probes say so, every call (no stale answer cached from before)
    assert not facilities.available("affinity") and not facilities.available("thread rusage")
    checks = {c.name: c for c in doctor._facilities()}
    assert "affinity" not in checks["platform"].detail and "proc memory" in checks["platform"].detail
    pin = checks["facility: affinity"]
    assert pin.status == "warn" and "absent" in pin.detail and "lab 01" in pin.fix and "lab 09" in pin.fix
    assert checks["facility: thread rusage"].status == "warn"


def test_an_unknown_facility_names_the_known_ones():
    with pytest.raises(BadInputError, match="affinity, thread rusage"):
        facilities.available("numa")


def test_a_service_asked_to_pin_where_nothing_can_refuses_before_starting_anything(monkeypatch):
    from labkit import service

    monkeypatch.delattr(os, "sched_setaffinity")
    with pytest.raises(BadInputError, match="leave cpus= out"):
        service.start(size="small", cpus={0})
