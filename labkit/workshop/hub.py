"""``labkit doctor --hub``: is this hub server fit to measure on? Its CPU quota, throttling, cores and neighbours.

A JupyterHub spawner usually packs learners densely: ``cpu_limit`` becomes a CFS quota (a share of each 100 ms
period, after which every thread of the server waits for the next period), guarantees are fractions of a core,
and a server's cores are shared with everyone else's. The labs then measure the throttler and the neighbours.
These checks read what the kernel enforces (the cgroup's ``cpu.max`` / ``cpu.cfs_quota_us`` and its throttling
counters), run a short busy probe on every core this server may use, and say what each finding means for the
labs and what to ask the hub's admin for (docs/workshop.md has the set-up that passes them).

Every file is read under ``root`` (``/`` on a real machine) so that tests hand in exact fake cgroup trees.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from labkit.measure.cgroup import CpuQuota, cpu_quota, cpuset, memory_limit
from labkit.workshop.culler import CellTime, culler_check, longest_cells
from labkit.workshop.doctor import Check

__all__ = ["Probe", "on_hub", "probe", "checks"]

_ADMIN = ("ask the hub's admin for exclusive cores with no CPU quota (docs/workshop.md: cpu_limit unset, cores "
          "pinned per learner: SystemdSpawner AllowedCPUs=, Docker cpuset_cpus, or Kubernetes' static CPU manager "
          "with an integer CPU request equal to the limit)")


def on_hub(env: Mapping[str, str] | None = None) -> bool:
    """True inside a JupyterHub single-user server (the spawner sets ``JUPYTERHUB_*`` variables)."""
    env = os.environ if env is None else env
    return any(k.startswith("JUPYTERHUB_") for k in env)


def _proc_stat(root: Path) -> dict[str, tuple[int, int, int]]:
    """Per line of /proc/stat (``cpu``, ``cpu0``…): (busy incl. steal, total, steal) in clock ticks."""
    out: dict[str, tuple[int, int, int]] = {}
    with contextlib.suppress(OSError):
        for line in (root / "proc/stat").read_text().splitlines():
            if line.startswith("cpu"):
                name, *vals = line.split()
                v = [int(x) for x in vals[:8]] + [0] * (8 - len(vals[:8]))
                total = sum(v)  # guest time is already inside user time: leave it out
                out[name] = (total - v[3] - v[4], total, v[7])
    return out


@dataclass(frozen=True)
class Probe:
    """What a short busy probe on every allowed core saw.

    Attributes:
        seconds: the probe's wall time.
        cores: the cores this process may run on (its affinity mask).
        got: the CPU time the probe's processes got, as a share of ``len(cores) × seconds`` (1.0 = all of it).
        periods, throttled, throttled_us: CFS periods, periods throttled and time paused during the probe
            (None without a quota's counters).
        steal: the share of the machine's time the hypervisor gave to other guests (None if unreadable).
        others: visible processes outside this one that used these cores meanwhile: (pid, name, cores used).
    """

    seconds: float
    cores: tuple[int, ...]
    got: float
    periods: int | None = None
    throttled: int | None = None
    throttled_us: int | None = None
    steal: float | None = None
    others: tuple[tuple[int, str, float], ...] = ()


def _busy_children(n: int, seconds: float) -> float:
    """Run ``n`` spinning processes for ``seconds``; return the CPU seconds they got."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = f"import time\nt = time.monotonic() + {seconds}\nwhile time.monotonic() < t: pass"
    procs = [subprocess.Popen([sys.executable, "-S", "-c", code]) for _ in range(n)]
    for p in procs:
        p.wait(timeout=seconds + 30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _cpu_by_process(cores: set[int]) -> dict[tuple[int, float], tuple[str, float]]:
    """CPU seconds so far of every visible process that may run on ``cores``, by (pid, start time), with a
    short command line; leaving out this process and the ancestors pinned inside these cores (the kernel and
    the server that started doctor: the learner's own, not neighbours)."""
    import psutil

    out: dict[tuple[int, float], tuple[str, float]] = {}
    mine = {os.getpid()}
    with contextlib.suppress(psutil.Error, AttributeError):
        mine |= {a.pid for a in psutil.Process().parents() if set(a.cpu_affinity()) <= cores}
    for p in psutil.process_iter(["pid", "name", "cmdline", "cpu_times", "create_time"]):
        with contextlib.suppress(psutil.Error, AttributeError, TypeError):
            if p.info["pid"] in mine or not cores & set(p.cpu_affinity()):
                continue
            t = p.info["cpu_times"]
            label = " ".join(p.info["cmdline"] or [p.info["name"]])
            out[(p.info["pid"], p.info["create_time"])] = (label[:60], t.user + t.system)
    return out


def probe(seconds: float = 0.5, root: str | os.PathLike[str] = "/", quota: CpuQuota | None = None) -> Probe:
    """Spin one process per allowed core for ``seconds`` and read the throttling, steal and neighbours meanwhile."""
    r = Path(root)
    quota = cpu_quota(r) if quota is None else quota
    cores = tuple(sorted(os.sched_getaffinity(0)))
    stat0, thr0, procs0 = _proc_stat(r), quota.throttling(), _cpu_by_process(set(cores))
    t0 = time.monotonic()
    used = _busy_children(len(cores), seconds)
    wall = time.monotonic() - t0
    stat1, thr1, procs1 = _proc_stat(r), quota.throttling(), _cpu_by_process(set(cores))
    steal = None
    if "cpu" in stat0 and "cpu" in stat1 and stat1["cpu"][1] > stat0["cpu"][1]:
        steal = (stat1["cpu"][2] - stat0["cpu"][2]) / (stat1["cpu"][1] - stat0["cpu"][1])
    others = sorted(((pid, name, (t - procs0[(pid, ct)][1]) / wall) for (pid, ct), (name, t) in procs1.items()
                     if (pid, ct) in procs0 and t - procs0[(pid, ct)][1] > 0.05 * wall), key=lambda o: -o[2])
    d = None if thr0 is None or thr1 is None else tuple(b - a for a, b in zip(thr0, thr1, strict=True))
    return Probe(round(wall, 3), cores, round(used / (len(cores) * wall), 3), *(d or (None, None, None)),
                 steal=None if steal is None else round(steal, 4),
                 others=tuple((pid, name, round(c, 2)) for pid, name, c in others))


def _span(cores: tuple[int, ...]) -> str:
    return ",".join(map(str, cores)) if len(cores) <= 8 else f"{cores[0]}…{cores[-1]}"


def checks(root: str | os.PathLike[str] = "/", env: Mapping[str, str] | None = None,
           measured: Probe | None = None, machine_cores: int | None = None,
           cells: Mapping[tuple[str, bool], CellTime] | None = None) -> tuple[Check, ...]:
    """The hub checks, one :class:`~labkit.workshop.doctor.Check` each: quota, throttling, cores, neighbours, steal, limits.

    Args:
        root: where /proc and /sys are read from (tests pass a fake tree).
        env: the environment to read ``CPU_LIMIT`` / ``CPU_GUARANTEE`` / ``MEM_LIMIT`` from (default: os.environ).
        measured: a :func:`probe` already taken (default: take one now, 0.5 s on every allowed core).
        machine_cores: the node's core count (default: os.cpu_count()).
        cells: each lab's longest cell as measured (default: :func:`labkit.workshop.culler.longest_cells`, from this
            server's ``labkit report`` runs), compared with the culler's timeout.
    """
    env = os.environ if env is None else env
    quota = cpu_quota(root)
    p = probe(root=root, quota=quota) if measured is None else measured
    n_node = machine_cores or os.cpu_count() or 1
    hub = on_hub(env)
    out = [_quota_check(quota, len(p.cores)), _throttle_check(quota, p),
           _affinity_check(p, n_node, hub, cpuset(root), env.get("PERFLAB_CORES")),
           _neighbour_check(p), _steal_check(p)]
    if hub and 0 in p.cores and n_node > 1:
        out.append(_hub_core_check(p))
    out += _env_checks(env, len(p.cores), memory_limit(root))
    out.append(_culler_check(env, longest_cells() if cells is None else cells))
    return tuple(out)


def _quota_check(q: CpuQuota, n: int) -> Check:
    src = {2: "cgroup v2 cpu.max", 1: "cgroup v1 cpu.cfs_quota_us"}.get(q.version, "")
    if q.version == 0:
        return Check("cpu quota", "ok", "no cgroup CPU controller visible: nothing enforces a CPU quota here")
    if q.cores is None:
        return Check("cpu quota", "ok", f"no CFS quota ({src} in {q.folder}): bursts run at full speed")
    status = "fail" if q.cores < 1 else "warn"
    return Check("cpu quota", status,
                 f"a CFS quota of {q.cores:.2f} cores ({q.quota_us} µs per {q.period_us} µs period, {src}) on "
                 f"{n} allowed core(s): once the server's threads have used it, all of them wait for the next "
                 "period, so load tests measure the throttler and tails grow by up to a period", _ADMIN)


def _throttle_check(q: CpuQuota, p: Probe) -> Check:
    if p.throttled is None:
        return Check("throttling", "ok", "no throttling counters (no quota enforced here)" if q.version == 0 else
                     "no throttling counters in cpu.stat")
    if p.throttled == 0:
        why = "no quota to throttle against" if q.cores is None else f"{p.periods} periods"
        return Check("throttling", "ok", f"not throttled during a {p.seconds:.1f} s busy probe on "
                     f"{len(p.cores)} core(s) ({why})")
    return Check("throttling", "warn" if p.throttled_us < 50_000 else "fail",
                 f"throttled in {p.throttled} of {p.periods} periods during a {p.seconds:.1f} s busy probe on "
                 f"{len(p.cores)} core(s), paused {p.throttled_us / 1000:.0f} ms in all: every lab that keeps more "
                 "cores busy than the quota measures these pauses", _ADMIN)


def _hub_core_check(p: Probe) -> Check:
    return Check("hub's core", "warn", "this server runs on core 0, which also runs the hub, the proxy, the culler and "
                 "every process nobody pinned: their bursts land in this learner's measurements (a short probe may "
                 "not catch them)", "leave core 0 to the hub: PERFLAB_HUB_CORES=1-… (docs/workshop.md, capacity); "
                 "on a node too small for that, use QUICK = True and compare ratios, not absolute times")


def _affinity_check(p: Probe, n_node: int, hub: bool, allowed: tuple[int, ...] | None = None,
                    pinned_by: str | None = None) -> Check:
    where = f"cores {_span(p.cores)} ({len(p.cores)} of the node's {n_node})"
    if allowed is not None and set(p.cores) < set(allowed):
        # the spawner narrowed the mask, the cgroup did not: a lab that pins to an absolute core number
        # (sched_setaffinity) can step outside it, onto a neighbour's core
        where += f"; by affinity only, which a process may widen to the cgroup's cores {_span(allowed)}"
    if len(p.cores) < 2:
        return Check("pinned cores", "warn", f"pinned to {where}: the labs that put a load generator and a server on "
                     "different cores will share this one", "use QUICK = True in each lab, or ask the hub's admin "
                     "for 2 cores per learner (docs/workshop.md, capacity)")
    # every core of the node, and no pinning spawner said it gave them (PERFLAB_CORES): on a 2-core node too
    if hub and len(p.cores) == n_node and not pinned_by:
        return Check("pinned cores", "warn", f"not pinned: {where}, shared with every other learner's server",
                     _ADMIN)
    return Check("pinned cores", "ok", f"may run on {where}")


def _neighbour_check(p: Probe) -> Check:
    busy = "; ".join(f"pid {pid} {name} {c:.2f} core" for pid, name, c in p.others[:3])
    if p.got >= 0.9 and not p.others:
        return Check("neighbours", "ok", f"the probe got {p.got:.0%} of its cores' time; no other process on them")
    detail = f"the probe got {p.got:.0%} of {len(p.cores)} core(s)' time"
    if p.others:
        detail += f"; {len(p.others)} other process(es) used these cores meanwhile ({busy})"
    return Check("neighbours", "warn", detail + ": absolute numbers will move with their work",
                 "on a hub: " + _ADMIN + "; on your own machine: close other programs or wait")


def _steal_check(p: Probe) -> Check:
    if p.steal is None:
        return Check("steal", "ok", "not exposed (/proc/stat unreadable)")
    if p.steal < 0.02:
        return Check("steal", "ok", f"{p.steal:.1%} of the machine's time stolen by the hypervisor during the probe")
    return Check("steal", "warn", f"{p.steal:.1%} of the machine's time went to other virtual machines during "
                 "the probe: the host is oversubscribed and every timing here stretches with it",
                 "ask the admin for dedicated (not burstable or shared-core) instances for the hub's nodes")


def _number(env: Mapping[str, str], name: str) -> float | None:
    try:
        return float(env[name])
    except (KeyError, ValueError):
        return None


def _env_checks(env: Mapping[str, str], n: int, enforced: int | None = None) -> list[Check]:
    out = []
    limit, guarantee, mem = (_number(env, k) for k in ("CPU_LIMIT", "CPU_GUARANTEE", "MEM_LIMIT"))
    if limit is None:
        out.append(Check("CPU_LIMIT", "ok", "not set: the spawner asked for no CPU quota"))
    else:
        out.append(Check("CPU_LIMIT", "warn", f"{limit:g}: the spawner set cpu_limit, which spawners enforce as a "
                         "CFS quota (see 'cpu quota')", "unset cpu_limit and give exclusive cores instead: " + _ADMIN))
    if guarantee is None:
        out.append(Check("CPU_GUARANTEE", "ok", "not set"))
    elif guarantee < n:
        out.append(Check("CPU_GUARANTEE", "warn", f"{guarantee:g} core(s) guaranteed of {n} allowed: when the "
                         "node is busy the server gets only that share, and measurements slow down with the room",
                         "ask for a guarantee equal to the cores given (an integer, equal to the limit: Kubernetes "
                         "Guaranteed QoS)"))
    else:
        out.append(Check("CPU_GUARANTEE", "ok", f"{guarantee:g} core(s), the cores this server may use"))
    if mem is None:
        out.append(Check("MEM_LIMIT", "ok", "not set"))
    else:
        status = "ok" if mem >= 2 * 2**30 else "fail" if mem < 2**30 else "warn"
        if status == "ok" and (enforced is None or enforced > 1.5 * mem):
            out.append(Check("MEM_LIMIT", "warn", f"{mem / 2**30:.1f} GiB per learner, stated but not enforced (no "
                             "cgroup memory cap on this server): one learner's run can take the node's memory",
                             "on a node with systemd: PERFLAB_HUB_SPAWNER=systemd (MemoryMax=); otherwise keep the "
                             "labs at QUICK = True"))
            return out
        out.append(Check("MEM_LIMIT", status, f"{mem / 2**30:.1f} GiB per learner", "" if status == "ok" else
                         "the latency lab's memory probe walks 256 MiB and the dataset builder needs more: ask for "
                         "2 GiB per learner (docs/workshop.md)"))
    return out


def _culler_check(env: Mapping[str, str], cells: Mapping[tuple[str, bool], CellTime]) -> Check:
    return culler_check(_number(env, "PERFLAB_CULL_TIMEOUT"), cells)
