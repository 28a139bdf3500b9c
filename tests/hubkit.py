"""What the two hub tests share: a free port, the hub's REST API with the test service's token, waiting for a
hub to answer and stopping it with everything it started (tests/test_hub.py, tests/test_hub_room.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

#: the API token of the "perflab-test" service each test's hub config declares
TOKEN = secrets.token_hex(16)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def http(method: str, url: str, body: object = None) -> dict:
    """One request to the hub (or a server through its proxy) as the test service; the JSON answer."""
    from tornado.httpclient import AsyncHTTPClient, HTTPRequest

    req = HTTPRequest(url, method=method, headers={"Authorization": f"token {TOKEN}"}, request_timeout=30,
                      body=None if body is None and method == "GET" else json.dumps(body or {}),
                      allow_nonstandard_methods=True)
    resp = await AsyncHTTPClient().fetch(req, raise_error=True)
    return json.loads(resp.body) if resp.body else {}


def wait_for_hub(proc: subprocess.Popen, base: str, log: Path, timeout: float = 30) -> None:
    """Return once the hub's API answers through the proxy; fail with its log if it exits or takes too long."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):  # refused, or the proxy's 404 until the hub's route is added
            asyncio.run(http("GET", f"{base}/hub/api/"))
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the hub did not start: {log.read_text()[-3000:]}")
        time.sleep(0.3)


def stop_hub(proc: subprocess.Popen) -> None:
    """Stop the hub (it stops the proxy and the servers it spawned), then anything it left behind, by pid."""
    import psutil

    kids = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for k in kids:
        with contextlib.suppress(psutil.Error):
            k.kill()
