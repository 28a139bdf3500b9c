"""A package's modules imported on first use: ``labkit.measure.stats`` works after a bare ``import labkit``."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from typing import Any


def submodules(package: str, path: Iterable[str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports its modules (found on disk, no import) when first read."""
    names = frozenset(m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))

    def getattr_(name: str) -> Any:
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_
