"""The toyshop dataset: deterministic, built atomically, rebuilt when corrupt or stale, skewed as documented."""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from labkit.errors import BadInputError
from labkit.toyshop import dataset
from labkit.toyshop.dataset import LADDER, build, config_key, ensure, ladder, skewed_config_keys, verify


def _digest(path: Path) -> str:
    """A digest of every row of every data table (file bytes may differ in free pages; rows may not)."""
    h = hashlib.sha256()
    conn = sqlite3.connect(path)
    try:
        for table in ("customers", "products", "orders", "order_items", "config", "meta"):
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1"):
                h.update(repr(row).encode())
    finally:
        conn.close()
    return h.hexdigest()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return build("small", tmp_path_factory.mktemp("data") / "toyshop-small.sqlite")


def test_same_seed_same_rows(small, tmp_path):
    # GIVEN the small dataset built once WHEN it is built again elsewhere THEN every row is the same
    again = build("small", tmp_path / "again.sqlite")
    assert _digest(again) == _digest(small)


def test_meta_and_counts(small):
    conn = sqlite3.connect(small)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["size"] == "small" and meta["schema_version"] == str(dataset.SCHEMA_VERSION)
    customers, products, n_config, _ = dataset.SIZES["small"]
    assert conn.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == customers
    assert conn.execute("SELECT COUNT(*) FROM config").fetchone()[0] == n_config >= 10_000
    assert len(conn.execute("SELECT * FROM products LIMIT 1").fetchone()) == 32
    assert verify(small, "small") is None


def test_ladder_customers_have_known_order_and_item_counts(small):
    conn = sqlite3.connect(small)
    got = {cid: (orders, items) for cid, orders, items in ladder(conn)}
    assert got == {cid: (n, 4 * n) for cid, n in LADDER.items()}


def test_order_counts_are_skewed(small):
    conn = sqlite3.connect(small)
    counts = sorted(n for (n,) in conn.execute("SELECT COUNT(*) FROM orders GROUP BY customer_id"))
    assert counts[0] <= 2 and counts[-1] >= 50  # some customers with few orders, some with many


def test_build_is_atomic_when_interrupted(small, tmp_path, monkeypatch):
    # GIVEN a sound file WHEN a rebuild dies half-way THEN the old file is intact and no temp file is left
    target = tmp_path / "toyshop-small.sqlite"
    target.write_bytes(small.read_bytes())

    def boom(conn, *args):
        conn.execute("CREATE TABLE half (x)")
        raise KeyboardInterrupt

    monkeypatch.setattr(dataset, "_fill", boom)
    with pytest.raises(KeyboardInterrupt):
        build("small", target)
    assert verify(target, "small") is None
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


@pytest.mark.parametrize("damage", ["garbage", "truncate", "stale", "rows"])
def test_ensure_rebuilds_a_damaged_file(small, tmp_path, capsys, damage):
    target = tmp_path / "toyshop-small.sqlite"
    target.write_bytes(small.read_bytes())
    if damage == "garbage":
        target.write_bytes(b"this is not a database" * 100)
    elif damage == "truncate":
        target.write_bytes(small.read_bytes()[: 4096 * 20])
    else:
        conn = sqlite3.connect(target)
        if damage == "stale":
            conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
        else:
            conn.execute("DELETE FROM orders WHERE id < 10")
        conn.commit()
        conn.close()
    assert verify(target, "small") is not None
    assert ensure("small", directory=tmp_path) == target
    assert "building the small toyshop dataset" in capsys.readouterr().err
    assert verify(target, "small") is None
    assert _digest(target) == _digest(small)


def test_ensure_builds_once(tmp_path, capsys):
    path = ensure("small", directory=tmp_path)
    mtime = path.stat().st_mtime_ns
    assert ensure("small", directory=tmp_path) == path
    assert path.stat().st_mtime_ns == mtime
    assert capsys.readouterr().err.count("building") == 1


def test_cli_build_and_path(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_DATA_DIR", str(tmp_path))
    from labkit.cli import data

    assert data.main(["build", "--size", "small"]) == 0
    assert data.main(["path", "--size", "small"]) == 0
    out = capsys.readouterr().out.split()
    assert out == [str(tmp_path / "toyshop-small.sqlite")] * 2


def test_unknown_size_is_refused():
    with pytest.raises(BadInputError, match="small, default, large"):
        dataset.db_path("huge")


def test_skewed_keys_are_80_20_and_deterministic(small):
    keys = skewed_config_keys(20_000, "small")
    assert keys == skewed_config_keys(20_000, "small")
    counts = Counter(keys).most_common()
    top = int(dataset.SIZES["small"][2] * 0.2)
    share = sum(n for _, n in counts[:top]) / len(keys)
    assert 0.78 <= share <= 0.86
    conn = sqlite3.connect(small)
    assert conn.execute("SELECT COUNT(*) FROM config WHERE key = ?", (keys[0],)).fetchone()[0] == 1
    assert config_key(8) == "cfg.pricing.000008"


def test_in_a_notebook_the_build_lines_go_to_the_cells_output_not_stderr(tmp_path, capsys, monkeypatch):
    # JupyterLab draws stderr red, as if the cell had failed: a first-use build is news, not an error
    import labkit.progress

    monkeypatch.setattr(labkit.progress, "ipython", lambda: object())  # a kernel's shell
    ensure("small", directory=tmp_path)
    out, err = capsys.readouterr()
    assert "building the small toyshop dataset" in out and "built" in out and err == ""


# --- one shared install, many learners: a dataset built by the organiser (root) is used by another system user --

def _other_users_python() -> list[str] | None:
    """An interpreter another user can run, with this labkit and this venv's packages on its path, or None."""
    import os
    import sys

    from labkit.workshop.sharing import blocked_for_others

    site = [p for p in sys.path if p.endswith("site-packages")]
    root = str(Path(__file__).resolve().parents[1])
    for exe in (sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        if os.path.exists(exe) and blocked_for_others(Path(exe)) is None and \
                all(blocked_for_others(Path(p)) is None for p in (root, *site)):
            return ["env", f"PYTHONPATH={os.pathsep.join([root, *site])}", exe]
    return None


@pytest.fixture
def learner():
    """A throwaway system user (removed after), and how to run Python as them."""
    import os
    import shutil
    import subprocess
    import uuid

    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"):
        pytest.skip("creating a system user needs root, useradd and runuser")
    python = _other_users_python()
    if python is None:
        pytest.skip("no interpreter here that another user can run with this labkit (a venv under a home "
                    "other users cannot enter)")
    name = f"pl{uuid.uuid4().hex[:8]}"
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="perflab-shared-", dir="/tmp"))  # pytest's tmp_path is root's alone (700)
    base.chmod(0o755)
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True, capture_output=True)
    try:
        def run(code: str, **env: str) -> subprocess.CompletedProcess:
            home = f"/home/{name}"
            return subprocess.run(["runuser", "-u", name, "--", "env", "-i", f"HOME={home}", "PATH=/usr/bin:/bin",
                                   *(f"{k}={v}" for k, v in env.items()), *python[1:], "-c", code],
                                  cwd=home, capture_output=True, text=True, timeout=60)
        yield name, run, base
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_a_dataset_the_organiser_built_is_used_read_only_by_a_learner(learner):
    # GIVEN the organiser (root) built the dataset in a shared folder that other users may only read
    name, run, tmp_path = learner
    shared = tmp_path / "shared"
    shared.mkdir()
    built = build("small", shared / "toyshop-small.sqlite")
    shared.chmod(0o755)
    before = sorted(shared.iterdir())
    # WHEN a learner's process asks for the dataset
    out = run("from labkit.toyshop import dataset, db; print(dataset.ensure('small'))\n"
              "print(db.connect().execute('SELECT COUNT(*) FROM customers').fetchone()[0])",  # what lab 02 does
              LABKIT_DATA_DIR=str(shared))
    # THEN it gets the organiser's file and can query it, nothing is written in the shared folder, nothing built
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(built), str(dataset.SIZES["small"][0])]
    assert sorted(shared.iterdir()) == before and "building" not in out.stderr


def test_a_learner_without_a_shared_dataset_builds_their_own_under_their_home(learner):
    # GIVEN a shared folder that holds no dataset and that the learner cannot write
    name, run, tmp_path = learner
    shared = tmp_path / "empty"
    shared.mkdir()
    # WHEN the learner asks for it, with PERFLAB_HOME as a hub sets it, and without
    code = "from labkit.toyshop import dataset; print(dataset.ensure('small', quiet=True))"
    hub = run(code, LABKIT_DATA_DIR=str(shared), PERFLAB_HOME="~/perflab")
    bare = run(code, LABKIT_DATA_DIR=str(shared))
    # THEN each build (and its lock) lands in the learner's own folder
    assert hub.returncode == 0 and bare.returncode == 0, (hub.stderr, bare.stderr)
    assert hub.stdout.strip() == f"/home/{name}/perflab/.labkit/datasets/toyshop-small.sqlite"
    assert bare.stdout.strip() == f"/home/{name}/.cache/labkit/toyshop-small.sqlite"
    assert not list(shared.iterdir())


def test_a_folder_the_learner_cannot_write_is_named_with_the_variable(learner):
    # GIVEN PERFLAB_HOME pointing at a folder the learner cannot write, and no shared dataset
    name, run, tmp_path = learner
    (tmp_path / "empty").mkdir()
    (tmp_path / "locked").mkdir(mode=0o755)
    # WHEN the learner asks for the dataset, and saves a record
    code = ("import sys\nfrom labkit.errors import LabkitError\nfrom labkit.toyshop import dataset\n"
            "from labkit.learner.record import Experiment\n"
            "plan = Experiment.plan('sort in place', 'list.sort skips building a second list, so a bit faster')\n"
            "for step in (lambda: dataset.ensure('small'), plan.save):\n"
            "    try:\n        step()\n    except LabkitError as e:\n        print(type(e).__name__, e)\n")
    out = run(code, LABKIT_DATA_DIR=str(tmp_path / "empty"), PERFLAB_HOME=str(tmp_path / "locked"))
    # THEN each says which folder and which variable, as a labkit error, not a traceback
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, out.stdout
    assert lines[0].startswith("ResultsError") and f"{tmp_path / 'locked'}/.labkit/datasets" in lines[0]
    assert "PERFLAB_HOME" in lines[0] and name in lines[0]
    assert lines[1].startswith("ResultsError") and f"{tmp_path / 'locked'}/results" in lines[1]
    assert "PERFLAB_HOME" in lines[1]
