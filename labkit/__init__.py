"""labkit — the helper package behind perflab's labs: measure honestly, then decide.

The top level holds the few names every lab and review uses (``sweep_sizes`` times candidates over input sizes;
``labkit.load.sweep`` is the other sweep, over request rates); each tool lives in its own module
(``labkit.trace``, ``labkit.charts``, ``labkit.service``, ``labkit.load`` …), imported on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from labkit.comparison import Comparison, compare
from labkit.errors import LabkitError
from labkit.machine import fingerprint
from labkit.microbench import BenchResult, bench
from labkit.record import Experiment, experiments
from labkit.scaling import SizeSweep, sweep_sizes
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
    "span",
    "sweep_sizes",
]

__version__ = "0.1.0"

# every module and package beside this file, found on disk (a listing, no import): ``labkit.charts`` etc.
# work after a bare ``import labkit`` without being kept by hand
_SUBMODULES = frozenset(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name: str) -> Any:
    # imported on first use, so ``import labkit`` does not pay for them up front
    if name in _SUBMODULES:
        return importlib.import_module(f"labkit.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
