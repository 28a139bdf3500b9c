from labkit.measure.machine import fingerprint


def test_fingerprint_describes_machine_and_load():
    fp = fingerprint()
    for key in ("cpu_model", "cores_logical", "cores_usable", "caches", "memory_total_bytes", "os", "python",
                "packages", "git_commit", "load_average", "memory_available_bytes", "cpu_governor"):
        assert key in fp
    assert fp["cores_logical"] >= 1 and fp["memory_total_bytes"] > 0
    assert "numpy" in fp["packages"] and fp["python"].startswith("3.")


def test_cpu_watch_counts_this_process_and_the_rest_of_the_machine():
    import time

    from labkit.measure.machine import CpuWatch

    # GIVEN a watch, WHEN this process spins for a while
    watch = CpuWatch()
    t0 = time.process_time()
    while time.process_time() - t0 < 0.2:
        sum(range(1000))
    use = watch.stop()
    # THEN at least that CPU time is counted as ours, and nothing is negative
    assert use["ours_cores"] * use["wall_s"] >= 0.15
    assert use["others_cores"] >= 0 and use["steal_cores"] >= 0 and use["cores"] >= 1
    if "cpu_pressure" in use:
        assert 0 <= use["cpu_pressure"] <= 1


def test_a_neighbour_of_programs_spins_one_per_usable_core_while_the_block_runs_and_is_gone_after():
    import time

    import psutil
    import pytest

    from labkit.errors import BadInputError
    from labkit.measure.machine import Neighbour, usable_cpus

    me = psutil.Process()
    before = {p.pid for p in me.children()}
    with Neighbour("processes"):
        spinning = [p for p in me.children() if p.pid not in before]
        assert len(spinning) == len(usable_cpus())
        t0 = [p.cpu_times().user for p in spinning]
        time.sleep(0.3)
        assert all(p.cpu_times().user > u for p, u in zip(spinning, t0, strict=True))  # spinning, not waiting
    assert {p.pid for p in me.children()} <= before
    with Neighbour("thread") as n:
        assert n._thread is not None and n._thread.is_alive()
    assert n._thread is None
    with Neighbour("none"):
        assert {p.pid for p in me.children()} <= before
    with pytest.raises(BadInputError, match="must be one of 'none', 'thread', 'processes'"):
        Neighbour("noisy")
