"""The environment fingerprint saved beside every result: what machine, what load, what software.

A number means little without knowing where it was measured; two results are comparable only when their
fingerprints agree on the static part (CPU, cores, Python, packages).
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["fingerprint"]

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
    return info
