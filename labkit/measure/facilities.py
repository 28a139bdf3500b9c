"""What this platform offers the labs: one probe per Linux facility they measure with, and what a lab loses without it.

    from labkit.measure import facilities
    facilities.available("affinity")        # True on Linux
    for f in facilities.survey():           # every facility: seen or not, and what its absence costs
        print(f.name, f.available, f.detail)

The labs reach for a few facilities that only Linux offers (CPU affinity, per-thread resource usage, ``/proc``'s
per-process files, cgroup files) and for one that needs rights (py-spy attaching to another process). Each lab
section that needs one asks :func:`available` and, where it is missing, says so in one line and skips or
approximates (``labkit doctor`` lists them all, with :attr:`Facility.costs`). Every call looks again: a probe is
a syscall or a file read, and a test may hide a facility after import.

Sources: the ``os`` module's documentation (``sched_setaffinity``: "Availability: Unix, not Emscripten, not
WASI", Linux in practice), the ``resource`` module's (``RUSAGE_THREAD``: "Availability: Linux >= 2.6.26"),
``proc(5)`` (``/proc/self/status``'s ``VmHWM``, ``/proc/self/clear_refs``), and the kernel's cgroup v2 document
(``cpu.max``, ``cpu.stat``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Facility", "available", "survey", "NAMES"]


@dataclass(frozen=True)
class Facility:
    """One facility: its name, whether this process has it, what was seen, and what a lab loses without it."""

    name: str
    available: bool
    detail: str
    costs: str


def _affinity() -> tuple[bool, str]:
    if not (hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")):
        return False, f"os.sched_setaffinity is absent on {sys.platform}"
    try:
        mine = os.sched_getaffinity(0)
        os.sched_setaffinity(0, mine)  # setting the mask it already has: allowed wherever pinning is
    except OSError as e:
        return False, f"os.sched_setaffinity refused: {e}"
    return True, f"os.sched_setaffinity on {len(mine)} CPU(s)"


def _thread_rusage() -> tuple[bool, str]:
    try:
        import resource
    except ImportError:
        return False, "no resource module (Windows)"
    if not hasattr(resource, "RUSAGE_THREAD"):
        return False, f"resource.RUSAGE_THREAD is absent on {sys.platform}"
    try:
        resource.getrusage(resource.RUSAGE_THREAD)
    except (OSError, ValueError) as e:
        return False, f"getrusage(RUSAGE_THREAD) refused: {e}"
    return True, "getrusage(RUSAGE_THREAD) counts per thread"


def _proc_memory() -> tuple[bool, str]:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError as e:
        return False, f"/proc/self/status unreadable ({type(e).__name__})"
    if "VmHWM:" not in text or "VmRSS:" not in text:
        return False, "/proc/self/status has no VmHWM or VmRSS line"
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS: harmless, and exactly what the peak reader does
    except OSError as e:
        return False, f"/proc/self/status readable, /proc/self/clear_refs not writable ({type(e).__name__})"
    return True, "/proc/self/status (VmHWM, VmRSS) readable, /proc/self/clear_refs resets the peak"


def _cgroup() -> tuple[bool, str]:
    from labkit.measure.cgroup import cpu_quota

    try:
        q = cpu_quota()
    except OSError as e:
        return False, f"cgroup files unreadable ({type(e).__name__})"
    if not q.version:
        return False, "no cgroup CPU controller visible"
    return True, f"cgroup v{q.version} CPU controller readable"


def _py_spy() -> tuple[bool, str]:
    from labkit.errors import ProbeUnavailable
    from labkit.profile.cpu import py_spy_path

    try:
        path = py_spy_path()
    except ProbeUnavailable:
        return False, "no py-spy executable (PERFLAB_PY_SPY, the venv, PATH)"
    if sys.platform == "darwin" and os.geteuid() != 0 and not os.environ.get("PERFLAB_PY_SPY"):
        return False, f"{path} found, but on macOS it attaches only as root (PERFLAB_PY_SPY can name a sudo wrapper)"
    return True, f"{path} (whether it may attach: labkit doctor's py-spy check)"


_PROBES: dict[str, tuple[Callable[[], tuple[bool, str]], str]] = {
    "affinity": (_affinity, "lab 01's same-core hand-off row is n/a and its other rows say they are unpinned; lab 07's "
                 "pinned load generator and lab 09's hand-off section are skipped; load.run(cpus=) and "
                 "service.start(cpus=) refuse"),
    "thread rusage": (_thread_rusage, "toyshop leaves its per-request faults metric out of Server-Timing, and lab 03 "
                      "counts the whole process's faults instead, and says so"),
    "proc memory": (_proc_memory, "a call's resident-memory peak (labkit.alloc.rss_peak) is measured in a fresh "
                    "process, from ru_maxrss, instead of in place; a service's resident memory reads 0"),
    "cgroup": (_cgroup, "labkit doctor --hub cannot say what quota or memory cap a hub enforces (nothing else needs it)"),
    "py-spy": (_py_spy, "labs 07 and 09 skip their profiles with a note; lab 06, whose subject is profiles, stops at "
               "its first one"),
}
#: every facility's name, in the order :func:`survey` lists them
NAMES = tuple(_PROBES)


def _probe(name: str) -> tuple[bool, str]:
    return _PROBES[name][0]()


def available(name: str) -> bool:
    """Whether this process has the facility ``name`` (one of :data:`NAMES`)."""
    if name not in _PROBES:
        from labkit.errors import BadInputError

        raise BadInputError(f"no facility named {name!r}: the names are {', '.join(NAMES)}")
    return _probe(name)[0]


def survey() -> tuple[Facility, ...]:
    """Every facility: whether this process has it, what was seen, and what a lab loses without it."""
    return tuple(Facility(n, *_probe(n), _PROBES[n][1]) for n in NAMES)
