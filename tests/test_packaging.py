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
        "BenchResult", "Comparison", "Experiment", "LabkitError", "SizeSweep", "bench", "collect", "compare",
        "experiments", "fingerprint", "load_ipython_extension", "span", "sweep_sizes",  # %load_ext labkit
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


def _faces() -> list[str]:
    # every package of labkit (the generated protobuf package aside): each one's __init__.py is a face
    import pkgutil

    names = ["labkit"] + [m.name for m in pkgutil.walk_packages(labkit.__path__, "labkit.") if m.ispkg]
    return [n for n in names if not n.endswith(".proto")]


def _public_names(module) -> set[str]:
    # what a face hands on: its names without a leading underscore, less submodules and the face's own
    # imports for its annotations (``from __future__ import annotations``, ``typing.Any``)
    import __future__

    import types
    import typing

    return {n for n, v in vars(module).items()
            if not n.startswith("_") and not isinstance(v, types.ModuleType | __future__._Feature)
            and getattr(v, "__module__", None) != "typing" and v is not typing.Any}


def test_every_face_declares_all_and_it_is_exactly_its_public_names():
    import importlib

    faces = _faces()
    assert {"labkit.exercises", "labkit.toyshop", "labkit.load", "labkit.toyshop.core"} <= set(faces)
    for face in faces:
        module = importlib.import_module(face)
        # GIVEN the face's declared API
        declared = getattr(module, "__all__", None)
        assert isinstance(declared, list), f"{face} declares no __all__"
        assert len(declared) == len(set(declared)), f"{face}.__all__ names one name twice"
        # THEN every declared name resolves (lazily loaded chart builders included) and has a docstring
        for name in declared:
            value = getattr(module, name)
            if callable(value):
                assert value.__doc__, f"{face}.{name} needs a docstring"
        # AND nothing public is left out of it
        missing = _public_names(module) - set(declared)
        assert not missing, f"{face} hands on {sorted(missing)} without naming them in __all__"


def test_every_submodule_is_reachable_from_a_bare_import():
    import importlib
    import pkgutil
    import subprocess
    import sys

    on_disk = {m.name for m in pkgutil.iter_modules(labkit.__path__) if not m.name.startswith("_")}
    assert {"queueing", "capstone", "cli", "load", "charts"} <= on_disk
    assert on_disk == labkit._SUBMODULES
    for name in sorted(on_disk):
        assert getattr(labkit, name) is importlib.import_module(f"labkit.{name}")
    # a bare `import labkit` loads none of them before they are asked for
    code = "import sys, labkit; print(sorted(m for m in sys.modules if m.startswith('labkit.load')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_face_hands_on_a_name_that_hides_one_of_its_modules():
    # labkit.load.sweep must be one thing: a face exporting a function named like its module makes the
    # module unreachable as an attribute (and mock.patch("labkit.load.sweep.run") patch the wrong thing)
    import importlib
    import pkgutil
    import types

    hidden = []
    for face in _faces():
        module = importlib.import_module(face)
        for sub in pkgutil.iter_modules(module.__path__):
            value = vars(module).get(sub.name)
            if value is not None and not isinstance(value, types.ModuleType):
                hidden.append(f"{face}.{sub.name}")
    assert not hidden, f"these names hide a module of the same name: {hidden}"


def test_no_package_reaches_into_another_packages_private_module():
    # a private module (labkit/load/_runner.py) is its package's business: others use the package's face
    # or the shared kit (labkit.progress, labkit.inputs, labkit.measure.stats, labkit.results)
    private = re.compile(r"^\s*(?:from|import)\s+(labkit(?:\.\w+)*)\.(_\w+)", re.M)
    reaches = []
    for path in sorted((ROOT / "labkit").rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for m in private.finditer(path.read_text()):
            if m.group(1) != package and not m.group(2).startswith("__"):
                reaches.append(f"{path.relative_to(ROOT)} imports {m.group(1)}.{m.group(2)}")
    assert not reaches, "\n".join(reaches)


def test_every_moved_module_keeps_its_old_name_as_the_same_module():
    # GIVEN the modules that moved into a family's package (labkit/__init__.py's table)
    import importlib
    import subprocess
    import sys

    moved = labkit._MOVED
    assert {"record", "comparison", "check", "hub"} <= set(moved)
    for old, new in moved.items():
        # THEN the old dotted name, the attribute and the new name are one module object
        assert importlib.import_module(f"labkit.{old}") is importlib.import_module(new), old
        assert getattr(labkit, old) is importlib.import_module(new), old
        assert not (ROOT / "labkit" / f"{old}.py").exists(), f"labkit/{old}.py is back beside {new}"
    # AND a fresh interpreter imports the old names the way a notebook does, before anything else of labkit
    code = ("from labkit.record import Experiment; from labkit.stats import percentiles; import labkit.check as c; "
            "import labkit.grading.kit as k; assert c is k; import labkit.learner.record as r; "
            "assert r.Experiment is Experiment")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
