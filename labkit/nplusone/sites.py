"""Call sites: which line of *your* code issued a query — the first frame that is not library code.

Like an error tracker's "in-app" frames, decided by where a frame's file lives, whatever the library:

- skipped: this package (the detector), the standard library (``sqlite3``, ``contextlib``, ``functools``…,
  frozen modules included), and every installed package — any file under the interpreter's ``stdlib`` or
  ``site-packages`` folders (``sysconfig`` and ``site`` say where they are), so an ORM or HTTP client the
  detector has never heard of is passed through to the line that called it;
- skipped too: the toyshop's transport modules (``toyshop/db.py``, ``toyshop/catalog.py``: their caller is
  the interesting line), paths starting with a prefix given to ``watch(skip=…)`` (your own data-access
  layer), and functions that set ``__tracebackhide__`` (pytest's marker for helpers);
- kept: everything else — your code, notebook cells, and the rest of labkit (the toyshop's handlers and the
  labs' code are the code under study, even when labkit is installed in ``site-packages``).

Decisions are cached per code object (one cache per ``skip`` tuple), keyed by ``id(code)`` (a code object's
own hash is recomputed from its contents on every lookup), so a frame costs an integer dictionary hit.
While recording, a site is kept raw as ``(code object, f_lasti)``, with the same pair for the frame that called
it (the *caller*: the report counts repeats per site and caller, see ``labkit.nplusone.report``); the line
number is resolved only when a report is read, once per distinct site (:func:`format_site`), and so is
whether the site's instruction is a ``for`` loop fetching its next item (:func:`is_loop_fetch`). Most queries
are not walked for at all: a tap's :func:`locator` recognises the call expression it found last time.
"""

from __future__ import annotations

import dis
import inspect
import os
import site
import sys
import sysconfig
from collections.abc import Callable
from types import CodeType
from typing import Any

__all__ = ["Site", "expression_of", "format_site", "is_loop_fetch", "library_prefixes", "locator", "site_of",
           "skip_cache"]

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LABKIT = os.path.dirname(_HERE.rstrip(os.sep)) + os.sep
# Transport layers of the toyshop: the caller of the client is the interesting line, not the client.
_TRANSPORT = (os.path.join("toyshop", "db.py"), os.path.join("toyshop", "catalog.py"))


def library_prefixes() -> tuple[str, ...]:
    """Folders whose files are library code: the standard library and every site-packages folder."""
    paths = sysconfig.get_paths()
    found = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    found.update(getattr(site, "getsitepackages", list)())
    if site.ENABLE_USER_SITE:
        found.add(site.getusersitepackages())
    out = set()
    for folder in filter(None, found):
        for form in (os.path.abspath(folder), os.path.realpath(folder)):
            out.add(form.rstrip(os.sep) + os.sep)
    return tuple(sorted(out, key=len, reverse=True))


_LIBRARIES = library_prefixes()
_IN_LIBRARY: dict[str, bool] = {}


def is_library(filename: str) -> bool:
    """True when a frame in *filename* is plumbing rather than the user's code (see the module docstring)."""
    hit = _IN_LIBRARY.get(filename)
    if hit is None:
        if filename.startswith(_HERE) or filename.endswith(_TRANSPORT):
            hit = True
        elif filename.startswith(_LABKIT):
            hit = False  # the toyshop and the labs: code under study, wherever labkit is installed
        else:
            hit = filename.startswith("<frozen ") or filename.startswith(_LIBRARIES)
        _IN_LIBRARY[filename] = hit
    return hit


Known = Callable[[int], "bool | None"]
Decide = Callable[[CodeType], bool]
# A call site as recorded: (code, f_lasti) of the first frame not skipped, and (code, f_lasti) of its caller.
Site = tuple["CodeType | None", int, "CodeType | None", int]
HINTS = 8  # sites remembered per tap: the lines of a loop body (and its inner loops) that send queries

# id(code) -> skipped? One cache per extra-skip tuple. Code objects seen are kept alive in _KEEP, so their ids
# are never reused while cached.
_CACHES: dict[tuple[str, ...], dict[int, bool]] = {}
_KEEP: dict[int, CodeType] = {}


def skip_cache(extra_skip: tuple[str, ...] = ()) -> tuple[Known, Decide]:
    """``(known, decide)`` for *extra_skip*: ``known(id(code))`` is the cached decision (None when not yet
    decided), ``decide(code)`` decides and caches it."""
    cache = _CACHES.setdefault(extra_skip, {})

    def decide(code: CodeType) -> bool:
        hit = (is_library(code.co_filename) or "__tracebackhide__" in code.co_varnames
               or bool(extra_skip and code.co_filename.startswith(extra_skip)))
        _KEEP[id(code)] = code
        cache[id(code)] = hit
        return hit

    return cache.get, decide


_getframe = sys._getframe
_NOWHERE: Site = (None, 0, None, 0)


def site_of(known: Known, decide: Decide) -> Site:
    """``(code, f_lasti, caller code, caller f_lasti)`` of the first frame, from the caller's caller outwards,
    that is not skipped, and of the frame that called it (``None, 0`` at the top of a thread).

    The one call-site walk of the detector; :func:`locator` saves most walks. Returns ``(None, 0, None, 0)``
    when every frame is skipped.
    """
    return _walk(known, decide)[1]


def _walk(known: Known, decide: Decide) -> tuple[int, Site]:
    """The walk of :func:`site_of`, from the frame 3 below this one (its caller's caller's caller): the site and
    the depth of the frame found, counted from this one's caller (0 when none)."""
    depth = 3
    frame = _getframe(depth)
    while frame is not None:
        code = frame.f_code
        skip = known(id(code))
        if skip is None:
            skip = decide(code)
        if not skip:
            lasti = frame.f_lasti
            back = frame.f_back
            return depth - 1, (code, lasti, None, 0) if back is None else (code, lasti, back.f_code, back.f_lasti)
        frame = frame.f_back
        depth += 1
    return 0, _NOWHERE


def _holds(entry: list[Any]) -> Any:
    """The frame at *entry*'s depth (counted from its caller's caller, ``here()``'s caller) when it runs
    *entry*'s code at its instruction, called from *entry*'s caller at its instruction; else None."""
    try:
        frame = _getframe(entry[0] + 1)
    except ValueError:
        return None
    if frame.f_code is not entry[1] or frame.f_lasti != entry[2]:
        return None
    back = frame.f_back
    if (back.f_code is entry[3] and back.f_lasti == entry[4]) if back is not None else entry[3] is None:
        return frame
    return None


# a generator's or coroutine's frame can be resumed from another caller: it is never held (see locator)
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def locator(known: Known, decide: Decide) -> Callable[[], Site]:
    """A ``here()`` that returns :func:`site_of` from its caller's caller outwards, saving most walks.

    One per tap and set of skip rules. ``here()`` remembers the last ``HINTS`` sites it found, each with the
    depth it was found at; a walk is saved when the frame at one of those depths runs the same code at the same
    instruction, called from the same instruction of the same code as then: the query comes from the same call
    expression, so its site is that line, found without walking (and materialising) the library's frames in
    between. Several are kept because a loop body often alternates between lines (``post.author``, then
    ``post.author.posts``), each reached through the library at its own depth; the site that came after the
    last one found, last time, is tried first, since a loop's body sends from its lines in the same order each
    pass. Each remembered site's frame is held too (not only its depth): while that very frame (the same activation,
    ``is``) stands at that depth, at the same instruction, its caller cannot have changed, so in the usual loop
    one frame is looked at, not its caller nor a walk's dozen. (A generator's or a coroutine's frame can be
    resumed from another caller: for those the caller is compared every time.) The cost: a function that
    sent queries keeps its locals alive after it returns until ``HINTS`` newer sites push it out or the tap's
    sinks change (every ``watch`` block's start and end), never beyond the block.
    """
    # entries: [depth (from here()), code, f_lasti, caller code, caller f_lasti, site, the entry found next,
    #           its frame (None for a resumable one)]
    entries: list[list[Any]] = []
    last: list[Any] | None = None

    def here() -> Site:
        nonlocal last
        prev = last
        if prev is not None:
            entry = prev[6]
            if entry is not None:  # the usual case, once per query: inline, no call
                try:
                    frame = _getframe(entry[0])
                except ValueError:
                    frame = None
                if frame is not None and frame is entry[7] and frame.f_lasti == entry[2]:
                    last = entry
                    return entry[5]  # type: ignore[no-any-return]
            for other in entries:
                frame = _holds(other)
                if frame is not None:
                    if not frame.f_code.co_flags & _RESUMABLE:
                        other[7] = frame
                    prev[6] = last = other
                    return other[5]  # type: ignore[no-any-return]
        depth, found = _walk(known, decide)
        if depth:
            frame = _getframe(depth)
            entry = [depth, found[0], found[1], found[2], found[3], found, None,
                     None if frame.f_code.co_flags & _RESUMABLE else frame]
            if prev is not None:
                prev[6] = entry
            last = entry
            entries.insert(0, entry)
            del entries[HINTS:]
        return found

    return here


_FOR_ITER = dis.opmap["FOR_ITER"]
_FETCH: dict[tuple[int, int], bool] = {}


def is_loop_fetch(code: CodeType | None, lasti: int) -> bool:
    """True when instruction *lasti* of *code* is a ``for`` loop asking its iterable for the next item
    (``FOR_ITER``): a query sent from there is the iterable's own load — a chunked iterator fetching its next
    chunk, with its prefetches — not the loop body's work per item. (``co_code`` is the unspecialised
    bytecode, so this holds on every CPython the lab supports; ``f_lasti`` is a byte offset into it.)"""
    if code is None:
        return False
    key = (id(code), lasti)
    found = _FETCH.get(key)
    if found is None:
        raw = code.co_code
        found = 0 <= lasti < len(raw) and raw[lasti] == _FOR_ITER
        if len(_FETCH) > 50_000:
            _FETCH.clear()
        _KEEP[id(code)] = code
        _FETCH[key] = found
    return found


_SITES: dict[tuple[int, int], str] = {}
_EXPRESSIONS: dict[tuple[int, int], str] = {}


def expression_of(code: CodeType | None, lasti: int) -> str:
    """The columns of the expression instruction *lasti* belongs to, ``"start-end"`` ("" when not known): what
    tells two calls on one line apart (``node.parent.parent`` makes two). Read from ``co_positions()`` (PEP 657)
    rather than kept as the offset itself, because an offset is not stable for one expression: CPython 3.11 runs
    a call as ``PRECALL`` then ``CALL``, and once specialised the call happens inside ``PRECALL``, two code units
    earlier — both instructions carry the call expression's columns."""
    if code is None or lasti < 0:
        return ""
    key = (id(code), lasti)
    found = _EXPRESSIONS.get(key)
    if found is None:
        found = ""
        for i, (_line, _end, col, end_col) in enumerate(code.co_positions()):
            if i == lasti // 2:
                found = "" if col is None or end_col is None else f"{col}-{end_col}"
                break
        if len(_EXPRESSIONS) > 50_000:
            _EXPRESSIONS.clear()
        _KEEP[id(code)] = code
        _EXPRESSIONS[key] = found
    return found


def format_site(code: CodeType | None, lasti: int) -> str:
    """``file:line`` of instruction offset *lasti* in *code* (the line ``frame.f_lineno`` gives there)."""
    if code is None:
        return "?:0"
    key = (id(code), lasti)
    found = _SITES.get(key)
    if found is None:
        line = code.co_firstlineno
        for start, end, lineno in code.co_lines():
            if start <= lasti < end:
                if lineno is not None:
                    line = lineno
                break
        found = f"{code.co_filename}:{line}"
        if len(_SITES) > 50_000:
            _SITES.clear()
        _KEEP[id(code)] = code
        _SITES[key] = found
    return found
