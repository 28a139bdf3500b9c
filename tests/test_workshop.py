"""workshop/ and binder/: the hub config, the pinning spawner, the Helm values and the repo2docker files, as read
by the tools that read them (JupyterHub's config loader, repo2docker's file names); no Docker, no Kubernetes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("jupyterhub")
sys.path.insert(0, str(ROOT / "workshop"))
import pinned  # noqa: E402

HUB_PIN = re.compile(r"^\s*-\s+jupyterhub==(\d+\.\d+\.\d+)", re.M)


def _deps(text: str) -> list[str]:
    body = text.split("\ndependencies:", 1)[1]
    return [re.sub(r"\s+#.*", "", m.group(1)) for m in re.finditer(r"^\s*-\s+(\S.*)$", body, re.M)]


def test_allocate_gives_disjoint_blocks_and_says_when_the_node_is_full():
    taken: dict[str, tuple[int, ...]] = {}
    for user in ("ada", "bob", "cy"):
        taken[user] = pinned.allocate(taken, range(1, 8), 2, user)
    assert taken == {"ada": (1, 2), "bob": (3, 4), "cy": (5, 6)}
    assert pinned.allocate(taken, range(1, 8), 2, "bob") == (3, 4)  # a restart keeps its cores
    with pytest.raises(pinned.NoFreeCores, match="all 3 blocks of 2 core"):
        pinned.allocate(taken, range(1, 8), 2, "dan")
    del taken["bob"]
    assert pinned.allocate(taken, range(1, 8), 2, "dan") == (3, 4)


def test_the_spawner_pins_the_server_before_it_starts(tmp_path):
    # GIVEN a spawner for one user with core 0 (every machine has it)
    sp = pinned.PinnedSimpleSpawner(user=SimpleNamespace(name="ada", url="/user/ada/"), cores=[0],
                                    cores_per_learner=1, home_dir_template=str(tmp_path / "{username}"))
    try:
        assert sp.pin() == (0,) and sp.environment["PERFLAB_CORES"] == "0"
        # WHEN a child starts with its preexec function
        out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)), os.getcwd())"],
                             preexec_fn=sp.make_preexec_fn("ada"), capture_output=True, text=True, check=True)
        # THEN it runs on that core only, in the learner's home
        assert out.stdout.split() == ["[0]", str(tmp_path / "ada")]
        assert sp.get_state()["cores"] == [0]
    finally:
        sp.release()
    assert "ada" not in pinned._Pinned._taken


def _load_config(env: dict[str, str]):
    from traitlets.config.loader import PyFileConfigLoader

    old = dict(os.environ)
    os.environ.update(env)
    try:
        return PyFileConfigLoader("jupyterhub_config.py", path=str(ROOT / "workshop")).load_config()
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_the_hub_config_gives_exclusive_cores_no_quota_and_a_patient_culler():
    c = _load_config({"PERFLAB_HUB_CORES": "2-9", "PERFLAB_HUB_CORES_PER_LEARNER": "2",
                      "PERFLAB_CULL_TIMEOUT": "3600"})
    assert c.JupyterHub.spawner_class == "pinned.PinnedSpawner"
    assert c.Spawner.cores == list(range(2, 10)) and c.Spawner.cores_per_learner == 2
    assert c.Spawner.cpu_limit is None and c.Spawner.cpu_guarantee == 2.0 and c.Spawner.mem_limit == "2048M"
    assert c.Spawner.environment["PERFLAB_CULL_TIMEOUT"] == "3600"
    culler = c.JupyterHub.services[0]["command"]
    assert "jupyterhub_idle_culler" in culler and "--timeout=3600" in culler
    assert c.JupyterHub.ip == "127.0.0.1"
    assert c.PAMAuthenticator.allowed_groups == {"perflab"}, "with no allow list nobody can log in"
    c = _load_config({"PERFLAB_HUB_LEARNERS": "ada,bob", "PERFLAB_HUB_ADMINS": "org"})
    assert c.Authenticator.allowed_users == {"ada", "bob"} and c.Authenticator.admin_users == {"org"}


def test_helm_values_ask_for_guaranteed_exclusive_cores():
    text = (ROOT / "workshop" / "z2jh-values.yaml").read_text()
    cpu = re.search(r"cpu:\n\s+guarantee: (\S+).*\n\s+limit: (\S+)", text)
    mem = re.search(r"memory:\n\s+guarantee: (\S+).*\n\s+limit: (\S+)", text)
    assert cpu and cpu.group(1) == cpu.group(2) and cpu.group(1).isdigit(), "integer CPU request = limit"
    assert mem and mem.group(1) == mem.group(2), "Guaranteed QoS needs memory request = limit too"
    for needed in ("cpuManagerPolicy: static", "prePuller:", "timeout: 3600", "cpuCFSQuota: false"):
        assert needed in text  # the schema and the pod: tests/test_z2jh.py


def test_binder_is_what_repo2docker_reads_and_mirrors_environment_yml():
    binder = ROOT / "binder"
    for name in ("postBuild", "start"):
        assert os.access(binder / name, os.X_OK), f"binder/{name} must be executable for repo2docker"
        assert (binder / name).read_text().startswith("#!/usr/bin/env bash")
    assert 'exec "$@"' in (binder / "start").read_text()  # repo2docker's start must hand over to the server
    assert "pip install --no-deps -e ." in (binder / "postBuild").read_text()
    ours, theirs = (_deps((p / "environment.yml").read_text()) for p in (ROOT, binder))
    pin = HUB_PIN.search((binder / "environment.yml").read_text())
    assert pin, "binder/environment.yml must pin jupyterhub at the hub's version (jupyterhub==X.Y.Z)"
    assert "python=3.11" in theirs, "binder/environment.yml pins the Python the instructor notes' ranges hold for"
    assert [d for d in theirs if not d.startswith(("jupyterhub==", "python="))] == [
        d for d in ours if not d.startswith(("jupyterhub>", "python>"))], \
        "binder/environment.yml is environment.yml with jupyterhub and python pinned: copy the change over"
    assert f"jupyterhub=={pin.group(1)}" in (ROOT / "docs" / "workshop.md").read_text()


def test_a_full_node_refuses_the_next_server_and_a_failed_start_frees_its_cores(tmp_path, monkeypatch):
    import asyncio

    def spawner(name):
        return pinned.PinnedSimpleSpawner(user=SimpleNamespace(name=name, url=f"/user/{name}/"), cores=[0],
                                          cores_per_learner=1, home_dir_template=str(tmp_path / "{username}"))

    ada, bob = spawner("ada"), spawner("bob")
    try:
        ada.pin()
        with pytest.raises(pinned.NoFreeCores, match="1 learners at once is this node's capacity"):
            asyncio.run(bob.start())
        assert "bob" not in pinned._Pinned._taken
        ada.release()

        async def boom(self):
            raise RuntimeError("server binary missing")

        monkeypatch.setattr(pinned.SimpleLocalProcessSpawner, "start", boom)
        with pytest.raises(RuntimeError, match="binary missing"):
            asyncio.run(bob.start())
        assert "bob" not in pinned._Pinned._taken  # its core went back to the pool
    finally:
        ada.release()
        bob.release()


# -- SystemdSpawner: what can be checked without systemd ---------------------------------------------------------


def test_the_systemd_config_asks_systemd_for_disjoint_cpusets_memory_and_no_quota(tmp_path, monkeypatch):
    """No systemd runs here: what is checked is the config's choice, that the spawner imports, and the unit it
    hands to systemd-run (start_transient_service, replaced by a recorder) — not that systemd enforces it."""
    import asyncio

    pytest.importorskip("systemdspawner", reason="pip install jupyterhub-systemdspawner (the test extra has it)")
    import pinned_systemd
    from systemdspawner import systemd

    # GIVEN the config with PERFLAB_HUB_SPAWNER=systemd on cores 2-5, 2 cores and 2 GiB per learner
    c = _load_config({"PERFLAB_HUB_SPAWNER": "systemd", "PERFLAB_HUB_CORES": "2-5", "PERFLAB_HUB_MEM_GIB": "2"})
    assert c.JupyterHub.spawner_class == "pinned_systemd.PinnedSystemdSpawner"
    units: dict[str, dict] = {}
    running: set[str] = set()

    async def start_transient_service(unit_name, cmd, args, working_dir, properties=None, **kw):
        units[unit_name] = dict(properties or {})
        running.add(unit_name)

    async def service_running(unit_name):
        return unit_name in running

    async def service_failed(unit_name):
        return False

    async def stop_service(unit_name):
        running.discard(unit_name)

    for fn in (start_transient_service, service_running, service_failed, stop_service):
        monkeypatch.setattr(systemd, fn.__name__, fn)

    def spawner(name):
        return pinned_systemd.PinnedSystemdSpawner(
            user=SimpleNamespace(name=name, id=1, url=f"/user/{name}/", escaped_name=name), config=c,
            dynamic_users=True, hub=SimpleNamespace(api_url="http://127.0.0.1:8081/hub/api", public_host="",
                                                    base_url="/hub/"), api_token="t", oauth_client_id="c")

    ada, bob, cy = spawner("ada"), spawner("bob"), spawner("cy")
    try:
        # WHEN two learners start
        asyncio.run(ada.start())
        asyncio.run(bob.start())
        # THEN each unit has a cpuset of its own, its memory cap, and no CPU quota
        a, b = units["jupyter-ada-singleuser"], units["jupyter-bob-singleuser"]
        assert (a["AllowedCPUs"], b["AllowedCPUs"]) == ("2,3", "4,5")
        assert a["MemoryMax"] == b["MemoryMax"] == 2 * 2**30
        assert "CPUQuota" not in a and "CPUQuota" not in b
        # AND a third is refused (the node is full) until one stops, whose cores go back to the pool
        with pytest.raises(pinned.NoFreeCores):
            asyncio.run(cy.start())
        asyncio.run(ada.stop())
        asyncio.run(cy.start())
        assert units["jupyter-cy-singleuser"]["AllowedCPUs"] == "2,3"
        assert "cores" not in ada.get_state() and bob.get_state()["cores"] == [4, 5]
        # AND a hub restarted while bob's unit ran gives bob's cores to nobody else
        pinned._Pinned._taken.pop("bob")
        again = spawner("bob")
        again.load_state({"unit_name": "jupyter-bob-singleuser", "cores": [4, 5]})
        assert pinned._Pinned._taken["bob"] == (4, 5)
    finally:
        for sp in (ada, bob, cy):
            sp.release()


def test_the_profile_snippet_puts_the_venv_first_once(tmp_path):
    from labkit.workshop.sharing import profile_snippet, write_profile

    # GIVEN the snippet the organiser's init writes to /etc/profile.d (here: a file of the test's)
    snippet = write_profile(tmp_path / "venv" / "bin", tmp_path / "perflab.sh")
    assert snippet.read_text() == profile_snippet(tmp_path / "venv" / "bin")
    # WHEN a login shell sources it (twice: a nested shell)
    out = subprocess.run(["sh", "-c", f". {snippet}; . {snippet}; echo $PATH"], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"}, check=True)
    # THEN the venv leads PATH, once
    assert out.stdout.strip() == f"{tmp_path}/venv/bin:/usr/bin:/bin"


def test_make_setup_warns_when_other_users_cannot_run_the_venv(capsys):
    import shutil
    import tempfile

    from labkit.workshop.sharing import blocked_for_others, main

    tmp_path = Path(tempfile.mkdtemp(prefix="perflab-venv-", dir="/tmp"))  # pytest's own tmp is root's alone (700)
    try:
        _setup_warns(tmp_path, blocked_for_others, main, capsys)
    finally:
        shutil.rmtree(tmp_path)


def _setup_warns(tmp_path, blocked_for_others, main, capsys):
    # GIVEN a venv whose interpreter sits under a folder only its owner may enter (a pyenv under /root)
    private = tmp_path / "private"
    (private / "bin").mkdir(parents=True)
    (private / "bin" / "python3").write_text("")
    (private / "bin" / "python3").chmod(0o755)
    private.chmod(0o700)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = x\n")
    (venv / "bin" / "python").symlink_to(private / "bin" / "python3")
    tmp_path.chmod(0o755)
    # WHEN make setup's check runs THEN it warns, naming the folder and the fix, and does not fail the setup
    assert blocked_for_others(venv / "bin" / "python") == f"{private} (mode 700) cannot be entered by other users"
    assert main([str(venv)]) == 0
    err = capsys.readouterr().err
    assert "a hub's learners could not start their servers" in err and f"{private} (mode 700)" in err
    assert "PYTHON=/usr/bin/python3 make setup" in err
    # AND a venv everyone can enter passes quietly
    private.chmod(0o755)
    assert main([str(venv)]) == 0 and capsys.readouterr().err == ""


def test_a_full_node_tells_the_learner_the_seats_are_taken_and_whom_to_ask():
    from jupyterhub.utils import format_exception
    from tornado import web

    # GIVEN a node whose two seats are held
    taken = {"ada": (0,), "bob": (1,)}
    # WHEN a third learner asks for one
    with pytest.raises(pinned.NoFreeCores) as info:
        pinned.allocate(taken, [0, 1], 1, "cy", contact="Grace (room 2)")
    e = info.value
    # THEN JupyterHub gets an HTTP error with a message for the learner (its page shows it, not a 500) …
    assert isinstance(e, web.HTTPError) and e.status_code == 503
    assert format_exception(e, only_jupyterhub=True)[0] == (
        "All 2 seats on this node are taken: every learner gets cores of their own, and all of them are in use. "
        "Ask Grace (room 2) for a seat, or try again when someone stops their server.")
    # … and the organiser's log line names who holds them and what to change
    assert str(e).startswith("all 2 blocks of 1 core(s) on cores 0-1 are held by running servers (ada, bob)")


def test_a_pool_smaller_than_one_seat_is_not_called_full():
    with pytest.raises(pinned.NoFreeCores) as info:
        pinned.allocate({}, [1], 2, "ada")
    assert "no seat at all: the pool (cores 1-1, 1 core(s)) is smaller than one learner's 2" in str(info.value)
    assert info.value.jupyterhub_message.startswith("This hub has no seats set up yet")
    assert "held by running servers" not in str(info.value)
    assert pinned.capacity_line([1], 2).startswith("perflab: 2 core(s) per learner from cores 1-1: room for 0 "
                                                  "learner(s) at once — no learner can start a server")
    assert pinned.capacity_line(range(1, 9), 2).endswith("room for 4 learner(s) at once")
