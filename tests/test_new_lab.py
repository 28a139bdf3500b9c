"""``labkit new-lab``: a throwaway lab written into a copy of the repository passes the suite's per-lab checks there
(the tables, the header's minutes, the notebook's QUICK run, the grader against its cheats); bad input is refused
before anything is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.errors import BadInputError
from labkit.labs import LABS
from labkit.scaffold import new_lab

ROOT = Path(__file__).resolve().parents[1]


def _copy_repo(dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    for rel in listed:
        src = ROOT / rel
        if src.is_file() and not rel.startswith(".venv"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _small_checkout(tmp_path: Path) -> Path:
    for rel in ("labkit/labs.py", "README.md", "notebooks/index.ipynb"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    return tmp_path


@pytest.mark.slow
def test_a_throwaway_lab_passes_the_per_lab_checks_in_a_copy_of_the_repository(tmp_path):
    # GIVEN a copy of the repository and the next free number
    repo = _copy_repo(tmp_path / "repo")
    nn = f"{int(LABS[-1].number) + 1:02d}"
    env = {**os.environ, "PYTHONPATH": str(repo), "PERFLAB_RESULTS": str(tmp_path / "results")}
    # WHEN a contributor runs new-lab there
    made = subprocess.run([sys.executable, "-m", "labkit", "new-lab", nn, "throwaway", "--root", str(repo)],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    stem = f"{nn}_throwaway"
    for rel in (f"notebooks/{stem}.ipynb", f"notebooks/instructor/{stem}.md", f"labkit/exercises/lab{nn}.py",
                f"tests/test_lab{nn}.py"):
        assert (repo / rel).is_file(), rel
    assert f"[{nn} — throwaway](notebooks/{stem}.ipynb)" in (repo / "README.md").read_text()
    index = "".join(json.loads((repo / "notebooks/index.ipynb").read_text())["cells"][0]["source"])
    assert f"| {nn} | 75 | 70 (+10 optional) | 00 |" in index
    # THEN the suite's per-lab checks pass on the result: the tables, the minutes, the grader, the QUICK run
    checks = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-x",
         "tests/test_labs.py", "tests/test_index.py", f"tests/test_lab{nn}.py", "tests/test_notebooks.py",
         "-k", f"not test_notebook_runs_top_to_bottom or {stem}"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=400)
    assert checks.returncode == 0, checks.stdout[-3000:] + checks.stderr[-2000:]
    assert f"{stem}.ipynb" in checks.stdout  # its QUICK run is in the times the session prints


def test_new_lab_refuses_a_taken_number_a_bad_name_and_a_folder_that_is_no_checkout(tmp_path):
    repo = _small_checkout(tmp_path / "repo")
    before = (repo / "labkit/labs.py").read_text()
    with pytest.raises(BadInputError, match="lab 03 exists already"):
        new_lab(repo, 3, "again")
    with pytest.raises(BadInputError, match="lower case letters"):
        new_lab(repo, 42, "Bad Name")
    with pytest.raises(BadInputError, match="0–99"):
        new_lab(repo, "x1", "fine")
    with pytest.raises(BadInputError, match="no labkit/labs.py"):
        new_lab(tmp_path / "elsewhere", 42, "fine")
    assert (repo / "labkit/labs.py").read_text() == before  # nothing written


def test_new_lab_writes_over_nothing(tmp_path):
    repo = _small_checkout(tmp_path / "repo")
    mine = repo / "notebooks" / "42_mine.ipynb"
    mine.write_text("{}")
    with pytest.raises(BadInputError, match="exist already"):
        new_lab(repo, 42, "mine")
    assert mine.read_text() == "{}" and "42_mine" not in (repo / "labkit/labs.py").read_text()


def test_new_lab_registers_the_row_and_regenerates_the_tables(tmp_path):
    repo = _small_checkout(tmp_path / "repo")
    done = new_lab(repo, 42, "cache_stampede", "cache stampedes")
    assert "labkit/exercises/lab42.py" in done.written and "README.md" in done.changed
    assert "Lab('42', '42_cache_stampede', 'cache stampedes'," in (repo / "labkit/labs.py").read_text()
    assert "[42 — cache stampedes](notebooks/42_cache_stampede.ipynb)" in (repo / "README.md").read_text()
    nb = json.loads((repo / "notebooks/42_cache_stampede.ipynb").read_text())
    assert nb["cells"][0]["source"][0].startswith("# Lab 42 — cache stampedes")
    params = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and "QUICK = False" in "".join(params[0]["source"])
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")
