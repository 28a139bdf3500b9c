"""Call sites: which line of *your* code issued a query (the first frame outside the plumbing).

Skipped: this package, the ``sqlite3`` package, SQLAlchemy, ``contextlib``/``functools`` wrappers, the
toyshop's transport modules (``toyshop/db.py``, ``toyshop/catalog.py``), extra path prefixes given to
``watch(skip=…)``, and functions that set ``__tracebackhide__`` (pytest's marker for helpers). Decisions are
cached per code object, so a lookup costs a dictionary hit per frame.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from typing import Any

__all__ = ["call_site", "raw_site"]

_SKIP_FILES: dict[str, bool] = {}
_SKIP_PREFIXES: list[str] = [
    os.path.dirname(__file__) + os.sep,
    os.path.dirname(sqlite3.__file__) + os.sep,
    os.path.join(os.path.dirname(os.__file__), "contextlib.py"),
    os.path.join(os.path.dirname(os.__file__), "functools.py"),
]
# Transport layers of the toyshop: the caller of the client is the interesting line, not the client.
_SKIP_SUFFIXES = (os.path.join("toyshop", "db.py"), os.path.join("toyshop", "catalog.py"))


def _skipped(filename: str) -> bool:
    hit = _SKIP_FILES.get(filename)
    if hit is None:
        if "sqlalchemy" in sys.modules and not any("sqlalchemy" in p for p in _SKIP_PREFIXES):
            import sqlalchemy

            _SKIP_PREFIXES.append(os.path.dirname(sqlalchemy.__file__) + os.sep)
            _SKIP_FILES.clear()
            _SKIP_CODE.clear()
        hit = filename.startswith(tuple(_SKIP_PREFIXES)) or filename.endswith(_SKIP_SUFFIXES)
        hit = hit or filename.startswith("<frozen ")
        _SKIP_FILES[filename] = hit
    return hit


_SKIP_CODE: dict[Any, bool] = {}


def _skip_code(code: Any) -> bool:
    hit = _skipped(code.co_filename) or "__tracebackhide__" in code.co_varnames
    _SKIP_CODE[code] = hit
    return hit


def raw_site(extra_skip: tuple[str, ...] = ()) -> tuple[str, int]:
    """``(file, line)`` of the first frame on the current stack outside the detector, sqlite3, SQLAlchemy and
    the toyshop's transport modules, outside any path starting with *extra_skip*, and outside functions that
    set ``__tracebackhide__`` (pytest's marker for helpers, honoured here for client wrappers).

    Kept as a tuple while recording (formatting costs time); ``call_site`` formats it."""
    frame = sys._getframe(1)
    known = _SKIP_CODE.get
    while frame is not None:
        code = frame.f_code
        skip = known(code)
        if skip is None:
            skip = _skip_code(code)
        if not skip and not (extra_skip and code.co_filename.startswith(extra_skip)):
            return (code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return ("?", 0)


def call_site(extra_skip: tuple[str, ...] = ()) -> str:
    """``file:line`` of the code that called into the detector's targets (see ``raw_site``)."""
    file, line = raw_site(extra_skip)
    return f"{file}:{line}"
