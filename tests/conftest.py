"""Shared fixtures: a fake nanosecond clock, a results folder per test, the review template's report, and every
notebook's one QUICK run per session (``notebook_runs``: test_notebooks.py checks it, test_browser.py opens it)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest


class FakeClock:
    """A clock that only moves when told: ``tick(ns)`` inside the function under test."""

    def __init__(self, start: int = 1_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def tick(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    # results written by a test land in its own temporary folder, never in the checkout; a developer's own
    # PERFLAB_HOME (a workshop account) does not move them
    monkeypatch.setenv("PERFLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("PERFLAB_HOME", raising=False)


@pytest.fixture(scope="session")
def template_report(tmp_path_factory):
    """The design-review template's report, made once per session the way a user makes it: ``labkit new-review``
    then ``labkit report review.ipynb --quick``. test_report.py reads it; test_browser.py opens it in Chromium."""
    from labkit.cli import main
    from labkit.report.run import ReportRun

    work = tmp_path_factory.mktemp("review")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        mp.setenv("PERFLAB_RESULTS", str(work / "results"))
        made = main(["new-review", "review"])
        code = main(["report", "review.ipynb", "--quick", "--no-progress"])
    folders = sorted(p for p in (work / "results" / "reports").glob("review-*") if p.is_dir())
    run = ReportRun.find(folders[-1]) if folders else None
    return SimpleNamespace(made=made, code=code, work=work, run=run,
                           html=Path(run.html) if run is not None and run.html else None)


@dataclass(frozen=True)
class NotebookRun:
    """One notebook executed top to bottom by papermill with ``QUICK = True`` (if it has a parameters cell)."""

    source: Path
    executed: Path           # the executed copy, every output and the widgets' state kept
    results: Path            # its PERFLAB_RESULTS folder
    secs: float              # the execution only
    error: BaseException | None = None

    def check(self) -> NotebookRun:
        """The run, or the papermill error that stopped it (raised again, for every test that reads the run)."""
        if self.error is not None:
            raise self.error
        return self


class NotebookRuns:
    """Each notebook runs at most once per session, on first request, whichever test asks first (docs/labs.md: at
    most two executions per lab per suite run; this is one of them)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self._runs: dict[str, NotebookRun] = {}

    def get(self, source: Path, *, typed: bool = True) -> NotebookRun:
        """The run with wrong answers typed into every guess and plan (tests/typed.py: the learner's path, every
        judged prediction refuted), or, ``typed=False``, the notebook as committed (every guess skipped)."""
        key = (source.name, typed)
        if key not in self._runs:
            self._runs[key] = self._execute(source, typed)
        return self._runs[key]

    def _execute(self, source: Path, typed: bool) -> NotebookRun:
        import papermill
        from typed import type_wrong

        folder = self.work / (source.stem if typed else f"{source.stem}-as-committed")
        folder.mkdir()
        executed, results = folder / source.name, folder / "results"
        nb = json.loads(source.read_text())
        given = source
        if typed:  # the typed copy keeps the lab's file name (a record knows its lab by it) and runs where the lab is
            given = folder / "typed" / source.name
            given.parent.mkdir()
            given.write_text(json.dumps(type_wrong(nb)[0], indent=1, ensure_ascii=False) + "\n")
        has_params = any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb["cells"]
                         if c["cell_type"] == "code")
        error = None
        t0 = time.perf_counter()
        with pytest.MonkeyPatch.context() as mp:  # the kernel inherits this process's environment
            mp.setenv("PERFLAB_RESULTS", str(results))
            try:
                # saved once at the end, not after every cell: a lab with a memray page rewrites megabytes per cell
                papermill.execute_notebook(str(given), str(executed), parameters={"QUICK": True} if has_params else {},
                                           kernel_name="python3", cwd=str(source.parent), progress_bar=False,
                                           log_output=False, request_save_on_cell_execute=False)
            except Exception as exc:  # kept and raised again by NotebookRun.check in every test that reads it
                error = exc
        return NotebookRun(source, executed, results, time.perf_counter() - t0, error)


@pytest.fixture(scope="session")
def notebook_runs(tmp_path_factory) -> NotebookRuns:
    return NotebookRuns(tmp_path_factory.mktemp("notebook-runs"))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks added here
def pytest_collection_modifyitems(session, config, items):
    """Three rules, so that no test module has to remember them:

    - the browser tests go last: they open the notebooks that test_notebooks.py executed (``notebook_runs``),
      so each run's time is charged to the test that checks it, and the browser finds the runs already made;
    - a test that reads a session fixture's product shares a worker (``make test`` runs two, pytest-xdist's
      ``--dist loadgroup``) with the other tests that read it: a notebook's run and its browser test, the
      template's report and its readers — each is made once per suite run, not once per worker;
    - every grader test module (it defines ``GRADER_CASES``) is ``slow``: a grader times real work, so the
      inner loop (``make unit``: ``-m "not slow"``) leaves it out.
    """
    items.sort(key=lambda item: item.path.name == "test_browser.py")  # a stable sort: the order is otherwise kept
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "notebook_runs" in fixtures:
            params = getattr(getattr(item, "callspec", None), "params", {})
            names = [Path(str(v)).name for v in params.values() if str(v).endswith(".ipynb")]
            item.add_marker(pytest.mark.xdist_group(f"notebook-{names[0]}" if names else "notebooks"))
        elif "template_report" in fixtures:
            item.add_marker(pytest.mark.xdist_group("template-report"))
        if hasattr(getattr(item, "module", None), "GRADER_CASES"):
            item.add_marker(pytest.mark.slow)


class _GroupGuard:
    """After every plugin has had the items: in a pytest-xdist worker under ``--dist loadgroup``, every test marked
    with a group must carry it in its id (``…@group``), which is what the scheduler reads. pytest 9.2 moved a node's
    id where pytest-xdist 3.8 cannot append to it, and nothing complained: each notebook ran once per worker and
    the suite took half as long again. Now each such test fails, saying so."""

    problem: str | None = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collection_modifyitems(self, session, config, items):
        yield
        if not getattr(config.option, "loadgroup", False):
            return
        lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
        if lost:
            import xdist

            self.problem = (
                f"pytest-xdist's --dist loadgroup did not group {len(lost)} tests: pytest {pytest.__version__} with "
                f"pytest-xdist {xdist.__version__} ignore the groups, so every notebook would run once per worker. "
                "Install the versions pyproject.toml's test extra allows (make setup).")

    def pytest_runtest_setup(self, item):
        if self.problem and item.get_closest_marker("xdist_group"):
            pytest.fail(self.problem, pytrace=False)


def pytest_configure(config):
    config.pluginmanager.register(_GroupGuard(), "perflab-xdist-group-guard")


_NOTEBOOK_TIMES: dict[str, tuple[float, float]] = {}


def pytest_runtest_logreport(report):
    # a notebook's run time travels with its test's report (user_properties), so the table below is complete
    # whichever process ran the test (each pytest-xdist worker reports to the one that prints)
    for key, value in getattr(report, "user_properties", ()):
        if key == "perflab_notebook_time":
            name, secs, budget = value
            _NOTEBOOK_TIMES[name] = (secs, budget)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The notebooks' QUICK runs, slowest first, against their budgets (tests/test_notebooks.py: BUDGET_S)."""
    if not _NOTEBOOK_TIMES or hasattr(config, "workerinput"):  # a pytest-xdist worker prints nothing
        return
    terminalreporter.section("notebook run times (QUICK; budget in brackets)")
    for name, (secs, budget) in sorted(_NOTEBOOK_TIMES.items(), key=lambda kv: -kv[1][0]):
        mark = "   <-- OVER BUDGET: make its QUICK settings smaller" if secs > budget else ""
        terminalreporter.write_line(f"{secs:7.1f} s  [{budget:.0f} s]  {name}{mark}")
