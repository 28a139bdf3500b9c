"""The launcher: real processes on loopback ports, health, Server-Timing over HTTP, and no orphans ever."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from labkit.errors import BadInputError, ServiceError
from labkit.service import start
from labkit.toyshop.catalog import CatalogClient
from labkit.trace import parse_server_timing

pytestmark = pytest.mark.slow


def _gone(pid: int) -> bool:
    """True if ``pid`` has exited (a zombie waiting for a reaper counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _get(url: str, path: str) -> http.client.HTTPResponse:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    resp.body = resp.read()
    conn.close()
    return resp


@pytest.fixture(scope="module")
def svc():
    with start(size="small", catalog_delay_ms=0.5) as s:
        yield s


def test_start_gives_healthy_loopback_processes(svc):
    assert svc.url.startswith("http://127.0.0.1:") and svc.catalog_url.startswith("http://127.0.0.1:")
    assert svc.alive and svc.pid != svc.catalog_pid
    assert json.loads(_get(svc.url, "/health").body)["status"] == "ok"
    assert svc.rss_bytes()["app"] > 0
    assert "running" in repr(svc)


def test_export_over_http_carries_server_timing(svc):
    resp = _get(svc.url, "/customers/2/export?n1=naive")
    assert resp.status == 200
    timing = parse_server_timing(resp.getheader("Server-Timing"))
    assert (timing["db"].count, timing["catalog"].count) == (2 + 1 + 4, 4)
    assert timing["catalog"].dur_ms >= 4 * 0.5  # each call paid the emulated 0.5 ms delay


def test_catalog_client_keeps_one_connection_and_notifies_observers(svc):
    seen = []
    with CatalogClient(svc.catalog_url, observers=[lambda m, u, d: seen.append((m, u, d))]) as cat:
        assert cat.get(3)["id"] == 3
        assert cat.get(10**9) is None
        assert sorted(cat.get_many(range(1, 121))) == list(range(1, 121))
        assert len(cat._conns) == 1
    assert len(seen) == 2 + 3 and all(u.startswith(svc.catalog_url) for _, u, d in seen)
    assert all(d >= 0.5e6 for _, _, d in seen)  # every call paid the emulated 0.5 ms (sub-ms sleeps are real)


def test_catalog_client_adds_its_own_emulated_delay_to_every_call(svc):
    seen = []
    with CatalogClient(svc.catalog_url, delay_ms=2, observers=[lambda m, u, d: seen.append(d)]) as cat:
        assert cat.get(3)["id"] == 3 and len(cat.get_many(range(1, 61))) == 60
    assert len(seen) == 1 + 2 and all(d >= 2.5e6 for d in seen)  # the client's 2 ms + the catalog's 0.5 ms
    with pytest.raises(BadInputError, match="delay_ms"):
        CatalogClient(svc.catalog_url, delay_ms=-1)


def test_catalog_client_refuses_non_loopback():
    with pytest.raises(BadInputError, match="loopback"):
        CatalogClient("http://example.com:80")


def test_stop_ends_both_processes():
    s = start(size="small")
    pids = (s.pid, s.catalog_pid)
    s.stop()
    s.stop()  # idempotent
    assert all(_gone(p) for p in pids) and not s.alive


def test_start_failure_raises_with_the_log_tail(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database" * 100)
    with pytest.raises(ServiceError, match="exited with code") as info:
        start(db_path=bad, timeout=20)
    assert "database" in str(info.value)


def test_a_taken_port_is_a_clear_error(svc):
    port = int(svc.url.rsplit(":", 1)[1])
    with pytest.raises(ServiceError, match=f"127.0.0.1:{port}"):
        start(port=port)


def test_children_die_when_the_parent_is_killed(tmp_path):
    # GIVEN a process that started toyshop WHEN it is killed with SIGKILL THEN the service and catalog exit
    script = textwrap.dedent("""
        import json, sys, time
        from labkit.service import start
        svc = start(size="small")
        print(json.dumps([svc.pid, svc.catalog_pid]), flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(parent.stdout.readline())
        assert not any(_gone(p) for p in pids)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(p) for p in pids), f"orphans left: {pids}"
    finally:
        parent.kill()


def test_concurrent_catalog_client_uses_a_connection_per_thread(svc):
    with CatalogClient(svc.catalog_url, concurrency=4) as cat:
        got = cat.get_many(range(1, 201))
        assert sorted(got) == list(range(1, 201))
        assert 2 <= len(cat._conns) <= 4  # one keep-alive connection per pool thread that ran a chunk


@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigint-default", "sigint-ignored"])
def test_labkit_serve_runs_until_interrupted(inherited):
    # the child's SIGINT disposition is set here, not inherited from however the suite was started: a shell's
    # `make test &` ignores SIGINT, and Ctrl-C must stop `labkit serve` started from such a shell all the same
    proc = subprocess.Popen([sys.executable, "-m", "labkit", "serve", "--port", "0", "--variant", "n1=join"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, inherited))
    try:
        line = proc.stdout.readline()
        assert "toyshop is up" in line, proc.stderr.read() if proc.poll() is not None else line
        url = line.split(": ", 1)[1].split(" ")[0]
        assert json.loads(_get(url, "/health").body)["variants"]["n1"] == "join"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
    finally:
        proc.kill()


def test_catalog_client_reconnects_when_the_server_dropped_the_connection(svc):
    import socket

    with CatalogClient(svc.catalog_url) as cat:
        assert cat.get(1)["id"] == 1
        cat._local.conn.sock.shutdown(socket.SHUT_RDWR)  # as if the server had closed an idle keep-alive
        assert cat.get(2)["id"] == 2


def test_in_process_export_against_the_live_catalog(svc):
    from labkit.toyshop.db import connect
    from labkit.toyshop.export import export_batched, export_naive

    conn = connect(svc.db_path)
    with svc.catalog_client() as cat:
        assert export_naive(conn, cat, 3) == export_batched(conn, cat, 3)


@pytest.mark.parametrize("ending", ["exit", "forget"])
def test_children_stop_at_exit_and_when_the_service_is_forgotten(ending):
    # "exit": the parent returns without calling stop(); "forget": the last reference to the Service goes
    script = textwrap.dedent(f"""
        import gc, json, time
        from labkit.service import start
        svc = start(size="small")
        print(json.dumps([svc.pid, svc.catalog_pid]), flush=True)
        if {ending!r} == "forget":
            del svc
            gc.collect()
            print("forgotten", flush=True)
            time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(parent.stdout.readline())
        if ending == "forget":
            assert parent.stdout.readline().strip() == "forgotten"
        else:
            assert parent.wait(20) == 0
        deadline = time.monotonic() + 10
        while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(p) for p in pids)
    finally:
        parent.kill()
