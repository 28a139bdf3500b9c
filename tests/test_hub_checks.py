"""labkit.workshop.hub: the hub checks read exact fake cgroup trees (v2 and v1, quota or not, throttled or not)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labkit.cli import doctor as doctor_cli
from labkit.measure import cgroup
from labkit.measure.cgroup import CpuQuota, cpu_quota
from labkit.workshop import doctor, hub
from labkit.workshop.hub import Probe, checks

STAT = "cpu  100 0 50 800 10 0 0 {steal} 0 0\ncpu0 50 0 25 400 5 0 0 0 0 0\n"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return tmp_path


def _v2(tmp_path: Path, cpu_max: str, stat: str = "usage_usec 10\nnr_periods 0\nnr_throttled 0\n"
        "throttled_usec 0\n") -> Path:
    return _tree(tmp_path, {"proc/self/cgroup": "0::/user.slice/learner-1.scope\n",
                            "sys/fs/cgroup/cgroup.controllers": "cpuset cpu memory\n",
                            "sys/fs/cgroup/user.slice/learner-1.scope/cpu.max": cpu_max,
                            "sys/fs/cgroup/user.slice/learner-1.scope/cpu.stat": stat,
                            "proc/stat": STAT.format(steal=0)})


def _v1(tmp_path: Path, quota: str, stat: str = "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n") -> Path:
    return _tree(tmp_path, {"proc/self/cgroup": "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/\n",
                            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": quota,
                            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
                            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.stat": stat})


def _probe(**kw) -> Probe:
    return Probe(**{"seconds": 0.5, "cores": (0, 1), "got": 0.99, "periods": 5, "throttled": 0,
                    "throttled_us": 0, "steal": 0.0, **kw})


def _by_name(results) -> dict[str, doctor.Check]:
    return {c.name: c for c in results}


def test_cgroup_v2_with_a_quota_is_read_from_the_process_own_cgroup(tmp_path):
    q = cpu_quota(_v2(tmp_path, "150000 100000\n"))
    assert (q.version, q.quota_us, q.period_us, q.cores) == (2, 150000, 100000, 1.5)
    assert q.folder.endswith("user.slice/learner-1.scope")


def test_cgroup_v2_max_means_no_quota(tmp_path):
    q = cpu_quota(_v2(tmp_path, "max 100000\n"))
    assert (q.version, q.quota_us, q.cores) == (2, None, None)


def test_cgroup_v2_throttling_counters(tmp_path):
    q = cpu_quota(_v2(tmp_path, "50000 100000\n", "nr_periods 40\nnr_throttled 12\nthrottled_usec 345678\n"))
    assert q.throttling() == (40, 12, 345678)


def test_cgroup_v1_quota_period_and_throttled_time_in_ns(tmp_path):
    q = cpu_quota(_v1(tmp_path, "200000\n", "nr_periods 9\nnr_throttled 3\nthrottled_time 7000000\n"))
    assert (q.version, q.cores) == (1, 2.0)
    assert q.throttling() == (9, 3, 7000)


def test_cgroup_v1_minus_one_is_no_quota(tmp_path):
    assert cpu_quota(_v1(tmp_path, "-1\n")).quota_us is None


def test_a_container_sees_its_cgroup_at_the_mount_root(tmp_path):
    # /proc/self/cgroup names a path that does not exist inside the container's view: read the mount's root
    root = _tree(tmp_path, {"proc/self/cgroup": "0::/kubepods/pod1/c1\n",
                            "sys/fs/cgroup/cgroup.controllers": "cpu\n", "sys/fs/cgroup/cpu.max": "100000 100000\n"})
    assert cpu_quota(root).cores == 1.0


def test_hybrid_v2_without_cpu_controller_falls_back_to_v1(tmp_path):
    root = _v1(tmp_path, "-1\n")
    _tree(root, {"sys/fs/cgroup/unified/cgroup.controllers": "\n", "sys/fs/cgroup/unified/cpu.stat": "usage_usec 1\n"})
    assert cpu_quota(root).version == 1


def test_no_cgroup_at_all(tmp_path):
    assert cpu_quota(tmp_path) == CpuQuota(0, "")
    assert CpuQuota(0, "").throttling() is None


def test_quota_and_throttling_say_what_to_ask_the_admin_for(tmp_path):
    root = _v2(tmp_path, "50000 100000\n")
    got = _by_name(checks(root, env={}, measured=_probe(periods=5, throttled=5, throttled_us=250_000)))
    assert got["cpu quota"].status == "fail" and "0.50 cores" in got["cpu quota"].detail
    assert "exclusive cores" in got["cpu quota"].fix
    assert got["throttling"].status == "fail" and "throttled in 5 of 5 periods" in got["throttling"].detail
    assert "250 ms" in got["throttling"].detail


def test_a_quota_of_whole_cores_warns_and_an_unthrottled_probe_is_ok(tmp_path):
    got = _by_name(checks(_v2(tmp_path, "200000 100000\n"), env={}, measured=_probe()))
    assert got["cpu quota"].status == "warn"
    assert got["throttling"].status == "ok" and "5 periods" in got["throttling"].detail


def test_no_quota_all_ok(tmp_path):
    got = _by_name(checks(_v2(tmp_path, "max 100000\n"), env={}, measured=_probe(), machine_cores=2))
    assert {c.status for c in got.values()} == {"ok"}, got


def test_one_pinned_core_and_an_unpinned_hub_server_warn(tmp_path):
    root = _v2(tmp_path, "max 100000\n")
    one = _by_name(checks(root, env={}, measured=_probe(cores=(3,)), machine_cores=64))["pinned cores"]
    assert one.status == "warn" and "cores 3 (1 of the node's 64)" in one.detail and "QUICK" in one.fix
    hubenv = {"JUPYTERHUB_USER": "ada"}
    wide = _by_name(checks(root, env=hubenv, measured=_probe(cores=tuple(range(64))), machine_cores=64))
    assert wide["pinned cores"].status == "warn" and "not pinned" in wide["pinned cores"].detail
    pinned = _by_name(checks(root, env=hubenv, measured=_probe(cores=(4, 5)), machine_cores=64))
    assert pinned["pinned cores"].status == "ok"


def test_neighbours_and_steal_are_named(tmp_path):
    p = _probe(got=0.55, steal=0.08, others=((4242, "python", 0.9), (7, "stress", 0.3)))
    got = _by_name(checks(_v2(tmp_path, "max 100000\n"), env={}, measured=p))
    assert got["neighbours"].status == "warn"
    assert "55%" in got["neighbours"].detail and "pid 4242 python 0.90 core" in got["neighbours"].detail
    assert got["steal"].status == "warn" and "8.0%" in got["steal"].detail


def test_spawner_env_limits(tmp_path):
    env = {"CPU_LIMIT": "2.0", "CPU_GUARANTEE": "0.05", "MEM_LIMIT": str(512 * 2**20), "PERFLAB_CULL_TIMEOUT": "45"}
    got = _by_name(checks(_v2(tmp_path, "max 100000\n"), env=env, measured=_probe()))
    assert got["CPU_LIMIT"].status == "warn" and "CFS quota" in got["CPU_LIMIT"].detail
    assert got["CPU_GUARANTEE"].status == "warn" and "0.05 core(s)" in got["CPU_GUARANTEE"].detail
    assert got["MEM_LIMIT"].status == "fail" and "0.5 GiB" in got["MEM_LIMIT"].detail
    assert got["culler"].status == "warn" and "45 s" in got["culler"].detail
    good = {"CPU_GUARANTEE": "2", "MEM_LIMIT": str(4 * 2**30), "PERFLAB_CULL_TIMEOUT": "3600"}
    # a MEM_LIMIT nothing enforces (no cgroup memory cap: the pinned spawner's) is said to be only stated
    unenforced = _by_name(checks(_v2(tmp_path, "max 100000\n"), env=good, measured=_probe()))["MEM_LIMIT"]
    assert unenforced.status == "warn" and "stated but not enforced" in unenforced.detail
    assert "PERFLAB_HUB_SPAWNER=systemd" in unenforced.fix
    root = _tree(_v2(tmp_path, "max 100000\n"), {"sys/fs/cgroup/user.slice/learner-1.scope/memory.max": f"{4 * 2**30}\n"})
    assert {c.status for c in checks(root, env=good, measured=_probe())} == {"ok"}


def test_an_unpinned_server_on_a_two_core_hub_node_is_not_called_pinned():
    # GIVEN a hub server that may run on both cores of a 2-core node
    p = _probe(cores=(0, 1))
    # WHEN no pinning spawner said it gave them THEN it is "not pinned", shared with the room
    check = hub._affinity_check(p, 2, True, (0, 1))
    assert check.status == "warn" and check.detail.startswith("not pinned: cores 0,1 (2 of the node's 2)")
    # AND a spawner that gave this learner the whole node (PERFLAB_CORES) is believed
    assert hub._affinity_check(p, 2, True, (0, 1), "0,1").status == "ok"


def test_a_learner_on_the_hubs_core_is_told(tmp_path):
    env = {"JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api", "PERFLAB_CORES": "0"}
    got = _by_name(checks(_v2(tmp_path, "max 100000\n"), env=env, measured=_probe(cores=(0,)), machine_cores=2))
    assert got["hub's core"].status == "warn" and "core 0, which also runs the hub" in got["hub's core"].detail
    other = _by_name(checks(_v2(tmp_path, "max 100000\n"), env={**env, "PERFLAB_CORES": "1"},
                            measured=_probe(cores=(1,)), machine_cores=2))
    assert "hub's core" not in other


def test_the_probe_reads_throttling_and_steal_from_the_fake_tree(tmp_path, monkeypatch):
    # GIVEN counters that move between the probe's two readings
    root = _v2(tmp_path, "50000 100000\n", "nr_periods 10\nnr_throttled 2\nthrottled_usec 1000\n")
    stat = root / "sys/fs/cgroup/user.slice/learner-1.scope/cpu.stat"

    def spin(n, seconds):
        stat.write_text("nr_periods 15\nnr_throttled 6\nthrottled_usec 81000\n")
        (root / "proc/stat").write_text(STAT.format(steal=0).replace("800 10 0 0 0", "880 10 0 0 20"))
        return 0.25 * n

    monkeypatch.setattr(hub, "_busy_children", spin)
    monkeypatch.setattr(hub, "_cpu_by_process", lambda cores: {})
    # WHEN probed
    p = hub.probe(0.01, root=root)
    # THEN the deltas are exact: 5 periods, 4 throttled, 80 ms; 20 of 100 ticks stolen
    assert (p.periods, p.throttled, p.throttled_us) == (5, 4, 80_000)
    assert p.steal == pytest.approx(0.2)
    assert p.cores == tuple(sorted(os.sched_getaffinity(0)))


def test_on_hub_reads_jupyterhub_variables():
    assert hub.on_hub({"JUPYTERHUB_API_TOKEN": "x"}) and not hub.on_hub({"HOME": "/root"})


def test_doctor_runs_the_hub_checks_with_hub_or_inside_a_hub(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "CHECKS", ())
    monkeypatch.setattr(hub, "checks", lambda: (doctor.Check("cpu quota", "warn", "a quota", "ask"),))
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setattr(doctor, "run_checks", lambda checks=(): tuple(c for fn in checks for c in fn()))
    assert doctor_cli.main([]) == 0 and "cpu quota" not in capsys.readouterr().out
    assert doctor_cli.main(["--hub"]) == 0 and "[WARN] cpu quota: a quota" in capsys.readouterr().out
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    assert doctor_cli.main([]) == 0 and "[WARN] cpu quota" in capsys.readouterr().out


def test_the_real_probe_on_this_machine_reads_something():
    p = hub.probe(0.1)
    assert p.cores and 0 < p.got <= 1.5 and p.seconds >= 0.1


def test_cpuset_v2_and_v1_and_an_affinity_narrower_than_the_cpuset_is_named(tmp_path):
    v2 = _v2(tmp_path / "a", "max 100000\n")
    (v2 / "sys/fs/cgroup/user.slice/learner-1.scope/cpuset.cpus.effective").write_text("0-3,8\n")
    assert cgroup.cpuset(v2) == (0, 1, 2, 3, 8)
    v1 = _v1(tmp_path / "b", "-1\n")
    _tree(v1, {"proc/self/cgroup": "3:cpuset:/\n2:cpu,cpuacct:/docker/abc\n", "sys/fs/cgroup/cpuset/cpuset.cpus": "4-5\n"})
    assert cgroup.cpuset(v1) == (4, 5)
    assert cgroup.cpuset(tmp_path / "none") is None
    got = _by_name(checks(v2, env={}, measured=_probe(cores=(2, 3)), machine_cores=9))["pinned cores"]
    assert got.status == "ok" and "by affinity only" in got.detail and "cores 0,1,2,3,8" in got.detail
    same = _by_name(checks(v1, env={}, measured=_probe(cores=(4, 5)), machine_cores=9))["pinned cores"]
    assert "affinity only" not in same.detail


# -- the culler against each lab's longest cell ------------------------------------------------------------------


def _lab_run(root: Path, lab: str, durations: list[float], *, started: str, passed: dict | None = None,
             quick_default: bool = False) -> Path:
    """A `labkit report` run folder of ``lab`` whose cells took ``durations`` (papermill's metadata)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from labkit.report.run import ReportRun

    folder = root / f"{Path(lab).stem}-{started[11:19].replace(':', '')}"
    folder.mkdir(parents=True)
    cells = [new_code_cell(f"QUICK = {quick_default}", metadata={"tags": ["parameters"]}),
             new_code_cell("QUICK = True", metadata={"tags": ["injected-parameters"]})]
    cells += [new_code_cell(f"# step {i}\nstep_{i}()") for i in range(len(durations) - 1)]
    for c, d in zip(cells[:1] + cells[2:], durations, strict=True):
        c.metadata["papermill"] = {"status": "completed", "duration": d}
    cells[1].metadata["papermill"] = {"status": "completed", "duration": 999.0}  # papermill's own: not the lab's
    run = ReportRun(f"/labs/notebooks/{lab}", str(folder), passed or {}, started, status="complete",
                    declared={"QUICK": str(quick_default)})
    nbformat.write(new_notebook(cells=cells), run.executed)
    run.save()
    return folder


def test_longest_cells_reads_the_latest_run_of_each_lab_at_each_setting(tmp_path):
    from labkit.workshop.culler import longest_cells

    # GIVEN two full runs of lab 06 (the later one's longest cell is its third), a QUICK run, and a non-lab
    _lab_run(tmp_path, "06_gc_profiling.ipynb", [1, 50, 2], started="2026-12-01T10:00:00+00:00")
    later = _lab_run(tmp_path, "06_gc_profiling.ipynb", [1, 2, 383.04], started="2026-12-01T11:00:00+00:00")
    _lab_run(tmp_path, "06_gc_profiling.ipynb", [1, 31.7, 2], started="2026-12-01T12:00:00+00:00",
             passed={"QUICK": True})
    _lab_run(tmp_path, "review.ipynb", [1, 5000], started="2026-12-01T12:00:00+00:00")
    got = longest_cells(tmp_path)
    # THEN each setting has its own longest cell, counted as the source counts (papermill's cell left out)
    assert set(got) == {("06_gc_profiling.ipynb", False), ("06_gc_profiling.ipynb", True)}
    full = got[("06_gc_profiling.ipynb", False)]
    assert (full.seconds, full.cell, full.first, full.run) == (383.0, 3, "step_1()", str(later))
    assert got[("06_gc_profiling.ipynb", True)].seconds == 31.7
    assert longest_cells(tmp_path / "nowhere") == {}


def test_doctor_names_the_labs_whose_cells_outlast_the_culler(tmp_path):
    from labkit.labs import QUICK_BUDGET_S
    from labkit.workshop.culler import longest_cells

    _lab_run(tmp_path, "06_gc_profiling.ipynb", [1, 2, 383], started="2026-12-01T11:00:00+00:00")
    _lab_run(tmp_path, "07_tail_latency.ipynb", [1, 120], started="2026-12-01T11:00:00+00:00")
    cells = longest_cells(tmp_path)
    root = _v2(tmp_path / "tree", "max 100000\n")

    def culler(timeout):
        return _by_name(checks(root, env={"PERFLAB_CULL_TIMEOUT": str(timeout)}, measured=_probe(),
                               cells=cells))["culler"]

    # WHEN the culler's timeout is 5 minutes: lab 06's full-settings cell ran longer, lab 07's did not
    short = culler(300)
    assert short.status == "warn"
    assert "06_gc_profiling (full settings) cell 3, 383 s: step_1()" in short.detail
    assert "07_tail" not in short.detail and "--timeout=3600" in short.fix and "QUICK = True" in short.fix
    # WHEN it is an hour: every QUICK run fits its budget, and the longest measured cell is named
    hour = culler(3600)
    assert hour.status == "ok" and "383 s (06_gc_profiling cell 3)" in hour.detail
    # (the labs, not the index: it has no full settings to measure)
    assert f"{len(QUICK_BUDGET_S) - 1 - 2} lab(s) not measured here at full settings" in hour.detail
    # WHEN it is shorter than a QUICK budget and no QUICK run was measured: which labs cannot be vouched for
    tight = culler(75)
    assert tight.status == "warn" and "07_tail_latency (full settings) cell 2, 120 s" in tight.detail
    assert "QUICK budget of index, 00_method" not in tight.detail and "00_method, 01_latency" in tight.detail
    assert "labkit report" in tight.fix
