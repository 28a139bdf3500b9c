"""A learner's view: JupyterLab in headless Chromium runs a notebook and draws labkit's charts offline.

Needs Debian's chromium and the playwright package (.ci/run installs chromium). Outside CI the test is
skipped when Chromium is missing; in CI (CI=true) a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: .ci/run should have installed it (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    settings = tmp_path / "settings"
    (settings / "@jupyterlab/apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        "import labkit\nfrom labkit import charts\ncharts.enable_offline()\n"
        "r = labkit.bench(sorted, list(range(200)), repeat=20)\ncharts.cdf(r)")]
    nbformat.write(nb, tmp_path / "t.ipynb")
    port = _free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", "--LabApp.news_url=None", f"--ServerApp.root_dir={tmp_path}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start within 60 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)


def test_charts_render_in_jupyterlab_with_no_network(lab):
    from playwright.sync_api import sync_playwright

    failed: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("requestfailed", lambda r: failed.append(f"{r.url} -> {r.failure}"))
        outside: list[str] = []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(("http://127.0.0.1", "data:", "blob:")) else None)
        page.goto(f"{lab}/lab/tree/t.ipynb?reset", wait_until="domcontentloaded")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
        page.wait_for_timeout(2000)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        # the chart is drawn by the anywidget front end shipped in the installed packages
        page.wait_for_selector(".jp-OutputArea-output .vega-embed canvas, .jp-OutputArea-output .vega-embed svg.marks",
                               timeout=120_000)
        text = page.inner_text(".jp-OutputArea-output")
        browser.close()
    assert "Error" not in text
    assert not failed, f"requests failed (something tried to reach the network): {failed}"
    assert not outside, f"requests left the machine: {outside}"
