"""This process's cgroup, as the kernel enforces it: the CPU quota (and its throttling so far) and the cpuset.

Read by ``labkit.measure.machine`` (every fingerprint notes the quota and throttling, so two taken around a measurement
show whether the kernel paused it) and by ``labkit doctor --hub`` (:mod:`labkit.workshop.hub`). Every file is read under
``root`` (``/`` on a real machine) so that tests hand in exact fake cgroup trees.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuQuota", "cpu_quota", "cpuset", "memory_limit"]


@dataclass(frozen=True)
class CpuQuota:
    """The CPU controller of this process's cgroup, as the kernel enforces it.

    Attributes:
        version: 2 or 1 (cgroup version), 0 when no CPU controller was found.
        folder: the cgroup folder read (under the root given), "" when none.
        quota_us, period_us: the CFS quota per period in µs; ``quota_us`` None means no quota ("max" / -1).
    """

    version: int
    folder: str
    quota_us: int | None = None
    period_us: int | None = None

    @property
    def cores(self) -> float | None:
        """The quota in cores (1.5 = one and a half cores' time per period), None without a quota."""
        return None if self.quota_us is None or not self.period_us else self.quota_us / self.period_us

    def throttling(self) -> tuple[int, int, int] | None:
        """``(nr_periods, nr_throttled, throttled_us)`` from the cgroup's ``cpu.stat``, None if unreadable."""
        stat = _keyed(Path(self.folder) / "cpu.stat") if self.folder else {}
        if "nr_throttled" not in stat:
            return None
        paused = stat["throttled_usec"] if "throttled_usec" in stat else stat.get("throttled_time", 0) // 1000
        return stat.get("nr_periods", 0), stat["nr_throttled"], paused


def _keyed(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
    return out


def _cgroup_paths(root: Path) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller: path}; the cgroup v2 entry is under the key ``""``."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in (root / "proc/self/cgroup").read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                for ctrl in parts[1].split(","):
                    out[ctrl] = parts[2]
    return out


def _within(base: Path, rel: str, name: str) -> Path | None:
    """The innermost folder from ``base/rel`` up to ``base`` that holds ``name`` (a container sees its own
    cgroup as the mount's root, so the path in /proc/self/cgroup may not exist under the mount)."""
    here = base / rel.lstrip("/")
    while True:
        if (here / name).is_file():
            return here
        if here == base or base not in here.parents:
            return None
        here = here.parent


def cpu_quota(root: str | os.PathLike[str] = "/") -> CpuQuota:
    """Find this process's CPU cgroup under ``root`` (cgroup v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``)."""
    r = Path(root)
    paths = _cgroup_paths(r)
    cg = r / "sys/fs/cgroup"
    for base in (cg, cg / "unified"):  # unified: the v2 half of a hybrid set-up (its cpu controller may be v1)
        if (base / "cgroup.controllers").is_file() and (found := _within(base, paths.get("", "/"), "cpu.max")):
            quota, _, period = (found / "cpu.max").read_text().strip().partition(" ")
            return CpuQuota(2, str(found), None if quota == "max" else int(quota), int(period or 100_000))
    for base in (cg / "cpu", cg / "cpu,cpuacct", cg / "cpuacct,cpu"):
        if found := _within(base, paths.get("cpu", "/"), "cpu.cfs_quota_us"):
            quota_us = int((found / "cpu.cfs_quota_us").read_text().strip())
            period = _read_int(found / "cpu.cfs_period_us") or 100_000
            return CpuQuota(1, str(found), None if quota_us < 0 else quota_us, period)
    return CpuQuota(0, "")


def cpuset(root: str | os.PathLike[str] = "/") -> tuple[int, ...] | None:
    """The cores this process's cgroup allows (cgroup v2 ``cpuset.cpus.effective`` or v1 ``cpuset.cpus``), None
    when no cpuset is visible. Unlike the affinity mask, a process cannot widen it."""
    r = Path(root)
    paths = _cgroup_paths(r)
    cg = r / "sys/fs/cgroup"
    found = None
    if (cg / "cgroup.controllers").is_file():
        found = _within(cg, paths.get("", "/"), "cpuset.cpus.effective")
        name = "cpuset.cpus.effective"
    if found is None:
        found, name = _within(cg / "cpuset", paths.get("cpuset", "/"), "cpuset.cpus"), "cpuset.cpus"
    if found is None:
        return None
    try:
        return tuple(_cpu_list((found / name).read_text()))
    except (OSError, ValueError):
        return None


def memory_limit(root: str | os.PathLike[str] = "/") -> int | None:
    """The memory cap this process's cgroup enforces, in bytes (cgroup v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), or None when nothing caps it ("max", v1's near-2**63 "unlimited", no cgroup)."""
    r = Path(root)
    paths = _cgroup_paths(r)
    cg = r / "sys/fs/cgroup"
    if (cg / "cgroup.controllers").is_file():
        found, name = _within(cg, paths.get("", "/"), "memory.max"), "memory.max"
    else:
        found, name = _within(cg / "memory", paths.get("memory", "/"), "memory.limit_in_bytes"), "memory.limit_in_bytes"
    if found is None:
        return None
    try:
        text = (found / name).read_text().strip()
    except OSError:
        return None
    if text == "max" or not text.isdigit() or int(text) >= 2**62:
        return None
    return int(text)


def _cpu_list(text: str) -> list[int]:
    """``0-3,8,10-11`` → [0, 1, 2, 3, 8, 10, 11] (the kernel's cpu list format)."""
    out: list[int] = []
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
