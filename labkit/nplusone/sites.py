"""Call sites: which line of *your* code issued a query (the first frame outside the plumbing).

Skipped: this package, the ``sqlite3`` package, SQLAlchemy, ``contextlib``/``functools`` wrappers, the
toyshop's transport modules (``toyshop/db.py``, ``toyshop/catalog.py``), extra path prefixes given to
``watch(skip=…)``, and functions that set ``__tracebackhide__`` (pytest's marker for helpers). Decisions are
cached per code object (one cache per ``skip`` tuple), keyed by ``id(code)`` (a code object's own hash is
recomputed from its contents on every lookup, ~0.2 µs), so a lookup costs an integer dictionary hit per frame.

While recording, a site is kept raw as ``(code object, f_lasti)`` — two attribute reads; the line number
(``frame.f_lineno`` walks the code's line table) is resolved only when a report is read, once per distinct
site (``format_site``).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable
from types import CodeType, FrameType

__all__ = ["call_site", "raw_site", "skip_cache", "site_of", "format_site"]

_SKIP_FILES: dict[str, bool] = {}
_SKIP_PREFIXES: list[str] = [
    os.path.dirname(__file__) + os.sep,
    os.path.dirname(sqlite3.__file__) + os.sep,
    os.path.join(os.path.dirname(os.__file__), "contextlib.py"),
    os.path.join(os.path.dirname(os.__file__), "functools.py"),
]
# Transport layers of the toyshop: the caller of the client is the interesting line, not the client.
_SKIP_SUFFIXES = (os.path.join("toyshop", "db.py"), os.path.join("toyshop", "catalog.py"))
# id(code) -> skipped? One cache per extra-skip tuple (cleared in place: taps hold their bound methods). Code
# objects seen are kept alive in _KEEP, so their ids are never reused while cached.
_CACHES: dict[tuple[str, ...], dict[int, bool]] = {}
_KEEP: dict[int, CodeType] = {}


def _skipped(filename: str) -> bool:
    hit = _SKIP_FILES.get(filename)
    if hit is None:
        if "sqlalchemy" in sys.modules and not any("sqlalchemy" in p for p in _SKIP_PREFIXES):
            import sqlalchemy

            _SKIP_PREFIXES.append(os.path.dirname(sqlalchemy.__file__) + os.sep)
            _SKIP_FILES.clear()
            for cache in _CACHES.values():
                cache.clear()
        hit = filename.startswith(tuple(_SKIP_PREFIXES)) or filename.endswith(_SKIP_SUFFIXES)
        hit = hit or filename.startswith("<frozen ")
        _SKIP_FILES[filename] = hit
    return hit


Known = Callable[[int], "bool | None"]
Decide = Callable[[CodeType], bool]


def skip_cache(extra_skip: tuple[str, ...] = ()) -> tuple[Known, Decide]:
    """``(known, decide)`` for *extra_skip*: ``known(id(code))`` is the cached decision (None when not yet
    decided), ``decide(code)`` decides and caches it."""
    cache = _CACHES.setdefault(extra_skip, {})

    def decide(code: CodeType) -> bool:
        hit = (_skipped(code.co_filename) or "__tracebackhide__" in code.co_varnames
               or bool(extra_skip and code.co_filename.startswith(extra_skip)))
        _KEEP[id(code)] = code
        cache[id(code)] = hit
        return hit

    return cache.get, decide


def site_of(frame: FrameType | None, known: Known, decide: Decide) -> tuple[CodeType | None, int]:
    """``(code, f_lasti)`` of the first frame from *frame* outwards that is not skipped (``(None, 0)``)."""
    while frame is not None:
        code = frame.f_code
        skip = known(id(code))
        if skip is None:
            skip = decide(code)
        if not skip:
            return code, frame.f_lasti
        frame = frame.f_back
    return None, 0


_SITES: dict[tuple[int, int], str] = {}


def format_site(code: CodeType | None, lasti: int) -> str:
    """``file:line`` of instruction offset *lasti* in *code* (the line ``frame.f_lineno`` gives there)."""
    if code is None:
        return "?:0"
    key = (id(code), lasti)
    site = _SITES.get(key)
    if site is None:
        line = code.co_firstlineno
        for start, end, lineno in code.co_lines():
            if start <= lasti < end:
                if lineno is not None:
                    line = lineno
                break
        site = f"{code.co_filename}:{line}"
        if len(_SITES) > 50_000:
            _SITES.clear()
        _KEEP[id(code)] = code
        _SITES[key] = site
    return site


def raw_site(extra_skip: tuple[str, ...] = ()) -> tuple[str, int]:
    """``(file, line)`` of the first frame on the current stack outside the detector, sqlite3, SQLAlchemy and
    the toyshop's transport modules, outside any path starting with *extra_skip*, and outside functions that
    set ``__tracebackhide__`` (pytest's marker for helpers, honoured here for client wrappers)."""
    code, lasti = site_of(sys._getframe(1), *skip_cache(tuple(extra_skip)))
    if code is None:
        return ("?", 0)
    file, _, line = format_site(code, lasti).rpartition(":")
    return (file, int(line))


def call_site(extra_skip: tuple[str, ...] = ()) -> str:
    """``file:line`` of the code that called into the detector's targets (see ``raw_site``)."""
    file, line = raw_site(extra_skip)
    return f"{file}:{line}"


