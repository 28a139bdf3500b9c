"""Sealing a module's namespace at import, so that rebinding its names later changes nothing its functions run."""

from __future__ import annotations

import types
from typing import Any

__all__ = ["seal"]


def seal(namespace: dict[str, Any]) -> dict[str, Any]:
    """Bind a module's functions to a snapshot of its namespace, taken now — call it at the end of the module.

    Each function defined in the module (and each method of its classes) is rebound so that the names it
    reads come from the snapshot; the module's own names become separate copies of them (so changing
    ``module.fn.__code__`` changes the copy, not the grader's). Replacing a name in the module afterwards —
    ``labNN.baseline = slow``, ``labkit.grading.kit.difference = always_none`` — changes nothing the sealed
    functions run. Returns the snapshot.
    """
    snap = dict(namespace)

    def rebound(fn: types.FunctionType) -> types.FunctionType:
        new = types.FunctionType(fn.__code__, snap, fn.__name__, fn.__defaults__, fn.__closure__)
        new.__kwdefaults__ = fn.__kwdefaults__
        new.__qualname__, new.__doc__, new.__module__ = fn.__qualname__, fn.__doc__, fn.__module__
        new.__annotations__ = fn.__annotations__
        new.__dict__.update(fn.__dict__)
        return new

    own = namespace.get("__name__")
    for name, value in namespace.items():
        if isinstance(value, types.FunctionType) and value.__globals__ is namespace:
            snap[name] = rebound(value)
        elif isinstance(value, type) and value.__module__ == own:
            for attr, member in list(vars(value).items()):
                if isinstance(member, types.FunctionType) and member.__globals__ is namespace:
                    setattr(value, attr, rebound(member))
                elif isinstance(member, staticmethod | classmethod) and getattr(member.__func__, "__globals__",
                                                                                None) is namespace:
                    setattr(value, attr, type(member)(rebound(member.__func__)))
    for name, value in snap.items():
        if isinstance(value, types.FunctionType) and value is not namespace.get(name):
            namespace[name] = rebound(value)  # the public copy: a second object, reading the same snapshot
    return snap
