"""labkit — the helper package behind perflab's labs: measure honestly, then decide.

The top level holds the few names every lab uses; each tool lives in its own module
(``labkit.trace``, ``labkit.charts``, ``labkit.service``, ``labkit.load`` …), imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from labkit.bench import BenchResult, bench
from labkit.compare import Comparison, compare
from labkit.errors import LabkitError
from labkit.fingerprint import fingerprint
from labkit.record import Experiment, experiments
from labkit.trace import collect, span

__all__ = [
    "BenchResult",
    "Comparison",
    "Experiment",
    "LabkitError",
    "bench",
    "collect",
    "compare",
    "experiments",
    "fingerprint",
    "span",
]

__version__ = "0.1.0"

_SUBMODULES = {"alloc", "charts", "check", "client", "clock", "doctor", "errors", "latency", "load", "nplusone",
               "profile", "record", "report", "results", "service", "stats", "toyshop", "trace", "exercises",
               "fingerprint", "widgets", "layout", "exact", "runner", "sealing"}


def __getattr__(name: str) -> Any:
    # ``labkit.charts`` etc. work after a bare ``import labkit``, without paying for them up front
    if name in _SUBMODULES:
        return importlib.import_module(f"labkit.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
