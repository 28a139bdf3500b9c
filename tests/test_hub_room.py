"""The organiser's walk, as the room meets it: real system users, PAM, the recommended spawner, a real browser.

``labkit workshop init`` and ``add-learners`` run on this machine (root: they make system users with passwords
and homes, and hand out the labs); JupyterHub starts with the organiser's config and its PAM login and the
pinned spawner (``workshop/pinned.py``: each server on cores of its own, run as its learner). Two learners log
in through headless Chromium with the passwords from the credentials sheet, land in their labs, and their
servers are pinned to disjoint cores; a third learner, on the full node, is shown the seats message (not a
500). In each learner's JupyterLab terminal (the Jupyter server's terminals API, a login shell as the
learner), ``labkit doctor --hub`` runs from the PATH the organiser set up, and lab 02 runs QUICK on the
shared, read-only dataset; then ``labkit room collect`` reads both learners' records from their homes.

What this machine needs, and the one change the test makes to it: root, useradd, Debian's Chromium,
configurable-http-proxy (``.ci/run`` installs both). Where this venv's interpreter lies under a home other users
cannot enter (a pyenv under ``/root``, mode 700 — ``make setup`` warns about it and names the organiser's fix,
a venv built from ``/usr/bin/python3``), the test opens that one folder for search (``o+x``) while it runs and
restores its mode after. It writes ``/etc/profile.d/perflab.sh`` (init's PATH snippet) and removes it after
unless it was there before. The users it makes (``plr…``) are removed with their homes at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hubkit import TOKEN, free_port, http, stop_hub, wait_for_hub

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "making system users needs root"
    for tool in ("useradd", "userdel", "chpasswd"):
        if not shutil.which(tool):
            return f"{tool} is missing"
    try:
        import jupyterhub  # noqa: F401
        import pamela  # noqa: F401
        import playwright  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed: pip install -e '.[test]'"
    if not shutil.which("configurable-http-proxy"):
        return "configurable-http-proxy is not on PATH: npm install -g configurable-http-proxy (.ci/run does)"
    if not Path(CHROMIUM).exists():
        return "Debian's chromium is not installed (apt-get install chromium; .ci/run does)"
    if len(os.sched_getaffinity(0)) < 2:
        return "two learners on cores of their own need two cores"
    return None


@contextlib.contextmanager
def _reachable_interpreter():
    """Open for search (o+x) the one folder that keeps other users from this venv's interpreter, if any."""
    from labkit.workshop.sharing import blocked_for_others

    opened: list[tuple[Path, int]] = []
    try:
        for _ in range(5):
            why = blocked_for_others(Path(sys.executable))
            m = re.match(r"(/\S*) \(mode \d+\) cannot be entered", why or "")
            if not m:
                break
            folder = Path(m.group(1))
            mode = stat.S_IMODE(folder.stat().st_mode)
            opened.append((folder, mode))
            folder.chmod(mode | stat.S_IXOTH)
        assert blocked_for_others(Path(sys.executable)) is None, blocked_for_others(Path(sys.executable))
        yield
    finally:
        for folder, mode in reversed(opened):
            folder.chmod(mode)


@contextlib.contextmanager
def _profile_snippet():
    from labkit.workshop.sharing import PROFILE

    before = PROFILE.read_bytes() if PROFILE.exists() else None
    try:
        yield PROFILE
    finally:
        if before is None:
            PROFILE.unlink(missing_ok=True)
        else:
            PROFILE.write_bytes(before)


def _remove_user(name: str) -> None:
    subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
    time.sleep(0.2)
    subprocess.run(["userdel", "--remove", "--force", name], capture_output=True)


class Terminal:
    """A learner's JupyterLab terminal, driven over the Jupyter server's terminals websocket through the proxy."""

    def __init__(self, base: str, user: str) -> None:
        self.base, self.user, self.out = base, user, ""

    async def open(self) -> Terminal:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        t = await http("POST", f"{self.base}/user/{self.user}/api/terminals")
        url = f"{self.base.replace('http', 'ws')}/user/{self.user}/terminals/websocket/{t['name']}"
        self.ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {TOKEN}"}))
        return self

    async def run(self, command: str, timeout: float) -> tuple[int, str]:
        """Type ``command`` and return its exit status and what the terminal showed meanwhile."""
        mark = secrets.token_hex(4)
        start = len(self.out)
        # the marker is split in the typed line, so only the shell's own output can match it
        self.ws.write_message(json.dumps(["stdin", f"{command}; echo {mark}\"\"END$?\r"]))
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(rf"{mark}END(\d+)", self.out[start:])
            if m:
                return int(m.group(1)), self.out[start:]
            left = deadline - time.monotonic()
            assert left > 0, f"{self.user}'s terminal: {command!r} did not finish in {timeout:g} s:\n{self.out[-3000:]}"
            raw = await asyncio.wait_for(self.ws.read_message(), left)
            assert raw is not None, f"{self.user}'s terminal closed:\n{self.out[-3000:]}"
            kind, *rest = json.loads(raw)
            if kind == "stdout":
                self.out += rest[0]


#: each step of the organiser's walk and how long it took here, in order (printed at the end of the test: run
#: it with ``pytest -s`` to see them; docs/workshop.md quotes them)
STEPS: dict[str, float] = {}


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    t0 = time.monotonic()
    try:
        yield
    finally:
        STEPS[name] = time.monotonic() - t0


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    from labkit.workshop import organiser

    tmp = tmp_path_factory.mktemp("room")
    workshop = tmp / "workshop"
    shutil.copytree(ROOT / "workshop", workshop, ignore=shutil.ignore_patterns("organiser_config.py",
                                                                               "learners.txt", "__pycache__"))
    tag = "".join(secrets.choice(string.ascii_lowercase) for _ in range(4))
    names = [f"plr{tag}{i}" for i in (1, 2, 3)]
    cores = sorted(os.sched_getaffinity(0))[:2]
    with contextlib.ExitStack() as stack:
        stack.enter_context(_reachable_interpreter())
        profile = stack.enter_context(_profile_snippet())
        for n in names:
            stack.callback(_remove_user, n)
        # the organiser's two commands, as `labkit workshop init` and `add-learners` run them
        with _step("labkit workshop init"):
            config, cap = organiser.init(workshop, admin=names[0], per_learner=1, cores=cores,
                                         contact="the test's organiser", profile=profile)
        with _step("labkit workshop add-learners (3 learners)"):
            sheet = {n: pw for n, pw, _done in organiser.add_learners(names, workshop, ROOT / "notebooks")}
        assert all(sheet.values()), sheet
        port, api_port, hub_port = free_port(), free_port(), free_port()
        (tmp / "test_config.py").write_text(f"""
c = get_config()
load_subconfig({str(config)!r})
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.JupyterHub.db_url = "sqlite:///{tmp}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.services.append({{"name": "perflab-test", "api_token": {TOKEN!r}}})
c.JupyterHub.load_roles.append({{"name": "perflab-test", "services": ["perflab-test"],
    "scopes": ["admin:users", "admin:servers", "access:servers"]}})
""")
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               "PERFLAB_HUB_PORT": str(port)}
        for k in ("PERFLAB_RESULTS", "PERFLAB_HOME", "PERFLAB_HUB_SPAWNER", "PERFLAB_HUB_CORES",
                  "PERFLAB_HUB_CORES_PER_LEARNER"):
            env.pop(k, None)
        log = stack.enter_context(open(tmp / "hub.log", "w"))
        proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(tmp / "test_config.py")], cwd=tmp,
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        stack.callback(stop_hub, proc)
        base = f"http://127.0.0.1:{port}"
        with _step("jupyterhub starts (to its API answering)"):
            wait_for_hub(proc, base, tmp / "hub.log")
        yield {"base": base, "names": names, "sheet": sheet, "cores": cores, "log": tmp / "hub.log",
               "capacity": cap, "tmp": tmp}


def _log_in(browser, base: str, name: str, password: str):
    """A learner's own path: the hub's login page, the sheet's password, the button."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/hub/login", wait_until="domcontentloaded")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    return context, page


def _server_pid(name: str) -> int:
    out = subprocess.run(["pgrep", "-u", name, "-f", "jupyterhub-singleuser"], capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]
    assert pids, f"no jupyterhub-singleuser runs as {name}"
    return min(pids)


def test_learners_log_in_get_their_own_cores_run_a_lab_and_the_full_node_says_so(room):
    from playwright.sync_api import sync_playwright

    base, (ada, bob, cyd), sheet = room["base"], room["names"], room["sheet"]
    log = room["log"].read_text()
    assert "room for 2 learner(s) at once" in log, log[-2000:]               # the capacity, stated at start

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            # a wrong password is told apart from a server problem
            with _step("a wrong password is refused"):
                context, page = _log_in(browser, base, ada, "not-" + sheet[ada])
                page.wait_for_selector("text=Invalid username or password", timeout=20_000)
                context.close()
            # the two learners with the sheet's passwords land in their labs (the spawn page, then JupyterLab)
            for i, name in enumerate((ada, bob), 1):
                with _step(f"learner {i} logs in and lands in JupyterLab (their server spawned)"):
                    context, page = _log_in(browser, base, name, sheet[name])
                    page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=90_000)
                    page.wait_for_selector(".jp-LabShell", timeout=60_000)
                    context.close()
            # the third finds the node full: the spawner's message, not "500 : Unhandled error"
            with _step("learner 3 logs in and is told the seats are taken"):
                context, page = _log_in(browser, base, cyd, sheet[cyd])
                page.wait_for_selector("text=seats on this node are taken", timeout=60_000)
            text = page.inner_text("body")
            assert "the test's organiser" in text and "500" not in text.split("seats")[0][-200:], text
            context.close()
        finally:
            browser.close()

    # each server runs as its learner, on a core no other learner holds
    pinned = {n: os.sched_getaffinity(_server_pid(n)) for n in (ada, bob)}
    assert all(len(c) == 1 for c in pinned.values()) and not pinned[ada] & pinned[bob], pinned
    assert {pwd.getpwuid(os.stat(f"/proc/{_server_pid(n)}").st_uid).pw_name for n in (ada, bob)} == {ada, bob}

    async def in_terminals() -> dict[str, tuple[tuple[int, str], tuple[int, str]]]:
        terms = {n: await Terminal(base, n).open() for n in (ada, bob)}
        doctor = {}
        for n, t in terms.items():
            with _step(f"labkit doctor --hub in a learner's terminal ({n})"):
                doctor[n] = await t.run("labkit doctor --hub", timeout=60)
        lab = "cd ~/perflab && python -m papermill 02_nplusone.ipynb 02_ran.ipynb -p QUICK True --no-progress-bar > ~/lab02.log 2>&1"
        with _step("lab 02 QUICK, both learners at once"):
            ran = await asyncio.gather(*(t.run(lab, timeout=200) for t in terms.values()))
        return {n: (doctor[n], r) for n, r in zip(terms, ran, strict=True)}

    results = asyncio.run(in_terminals())
    for name, ((doc_code, doc_out), (lab_code, _)) in results.items():
        home = Path(pwd.getpwnam(name).pw_dir)
        # `labkit` is on the learner's login-shell PATH, and doctor reads the pinning from inside: the core this
        # server holds, and — for the learner on the hub's core 0 — that the hub's bursts land there too
        (core,) = pinned[name]
        assert doc_code == 0 and "command not found" not in doc_out and " 0 failed" in doc_out, doc_out
        assert f"pinned to cores {core} " in doc_out, doc_out
        assert ("[WARN] hub's core" in doc_out) == (core == 0), doc_out
        assert lab_code == 0, f"lab 02 failed for {name}:\n{(home / 'lab02.log').read_text()[-3000:]}"
        records = list((home / "perflab" / "results").rglob("*.json"))
        assert records, f"lab 02 saved no record in {name}'s home"
        assert all(r.stat().st_uid == pwd.getpwnam(name).pw_uid for r in records)  # written as the learner
        assert not (home / "perflab" / "instructor").exists(), "the instructor notes were handed to a learner"

    # the organiser's view of the room: both learners' records, from their homes
    page = room["tmp"] / "room.html"
    homes = sorted({str(Path(pwd.getpwnam(n).pw_dir).parent) for n in (ada, bob)})
    with _step("labkit room collect over the homes"):
        out = subprocess.run([sys.executable, "-m", "labkit", "room", "collect", *homes, "--names", "--out",
                              str(page)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert " 0 file(s) skipped" in out.stdout, out.stdout   # the handout's own manifest is not a stray file
    html = page.read_text()
    assert ada in html and bob in html, out.stdout
    print("\nthe organiser's walk, step by step (s):")
    for name, took in STEPS.items():
        print(f"  {took:6.1f}  {name}")
