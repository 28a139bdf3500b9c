"""labkit.budget.within: exact counters fail at one over, memory counts within their tolerance, clear misuse."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from labkit.budget import BudgetExceeded, within
from labkit.errors import BadInputError


@pytest.fixture
def conn():
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT)")
    c.executemany("INSERT INTO item VALUES (?, ?)", [(i, f"n{i}") for i in range(20)])
    yield c
    c.close()


def per_item(conn, ids):
    return [conn.execute("SELECT name FROM item WHERE id = ?", (i,)).fetchone() for i in ids]  # per-item query


def test_one_query_over_fails_with_the_lines_and_at_the_budget_passes(conn):
    with within(conn, queries=3) as block:
        per_item(conn, [1, 2, 3])
    assert block.counted.values == {"queries": 3} and not block.counted.broken
    for _ in range(20):  # exact: every run
        with pytest.raises(BudgetExceeded) as e, within(conn, queries=3):
            per_item(conn, [1, 2, 3, 4])
        assert "queries = 4, limit 3" in str(e.value)
        assert "test_budget.py" in str(e.value) and "SELECT name FROM item WHERE id = ?" in str(e.value)


def test_memory_growth_inside_the_tolerance_passes_and_beyond_it_fails():
    def make(n):
        return [bytes(1000) for _ in range(n)]

    with within(allocated_bytes=10**9) as block:
        make(1000)
    figure = block.counted.values["allocated_bytes"]
    assert figure >= 1000 * 1000
    with within(allocated_bytes=figure, tolerance=0.15) as grown:
        make(1100)  # 10 % more
    assert figure < grown.counted.values["allocated_bytes"] <= grown.counted.limit("allocated_bytes")
    with pytest.raises(BudgetExceeded, match="allocated_bytes = .* tolerance") as e, \
            within(allocated_bytes=figure, tolerance=0.15):
        make(1500)
    assert "test_budget.py" in str(e.value)  # the allocating line is named


def test_misuse_is_refused_before_anything_runs(conn):
    with pytest.raises(BadInputError, match="no budget called querys"), within(conn, querys=3):
        pass
    with pytest.raises(BadInputError, match="pass it"), within(queries=3):
        pass
    with pytest.raises(BadInputError, match="whole number"), within(conn, queries=-1):
        pass
    with pytest.raises(BadInputError, match="at least one budget"), within(conn):
        pass


EXAMPLE_TEST = '''
import shutil
import sqlite3


def export(conn, ids):
    return [conn.execute("SELECT ?", (i,)).fetchone() for i in ids]


def test_export(budget):
    conn = sqlite3.connect(":memory:")
    with budget(conn, queries=QUERIES, allocated_bytes=10**8):
        export(conn, range(3))
'''


def _example(repo, queries):
    (repo / "conftest.py").write_text('pytest_plugins = ["labkit.budget_plugin"]\n', encoding="utf-8")
    (repo / "test_example.py").write_text(EXAMPLE_TEST.replace("QUERIES", str(queries)), encoding="utf-8")


@pytest.mark.slow  # runs pytest twice in a repository of its own
def test_the_fixture_fails_one_over_keeps_a_ledger_and_the_cli_shows_a_raised_figure(tmp_path):
    import subprocess
    import sys

    repo = tmp_path / "shop"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ledger = repo / "perf" / "ledger.jsonl"

    def run(queries):
        _example(repo, queries)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", f"budget {queries}"], check=True)
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                               f"--budget-ledger={ledger}", "test_example.py"], cwd=repo, capture_output=True,
                              text=True, timeout=120)

    over = run(2)
    assert over.returncode == 1 and "queries = 3, limit 2" in over.stdout, over.stdout + over.stderr
    assert run(3).returncode == 0
    rows = [line for line in ledger.read_text().splitlines() if '"queries"' in line]
    assert len(rows) == 2 and '"passed": false' in rows[0] and '"passed": true' in rows[1]
    shown = subprocess.run([sys.executable, "-m", "labkit", "budget", "history", str(ledger)], capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "test_example.py::test_export queries: 2 runs, 3 at" in shown.stdout
    assert "figure raised 2 → 3 at" in shown.stdout
    # the asv export: one results file per commit, which asv's own loader reads back with the values
    from asv.results import Results

    out = subprocess.run([sys.executable, "-m", "labkit", "budget", "export-asv", str(ledger),
                          str(tmp_path / "results"), "--machine", "ci"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    files = sorted((tmp_path / "results" / "ci").glob("*-labkit.json"))
    assert len(files) == 2
    loaded = [Results.load(str(f)) for f in files]
    name = "labkit_budget.queries.test_example.py::test_export"
    assert sorted(r.get_result_value(name, []) for r in loaded) == [[3], [3]]
    assert {r.commit_hash for r in loaded} == {line.split('"rev": "')[1][:40] for line in rows}
    # and asv publish draws it: one point per commit, on the repository's branch
    import json

    branch = subprocess.run(["git", "-C", str(repo), "branch", "--show-current"], capture_output=True, text=True,
                            check=True).stdout.strip()
    conf = tmp_path / "asv.conf.json"
    conf.write_text(json.dumps({"version": 1, "project": "shop", "repo": str(repo), "branches": [branch],
                                "results_dir": str(tmp_path / "results"), "html_dir": str(tmp_path / "html"),
                                "environment_type": "existing"}))
    published = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(conf)], capture_output=True,
                               text=True, timeout=120)
    assert published.returncode == 0, published.stdout + published.stderr
    [graph] = (tmp_path / "html" / "graphs" / f"branch-{branch}").rglob(f"{name.replace('::', '__')}.json")
    assert json.loads(graph.read_text()) == [[0, 3.0], [1, 3.0]]
    missing = subprocess.run([sys.executable, "-m", "labkit", "budget", "history", str(tmp_path / "none.jsonl")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no ledger at" in missing.stderr


CASES = '''
from labkit.gate import timed


@timed(threshold=0.10)
def squares():
    from shop import work
    return lambda: work(20000)
'''


@pytest.mark.slow  # worktrees and worker processes
def test_the_time_gate_passes_a_docs_change_fails_a_gross_slowdown_and_refuses_a_bad_base(tmp_path):
    import subprocess

    from labkit.gate import gate

    repo = tmp_path / "shop"
    (repo / "shop").mkdir(parents=True)
    code = repo / "shop" / "__init__.py"
    code.write_text("def work(n):\n    return sum(i * i for i in range(n))\n")
    (repo / "perf_cases.py").write_text(CASES)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "README.md").write_text("docs only\n")
    [same] = gate(repo, "HEAD", "perf_cases.py", max_time=5)
    assert not same.failed and same.verdict in ("not slower", "inconclusive")
    worktrees = repo / ".git" / "worktrees"
    assert not worktrees.exists() or not any(worktrees.iterdir())  # the base's worktree is removed
    code.write_text("def work(n):\n    return sum(i * i for i in range(n)) + sum(i * i for i in range(2 * n))\n")
    [slow] = gate(repo, "HEAD", "perf_cases.py", max_time=5)
    assert slow.failed and slow.ci[0] > 1.10, slow
    from labkit.budget import append_times, history

    append_times(tmp_path / "ledger.jsonl", "HEAD", [same, slow])
    assert "squares time: 2 runs" in history(tmp_path / "ledger.jsonl")
    with pytest.raises(BadInputError, match="rev-parse"):
        gate(repo, "no-such-branch", "perf_cases.py")
    with pytest.raises(BadInputError, match="no cases file"):
        gate(repo, "HEAD", "missing.py")
    (repo / "empty_cases.py").write_text("x = 1\n")
    with pytest.raises(BadInputError, match="declares no timed case"):
        gate(repo, "HEAD", "empty_cases.py")


EXTENSION = '''
#include <Python.h>
static PyObject *work(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg); volatile double s = 0;
    for (long r = 0; r < REPEAT; r++) for (long i = 0; i < n; i++) s += (double)i * i;
    return PyFloat_FromDouble(s);
}
static PyMethodDef methods[] = {{"work", work, METH_O, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit__fast(void) {
    PyObject *m = PyModule_Create(&module);
    PyModule_AddIntConstant(m, "REPEAT", REPEAT);
    return m;
}
'''

SETUP = '''
from setuptools import Extension, setup
setup(name="fastshop", version="0", packages=["fastshop"], ext_modules=[Extension("fastshop._fast", ["fast.c"])])
'''

C_CASES = '''
from labkit.gate import timed


@timed(threshold=0.10)
def compiled():
    from fastshop._fast import work
    return lambda: work(200000)
'''


@pytest.mark.slow  # compiles a C extension in each tree
@pytest.mark.skipif(not shutil.which("cc"), reason="needs a C compiler")
def test_the_gate_builds_each_tree_so_a_compiled_slowdown_fails(tmp_path):
    import subprocess
    import sys

    from labkit.gate import _copy_of, _import_root, _install, _worker_env, gate

    repo = tmp_path / "fastshop"
    (repo / "fastshop").mkdir(parents=True)
    (repo / "fastshop" / "__init__.py").write_text("")
    (repo / "setup.py").write_text(SETUP)
    (repo / "perf_cases.py").write_text(C_CASES)
    (repo / "fast.c").write_text("#define REPEAT 1\n" + EXTENSION)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "fast.c").write_text("#define REPEAT 3\n" + EXTENSION)  # the tree's build does the work three times

    [slow] = gate(repo, "HEAD", "perf_cases.py", max_time=5)
    assert slow.failed and slow.ci[0] > 1.10, slow
    assert sorted(p.name for p in repo.iterdir()) == [".git", "fast.c", "fastshop", "perf_cases.py", "setup.py"]

    # each tree's build is what its worker imports: the tree's constant, not the base's, and not the source's
    root = _import_root(repo, _install(_copy_of(repo, tmp_path / "copy"), tmp_path / "site"))
    shown = subprocess.run([sys.executable, "-P", "-c", "import fastshop._fast as f; print(f.REPEAT, f.__file__)"],
                           cwd=tmp_path, env=_worker_env(root), capture_output=True, text=True, timeout=60)
    assert shown.stdout.split()[0] == "3" and shown.stdout.split()[1].startswith(str(tmp_path / "site"))
    with pytest.raises(BadInputError, match="no-install"):
        (repo / "fast.c").write_text("this is not C\n")
        gate(repo, "HEAD", "perf_cases.py", max_time=5)
