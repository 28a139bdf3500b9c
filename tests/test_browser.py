"""A learner's view: every lab as it ran, open in JupyterLab in headless Chromium, every chart painted, all offline;
and the labs' panels, clicked in a live kernel.

Needs Debian's chromium and the playwright package (.ci/run installs chromium). Outside CI the tests are
skipped when Chromium is missing; in CI (CI=true) a missing browser is a failure.

A lab is not run again here: test_notebooks.py's papermill run of it (``notebook_runs`` in conftest.py, once per
session) is opened in JupyterLab as a learner would reopen a lab they ran — trusted, its widgets drawn from the
state the run saved, no cell run (the kernel JupyterLab starts on opening stays idle and is shut down after)
— and every chart it drew must be painted there. Only the panels need a live kernel: each panel's test runs
the lab's own cells that build the panel (``PANELS``), clicks Run and waits for the click's result on the
chart; with the papermill run, that is the lab's two executions per suite run (tests/README.md).

JupyterLab serves a temporary folder (outputs never land in the checkout). Every request the page makes is
watched: one that leaves 127.0.0.1 (or fails) fails the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from labkit.labs import LABS

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
LOCAL = ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:", "file:")  # file: a report on disk
CHART = ".vega-embed canvas, .vega-embed svg.marks"

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: every lab, as its papermill run left it: how many charts it draws at least (besides every JupyterChart the
#: run's outputs hold, which must all be painted) — declared with the lab in labkit/labs.py
CHARTS = {x.notebook: x.charts for x in LABS}

#: the live part of a lab with a panel: after its parameters cells (QUICK = True), the lab's own cells that build
#: the panel — each named by a line only it contains — and, as plain code, stand-ins for what the sections before
#: the panel measured (the test checks the panel answers a click, not those figures)
PANELS: dict[str, list[str | tuple[str]]] = {
    "04_data_layout.ipynb": [("explorer = layout_panel(",)],
    "07_tail_latency.ipynb": [("shop = Services(",),
                              "RULE = CORES * 2   # stand-ins: section 6's rule and a knee the panel's rates fit\n"
                              "KNEE = 800.0",
                              ("panel = pool_panel(",),
                              "shop.close()"],
}


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


def _code(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def _quick_cells(nb: dict) -> list[dict]:
    """The parameters cell with ``QUICK = True``, and the cell after it if that one applies QUICK's settings."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    [i] = [i for i, c in enumerate(code) if "parameters" in c.get("metadata", {}).get("tags", [])]
    cells = [dict(code[i], source="".join(code[i]["source"]).replace("QUICK = False", "QUICK = True", 1))]
    if i + 1 < len(code) and "".join(code[i + 1]["source"]).startswith("if QUICK:"):
        cells.append(code[i + 1])
    return cells


def _quick(path: Path) -> None:
    """Set ``QUICK = True`` in a notebook's parameters cell: the browser runs each lab's quick version."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            cell["source"] = "".join(cell["source"]).replace("QUICK = False", "QUICK = True", 1)
    path.write_text(json.dumps(nb))


def _panel_notebook(name: str) -> dict:
    """A notebook of lab ``name``'s QUICK parameters, the cells that build its panel and the stand-ins (PANELS)."""
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    cells = _quick_cells(nb)
    for part in PANELS[name]:
        if isinstance(part, str):
            cells.append(_code(part))
            continue
        found = [c for c in nb["cells"] if c["cell_type"] == "code" and part[0] in "".join(c["source"])]
        assert len(found) == 1, f"{name}: {len(found)} cells contain {part[0]!r}; PANELS in test_browser.py names " \
                                "each cell the panel needs by a line only that cell has"
        cells.append(dict(found[0], outputs=[], execution_count=None))
    return dict(nb, cells=cells)


@pytest.fixture(scope="session")
def lab(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """JupyterLab on 127.0.0.1 over a temporary folder: a copy of notebooks/ (QUICK = True), into which a test
    puts what it opens. One per session (per pytest-xdist worker): a lab's browser test runs beside that lab's
    papermill test (conftest.py groups them), so a module-scoped server would start again for every lab.
    ``lab.url``, ``lab.root`` (the folder), ``lab.data`` (its Jupyter data dir: the trust database)."""
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
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings), PERFLAB_RESULTS=str(tmp / "results"),
               JUPYTER_DATA_DIR=str(tmp / "data"))
    # started as nobody's child (a shell backgrounds it in a session of its own, prints its pid and exits): the
    # graders count the CPU of this worker's child processes as work beside the learner's function, and this
    # server, alive from the first browser test to the worker's end, would be timed with every grader after it. If
    # the worker dies without tearing down, the server stops itself after 15 idle minutes.
    args = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
            "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
            "--LabApp.news_url=None", "--ServerApp.shutdown_no_activity_timeout=900",
            f"--ServerApp.root_dir={tmp / 'notebooks'}"]
    launched = subprocess.run(["/bin/sh", "-c", 'setsid "$@" >/dev/null 2>&1 </dev/null & echo $!', "sh", *args],
                              env=env, capture_output=True, text=True, timeout=30, check=True)
    server = psutil.Process(int(launched.stdout.strip()))
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until(lambda: _up(f"{url}/api/status"), 90, "JupyterLab did not start")
        yield SimpleNamespace(url=url, root=tmp / "notebooks", data=tmp / "data")
    finally:
        _stop(server)


def _stop(server: psutil.Process) -> None:
    """Stop a server that is not this process's child (no wait() for it): SIGTERM to its session's group, up to
    20 s for it to go, then SIGKILL and up to 5 s more."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, 15)
    if not _gone_within(server, 20):
        with contextlib.suppress(psutil.Error):
            server.kill()
        _gone_within(server, 5)


def _gone_within(proc: psutil.Process, secs: float) -> bool:
    """True once ``proc`` is gone or a zombie (its new parent reaps it), polling for up to ``secs``."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def _stop_kernels(lab) -> None:
    """Shut down every kernel the page started (JupyterLab keeps them when a page closes)."""
    with urllib.request.urlopen(f"{lab.url}/api/kernels", timeout=10) as r:
        kernels = json.load(r)
    for k in kernels:
        urllib.request.urlopen(urllib.request.Request(f"{lab.url}/api/kernels/{k['id']}", method="DELETE"), timeout=30)


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    """One headless Chromium for a run of this module's tests; each test opens its own context (cookies, offline)
    in it. Not one per session: a lab's browser test runs beside its papermill test, in the middle of the worker's
    other tests, and while Playwright's sync API is open the thread counts as inside a running event loop — every
    later ``asyncio.run`` (the load generator, the hub's tests) would fail. pytest closes a module's fixture as soon
    as the next test is another module's."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def browser_page(chromium, url: str, lab=None) -> Iterator[tuple]:
    """A Chromium page on ``url`` and the lists of requests that failed or left the machine; on leaving, the
    kernels the page started in ``lab`` are shut down."""
    failed: list[str] = []
    outside: list[str] = []
    context = chromium.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    page.on("requestfailed", lambda r: failed.append(f"{r.url} -> {r.failure}"))
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(LOCAL) else None)
    page.goto(url, wait_until="domcontentloaded")
    try:
        yield page, failed, outside
    finally:
        context.close()
        if lab is not None:
            _stop_kernels(lab)


def _executed(notebook_runs, name: str) -> Path:
    run = notebook_runs.get(ROOT / "notebooks" / name)
    if run.error is not None:
        pytest.fail(f"{name} did not run under papermill, so there is nothing to open (test_notebooks.py shows "
                    f"why): {type(run.error).__name__}: {str(run.error)[:300]}")
    return run.executed


def _serve_trusted(lab, nb: dict, name: str) -> None:
    """Put a notebook in the lab's folder, signed as trusted (as a notebook that ran in this JupyterLab is): an
    untrusted notebook's widgets and HTML outputs are not drawn."""
    import nbformat
    from nbformat.sign import NotebookNotary

    node = nbformat.from_dict(nb)
    NotebookNotary(data_dir=str(lab.data)).sign(node)
    (lab.root / name).write_text(nbformat.writes(node))


def _jupyter_charts(nb: dict) -> int:
    """How many Altair JupyterCharts the executed notebook's outputs show (the widget state names each view)."""
    view = "application/vnd.jupyter.widget-view+json"
    state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return sum(1 for c in nb["cells"] for o in c.get("outputs", []) if view in o.get("data", {})
               and state.get(o["data"][view]["model_id"], {}).get("state", {}).get("_anywidget_id", "")
               .endswith("JupyterChart"))


def wait_for_cells(page) -> None:
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)


def run_notebook(page, timeout_s: float = 240) -> None:
    """Run All Cells in the open notebook once its kernel is idle, and wait until every cell has run."""
    wait_for_cells(page)

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
    # a request to this JupyterLab that the page abandoned itself (the second load of assert_charts_drawn aborts
    # the first load's fetches) reached nothing outside; every request that left the machine is in ``outside``
    failed = [f for f in failed if not (f.startswith(LOCAL) and f.endswith("net::ERR_ABORTED"))]
    assert not failed, f"requests failed (something tried to reach the network): {failed}"
    assert not outside, f"requests left the machine: {outside}"


_BLANK_JS = """(el) => {
  // a canvas with no painted pixel, or an SVG with no mark inside, is a blank frame
  const c = el.querySelector('canvas');
  if (c) { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
           for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return false; return true; }
  const s = el.querySelector('svg.marks');
  return !(s && s.querySelectorAll('path, rect, text').length > 3);
}"""


def _page_state(page) -> str:
    """What the page shows, for a failure message: cells, outputs, charts, the kernel's status and the open tabs."""
    return page.evaluate("""() => { const n = s => document.querySelectorAll(s).length;
      const bar = (document.querySelector('#jp-main-statusbar') || {}).innerText || '';
      return `${n('.jp-Notebook .jp-Cell')} cells, ${n('.jp-OutputArea-output')} outputs, `
        + `${n('.jp-OutputArea-output .vega-embed')} charts; `
        + `kernel: ${(bar.match(/[|] *(\\w+)/) || ['', '?'])[1]}; tabs: `
        + [...document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tabLabel')].map(e => e.textContent).join(', '); }""")


def _charts_shown(page, at_least: int, first_s: float, all_s: float) -> str | None:
    """Wait until the first chart is painted and ``at_least`` charts are on the page; None, or what was missing."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.locator(f".jp-OutputArea-output :is({CHART})").first.wait_for(timeout=first_s * 1000)
    except PlaywrightTimeoutError:
        return f"no chart painted within {first_s:.0f} s ({_page_state(page)})"
    embeds = page.locator(".jp-OutputArea-output .vega-embed")
    deadline = time.monotonic() + all_s
    while embeds.count() < at_least:
        if time.monotonic() > deadline:
            return f"expected at least {at_least} charts within {all_s:.0f} s ({_page_state(page)})"
        time.sleep(0.5)
    return None


def assert_charts_drawn(page, at_least: int) -> None:
    """Every Altair chart in the notebook's outputs is painted (none blank), and there are ``at_least`` of them.

    A busy 2-core machine (the suite's other worker, a kernel still starting) can paint late, and in the suite's
    CI runs JupyterLab now and then left a saved notebook's widget charts undrawn on a first load that a reload
    drew: so a page short of charts is loaded once more, and only a second shortfall fails (with both states).
    The second load resets the workspace too (``?reset``): a plain reload restored the notebooks earlier tests had
    opened in this JupyterLab beside this one (a CI run counted 138 cells for a 56-cell lab)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    missing = _charts_shown(page, at_least, 90, 60)
    if missing is not None:
        page.goto(page.url.split("?")[0] + "?reset", wait_until="domcontentloaded")
        wait_for_cells(page)
        again = _charts_shown(page, at_least, 120, 90)
        assert again is None, f"first load: {missing}; after a reload: {again}"
        warnings.warn(f"charts drawn only after a reload (first load: {missing})", stacklevel=2)
    embeds = page.locator(".jp-OutputArea-output .vega-embed")

    blank = []
    for i in range(embeds.count()):  # off-screen cells are not rendered: bring each chart into view first
        chart = embeds.nth(i)
        chart.scroll_into_view_if_needed()
        try:  # painted as soon as it is (no fixed pause), blank if still not after 10 s on a busy machine
            page.wait_for_function(f"(el) => !({_BLANK_JS})(el)", arg=chart.element_handle(), polling=100,
                                   timeout=10_000)
        except PlaywrightTimeoutError:
            blank.append(i)
    assert not blank, f"charts drawn blank: {blank}"


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_lab_as_it_ran_opens_in_jupyterlab_every_chart_drawn_with_no_network(lab, chromium, notebook_runs, name):
    nb = json.loads(_executed(notebook_runs, name).read_text())
    _serve_trusted(lab, nb, name)
    with browser_page(chromium, f"{lab.url}/lab/tree/{name}?reset", lab) as (page, failed, outside):
        wait_for_cells(page)
        assert_charts_drawn(page, at_least=max(CHARTS[name], _jupyter_charts(nb)))
        if name == "06_gc_profiling.ipynb":
            _assert_flame_graphs_drawn(page)
        assert_offline(page, failed, outside)


def _assert_flame_graphs_drawn(page) -> None:
    frames = page.locator("iframe.labkit-frame")
    assert frames.count() == 2, "py-spy's and memray's own flame graphs"
    frames.nth(0).scroll_into_view_if_needed()
    box = frames.nth(0).bounding_box()
    assert box is not None and box["height"] > 100, f"py-spy's frame is laid out {box}"
    spy = page.frame_locator("iframe.labkit-frame").nth(0)
    # py-spy's SVG, one rect per frame, loaded from its data: URL; "attached", not "visible": a suite run saw its
    # rects reported hidden for 60 s in a frame laid out at full size (once in three), a layout flake, not a page
    # that failed to load
    spy.locator("svg rect").nth(5).wait_for(state="attached", timeout=60_000)
    assert spy.locator("svg rect").count() > 5
    frames.nth(1).scroll_into_view_if_needed()
    mem = page.frame_locator("iframe.labkit-frame").nth(1)
    mem.locator("#chart svg g rect").nth(3).wait_for(timeout=60_000)   # memray draws its graph with d3
    assert mem.locator("#chart svg g rect").count() > 3


def test_index_panel_runs_and_draws_its_chart_with_no_network(lab, chromium):
    with browser_page(chromium, f"{lab.url}/lab/tree/index.ipynb?reset", lab) as (page, failed, outside):
        run_notebook(page)
        click_panel(page)
        assert "done" in page.locator(".labkit-panel").first.inner_text()
        assert_offline(page, failed, outside)


def test_lab04_layout_panel_answers_a_click_with_no_network(lab, chromium):
    (lab.root / "panel-04.ipynb").write_text(json.dumps(_panel_notebook("04_data_layout.ipynb")))
    with browser_page(chromium, f"{lab.url}/lab/tree/panel-04.ipynb?reset", lab) as (page, failed, outside):
        run_notebook(page, timeout_s=120)
        panel = page.locator(".labkit-panel").first
        assert _results_shown(panel) == 1, panel.inner_text()  # QUICK ran the panel once, as the lab does
        click_panel(page)                                      # the click must add a second result
        assert _results_shown(panel) == 2, panel.inner_text()
        assert_offline(page, failed, outside)


def test_lab07_pool_panel_adds_a_bounded_step_and_draws_it_with_no_network(lab, chromium):
    (lab.root / "panel-07.ipynb").write_text(json.dumps(_panel_notebook("07_tail_latency.ipynb")))
    with browser_page(chromium, f"{lab.url}/lab/tree/panel-07.ipynb?reset", lab) as (page, failed, outside):
        run_notebook(page, timeout_s=180)
        panel = page.locator(".labkit-panel").first
        assert _results_shown(panel) == 1, panel.inner_text()  # the cell's own step drew the first point
        click_panel(page)                                      # the click must add the second
        assert _results_shown(panel) == 2, panel.inner_text()
        assert_offline(page, failed, outside)


def test_report_opens_offline_with_every_chart_drawn(template_report, chromium, tmp_path):
    # the review template's report (conftest.py: `labkit report --quick`, once per session), alone in a folder
    assert template_report.code == 0, "labkit report of the template failed: see test_report.py"
    page_file = tmp_path / "report.html"
    shutil.copy(template_report.html, page_file)
    charts = page_file.read_text().count('class="marks"')
    with browser_page(chromium, "about:blank") as (page, failed, outside):
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


def test_every_lab_is_opened_in_the_browser_by_some_test():
    # a new lab gets a row in CHARTS (and, with a panel, in PANELS and a test of its own): docs/labs.md asks every
    # lab to be opened in a real browser, every chart drawn
    missing = [p.name for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) if p.name not in CHARTS]
    assert not missing, f"labs no browser test opens: {missing} (add them to CHARTS in tests/test_browser.py)"
