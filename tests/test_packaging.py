"""The two dependency lists (pip and conda) stay in step, and the public API is exactly what we curate."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import labkit

ROOT = Path(__file__).resolve().parents[1]
# conda-forge spells a few packages differently from PyPI
CONDA_NAMES = {"msgpack-python": "msgpack"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_mirrors_pyproject():
    # GIVEN both lists
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip_names = {_name(r) for r in meta["dependencies"] + meta["optional-dependencies"]["test"]}
    conda_names = set()
    deps = (ROOT / "environment.yml").read_text().split("\ndependencies:", 1)[1]
    for line in deps.splitlines():
        m = re.match(r"\s*-\s+([A-Za-z0-9_.\-]+)", line)
        if m and not line.strip().endswith(":"):
            conda_names.add(CONDA_NAMES.get(_name(m.group(1)), _name(m.group(1))))
    conda_names -= {"python", "pip"}
    # THEN they name the same packages
    assert conda_names == pip_names, (
        f"only in environment.yml: {sorted(conda_names - pip_names)}; only in pyproject.toml: "
        f"{sorted(pip_names - conda_names)}")


def test_public_api_is_curated():
    assert sorted(labkit.__all__) == [
        "BenchResult", "Comparison", "Experiment", "LabkitError", "bench", "collect", "compare",
        "experiments", "fingerprint", "span",
    ]
    for name in labkit.__all__:
        assert getattr(labkit, name).__doc__, f"labkit.{name} needs a docstring"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert re.search(r"^make test$", ci, re.M)


def test_make_test_lints_before_it_tests():
    # ruff runs from `make test` (CI's command) ahead of pytest, so a lint finding fails the build
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None
    lines = recipe.group(1).split("\n")
    assert "ruff check labkit tests" in lines[0] and "pytest" in lines[1]
