"""Exact answers: a comparison in a canonical form that no object can fake.

:func:`difference` is what graders compare a learner's answer with the baseline's by: every part must be of the
exact type of the baseline's (``type(x) is``), compared by this module's code, never by the answer's own methods.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from labkit.grading.sealing import seal

__all__ = ["difference", "kind"]


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def kind(x: Any) -> str:
    """The name of ``x``'s exact type (``type(x)``), with its module unless built in."""
    t = type(x)  # type(), not x.__class__: a proxy can fake the second, not the first
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


_SCALARS = (type(None), bool, int, str, bytes, complex)


def difference(want: Any, got: Any, where: str = "the answer", *, rel: float = 0.0, ordered: bool = False) -> str | None:
    """Where ``got`` differs from ``want`` (a sentence), or None when they are the same — compared in a form
    no object can fake.

    Every part of ``got`` must be of the *exact* type of the same part of ``want`` (``type(x) is``: no
    subclass, proxy or lazy object; ``True`` is not ``1``, ``3.0`` is not ``3``), and values are compared by
    this function on those exact built-in types (or NumPy arrays and scalars, or the same dataclass), never by
    the answer's own ``__eq__``. Supported in ``want``: None, bool, int, float, complex, str, bytes, list,
    tuple, dict, set, frozenset, ``numpy.ndarray`` (not of dtype object), NumPy scalars, dataclass instances.

    Args:
        rel: relative tolerance for floats (0: exact; NaN equals NaN).
        ordered: dicts must also list their keys in the same order.
    """
    tw = type(want)
    if type(got) is not tw:
        return f"{where}: expected type {kind(want)}, got type {kind(got)}"
    if tw in _SCALARS or isinstance(want, np.generic):
        if isinstance(want, np.generic) and want.dtype != got.dtype:
            return f"{where}: expected dtype {want.dtype}, got {got.dtype}"
        same = bool(want == got) or (isinstance(want, np.floating) and bool(np.isnan(want) and np.isnan(got)))
        return None if same else f"{where}: expected {_short(want, 60)}, got {_short(got, 60)}"
    if tw is float:
        if want == got or (math.isnan(want) and math.isnan(got)) or (rel and math.isclose(want, got, rel_tol=rel)):
            return None
        return f"{where}: expected {want!r}, got {got!r}"
    if tw is list or tw is tuple:
        if len(got) != len(want):
            return f"{where}: expected {len(want)} entries, got {len(got)}"
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            if (d := difference(a, b, f"{where}[{i}]", rel=rel, ordered=ordered)) is not None:
                return d
        return None
    if tw is dict:
        for key in got:  # keys first: a key of a foreign type could answer `in` and `[]` as it likes
            if type(key) not in (*_SCALARS, float, tuple) or (type(key) is tuple and _foreign(key)):
                return f"{where}: a key of type {kind(key)} (keys must be plain values)"
        missing = [k for k in want if k not in got]
        if missing:
            return f"{where}: missing key {_short(missing[0], 40)}"
        own = {k: k for k in want}  # each of want's keys under itself: own[k] is the key of want equal to k
        extra = [k for k in got if k not in want or type(k) is not type(own[k])]
        if extra:
            return f"{where}: unexpected key {_short(extra[0], 40)}"
        if ordered and list(got) != list(want):
            return f"{where}: the keys must come in the baseline's order ({_short(list(want)[:4], 60)}…)"
        for k in want:
            if (d := difference(want[k], got[k], f"{where}[{k!r}]", rel=rel, ordered=ordered)) is not None:
                return d
        return None
    if tw is set or tw is frozenset:
        if any(type(x) not in (*_SCALARS, float, tuple) or (type(x) is tuple and _foreign(x)) for x in got):
            return f"{where}: holds something that is not a plain value"
        tagged = {(type(x), x) for x in want}
        if {(type(x), x) for x in got} != tagged:
            return f"{where}: expected {_short(want, 60)}, got {_short(got, 60)}"
        return None
    if tw is np.ndarray:
        if got.dtype == object or want.dtype == object:
            return f"{where}: an array of Python objects cannot be compared exactly; return a numeric array"
        if got.shape != want.shape:
            return f"{where}: expected shape {want.shape}, got {got.shape}"
        if got.dtype != want.dtype:
            return f"{where}: expected dtype {want.dtype}, got {got.dtype}"
        if want.dtype.kind in "fc":
            ok = np.isclose(got, want, rtol=rel, atol=0, equal_nan=True) if rel else \
                (got == want) | (np.isnan(got) & np.isnan(want))
        else:
            ok = got == want
        if bool(np.all(ok)):
            return None
        first = tuple(int(i) for i in np.argwhere(~np.asarray(ok))[0])
        return f"{where}{list(first)}: expected {want[first]!r}, got {got[first]!r}"
    if dataclasses.is_dataclass(want):
        for f in dataclasses.fields(want):
            if (d := difference(getattr(want, f.name), getattr(got, f.name), f"{where}.{f.name}", rel=rel,
                                ordered=ordered)) is not None:
                return d
        return None
    raise TypeError(f"difference() cannot compare a {kind(want)} exactly (a grader bug: give it a differ=)")


def _foreign(t: tuple[Any, ...]) -> bool:
    return any(type(x) not in (*_SCALARS, float) and not (type(x) is tuple and not _foreign(x)) for x in t)


_SEALED = seal(globals())
