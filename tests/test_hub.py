"""A real JupyterHub with workshop/'s config on 127.0.0.1: two learners on cores of their own measure at once,
their records land in their homes, `labkit doctor --hub` reports from inside, and the idle culler spares a
measurement that reports progress while it stops a silent server.

Needs jupyterhub and jupyterhub-idle-culler (the test extra) and configurable-http-proxy (npm; `.ci/run`
installs it). Everything listens on loopback; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hubkit import TOKEN, free_port, http, stop_hub, wait_for_hub

ROOT = Path(__file__).resolve().parents[1]
CULL_S = 20  # the culler's timeout here: short, so the test can watch it cull
pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]


def _missing() -> str | None:
    try:
        import jupyterhub  # noqa: F401
        import jupyterhub_idle_culler  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed: pip install -e '.[test]'"
    if not shutil.which("configurable-http-proxy"):
        return "configurable-http-proxy is not on PATH: npm install -g configurable-http-proxy (.ci/run does)"
    if len(os.sched_getaffinity(0)) < 2:
        return "two learners on different cores need two cores"
    return None


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("hub")
    port, api_port, hub_port = free_port(), free_port(), free_port()
    cores = sorted(os.sched_getaffinity(0))[:2]
    (tmp / "test_config.py").write_text(f"""
c = get_config()
load_subconfig({str(ROOT / "workshop" / "jupyterhub_config.py")!r})
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.JupyterHub.db_url = "sqlite:///{tmp}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.Spawner.home_dir_template = "{tmp}/home/{{username}}"
c.JupyterHub.services.append({{"name": "perflab-test", "api_token": {TOKEN!r}}})
c.JupyterHub.load_roles.append({{"name": "perflab-test", "services": ["perflab-test"],
    "scopes": ["admin:users", "admin:servers", "access:servers", "read:users:activity"]}})
""")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PERFLAB_HUB_SPAWNER": "simple", "PERFLAB_HUB_CORES": ",".join(map(str, cores)),
           "PERFLAB_HUB_CORES_PER_LEARNER": "1", "PERFLAB_CULL_TIMEOUT": str(CULL_S),
           "PERFLAB_HUB_ACTIVITY_INTERVAL": "2", "PERFLAB_HUB_PORT": str(port)}
    env.pop("PERFLAB_RESULTS", None)
    log = open(tmp / "hub.log", "w")  # noqa: SIM115 - closed below, after the hub stopped
    proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(tmp / "test_config.py")], cwd=tmp,
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_hub(proc, base, tmp / "hub.log")
        yield {"base": base, "tmp": tmp, "cores": cores, "log": tmp / "hub.log"}
    finally:
        stop_hub(proc)
        log.close()


async def _server(base: str, user: str, timeout: float = 45) -> None:
    """Start a learner's server through the hub's REST API and wait until the hub says it is ready."""
    await http("POST", f"{base}/hub/api/users/{user}/server")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        model = await http("GET", f"{base}/hub/api/users/{user}")
        if model.get("servers", {}).get("", {}).get("ready"):
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"{user}'s server was not ready within {timeout:g} s")


class Kernel:
    """A kernel in a learner's server, driven over its websocket (the JSON protocol), through the proxy."""

    def __init__(self, base: str, user: str) -> None:
        self.base, self.user = base, user

    async def open(self) -> Kernel:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        k = await http("POST", f"{self.base}/user/{self.user}/api/kernels", {"name": "python3"})
        url = f"{self.base.replace('http', 'ws')}/user/{self.user}/api/kernels/{k['id']}/channels"
        self.ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {TOKEN}"}))
        self.session = uuid.uuid4().hex
        return self

    def send(self, code: str) -> str:
        msg_id = uuid.uuid4().hex
        self.ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": self.session, "msg_type": "execute_request",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        return msg_id

    async def result(self, msg_id: str, timeout: float) -> tuple[str, list[str]]:
        """The cell's printed text and its errors, once the kernel is idle again."""
        text, errors, comms = [], [], 0
        deadline = time.monotonic() + timeout
        while True:
            raw = await asyncio.wait_for(self.ws.read_message(), max(deadline - time.monotonic(), 0.1))
            assert raw is not None, f"{self.user}'s kernel connection closed"
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                text.append(content["text"])
            elif kind == "error":
                errors.append(f"{content['ename']}: {content['evalue']}")
            elif kind in ("comm_open", "comm_msg"):
                comms += 1
            elif kind == "status" and content["execution_state"] == "idle":
                self.comms = comms
                return "".join(text), errors

    async def run(self, code: str, timeout: float = 60) -> tuple[str, list[str]]:
        return await self.result(self.send(code), timeout)


MEASURE = """
import os, sys
import labkit
from labkit.learner.record import Experiment
print("affinity", sorted(os.sched_getaffinity(0)), flush=True)
exp = Experiment.plan("sort in place", "list.sort on a copy skips building a second list, so ~0.9 of sorted()",
                      predicted_ratio=0.9)
exp.save()
data = list(range(3000, 0, -1))
cmp = labkit.compare(lambda: sorted(data), lambda: data.copy().sort(), rounds=20, max_time=3, progress=False)
print("saved", exp.conclude(cmp).save(), flush=True)
"""
DOCTOR = "get_ipython().system(f'{sys.executable} -m labkit doctor --hub')\nprint('doctor exit', _exit_code)"
PROGRESS = """
import time
cmp = labkit.compare(lambda: time.sleep(0.02), lambda: time.sleep(0.02), rounds=600, max_rounds=600,
                     max_time=120, progress=True)
print("progress run done:", cmp.verdict, flush=True)
"""


def test_two_learners_on_their_own_cores_measure_at_once_and_the_culler_spares_progress(hub):
    base, tmp = hub["base"], hub["tmp"]

    async def main() -> None:
        # GIVEN two learners whose servers the hub starts through its REST API
        await http("POST", f"{base}/hub/api/users", {"usernames": ["ada", "bob"]})
        await asyncio.gather(_server(base, "ada"), _server(base, "bob"))
        ada, bob = await asyncio.gather(Kernel(base, "ada").open(), Kernel(base, "bob").open())
        # AND a third learner on the now full node is told so (the spawner's message, not a 500)
        from tornado.httpclient import HTTPClientError

        await http("POST", f"{base}/hub/api/users", {"usernames": ["cy"]})
        with pytest.raises(HTTPClientError) as full:
            await http("POST", f"{base}/hub/api/users/cy/server")
        assert full.value.code == 503, full.value
        said = json.loads(full.value.response.body)["message"]
        assert said.startswith("All 2 seats on this node are taken") and "Ask the workshop's organiser" in said
        log = hub["log"].read_text()
        assert "perflab: 1 core(s) per learner from cores" in log and "room for 2 learner(s) at once" in log
        assert "Traceback" not in log, log[-3000:]

        # WHEN both measure at the same time
        (a_out, a_err), (b_out, b_err) = await asyncio.gather(ada.run(MEASURE), bob.run(MEASURE))
        # THEN each ran on a core of its own, with no error, and saved its record in its own home
        assert not a_err and not b_err, (a_err, b_err)
        a_cores = json.loads(a_out.split("affinity ", 1)[1].splitlines()[0])
        b_cores = json.loads(b_out.split("affinity ", 1)[1].splitlines()[0])
        assert len(a_cores) == len(b_cores) == 1 and set(a_cores).isdisjoint(b_cores)
        assert set(a_cores) | set(b_cores) == set(hub["cores"])
        for user in ("ada", "bob"):
            records = list((tmp / "home" / user / "perflab" / "results").glob("*.json"))  # PERFLAB_HOME
            assert len(records) == 1, f"{user}: {records}"
        from labkit.workshop import room

        collected = room.collect(tmp / "home")
        assert sorted(e.learner for e in collected.entries) == ["ada", "bob"] and not collected.skipped

        # AND doctor --hub, inside each, reads the hub's set-up
        (a_doc, a_err), (b_doc, b_err) = await asyncio.gather(ada.run(DOCTOR, 90), bob.run(DOCTOR, 90))
        assert not a_err and not b_err
        for out, cores in ((a_doc, a_cores), (b_doc, b_cores)):
            print(out)  # shown with pytest -s: what doctor says inside a learner's server
            assert "[ok  ] cpu quota: no CFS quota" in out
            assert f"[WARN] pinned cores: pinned to cores {cores[0]} (1 of the node's" in out
            assert "[ok  ] CPU_LIMIT: not set" in out and "[ok  ] CPU_GUARANTEE: 1 core(s)" in out
            assert "[WARN] MEM_LIMIT: 2.0 GiB per learner, stated but not enforced" in out  # no memory cap here
            assert f"[WARN] culler: idle servers are culled after {CULL_S} s" in out
            assert "Traceback" not in out and "the check itself failed" not in out
            assert out.strip().splitlines()[-1] in ("doctor exit 0", "doctor exit 1")

        # WHEN ada runs a measurement that reports progress and bob a silent sleep, both past the culler's timeout
        progress = ada.send(PROGRESS)
        bob.send(f"import time\ntime.sleep({3 * CULL_S})\nprint('woke')")
        bob.ws.close()  # nothing of bob's passes the proxy from now on
        t0 = time.monotonic()
        culled_after = None
        while culled_after is None and time.monotonic() - t0 < 3 * CULL_S:
            await asyncio.sleep(1)
            model = await http("GET", f"{base}/hub/api/users/bob")
            if not model.get("servers"):
                culled_after = time.monotonic() - t0
        # THEN the culler stops bob's silent server after its timeout …
        assert culled_after is not None, "the culler did not stop the silent server"
        assert culled_after >= CULL_S - 5, f"culled after {culled_after:.0f} s, before its {CULL_S} s timeout"
        out, err = await ada.result(progress, 90)
        # … and spares ada's, whose measurement kept reporting progress for longer than the timeout
        assert not err and "progress run done" in out, (out, err)
        assert time.monotonic() - t0 > CULL_S + 2, "the progress run must outlast the culler's timeout"
        assert ada.comms > 0, "the progress bar sent no updates"
        model = await http("GET", f"{base}/hub/api/users/ada")
        assert model["servers"][""]["ready"], "the culler stopped a server that was reporting progress"

    try:
        asyncio.run(main())
    except BaseException:
        print(hub["log"].read_text()[-4000:])
        raise
