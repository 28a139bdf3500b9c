"""labkit — the helper package behind perflab's labs: measure honestly, then decide.

The top level holds the few names every lab and review uses (``sweep_sizes`` times candidates over input sizes;
``labkit.load.sweep`` is the other sweep, over request rates); each tool lives in its own module
(``labkit.trace``, ``labkit.charts``, ``labkit.service``, ``labkit.load`` …), imported on first use.

Modules of one family live in a package of their own: :mod:`labkit.measure` (the measurement core),
:mod:`labkit.learner` (records and guesses), :mod:`labkit.grading` (the grader kit) and :mod:`labkit.workshop`
(doctor, hub, room). Each of their modules keeps the name it had at the top level (the table ``_MOVED`` below):
``import labkit.record`` gives the very module ``labkit.learner.record``, so every notebook, review and
script written against the old names goes on working.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import pkgutil
import sys
import types
from typing import Any

from labkit.errors import LabkitError
from labkit.learner.record import Experiment, experiments
from labkit.measure.comparison import Comparison, compare
from labkit.measure.machine import fingerprint
from labkit.measure.microbench import BenchResult, bench
from labkit.measure.scaling import SizeSweep, sweep_sizes
from labkit.trace import collect, span

__all__ = [
    "BenchResult",
    "Comparison",
    "Experiment",
    "LabkitError",
    "SizeSweep",
    "bench",
    "collect",
    "compare",
    "experiments",
    "fingerprint",
    "load_ipython_extension",
    "span",
    "sweep_sizes",
]

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext labkit``: registers ``%%lines`` (:func:`labkit.profile.perline.magic`), a cell profiled line by
    line — time, allocations, SQL statements and HTTP calls."""
    from labkit.profile.perline import magic

    ipython.register_magic_function(magic, magic_kind="cell", magic_name="lines")

# every module and package beside this file, found on disk (a listing, no import): ``labkit.charts`` etc.
# work after a bare ``import labkit`` without being kept by hand
_SUBMODULES = frozenset(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


#: a module's name at the top level → where it lives now (its family's package)
_MOVED: dict[str, str] = {
    "check": "labkit.grading.kit", "runner": "labkit.grading.calls", "exact": "labkit.grading.exact",
    "sealing": "labkit.grading.sealing",
    **{m: f"labkit.measure.{m}" for m in ("cgroup", "collector", "comparison", "machine", "microbench", "scaling",
                                          "stats", "workers")},
    "record": "labkit.learner.record", "guesses": "labkit.learner.guesses",
    "doctor": "labkit.workshop.doctor", "hub": "labkit.workshop.hub", "room": "labkit.workshop.room",
}


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``labkit.<old name>`` as the module it moved to: one module object under both names (so a
    ``monkeypatch`` or a ``seal`` through either name sees the same namespace)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        head, _, name = fullname.partition(".")
        if head != __name__ or name not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(_MOVED[spec.name.partition(".")[2]])

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # already executed under its own name


if not any(isinstance(f, _OldNames) for f in sys.meta_path):
    sys.meta_path.insert(0, _OldNames())


def __getattr__(name: str) -> Any:
    # imported on first use, so ``import labkit`` does not pay for them up front
    if name in _SUBMODULES:
        return importlib.import_module(f"labkit.{name}")
    if name in _MOVED:
        return importlib.import_module(_MOVED[name])
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
