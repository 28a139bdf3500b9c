"""The machine a measurement ran on: its fingerprint, how busy it was, and the CPUs this process may use.

A number means little without knowing where it was measured; two results are comparable only when their
fingerprints agree on the static part (CPU, cores, Python, packages). :func:`fingerprint` is saved beside
every result; :class:`CpuWatch` says whether other programs shared the CPUs during a run; :func:`usable_cpus`
and :func:`pinned` are what a measurement needs to place a thread on one core; :class:`Neighbour` is busy work
beside a measurement (a thread here, or a program on every core), for the labs that show what noise does.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["fingerprint", "CpuWatch", "usable_cpus", "pinned", "can_pin", "UNPINNED", "Neighbour", "NEIGHBOURS"]

_PACKAGES = ("labkit", "numpy", "pandas", "scipy", "altair", "numba", "orjson", "msgpack", "starlette",
             "uvicorn", "uvloop", "memray", "py-spy")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _caches() -> dict[str, str]:
    caches: dict[str, str] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        level, ctype, size = _read(f"{idx}/level"), _read(f"{idx}/type"), _read(f"{idx}/size")
        if level and size:
            key = f"L{level}" + ({"Data": "d", "Instruction": "i"}.get(ctype or "", ""))
            caches[key] = size
    return caches


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=2)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=2)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


@functools.lru_cache(maxsize=1)
def _static() -> dict[str, Any]:
    import psutil

    versions = {}
    for name in _PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return {
        "cpu_model": _cpu_model(),
        "cores_logical": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "caches": _caches(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "packages": versions,
        "git_commit": _git_commit(),
    }


def fingerprint() -> dict[str, Any]:
    """Describe this machine now: the static part (cached) plus load average, free memory and governor."""
    import psutil

    info = dict(_static())
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        info["load_average"] = None
    info["memory_available_bytes"] = psutil.virtual_memory().available
    info["cpu_governor"] = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    info.update(_cgroup_cpu())
    return info


def _cgroup_cpu() -> dict[str, Any]:
    """The cores this process may use, its CFS quota (cores, None = none) and the cgroup's throttling so far:
    two fingerprints taken around a measurement show whether the kernel paused it (``labkit room``)."""
    from labkit.measure.cgroup import cpu_quota

    out: dict[str, Any] = {}
    if hasattr(os, "sched_getaffinity"):
        out["cpu_affinity"] = sorted(os.sched_getaffinity(0))
    with contextlib.suppress(OSError, ValueError):
        quota = cpu_quota()
        out["cpu_quota_cores"] = quota.cores
        thr = quota.throttling()
        if thr is not None:
            out["cpu_throttled_periods"], out["cpu_throttled_us"] = thr[1], thr[2]
    return out


class CpuWatch:
    """CPU used while something ran: by this process and its children (the service a lab started, the load
    generator's thread), and by everything else on the machine — the neighbours whose work moves your numbers.

        watch = CpuWatch()            # starts now
        ...                            # run the load
        use = watch.stop()             # {"wall_s", "cores", "ours_cores", "others_cores", "steal_cores"}

    Amounts are in *cores*: 0.5 means half of one CPU's time over the window, on average. ``others_cores`` is the
    machine's busy time (steal included: time the hypervisor gave to other guests) minus this process tree's.
    A child that started during the window counts in full; one that exited during it is lost (it is not ours
    any more, and its time then shows as the neighbours'). Linux and macOS, through psutil.
    """

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._t0 = time.monotonic()
        self._sys0 = self._busy()
        self._ours0 = self._tree()
        self._stall0 = _cpu_stall_us()

    def _busy(self) -> tuple[float, float]:
        t = self._psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)  # already counted in user time
        return sum(t) - idle - guest, getattr(t, "steal", 0.0)

    def _tree(self) -> dict[tuple[int, float], float]:
        me = self._psutil.Process()
        out: dict[tuple[int, float], float] = {}
        for p in [me, *me.children(recursive=True)]:
            with contextlib.suppress(self._psutil.Error):
                t = p.cpu_times()
                out[(p.pid, p.create_time())] = t.user + t.system
        return out

    def stop(self) -> dict[str, float]:
        """The window's use so far (the watch can be read again later, from the same start).

        ``cpu_pressure`` (Linux with PSI, else absent) is the share of the window during which at least one
        runnable task waited for a CPU: near 0 on a quiet machine; high means every thread — the service's,
        the generator's — queued for a core, whoever caused it.
        """
        wall = max(time.monotonic() - self._t0, 1e-9)
        busy, steal = self._busy()
        ours = sum(v - self._ours0.get(k, 0.0) for k, v in self._tree().items())
        busy_d, steal_d = busy - self._sys0[0], steal - self._sys0[1]
        out = {"wall_s": round(wall, 3), "cores": float(os.cpu_count() or 1),
               "ours_cores": round(max(ours, 0.0) / wall, 3),
               "others_cores": round(max(busy_d - ours, 0.0) / wall, 3),
               "steal_cores": round(max(steal_d, 0.0) / wall, 3)}
        stall = _cpu_stall_us()
        if stall is not None and self._stall0 is not None:
            out["cpu_pressure"] = round(min(1.0, (stall - self._stall0) / 1e6 / wall), 3)
        return out


def _cpu_stall_us() -> int | None:
    """Linux PSI: total µs during which some runnable task waited for a CPU (None where unavailable)."""
    text = _read("/proc/pressure/cpu")
    if not text:
        return None
    for part in text.splitlines()[0].split():
        if part.startswith("total="):
            return int(part[6:])
    return None


@contextlib.contextmanager
def pinned(cpus: set[int] | None) -> Iterator[bool]:
    """Pin the *calling thread* to ``cpus`` for the block, then restore; yields whether pinning happened.

    On Linux, ``sched_setaffinity(0, …)`` applies to the calling thread only, so a probe can pin the two
    ends of a hand-off to the same or to different cores. Elsewhere (or with ``cpus=None``) it does nothing.
    """
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield False
        return
    old = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setaffinity(0, old)


#: what a measurement that wanted its thread on one core says where it could not pin it
UNPINNED = ("not pinned: this platform cannot pin a thread to a core (no os.sched_setaffinity: macOS, Windows), "
            "so the scheduler may move it between samples")


def can_pin() -> bool:
    """Whether this platform can pin a thread to chosen cores (Linux's ``os.sched_setaffinity``): the
    ``affinity`` facility of :mod:`labkit.measure.facilities`."""
    from labkit.measure.facilities import available

    return available("affinity")


def usable_cpus() -> list[int]:
    """CPUs this process may run on, sorted (falls back to ``range(os.cpu_count())``)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


#: the kinds of :class:`Neighbour`, and what each is: a run's label
NEIGHBOURS = {"none": "quiet", "thread": "a thread in this process", "processes": "a program on every core"}
#: a neighbour process exits on its own after this long (or as soon as its parent is gone)
NEIGHBOUR_MAX_S = 120

_SPIN = ("import os, sys, time\n"
         "parent, end = os.getppid(), time.monotonic() + float(sys.argv[1])\n"
         "print(flush=True)\n"
         "while time.monotonic() < end and os.getppid() == parent:\n"
         "    sum(range(10_000))\n")


class Neighbour:
    """Busy work beside a measurement, started and stopped around a block (``with Neighbour("processes"):``).

    Two different things a learner meets: ``"thread"`` spins Python code in *this* process, so the two take
    turns holding the interpreter lock (contention inside one program: it strikes in bursts, at each hand-over
    of the lock); ``"processes"`` starts one spinning program per usable core, what another learner's benchmark
    on a shared node or a video call does — the scheduler shares the cores the whole time. ``"none"`` does
    nothing. :meth:`start` returns once the neighbours spin; a neighbour process exits on its own within
    :data:`NEIGHBOUR_MAX_S` seconds if this process dies first.
    """

    def __init__(self, kind: str) -> None:
        from labkit.errors import BadInputError

        if kind not in NEIGHBOURS:
            raise BadInputError(f"a neighbour must be one of {', '.join(map(repr, NEIGHBOURS))}, got {kind!r}")
        self.kind = kind
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._procs: list[subprocess.Popen] = []

    def start(self) -> Neighbour:
        self._stop.clear()
        if self.kind == "thread":
            def spin() -> None:
                while not self._stop.is_set():
                    sum(range(1000))

            self._thread = threading.Thread(target=spin, daemon=True, name="labkit neighbour")
            self._thread.start()
        elif self.kind == "processes":
            self._procs = [subprocess.Popen([sys.executable, "-c", _SPIN, str(NEIGHBOUR_MAX_S)],
                                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
                           for _ in usable_cpus()]
            for p in self._procs:  # each prints one line, then spins: started means spinning
                assert p.stdout is not None
                p.stdout.readline()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for p in self._procs:
            p.kill()
        for p in self._procs:
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
        self._procs = []

    def __enter__(self) -> Neighbour:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
