"""labkit.latency: the probes measure what they say (physical sanity bands, not speed goals), degrade with a
labelled note when numba or O_DIRECT is missing, and leave no temporary files behind."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from labkit.cli.latency import main
from labkit.latency import PROBES, LatencyTable, Samples, disk, memory, network, table, work
from labkit.latency._harness import time_batches, time_each

KiB, MiB = 1024, 1024 * 1024


# --- harness: exact numbers with a fake clock --------------------------------------------------------------

def test_time_each_and_batches_divide_exactly(clock):
    # GIVEN an operation that advances the fake clock by 250 ns per call
    def op():
        clock.tick(250)

    # WHEN timed one by one and in batches THEN the per-call figure is exactly 250 ns
    assert time_each(op, 3, warmup=1, clock=clock) == (250.0, 250.0, 250.0)
    assert time_batches(op, batch=4, repeats=2, clock=clock) == (250.0, 250.0)


def test_samples_round_trip_and_unavailable_summary():
    s = Samples("k", "label", "cpu", (1.0, 2.0, 3.0), "how", None, {"x": 1})
    assert Samples.from_dict(s.to_dict()) == s and s.median_ns == 2.0 and s.available
    empty = Samples("k", "label", "cpu", (), "how", "why")
    assert not empty.available and np.isnan(empty.median_ns)


def test_the_chase_kernel_walks_one_cycle_through_every_line_on_unsigned_indices():
    k = memory._kernels()
    # unsigned only: a signed index makes numba check for a negative one between two dependent loads
    import numba

    (array_type, _steps, index_type), = k["chase"].signatures
    assert array_type.dtype == numba.uint64 and index_type == numba.uint64
    a = k["build"](64, 8, 3)
    seen, p = set(), 0
    for _ in range(64):
        seen.add(p)
        p = k["chase"](a, 1, p)
    assert p == 0 and seen == {8 * i for i in range(64)}  # back at the start after visiting every line once
    steps, at = memory.chase_steps(k["chase"], a, 1e5)
    assert 1_000 <= steps <= 5_000_000 and at % 8 == 0


# --- physical sanity bands (generous: they catch a probe measuring the wrong thing, not a slow machine) ----

def test_pointer_chase_shows_l1_below_interpreter_cost_and_dram_far_above():
    # GIVEN a tiny working set (inside L1) and one far larger than any last-level cache
    l1, dram = memory.pointer_chase([16 * KiB, 64 * MiB], repeats=5, sample_ns=3e5)
    # THEN the L1 row is a few ns — not the ~20+ ns a Python-level loop step would cost
    assert 0.2 < l1.median_ns < 10, l1
    # AND main memory is tens to hundreds of ns, far above L1
    assert 40 < dram.median_ns < 600, dram
    assert dram.median_ns > 8 * l1.median_ns


def test_cache_rows_pick_named_levels_from_the_curve():
    curve = tuple(Samples(f"chase_{s}", "x", "cpu", (float(i + 1),), "m", None, {"working_set_bytes": s})
                  for i, s in enumerate([16 * KiB, 256 * KiB, 2 * MiB, 256 * MiB]))
    rows = {r.key: r for r in memory.cache_rows(curve)}
    assert list(rows) == ["mem_l1", "mem_l2", "mem_llc", "mem_dram"]
    assert rows["mem_l1"].extra["working_set_bytes"] <= 32 * KiB
    assert rows["mem_dram"].extra["working_set_bytes"] == 256 * MiB


def test_branch_mispredict_is_nanoseconds():
    r = memory.branch_mispredict(n=1 << 17, repeats=5)
    assert r.available, r.note
    assert 0.5 < r.median_ns < 60, r


def test_uncached_read_is_slower_than_page_cache_and_leaves_nothing_behind(tmp_path):
    # GIVEN a small file in a folder we control
    rows = {r.key: r for r in disk.disk_reads(dir=tmp_path, file_bytes=8 * MiB, rounds=60)}
    # THEN the read past the page cache is slower than the read from it
    assert rows["disk_random_read_4k"].median_ns > rows["page_cache_read_4k"].median_ns
    extra = rows["disk_random_read_4k"].extra
    assert extra["mode"] in {"O_DIRECT", "fadvise"}
    if extra["mode"] == "O_DIRECT" and extra["resident_pages_after_4k_reads"] is not None:
        assert extra["resident_pages_after_4k_reads"] == 0  # verified: nothing was read through the page cache
    assert rows["disk_seq_read_1mb"].available
    # AND the temporary file is gone
    assert list(tmp_path.iterdir()) == []


def test_resident_pages_sees_a_freshly_read_file(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(os.urandom(64 * KiB))
    p.read_bytes()
    n = disk.resident_pages(p)
    if sys.platform != "linux":
        pytest.skip("mincore is read on Linux only")
    assert n == 64 * KiB // disk.PAGE  # just written and read: every page is in the cache
    (tmp_path / "empty").write_bytes(b"")
    assert disk.resident_pages(tmp_path / "empty") == 0


# --- degradation: labelled notes, never a crash, never a wrong number presented as right ---------------------

def test_without_numba_cache_rows_are_unavailable_with_a_note(monkeypatch):
    # GIVEN numba cannot be imported
    monkeypatch.setitem(sys.modules, "numba", None)
    # WHEN the compiled probes run
    curve = memory.pointer_chase([16 * KiB])
    branch = memory.branch_mispredict(n=1 << 12, repeats=2)
    bw = memory.seq_read_bandwidth(nbytes=4 * MiB, repeats=2)
    # THEN they report no number (an interpreted chase would measure the interpreter) and say why
    assert not curve[0].available and "numba" in curve[0].note
    assert not branch.available and "numba" in branch.note
    # AND bandwidth falls back to numpy, labelled as such
    assert bw.available and "numpy" in bw.note


def test_table_without_numba_keeps_going(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)
    t = table(quick=True, progress=False, include=["cache", "syscall"])
    assert [r.key for r in t.rows] == ["mem_l1", "mem_l2", "mem_llc", "mem_dram", "syscall"]
    assert not t.row("mem_l1").available and "numba" in t.row("mem_l1").note
    assert t.row("syscall").available


def test_without_o_direct_falls_back_to_fadvise_with_a_note(monkeypatch, tmp_path):
    monkeypatch.delattr(os, "O_DIRECT", raising=False)
    rows = {r.key: r for r in disk.disk_reads(dir=tmp_path, file_bytes=4 * MiB, rounds=40)}
    r = rows["disk_random_read_4k"]
    assert r.extra["mode"] == "fadvise"
    assert "O_DIRECT" in r.note
    assert list(tmp_path.iterdir()) == []


def test_without_o_direct_or_fadvise_uncached_rows_are_unavailable(monkeypatch, tmp_path):
    monkeypatch.delattr(os, "O_DIRECT", raising=False)
    monkeypatch.delattr(os, "posix_fadvise", raising=False)
    rows = {r.key: r for r in disk.disk_reads(dir=tmp_path, file_bytes=4 * MiB, rounds=20)}
    assert not rows["disk_random_read_4k"].available and "page cache" in rows["disk_random_read_4k"].note
    assert not rows["disk_seq_read_1mb"].available
    assert rows["page_cache_read_4k"].available


def test_http_row_degrades_when_toyshop_is_missing(monkeypatch):
    def broken():
        raise ImportError("No module named 'labkit.service'")

    monkeypatch.setattr(network, "_start_service", broken)
    r = network.http_health(rounds=5)
    assert not r.available and "toyshop" in r.note


@pytest.mark.slow
def test_the_server_rows_time_round_trips_to_a_private_server_or_say_why_not(monkeypatch):
    from labkit.latency import servers
    from labkit.toyshop import backends

    for probe, key in ((servers.postgres_point_query, "postgres_point_query"), (servers.redis_get, "redis_get")):
        if backends.unavailable(key.split("_")[0]):
            continue
        row = probe(repeats=3)
        assert row.key == key and row.available and len(row.samples_ns) == 3 and min(row.samples_ns) > 0
    monkeypatch.setattr(backends, "_binary", lambda *a: None)
    for row in (servers.postgres_point_query(), servers.redis_get()):
        assert not row.available and "pip install" in row.note and row.family == "io"


def test_a_failing_probe_becomes_a_labelled_row(monkeypatch):
    def boom(quick, d):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(PROBES, "fsync", (("write_fsync",), boom))
    t = table(quick=True, progress=False, include=["fsync"])
    assert not t.row("write_fsync").available and "disk on fire" in t.row("write_fsync").note


# --- cleanup even on KeyboardInterrupt --------------------------------------------------------------------

@pytest.mark.parametrize("probe", ["disk", "fsync", "sqlite"])
def test_interrupt_mid_probe_removes_temp_files(monkeypatch, tmp_path, probe):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(disk, "time_each", interrupted)
    monkeypatch.setattr(work, "time_lookups", interrupted)  # the SQLite probe's timing loop
    with pytest.raises(KeyboardInterrupt):
        if probe == "disk":
            disk.disk_reads(dir=tmp_path, file_bytes=2 * MiB, rounds=5)
        elif probe == "fsync":
            disk.write_fsync(dir=tmp_path, rounds=2)
        else:
            work.sqlite_point_query(dir=tmp_path, rows=100, repeats=1)
    assert list(tmp_path.iterdir()) == []


# --- the table value and the CLI ---------------------------------------------------------------------------

def test_table_round_trips_and_frames(tmp_path):
    t = table(quick=True, progress=False, include=["python", "lock", "json"])
    assert isinstance(t, LatencyTable) and t.quick
    back = LatencyTable.load(t.save(tmp_path / "t.json"))
    assert back.rows == t.rows
    df = t.to_frame()
    assert {"key", "label", "median_ns", "p10_ns", "p90_ns", "n", "note"} <= set(df.columns)
    assert set(df["key"]) == {"python_call", "python_attr", "python_dict", "python_alloc", "lock_uncontended",
                              "json_encode_1k", "orjson_encode_1k"}
    assert "Python: call an empty function" in str(t)


def test_unknown_probe_name_is_refused():
    from labkit.errors import BadInputError

    with pytest.raises(BadInputError, match="unknown probe"):
        table(include=["warp_drive"], progress=False)


def test_cli_json_is_pure_json_on_stdout_and_progress_goes_to_stderr(capsys, monkeypatch):
    # a busy machine adds a warning line: it must go to stderr too
    monkeypatch.setattr("labkit.latency.ladder._load", lambda: 99.0)
    assert main(["--quick", "--only", "syscall", "--only", "lock", "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)  # the whole of stdout, as `labkit latency --json | jq` reads it
    assert data["kind"] == "latency_table" and [r["key"] for r in data["rows"]] == ["syscall", "lock_uncontended"]
    assert len(data["rows"][0]["samples_ns"]) > 1
    assert "syscall" in err and "lock" in err and "warning: the machine was busy" in err  # progress, per probe
    assert main(["--quick", "--only", "syscall", "--json", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["rows"][0]["key"] == "syscall" and "syscall" not in err


@pytest.mark.slow
def test_tcp_loopback_round_trip_is_microseconds():
    r = network.tcp_loopback_rtt(rounds=200)
    assert 1_000 < r.median_ns < 5_000_000, r


def test_in_a_notebook_the_per_probe_lines_go_to_the_cells_output_not_stderr(capsys, monkeypatch):
    # JupyterLab draws stderr red, as if the cell had failed: a probe finishing (or a busy machine) is no error
    import labkit.progress

    monkeypatch.setattr(labkit.progress, "ipython", lambda: object())  # a kernel's shell
    monkeypatch.setattr("labkit.latency.ladder._load", lambda: 99.0)
    table(quick=True, progress=True, include=["syscall"])
    out, err = capsys.readouterr()
    assert "syscall " in out and "warning: the machine was busy" in out
    assert "syscall " not in err and "warning" not in err


def test_busy_machine_warning_says_what_to_do():
    from labkit.latency.ladder import busy_warning

    assert busy_warning(0.5, 1.2, 2) is None
    assert busy_warning(None, None, 2) is None
    w = busy_warning(1.0, 3.7, 2)
    assert "3.7 on 2 CPUs" in w and "rerun" in w
    t = LatencyTable(rows=(), warnings=(w,))
    assert LatencyTable.from_dict(t.to_dict()).warnings == (w,) and "warning:" in str(t)


def test_the_text_table_keeps_its_columns_under_a_label_longer_than_the_default_column():
    long = "page faults: first touch of 64 MiB of fresh anonymous memory, per page"
    rows = (Samples("a", "L1", "cpu", (1.0, 1.0)), Samples("b", long, "work", (2_000.0, 2_100.0)))
    head, short, longer = str(LatencyTable(rows=rows)).splitlines()[:3]
    end = head.index("median") + len("median")  # the median column is right-aligned under its header
    assert short[:end].endswith("1 ns") and longer[:end].endswith("2.05 µs")
    assert longer.startswith(long + " ")


def test_where_threads_cannot_be_pinned_the_rows_say_so_instead_of_claiming_a_core(monkeypatch):
    # GIVEN a platform without CPU affinity (macOS, Windows): os.sched_setaffinity is absent
    from labkit.latency import concurrency, osprobes
    from labkit.measure.machine import UNPINNED, can_pin

    monkeypatch.delattr(os, "sched_setaffinity")
    assert not can_pin()
    # THEN the same-core hand-off is not measured (it cannot be arranged) and the other row says it is unpinned
    same, other = osprobes.context_switch(quick=True, rounds=50)
    assert not same.available and UNPINNED in same.note
    assert other.available and UNPINNED in other.note and "unpinned" in other.label
    # AND a one-thread probe and a two-thread hand-off carry the note with their samples
    (chase,) = memory.pointer_chase([64 * 1024], quick=True, repeats=3, sample_ns=2e4)
    assert chase.available and chase.note == UNPINNED
    lock = concurrency.lock_contended(quick=True, rounds=50)
    assert lock.available and UNPINNED in (lock.note or "")
