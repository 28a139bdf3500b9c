"""labkit.profile: the Stacks shape, py-spy and memray into it, the charts and frames, and every failure path."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import pytest

from labkit import profile
from labkit.errors import BadInputError, ProbeUnavailable
from labkit.profile import Stacks

RAW = """<module> (app.py:9);handle (app.py:3);encode (json/encoder.py:200) 6
<module> (app.py:9);handle (app.py:3);query (db.py:12) 3
<module> (app.py:9);handle (app.py:3) 1
<module> (app.py:9);handle (app.py:3);encode (json/encoder.py:200) 2
"""


def test_collapsed_stacks_parse_merge_and_round_trip(tmp_path):
    s = Stacks.from_collapsed(RAW)
    assert s.total == 12 and len(s) == 3                       # the repeated stack is merged
    assert Stacks.from_collapsed(s.to_collapsed()) == s
    assert Stacks.load(s.save(tmp_path / "s.json")) == s
    with pytest.raises(BadInputError, match="line 1"):
        Stacks.from_collapsed("a;b;c notanumber")
    assert Stacks.from_collapsed(" 3\n").stacks == ((("(no Python frame)",), 3),)


def test_top_separates_self_from_total_and_focus_cuts_above_a_frame():
    s = Stacks.from_collapsed(RAW)
    top = s.top(5, by="total").set_index("function")
    assert top.loc["handle", "total"] == 12 and top.loc["handle", "self"] == 1
    assert top.loc["encode", "self"] == 8 and round(top.loc["encode", "self %"]) == 67
    assert top.loc["encode", "package"] == "json"
    f = s.focus("handle")
    assert all(st[0].startswith("handle") for st, _ in f.stacks) and f.total == 12
    assert s.share("query") == 3 / 12 and s.without("query").total == 9


def test_icicle_layout_nests_children_inside_parents_and_drops_slivers():
    s = Stacks.from_collapsed(RAW + "<module> (app.py:9);tiny (app.py:1) 0\n")
    df = s.layout(min_share=0.2)
    root = df[df.depth == 0].iloc[0]
    assert (root.x0, root.x1, root.value) == (0.0, 1.0, 12)
    enc = df[df.function == "encode"].iloc[0]
    handle = df[df.function == "handle"].iloc[0]
    assert handle.x0 <= enc.x0 and enc.x1 <= handle.x1 and enc.depth == handle.depth + 1
    assert "query" in set(df.function) and "tiny" not in set(df.function)
    assert profile.icicle_chart(s).to_dict()["layer"][0]["mark"]["type"] == "bar"
    with pytest.raises(BadInputError, match="no stacks"):
        profile.icicle_chart(Stacks(()))


def test_frames_embed_pages_in_srcdoc_and_svgs_as_data_urls_sandboxed():
    import base64

    page = profile.Frame('<html><body><script>var a = "x" < 1;</script></body></html>', height=300)._repr_html_()
    assert page.startswith("<iframe") and "sandbox='allow-scripts'" in page and "srcdoc=" in page
    assert "&lt;script&gt;" in page and '"x"' not in page and "height:300px" in page
    svg = '<?xml version="1.0"?><svg><script>init()</script></svg>'
    framed = profile.Frame(svg)._repr_html_()
    src = framed.split("src='")[1].split("'")[0]
    assert src.startswith("data:image/svg+xml;base64,") and base64.b64decode(src.split(",")[1]).decode() == svg
    with pytest.raises(BadInputError, match="svg=True"):
        profile.flamegraph(profile.CpuProfile(Stacks(()), "x", 1, 100, 1.0, 1.0, 0))


def _fake_py_spy(tmp_path, stdout: str, stderr: str, code: int) -> str:
    exe = tmp_path / "py-spy"
    exe.write_text(f"#!{sys.executable}\nimport sys\nprint({stdout!r})\nprint({stderr!r}, file=sys.stderr)\n"
                   f"sys.exit({code})\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_no_ptrace_permission_says_what_to_do_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    import tempfile

    exe = _fake_py_spy(tmp_path, "", "Permission Denied: Try running again with elevated permissions", 1)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(ProbeUnavailable) as err:
        profile.attach(os.getpid(), duration_s=1, executable=exe)
    assert not list(scratch.iterdir())
    msg = str(err.value)
    assert "ptrace" in msg and "--cap-add SYS_PTRACE" in msg and "profile.call" in msg and "labkit doctor" in msg


def test_a_process_that_is_gone_and_bad_arguments_are_named(tmp_path):
    exe = _fake_py_spy(tmp_path, "", "Error: Failed to get process executable name. Check that the process is "
                       "running.", 1)
    with pytest.raises(ProbeUnavailable, match="no such process"):
        profile.attach(123456, duration_s=1, executable=exe)
    with pytest.raises(BadInputError, match="duration_s"):
        profile.attach(os.getpid(), duration_s=0)
    with pytest.raises(BadInputError, match="rate"):
        profile.attach(os.getpid(), rate=5000)
    with pytest.raises(BadInputError, match="pid"):
        profile.attach("1234")
    with pytest.raises(BadInputError, match="itself"):
        profile.call(sum([1, 2]))


def test_attach_shows_the_seconds_sampled_as_it_samples(tmp_path, capsys):
    # GIVEN a py-spy that samples until it is interrupted, then writes its stacks
    exe = tmp_path / "py-spy"
    exe.write_text(f"""#!{sys.executable}
import signal, sys, time
out = sys.argv[sys.argv.index("--output") + 1]
def done(*_):
    open(out, "w").write("main;work 3\\n")
    print("Samples: 3 Errors: 0", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, done)
print("Sampling process 100 times a second", flush=True)
time.sleep(60)
""")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    # WHEN a process is profiled for 1.5 s with a progress bar
    prof = profile.attach(os.getpid(), duration_s=1.5, executable=str(exe), progress=True)
    # THEN the bar named py-spy and its target, and moved while it sampled (1 of 2 s) before the profile came back
    err = capsys.readouterr().err
    assert f"py-spy pid {os.getpid()}" in err and "1/2" in err, err
    assert prof.stacks.total == 3 and prof.samples == 3


@pytest.mark.slow
def test_a_process_that_exits_mid_run_gives_what_was_sampled():
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\n"
                              "while time.time() - t < 1.2: sum(range(1000))"])
    try:
        time.sleep(0.3)
        t0 = time.perf_counter()
        prof = profile.attach(child.pid, duration_s=8)
        assert time.perf_counter() - t0 < 6                # it stopped with the process, not after 8 s
    finally:
        child.kill()
        child.wait()
    assert prof.stacks.total > 0 and any("exited" in n for n in prof.notes)
    assert any("<module>" in f for st, _ in prof.stacks.stacks for f in st)


def _spin(n: int) -> int:
    return sum(str(i).count("7") for i in range(n))


@pytest.mark.slow
def test_call_profiles_this_process_with_the_function_at_the_root_and_an_svg():
    prof = profile.call(_spin, 20_000, duration_s=0.6, svg=True)
    assert prof.calls and prof.calls > 0 and prof.stacks.total > 10
    assert all(st[0].startswith("_spin") for st, _ in prof.stacks.stacks)   # the kernel's frames are cut off
    assert prof.svg and "<svg" in prof.svg and "_spin" in prof.svg
    assert "iframe" in profile.flamegraph(prof)._repr_html_()


def _allocate(n: int) -> list:
    return [{"i": i, "tags": [i]} for i in range(n)] + [bytearray(1 << 20)]


def test_memory_reads_count_and_bytes_temporaries_and_the_peak():
    mem = profile.memory(_allocate, 5000)
    assert mem.allocations >= 5000 and mem.bytes_allocated >= 1 << 20 and mem.peak_bytes >= 1 << 20
    by_count, by_bytes = mem.top("count", 3), mem.top("bytes", 3)
    assert by_count.iloc[0]["allocations"] >= 5000                 # many small objects top the count…
    assert by_bytes.iloc[0]["bytes"] >= 1 << 20                    # …one big buffer tops the bytes
    assert all(st[0].startswith("_allocate") for st, _ in mem.by_count.stacks)
    assert mem.python_allocators and not mem.truncated and "allocations" in str(mem)


def _chatter(stop) -> None:
    while not stop.is_set():
        [{"noise": i} for i in range(200)]  # a background thread allocating all along


def test_memory_of_one_call_leaves_out_what_other_threads_allocate_meanwhile():
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=_chatter, args=(stop,), daemon=True)
    thread.start()
    try:
        mem = profile.memory(_allocate, 5000)
    finally:
        stop.set()
        thread.join()
    assert mem.allocations >= 5000
    every = [*mem.by_count.stacks, *mem.by_bytes.stacks, *mem.temporary.stacks, *mem.at_peak.stacks]
    assert every and not [st for st, _ in every if any("_chatter" in f for f in st)]


def test_memory_without_python_allocators_says_what_it_misses_and_records_are_bounded():
    mem = profile.memory(_allocate, 2000, python_allocators=False, max_records=1000)
    assert any("python_allocators=False" in n for n in mem.notes)
    with pytest.raises(BadInputError, match="max_records"):
        profile.memory(_allocate, 10, max_records=5)


def test_a_tracked_block_that_raises_keeps_its_profile_and_cleans_up(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ZeroDivisionError), profile.tracking() as t:
        _allocate(1000)
        1 / 0  # noqa: B018
    assert t.profile is not None and t.profile.allocations >= 1000
    assert not list(tmp_path.iterdir())                             # the capture is gone


@pytest.mark.slow
def test_memray_page_is_self_contained():
    mem = profile.memory(_allocate, 500, html=True)
    assert mem.html and "cdn.jsdelivr" not in mem.html and "d3" in mem.html
    assert "srcdoc" in profile.memray_html(mem)._repr_html_()


@pytest.mark.parametrize("file, package", [
    ("/tmp/ipykernel_4242/982293949.py", "this notebook"),   # py-spy: a notebook cell's full path
    ("982293949.py", "this notebook"),                       # memray: the cell's file name alone
    ("json/encoder.py", "json"),
    ("labkit/toyshop/export.py", "labkit.toyshop"),
    ("", "native"),
])
def test_frames_are_coloured_by_the_package_their_file_belongs_to(file, package):
    from labkit.profile.stacks import _package

    assert _package(file) == package


def test_a_py_spy_refused_its_rights_says_how_to_give_them(tmp_path, monkeypatch):
    # GIVEN a py-spy that answers as one without the right to attach does (macOS without root)

    from labkit.profile import attach

    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\necho 'Permission Denied: Try running again with elevated permissions' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PERFLAB_PY_SPY", str(fake))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # THEN the profile is refused with the fix, not a traceback from py-spy's output
        with pytest.raises(ProbeUnavailable, match="no permission to read that process"):
            attach(child.pid, duration_s=0.5)
    finally:
        child.kill()
        child.wait()
