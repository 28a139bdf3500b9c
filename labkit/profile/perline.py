"""Where the time, the memory, the queries and the calls go, line by line — of a function, or of a notebook cell.

    view = profile.lines(export, conn, catalog, 7, watch=(conn, catalog))   # a function, called once
    view                                     # the annotated source (offline HTML): a bar per column, per line
    view.to_frame()                          # line, source, hits, ms, allocations, bytes, sql, http
    view.top("sql")                          # the line that sent the most statements
    %load_ext labkit                         # then, on a cell with no function around it:
    %%lines --watch conn catalog

Two passes, because counting is never timing (:mod:`labkit.alloc`): the first runs the code under a line tracer
(``sys.settrace``, only in the profiled code's own frames: a function it calls is charged to the calling line)
and under the N+1 detector's taps on ``watch`` (:func:`labkit.nplusone.watch`), each query charged to the line
that was running when it started; the second runs it again under a memray census (Python allocators traced), each
allocation charged to the innermost frame of the profiled code on its stack. So the code must be safe to run
twice (the second run's result is the one returned). The tracer is pure Python: its own work is left out of
each line's time, but a line event costs it far more than line_profiler's C tracer, so short lines inside a hot
loop read long beside the rest (``tests/benchmarks/bench_profile_lines.py`` prints both tracers' cost against
the plain call, side by side). The allocation pass is skipped, with the reason in ``note``, where memray is
missing or another memray tracker runs.
"""

from __future__ import annotations

import html
import inspect
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError

__all__ = ["LineProfile", "LineRow", "COLUMNS", "lines", "lines_of_cell"]

#: the columns of the view, in display order (``ms``: wall time; ``bytes``: bytes allocated, freed or not)
COLUMNS = ("hits", "ms", "allocations", "bytes", "sql", "http")


@dataclass(frozen=True)
class LineRow:
    """One source line: how often it ran, and what it cost (allocations and bytes None when not counted)."""

    line: int
    source: str
    hits: int = 0
    ms: float = 0.0
    allocations: int | None = None
    bytes: int | None = None
    sql: int = 0
    http: int = 0


@dataclass(frozen=True)
class LineProfile:
    """A line-by-line view of one run of ``label``: :attr:`rows` in source order, from ``first_line``."""

    label: str
    filename: str
    rows: tuple[LineRow, ...]
    note: str = ""
    result: Any = field(default=None, compare=False, repr=False)

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([vars(r) for r in self.rows], columns=["line", "source", *COLUMNS])

    def top(self, column: str) -> LineRow | None:
        """The line with the most of ``column`` (one of :data:`COLUMNS`), or None when no line has any."""
        if column not in COLUMNS:
            raise BadInputError(f"column={column!r}: one of {', '.join(COLUMNS)}")
        best = max(self.rows, key=lambda r: getattr(r, column) or 0, default=None)
        return best if best is not None and (getattr(best, column) or 0) > 0 else None

    def __repr__(self) -> str:
        tops = [f"{c} line {r.line}" for c in ("ms", "bytes", "sql", "http") if (r := self.top(c)) is not None]
        return f"LineProfile({self.label}: {len(self.rows)} lines; most {', '.join(tops) or 'nothing'})"

    def _repr_html_(self) -> str:
        """The annotated source: each column's figure beside its line, with a bar against the column's largest
        (plain HTML and CSS: renders in any viewer, nothing fetched)."""
        peak = {c: max((getattr(r, c) or 0 for r in self.rows), default=0) or 1 for c in COLUMNS}
        fmt = {"hits": "{:,}", "ms": "{:,.3f}", "allocations": "{:,}", "bytes": "{:,}", "sql": "{:,}", "http": "{:,}"}

        def cell(r: LineRow, c: str) -> str:
            v = getattr(r, c)
            if v is None:
                return "<td style='color:#999;text-align:right'>–</td>"
            if not v:
                return "<td></td>"
            width = max(2, round(60 * v / peak[c]))
            bar = f"<span style='display:inline-block;height:8px;width:{width}px;background:#4c78a8;opacity:.55'></span>"
            return f"<td style='text-align:right;white-space:nowrap'>{fmt[c].format(v)} {bar}</td>"

        head = "".join(f"<th style='text-align:right'>{c}</th>" for c in COLUMNS)
        body = "".join(
            f"<tr><td style='color:#999;text-align:right'>{r.line}</td>{''.join(cell(r, c) for c in COLUMNS)}"
            f"<td style='font-family:monospace;white-space:pre;text-align:left'>{html.escape(r.source)}</td></tr>"
            for r in self.rows)
        note = f"<div style='color:#a60'>{html.escape(self.note)}</div>" if self.note else ""
        return (f"<div style='overflow-x:auto'><b>{html.escape(self.label)}</b> — line by line (ms: wall time with the tracer on; "
                f"allocations and bytes: a second run, under memray){note}<table style='font-size:12px'>"
                f"<tr><th>line</th>{head}<th style='text-align:left'>source</th></tr>{body}</table></div>")


def lines(fn: Callable[..., Any], *args: Any, watch: Sequence[Any] = (), allocations: bool = True,
          **kwargs: Any) -> LineProfile:
    """Call ``fn(*args, **kwargs)`` and view what each of its source lines cost (see the module's text).

    Args:
        fn: a Python function (its source must be readable: not a builtin or a lambda typed at a prompt).
        watch: connections and HTTP clients whose queries to count per line (:func:`labkit.nplusone.watch`'s
            targets); none by default.
        allocations: run a second time under memray to count allocations per line.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        raise BadInputError(f"lines() profiles a Python function, got {type(fn).__name__}: wrap the call in a def, "
                            "or use %%lines on a cell")
    try:
        source, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise BadInputError(f"lines() needs {fn.__qualname__}'s source to show it ({e}); define it in a file or "
                            "a notebook cell") from e
    span = (code.co_filename, first, first + len(source) - 1)
    return _profile(lambda: fn(*args, **kwargs), span, source, fn.__qualname__, tuple(watch), allocations)


def lines_of_cell(cell: str, namespace: dict[str, Any], *, watch: Sequence[Any] = (), allocations: bool = True,
                  label: str = "cell") -> LineProfile:
    """Run a notebook cell's source in ``namespace`` (the notebook's own: its names are read and set there) and
    view what each of its lines cost. What ``%%lines`` does."""
    folder = Path(tempfile.gettempdir()) / "labkit-lines"
    folder.mkdir(exist_ok=True)
    path = folder / f"cell-{time.time_ns()}.py"  # a real file: tracebacks and memray's stacks can name its lines
    path.write_text(cell)
    try:
        code = compile(cell, str(path), "exec")
    except SyntaxError as e:
        raise BadInputError(f"the cell does not compile: {e}") from e
    rows = cell.splitlines(keepends=True) or [""]
    return _profile(lambda: exec(code, namespace), (str(path), 1, len(rows)), rows, label, tuple(watch), allocations)


def _profile(run: Callable[[], Any], span: tuple[str, int, int], source: list[str], label: str,
             watch: tuple[Any, ...], allocations: bool) -> LineProfile:
    filename, lo, hi = span
    hits: dict[int, int] = {}
    spent: dict[int, int] = {}
    changes: list[tuple[int, int]] = []  # (ns, line): when each line began, for charging queries by time
    state = {"line": 0, "t": 0}

    def ours(code: Any) -> bool:
        return code.co_filename == filename and lo <= code.co_firstlineno <= hi

    def local(frame: Any, event: str, _arg: Any) -> Any:
        now = time.perf_counter_ns()
        if state["line"]:
            spent[state["line"]] = spent.get(state["line"], 0) + now - state["t"]
        if event == "line" and lo <= frame.f_lineno <= hi:
            hits[frame.f_lineno] = hits.get(frame.f_lineno, 0) + 1
            state["line"] = frame.f_lineno
            changes.append((now, frame.f_lineno))
        state["t"] = time.perf_counter_ns()  # the tracer's own work is left out of the line's time
        return local

    def calls(frame: Any, event: str, _arg: Any) -> Any:
        return local if event == "call" and ours(frame.f_code) else None

    recorder = None
    if watch:
        from labkit.nplusone import watch as nplusone_watch

        recorder = nplusone_watch(*watch, label=label)
    previous = sys.gettrace()
    if recorder is not None:
        recorder.start()
    started = time.perf_counter_ns()  # the queries' start_ns are counted from the recorder's start, just before
    sys.settrace(calls)
    try:
        result = run()
    finally:
        sys.settrace(previous)
        if state["line"]:
            spent[state["line"]] = spent.get(state["line"], 0) + time.perf_counter_ns() - state["t"]
        report = recorder.stop() if recorder is not None else None
    sql: dict[int, int] = {}
    http: dict[int, int] = {}
    if report is not None:
        import bisect

        starts = [t for t, _ in changes]
        for q in report.queries:
            i = bisect.bisect_right(starts, started + q.start_ns) - 1
            if i >= 0:
                into = sql if q.kind == "sql" else http
                into[changes[i][1]] = into.get(changes[i][1], 0) + 1
    counted, note = None, ""
    if allocations:
        counted, note, result = _allocations(run, span, result)
    rows = tuple(LineRow(n, text.rstrip("\n"), hits.get(n, 0), spent.get(n, 0) / 1e6,
                         *((None, None) if counted is None else counted.get(n, (0, 0))), sql.get(n, 0), http.get(n, 0))
                 for n, text in zip(range(lo, hi + 1), source, strict=False))
    return LineProfile(label, filename, rows, note, result)


def _allocations(run: Callable[[], Any], span: tuple[str, int, int],
                 result: Any) -> tuple[dict[int, tuple[int, int]] | None, str, Any]:
    """Per line of ``span``: (allocations, bytes) of a second run under memray, "", and that run's result; or
    None, why not, and ``result`` (the first run's) when memray cannot run here."""
    from labkit.alloc.census import _free_kinds, census_unavailable

    if (why := census_unavailable()) is not None:
        return None, f"allocations not counted: {why}", result
    import memray

    filename, lo, hi = span
    out: dict[int, tuple[int, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "lines.bin"
        tracker = memray.Tracker(destination=memray.FileDestination(str(dest), compress_on_exit=False),
                                 trace_python_allocators=True)
        try:
            tracker.__enter__()
        except RuntimeError as e:  # another tracker is active (an error of the profiled code is not caught here)
            return None, f"allocations not counted: {e}", result
        try:
            result = run()
        finally:
            tracker.__exit__(None, None, None)
        frees = _free_kinds()
        reader = memray.FileReader(str(dest))
        try:
            for r in reader.get_allocation_records():
                if int(r.allocator) in frees:
                    continue
                line = next((ln for _fn, f, ln in r.stack_trace() if f == filename and lo <= ln <= hi), None)
                if line is not None:
                    n, size = out.get(line, (0, 0))
                    out[line] = (n + r.n_allocations, size + r.size)
        finally:
            reader.close()
    return out, "", result


def magic(line: str, cell: str) -> LineProfile:
    """``%%lines [--watch NAME …] [--no-allocations]``: the cell, profiled line by line in the notebook's
    namespace (``--watch`` names connections or clients defined there). The cell runs twice — timed, then
    counted — unless ``--no-allocations``: a cell that appends to a list appends twice."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise BadInputError("%%lines runs in a notebook (IPython)")
    words = shlex.split(line)
    allocations = "--no-allocations" not in words
    words = [w for w in words if w != "--no-allocations"]
    names = words[1:] if words[:1] == ["--watch"] else []
    if words and not names:
        raise BadInputError(f"%%lines takes --watch NAME … and --no-allocations, got {line!r}")
    missing = [n for n in names if n not in shell.user_ns]
    if missing:
        raise BadInputError(f"%%lines --watch: {', '.join(missing)} not defined in this notebook")
    return lines_of_cell(cell, shell.user_ns, watch=[shell.user_ns[n] for n in names], allocations=allocations)
