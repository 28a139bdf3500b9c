"""A learner's view: JupyterLab in headless Chromium runs a lab, a panel is clicked, charts draw, all offline.

Needs Debian's chromium and the playwright package (.ci/run installs chromium). Outside CI the tests are
skipped when Chromium is missing; in CI (CI=true) a missing browser is a failure.

JupyterLab serves a temporary copy of ``notebooks/`` (outputs never land in the checkout). Every request the
page makes is watched: one that leaves 127.0.0.1 (or fails) fails the test. Labs with a panel add a test here
with :func:`run_notebook` and :func:`click_panel`; each such test counts as one of the lab's (at most two)
executions per suite run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
LOCAL = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:", "file:")  # file: a report on disk
CHART = ".vega-embed canvas, .vega-embed svg.marks"

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} within {timeout:.0f} s")


def _up(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1)
        return True
    except OSError:
        return False


def need_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: .ci/run should have installed it (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")


def _quick(path: Path) -> None:
    """Set ``QUICK = True`` in a notebook's parameters cell: the browser runs each lab's quick version."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"])
            cell["source"] = source.replace("QUICK = False", "QUICK = True", 1)
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[str]:
    """JupyterLab on 127.0.0.1 over a temporary copy of notebooks/, every lab set to ``QUICK = True``."""
    need_chromium()
    tmp = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", tmp / "notebooks")
    for path in (tmp / "notebooks").glob("*.ipynb"):
        _quick(path)
    settings = tmp / "settings"
    for plugin, value in (("apputils-extension/notification", '{"fetchNews": "false"}'),
                          # no windowing: every cell of a long lab stays in the page, so all can be checked
                          ("notebook-extension/tracker", '{"windowingMode": "none"}')):
        target = settings / f"@jupyterlab/{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value)
    port = _free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings), PERFLAB_RESULTS=str(tmp / "results"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", "--LabApp.news_url=None",
         f"--ServerApp.root_dir={tmp / 'notebooks'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        _wait_until(lambda: _up(f"http://127.0.0.1:{port}/api/status"), 90, "JupyterLab did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)


@contextmanager
def browser_page(url: str) -> Iterator[tuple]:
    """A Chromium page on ``url`` and the lists of requests that failed or left the machine."""
    from playwright.sync_api import sync_playwright

    failed: list[str] = []
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("requestfailed", lambda r: failed.append(f"{r.url} -> {r.failure}"))
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(LOCAL) else None)
        page.goto(url, wait_until="domcontentloaded")
        try:
            yield page, failed, outside
        finally:
            browser.close()


def run_notebook(page, timeout_s: float = 240) -> None:
    """Run All Cells in the open notebook once its kernel is idle, and wait until every cell has run."""
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)

    # the kernel must be up before Run All (no fixed sleep); JupyterLab sometimes asks which kernel to start
    def kernel_ready() -> bool:
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        if dialog.count():
            dialog.first.click()
            return False
        # the status bar reads "No Kernel | Initializing", then "Python 3 (ipykernel) | Idle" once it is up
        return "| Idle" in (page.locator("#jp-main-statusbar").first.inner_text() or "")
    _wait_until(kernel_ready, 90, "the kernel did not start")
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    # every code cell's prompt shows its execution count ("[3]:") once done; "[*]:" while queued or running
    # (textContent, not innerText: JupyterLab skips rendering cells scrolled out of view, whose innerText is "")
    _wait_until(lambda: page.evaluate(
        "() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent);"
        " return p.length > 0 && p.every(t => /\\[\\d+\\]/.test(t)); }"), timeout_s, "the notebook did not finish")


def _results_shown(panel) -> int:
    m = re.search(r"done: (\d+) result", panel.inner_text())
    return int(m.group(1)) if m else 0


def click_panel(page, index: int = 0, timeout_s: float = 120) -> None:
    """Press Run on the ``index``-th labkit panel on the page, wait until the click's result is on the chart
    (the panel reports one result more than before the click), and that the chart is drawn."""
    panel = page.locator(".labkit-panel").nth(index)
    panel.wait_for(timeout=60_000)
    before = _results_shown(panel)
    panel.locator("button", has_text="Run").first.click()
    _wait_until(lambda: _results_shown(panel) > before, timeout_s,
                f"the click on Run did not add a result to panel {index} (it showed {before})")
    panel.locator(f".labkit-panel-chart :is({CHART})").first.wait_for(timeout=timeout_s * 1000)


def assert_offline(page, failed: list[str], outside: list[str]) -> None:
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    assert not [e for e in errors if "Traceback" in e or "Error" in e], errors
    assert not failed, f"requests failed (something tried to reach the network): {failed}"
    assert not outside, f"requests left the machine: {outside}"


def test_index_panel_runs_and_draws_its_chart_with_no_network(lab):
    with browser_page(f"{lab}/lab/tree/index.ipynb?reset") as (page, failed, outside):
        run_notebook(page)
        click_panel(page)
        assert "done" in page.locator(".labkit-panel").first.inner_text()
        assert_offline(page, failed, outside)


_BLANK_JS = """(el) => {
  // a canvas with no painted pixel, or an SVG with no mark inside, is a blank frame
  const c = el.querySelector('canvas');
  if (c) { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
           for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return false; return true; }
  const s = el.querySelector('svg.marks');
  return !(s && s.querySelectorAll('path, rect, text').length > 3);
}"""


def assert_charts_drawn(page, at_least: int) -> None:
    """Every Altair chart in the notebook's outputs is painted (none blank), and there are ``at_least`` of them."""
    page.locator(f".jp-OutputArea-output :is({CHART})").first.wait_for(timeout=60_000)
    embeds = page.locator(".jp-OutputArea-output .vega-embed")
    assert embeds.count() >= at_least, f"expected at least {at_least} charts, found {embeds.count()}"
    blank = []
    for i in range(embeds.count()):  # off-screen cells are not rendered: bring each chart into view first
        embeds.nth(i).scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        if embeds.nth(i).evaluate(_BLANK_JS):
            blank.append(i)
    assert not blank, f"charts drawn blank: {blank}"


#: labs with no test of their own below: each runs QUICK in the browser, every chart painted, nothing leaves
#: 127.0.0.1 (with the papermill run, the lab's two executions per suite run). How many charts each draws at least.
_PLAIN_LABS = {"00_method.ipynb": 3, "01_latency_numbers.ipynb": 3, "02_nplusone.ipynb": 3,
               "03_preallocation.ipynb": 3, "05_serialization.ipynb": 3, "08_capstone.ipynb": 8}


@pytest.mark.parametrize("name", sorted(_PLAIN_LABS))
def test_lab_runs_in_the_browser_every_chart_drawn_with_no_network(lab, name):
    with browser_page(f"{lab}/lab/tree/{name}?reset") as (page, failed, outside):
        run_notebook(page, timeout_s=420)
        assert_charts_drawn(page, at_least=_PLAIN_LABS[name])
        assert_offline(page, failed, outside)


def test_lab06_flame_graphs_and_gc_charts_draw_with_no_network(lab):
    with browser_page(f"{lab}/lab/tree/06_gc_profiling.ipynb?reset") as (page, failed, outside):
        run_notebook(page, timeout_s=600)
        assert_charts_drawn(page, at_least=10)
        frames = page.locator("iframe.labkit-frame")
        assert frames.count() == 2, "py-spy's and memray's own flame graphs"
        frames.nth(0).scroll_into_view_if_needed()
        spy = page.frame_locator("iframe.labkit-frame").nth(0)
        spy.locator("svg rect").nth(5).wait_for(timeout=60_000)     # py-spy's SVG: one rect per frame
        assert spy.locator("svg rect").count() > 5
        frames.nth(1).scroll_into_view_if_needed()
        mem = page.frame_locator("iframe.labkit-frame").nth(1)
        mem.locator("#chart svg g rect").nth(3).wait_for(timeout=60_000)   # memray draws its graph with d3
        assert mem.locator("#chart svg g rect").count() > 3
        assert_offline(page, failed, outside)


def test_report_opens_offline_with_every_chart_drawn(template_report, tmp_path):
    # the review template's report (conftest.py: `labkit report --quick`, once per session), alone in a folder
    need_chromium()
    assert template_report.code == 0, "labkit report of the template failed: see test_report.py"
    page_file = tmp_path / "report.html"
    shutil.copy(template_report.html, page_file)
    charts = page_file.read_text().count('class="marks"')
    with browser_page("about:blank") as (page, failed, outside):
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.context.set_offline(True)                       # the network is gone: only the file can load
        page.goto(page_file.as_uri(), wait_until="load")
        drawn = page.evaluate("""() => [...document.querySelectorAll('svg.marks')].filter(svg => {
            const box = svg.getBoundingClientRect();
            return box.width > 100 && box.height > 50 && svg.querySelectorAll('path, line, rect').length > 10;
        }).length""")
        assert charts >= 2 and drawn == charts, f"{drawn} of {charts} charts drawn"
        assert page.locator("#labkit-report table").first.is_visible()
        assert requested == [page_file.as_uri()], requested


def test_lab04_runs_quick_every_chart_draws_and_its_layout_panel_answers_a_click(lab):
    nb = json.loads((ROOT / "notebooks" / "04_data_layout.ipynb").read_text())
    charts = sum(1 for c in nb["cells"] if c["cell_type"] == "code"
                 and any(k in "".join(c["source"]) for k in ("_chart(", "charts.ab(")))
    with browser_page(f"{lab}/lab/tree/04_data_layout.ipynb?reset") as (page, failed, outside):
        run_notebook(page, timeout_s=420)
        drawn = page.locator(f".jp-OutputArea-output :is({CHART})").count()
        click_panel(page)  # QUICK already ran the panel once: the click must add a second result
        assert drawn >= charts >= 6, f"{drawn} charts drawn; {charts} of the lab's cells draw one"
        assert_offline(page, failed, outside)


def test_lab07_pool_panel_adds_a_bounded_step_and_draws_it_with_no_network(lab):
    with browser_page(f"{lab}/lab/tree/07_tail_latency.ipynb?reset") as (page, failed, outside):
        run_notebook(page, timeout_s=420)
        panel = page.locator(".labkit-panel").first
        assert _results_shown(panel) == 1, panel.inner_text()  # the notebook's own step drew the first point
        click_panel(page)                                      # the click must add the second
        assert _results_shown(panel) == 2, panel.inner_text()
        assert_charts_drawn(page, at_least=8)
        assert_offline(page, failed, outside)


def test_every_lab_is_opened_in_the_browser_by_some_test():
    # a new lab gets a test here (its own, or a row in _PLAIN_LABS): LABS.md asks every lab to be opened
    here = Path(__file__).read_text()
    missing = [p.name for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) if p.name not in here]
    assert not missing, f"labs no browser test opens: {missing} (add them to _PLAIN_LABS or give them a test)"
