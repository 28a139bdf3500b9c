"""``labkit doctor``: check that this machine can run the labs, and say what to do where it cannot.

Each check returns a :class:`Check` value (ok / warn / fail, what was seen, what to do); the CLI only
prints them. A warning means the labs run but some numbers will be noisier; a failure means a lab breaks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Check", "run_checks"]


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``status`` is ``ok``, ``warn`` or ``fail``; ``fix`` says what to do otherwise."""

    name: str
    status: str
    detail: str
    fix: str = ""


def _cores() -> Check:
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if n >= 2:
        return Check("cores", "ok", f"{n} usable cores")
    return Check("cores", "warn", f"only {n} usable core", "labs that pin a load generator and a server to different "
                 "cores will share one; run on a machine (or container) with at least 2 cores")


def _load() -> Check:
    n = os.cpu_count() or 1
    load1 = os.getloadavg()[0]
    if load1 <= 0.5 * n:
        return Check("load", "ok", f"load average {load1:.2f} on {n} cores")
    return Check("load", "warn", f"load average {load1:.2f} on {n} cores: the machine is busy",
                 "close other programs (or wait) before measuring; labkit.compare interleaves A and B, but "
                 "absolute numbers will wander")


def _memory() -> Check:
    import psutil

    avail = psutil.virtual_memory().available
    if avail >= 2 * 2**30:
        return Check("memory", "ok", f"{avail / 2**30:.1f} GiB available")
    return Check("memory", "fail" if avail < 2**30 else "warn", f"only {avail / 2**30:.1f} GiB available",
                 "the latency lab's DRAM probe allocates 256 MiB and the dataset builder more: free memory or "
                 "use the --quick / small sizes")


def _governor() -> Check:
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    try:
        gov = path.read_text().strip()
    except OSError:
        return Check("cpu governor", "ok", "not exposed (typical of a VM): the host decides the clock speed")
    if gov == "performance":
        return Check("cpu governor", "ok", "performance")
    return Check("cpu governor", "warn", f"{gov}: the clock speed changes with load, so short runs vary",
                 "as root: cpupower frequency-set -g performance (or accept noisier numbers)")


def _py_spy() -> Check:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        return Check("py-spy", "fail", "py-spy is not installed", "pip install py-spy")
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    try:
        time.sleep(0.3)
        out = subprocess.run([exe, "dump", "--pid", str(child.pid)], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return Check("py-spy", "fail", "py-spy dump timed out", "check ptrace permissions (see below)")
    finally:
        child.kill()
        child.wait()
    if out.returncode == 0 and "sleep" in out.stdout:
        return Check("py-spy", "ok", "attached to a child process and read its stack")
    return Check("py-spy", "fail", f"py-spy could not attach: {(out.stderr or out.stdout).strip()[:200]}",
                 "run as root, or allow ptrace: sudo sysctl kernel.yama.ptrace_scope=0; in Docker add "
                 "--cap-add SYS_PTRACE")


def _memray() -> Check:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "probe.bin"
        code = f"import memray\nwith memray.Tracker({str(out)!r}):\n    x = [bytes(1000) for _ in range(1000)]"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or not out.exists():
            return Check("memray", "fail", f"memray could not track a process: {r.stderr.strip()[-200:]}",
                         "pip install memray (Linux or macOS only)")
        import memray

        n = sum(1 for _ in memray.FileReader(out).get_allocation_records())
    version = tuple(int(x) for x in memray.__version__.split(".")[:3] if x.isdigit())
    if version < (1, 19, 2):
        return Check("memray", "warn", f"memray {memray.__version__}: its own flame-graph page draws nothing "
                     "offline before 1.19.2 (lab 06 shows it)", "pip install -U 'memray>=1.19.2'")
    return Check("memray", "ok", f"tracked a child process ({n} allocation records)")


def _charts() -> Check:
    try:
        import altair as alt
        import anywidget  # noqa: F401  - the offline jupyter renderer's front end ships in this package
        import vl_convert as vlc
    except ImportError as e:
        return Check("charts", "fail", f"missing {e.name}", "pip install altair anywidget vl-convert-python")
    chart = alt.Chart(alt.Data(values=[{"x": 1, "y": 2}])).mark_point().encode(x="x:Q", y="y:Q")
    svg = vlc.vegalite_to_svg(chart.to_dict())
    if "<svg" not in svg:
        return Check("charts", "fail", "vl-convert produced no SVG", "reinstall vl-convert-python")
    return Check("charts", "ok", "charts render offline (jupyter renderer via anywidget; SVG via vl-convert)")


def _facilities() -> tuple[Check, ...]:
    """One line for the Linux facilities this machine has, and a warning for each it lacks, with what that costs."""
    from labkit.measure.facilities import survey

    found = survey()
    have = [f.name for f in found if f.available]
    out = [Check("platform", "ok", f"{sys.platform}: {', '.join(have) or 'none'} of the labs' Linux facilities")]
    out += [Check(f"facility: {f.name}", "warn", f"missing — {f.detail}", f"nothing to do for most labs: {f.costs}")
            for f in found if not f.available]
    return tuple(out)


def _servers() -> tuple[Check, ...]:
    """Start and stop each real server the ``db=postgres`` switch and the Redis sections use (a second or so
    each): a warning, with the reason, where one cannot run — those sections say so and skip."""
    from labkit.errors import LabkitError
    from labkit.toyshop import backends

    out = []
    for kind, server, what in (("postgres", backends.Postgres, "PostgreSQL"), ("redis", backends.Redis, "Redis")):
        costs = f"the labs' {what} sections skip, and say so; everything else runs"
        why = backends.unavailable(kind)
        if why:
            out.append(Check(kind, "warn", f"{what} cannot run here: {why}", costs))
            continue
        t0 = time.perf_counter()
        try:
            server.start().stop()
        except LabkitError as e:
            out.append(Check(kind, "warn", f"{what} would not start: {str(e)[-300:]}", costs))
            continue
        out.append(Check(kind, "ok", f"started a private {what} and stopped it in {time.perf_counter() - t0:.1f} s"))
    return tuple(out)


CHECKS: tuple[Callable[[], Check | tuple[Check, ...]], ...] = (_cores, _load, _memory, _governor, _facilities, _charts,
                                                                _py_spy, _memray, _servers)


def run_checks(checks: tuple[Callable[[], Check | tuple[Check, ...]], ...] = CHECKS) -> tuple[Check, ...]:
    """Run every check (one that returns several counts each); a check that crashes is reported as a failure,
    never raised."""
    results: list[Check] = []
    for fn in checks:
        try:
            got = fn()
            results.extend(got if isinstance(got, tuple) else (got,))
        except Exception as e:  # a broken probe must not hide the others
            name = fn.__name__.strip("_").replace("_", "-")
            results.append(Check(name, "fail", f"the check itself failed: {type(e).__name__}: {e}",
                                 "report this with the output of `labkit doctor`"))
    return tuple(results)
