"""Exact counters as a test's budget: queries, HTTP calls, allocator calls, bytes and peak memory.

    from labkit.budget import within

    def test_export_stays_batched(conn):
        with within(conn, queries=2, http=1, allocations=20_000, allocated_bytes=2_000_000, tolerance=0.10):
            export(conn, 42)

The block fails (:class:`BudgetExceeded`, an ``AssertionError``) with every count it broke: the measured value,
the budget, and where the excess came from — the N+1 report's lines for queries and HTTP calls, the calling lines
that allocated most (or held the peak) for memory.

What each kind of budget promises:

* ``queries`` and ``http`` are **exact and hard**: one query more than the budget fails, every run. Queries are
  those the targets send (as :func:`labkit.nplusone.watch` sees them); HTTP calls are every request sent through
  the standard library's ``http.client`` in the process (``urllib``, ``requests``, ``urllib3``; not ``httpx``).
* ``allocations``, ``allocated_bytes`` and ``peak_bytes`` come from a memray census of the block
  (:class:`labkit.alloc.Census`): allocator calls, the bytes they asked for, and the most held at once. They
  are a floor (free lists reuse memory unseen) and move a little between Python versions and library releases,
  so each passes up to ``tolerance`` above its figure (default 10 %): declare the figure the code has today, and
  a growth beyond the tolerance fails. Nothing here times anything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import http.client
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError

__all__ = ["BudgetExceeded", "Counted", "EXACT", "MEMORY", "append", "append_times", "export_asv", "history", "within"]

#: budgets that are exact: no tolerance
EXACT = ("queries", "http")
#: budgets read from a memray census: each passes up to ``tolerance`` above its figure
MEMORY = ("allocations", "allocated_bytes", "peak_bytes")


@dataclass(frozen=True)
class Counted:
    """What one block counted against its budgets.

    Attributes:
        values: the measured count of each budgeted kind.
        budgets: the declared figure of each.
        tolerance: the fraction above its figure a memory count may reach.
        where: for each kind, where its count came from (the N+1 report, the top allocating lines).
    """

    values: dict[str, int]
    budgets: dict[str, int]
    tolerance: float
    where: dict[str, str] = field(default_factory=dict)

    def limit(self, kind: str) -> int:
        """The most ``kind`` may reach: its budget, plus the tolerance for a memory count."""
        budget = self.budgets[kind]
        return budget if kind in EXACT else int(budget * (1 + self.tolerance))

    @property
    def broken(self) -> tuple[str, ...]:
        """The kinds over their limit."""
        return tuple(k for k in self.budgets if self.values[k] > self.limit(k))

    def message(self) -> str:
        """Every broken budget, its measured value and limit, and where the count came from."""
        lines = []
        for k in self.broken:
            v, b = self.values[k], self.budgets[k]
            over = "" if k in EXACT else f" (figure {b:,} + {self.tolerance:.0%} tolerance)"
            lines.append(f"budget exceeded: {k} = {v:,}, limit {self.limit(k):,}{over}, {v - b:+,} on the figure")
        for k in dict.fromkeys(self.broken):
            if self.where.get(k):
                lines += ["", f"where the {k} came from:", self.where[k]]
        if lines:
            lines += ["", "Fix the code, or — if the growth is intended — raise the figure beside the test."]
        return "\n".join(lines)


class BudgetExceeded(AssertionError):
    """A block broke one of its budgets; ``.counted`` holds what it measured."""

    def __init__(self, counted: Counted) -> None:
        super().__init__(counted.message())
        self.counted = counted


def _checked(budgets: dict[str, Any], tolerance: float, targets: tuple[Any, ...]) -> dict[str, int]:
    known = EXACT + MEMORY
    unknown = sorted(set(budgets) - set(known))
    if unknown:
        raise BadInputError(f"within() has no budget called {', '.join(unknown)}: the kinds are {', '.join(known)}")
    if not budgets:
        raise BadInputError(f"within() needs at least one budget, e.g. within(conn, queries=3); the kinds are "
                            f"{', '.join(known)}")
    for k, v in budgets.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise BadInputError(f"{k}= must be a whole number ≥ 0 (the most the block may make), got {v!r}")
    if not (isinstance(tolerance, int | float) and 0 <= tolerance < 10):
        raise BadInputError(f"tolerance= is the fraction a memory count may pass its figure by (0.10 = 10 %), "
                            f"got {tolerance!r}")
    if "queries" in budgets and not targets:
        raise BadInputError("queries= counts what a connection sends: pass it, e.g. within(conn, queries=3)")
    return dict(budgets)


class within:  # noqa: N801 - a context manager used like a function: `with within(conn, queries=3):`
    """Fail the block (:class:`BudgetExceeded`) when it breaks any budget given as a keyword.

    Args:
        *targets: what the ``queries`` are counted on (a connection, an Engine: as for
            :func:`labkit.nplusone.watch`).
        tolerance: how far above its figure a memory count may go (0.10: 10 %); exact counts have none.
        sites: how many calling lines a memory failure names.
        record: called with the :class:`Counted` when the block ends, passed or not (the pytest fixture's
            ledger: :func:`append`).
        **budgets: ``queries``, ``http``, ``allocations``, ``allocated_bytes``, ``peak_bytes``.

    ``with within(...) as block:`` — ``block.counted`` is the :class:`Counted` once the block ends (also when it
    passes). A class rather than a generator: memray follows the Python stack from where its tracker starts,
    and a generator's ``yield`` would leave it without the caller's frames (the allocating lines unnamed).

    Raises:
        BadInputError: an unknown budget, a negative one, or ``queries=`` with nothing to watch.
        ProbeUnavailable: a memory budget where memray cannot run.
    """

    def __init__(self, *targets: Any, tolerance: float = 0.10, sites: int = 5,
                 record: Callable[[Counted], None] | None = None, **budgets: int) -> None:
        self.budgets = _checked(budgets, tolerance, targets)
        self.targets, self.tolerance, self.sites, self.record = targets, float(tolerance), sites, record
        self.counted: Counted | None = None

    def __enter__(self) -> within:
        from labkit.alloc.census import Census
        from labkit.nplusone import watch

        watched = (*self.targets, http.client) if "http" in self.budgets else self.targets
        self._stack = contextlib.ExitStack()
        self._watch = self._stack.enter_context(watch(*watched)) if watched else None
        self._census = Census(sites=self.sites) if set(self.budgets) & set(MEMORY) else None
        if self._census is not None:
            self._census.start()  # last: what starting the watch allocates is not the block's
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        from labkit.nplusone.render import render_text

        census = self._census
        if census is not None:
            census.stop()
        self._stack.close()
        if et is not None:
            return  # the block raised: that is the failure to see
        values: dict[str, int] = {}
        where: dict[str, str] = {}
        if self._watch is not None:
            report = self._watch.report
            values["queries"] = sum(q.kind == "sql" for q in report.queries)
            values["http"] = sum(q.kind == "http" for q in report.queries)
            where["queries"] = where["http"] = render_text(report)
        if census is not None:
            values.update(allocations=census.allocations or 0, allocated_bytes=census.bytes_allocated or 0,
                          peak_bytes=census.peak_bytes or 0)
            top = "\n".join(f"  {line}: {calls:,} allocations, {size:,} bytes" for line, calls, size in
                            census.allocating_sites)
            held = "\n".join(f"  {line}: {size:,} bytes held at the peak" for line, _, size in census.peak_sites)
            where.update(allocations=top, allocated_bytes=top, peak_bytes=held)
        counted = Counted({k: values[k] for k in self.budgets}, self.budgets, self.tolerance, where)
        self.counted = counted
        if self.record is not None:
            self.record(counted)
        if counted.broken:
            raise BudgetExceeded(counted)


@functools.cache
def _revision(folder: Path) -> str:
    """The git commit checked out in *folder*, or "" outside a repository — asked once per folder and process (a
    pytest run appends a row per block, all at one commit)."""
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _write(ledger: str | Path, rows: list[dict[str, Any]]) -> None:
    path = Path(ledger)
    path.parent.mkdir(parents=True, exist_ok=True)
    at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    rev = _revision(path.resolve().parent)
    with path.open("a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps({"at": at, "rev": rev, **row}) + "\n")


def append(ledger: str | Path, name: str, counted: Counted) -> None:
    """Append one line per budgeted kind of *counted* to the drift ledger (JSON lines, kept in the repository):
    when, at which commit, which test, the value, the figure and whether it passed."""
    broken = set(counted.broken)
    _write(ledger, [{"test": name, "kind": kind, "value": value, "figure": counted.budgets[kind],
                     "tolerance": 0.0 if kind in EXACT else counted.tolerance, "passed": kind not in broken}
                    for kind, value in counted.values.items()])


def append_times(ledger: str | Path, base: str, results: list[Any]) -> None:
    """Append the time gate's results (:class:`labkit.gate.GateResult`): kind ``time``, the ratio tree / base as
    the value, its interval, the threshold as the figure."""
    _write(ledger, [{"test": r.case, "kind": "time", "value": round(r.ratio, 4), "ci": [round(x, 4) for x in r.ci],
                     "figure": r.threshold, "base": base, "verdict": r.verdict, "passed": not r.failed}
                    for r in results])


def _num(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:.3f}"


def _read(ledger: str | Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    path = Path(ledger)
    if not path.is_file():
        raise BadInputError(f"no ledger at {path}: run the tests with --budget-ledger={path} first")
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = (str(row["test"]), str(row["kind"]))
            missing = {"value", "figure", "rev", "at"} - set(row)
            if missing:
                raise KeyError(", ".join(sorted(missing)))
        except (ValueError, KeyError, TypeError) as e:
            raise BadInputError(f"{path}, line {n}, is not a ledger line ({type(e).__name__}: {e}): the ledger is "
                                "JSON lines written by labkit.budget; remove or mend that line") from e
        series.setdefault(key, []).append(row)
    return series


def history(ledger: str | Path) -> str:
    """The ledger read back: for each test and kind, its first and last value, and every change of its figure
    (a raised budget shows when, and at which commit)."""
    series = _read(ledger)
    out = []
    for (test, kind), rows in sorted(series.items()):
        first, last = rows[0], rows[-1]
        out.append(f"{test} {kind}: {len(rows)} runs, {_num(first['value'])} at {first['rev'][:10] or '?'} → "
                   f"{_num(last['value'])} at {last['rev'][:10] or '?'} (figure {_num(last['figure'])})")
        for before, after in zip(rows, rows[1:], strict=False):
            if after["figure"] != before["figure"]:
                out.append(f"    figure {'raised' if after['figure'] > before['figure'] else 'lowered'} "
                           f"{_num(before['figure'])} → {_num(after['figure'])} at {after['rev'][:10] or '?'} "
                           f"({after['at']})")
    return "\n".join(out) if out else f"{ledger} holds no runs yet"


_UNITS = {"queries": "queries", "http": "requests", "allocations": "allocations", "allocated_bytes": "bytes",
          "peak_bytes": "bytes", "time": "ratio"}


def export_asv(ledger: str | Path, folder: str | Path, machine: str = "") -> Path:
    """Write the ledger as an asv results folder (``results/<machine>/…``): one "track" benchmark per test and
    kind, one results file per commit (its last value there), in the format asv's results loader reads.
    Lines with no commit (a ledger written outside git) are left out. Returns the machine's folder."""
    import platform

    series = _read(ledger)
    machine = machine or platform.node() or "labkit"
    root = Path(folder)
    where = root / machine
    where.mkdir(parents=True, exist_ok=True)
    (where / "machine.json").write_text(json.dumps({
        "machine": machine, "os": platform.platform(), "arch": platform.machine(), "cpu": platform.processor(),
        "num_cpu": str(os.cpu_count() or ""), "ram": "", "version": 1}, indent=1), encoding="utf-8")
    names = {(test, kind): f"labkit_budget.{kind}.{test}" for test, kind in series}
    (root / "benchmarks.json").write_text(json.dumps({**{name: {
        "name": name, "type": "track", "unit": _UNITS.get(kind, kind), "version": "1", "param_names": [],
        "params": [], "timeout": 60} for (_, kind), name in names.items()}, "version": 2}, indent=1),
        encoding="utf-8")
    by_rev: dict[str, dict[str, Any]] = {}
    dates: dict[str, int] = {}
    for key, rows in series.items():
        for row in rows:
            if row["rev"]:
                by_rev.setdefault(row["rev"], {})[names[key]] = [[row["value"]], []]
                dates[row["rev"]] = int(dt.datetime.fromisoformat(row["at"]).timestamp() * 1000)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    for rev, results in by_rev.items():
        (where / f"{rev[:8]}-labkit.json").write_text(json.dumps({
            "commit_hash": rev, "env_name": "labkit", "date": dates[rev],
            "params": {"machine": machine, "python": python}, "python": python, "requirements": {},
            "env_vars": {}, "result_columns": ["result", "params"], "results": results, "durations": {}, "version": 2}),
            encoding="utf-8")
    return where
