"""Which cell of a running notebook is still running: papermill's bar moves only when a cell ends, and a long run
shows progress at least every 30 s (:data:`labkit.progress.BEAT_S`), so ``labkit report`` says so in between.

    with Heartbeat(CellWatch(run.executed)):     # labkit.progress.Heartbeat: every 10 s
        papermill.execute_notebook(...)
    # labkit report: cell 14 of 31 still running after 1 min 35 s: cmp = labkit.compare(parse_c, parse_arrow)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["CENSUS_TAG", "STILL_S", "CellWatch", "first_line", "running_cell", "source_cells"]

#: a cell running this long is said to be still running, and again each time as long again has passed
STILL_S = 15.0
#: tags the cell ``labkit report`` appends to a run (``labkit.report.run``): it lists the versions of every
#: package the kernel imported by the end
CENSUS_TAG = "labkit-report-imports"
#: the tags of the cells a report run adds to the notebook (papermill's parameters, labkit's package census)
_ADDED = {"injected-parameters", CENSUS_TAG}


def source_cells(nb: dict) -> list[dict]:
    """The cells of an executed notebook (as JSON) that its source has: papermill's injected parameters and
    labkit's census cell left out, so that cell numbers match the notebook the learner wrote."""
    return [c for c in nb.get("cells", ()) if not _ADDED & set(c.get("metadata", {}).get("tags", ()))]


def first_line(cell: dict) -> str:
    """A cell's first line of code (a comment only when it holds nothing else), at most 80 characters, with
    `` …`` when more code follows."""
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    code = [line for line in lines if not line.startswith("#")]
    first = (code or lines or [""])[0][:80]
    return first + " …" if len(code) > 1 else first


def running_cell(executed: str | os.PathLike[str]) -> tuple[int, int, str, dt.datetime] | None:
    """The cell papermill is running, read from the executed notebook it saves as each cell starts:
    ``(number, cells, first line of code, started)`` counted as in the source notebook (:func:`source_cells`);
    None when no cell is running or the file is mid-write."""
    try:
        nb = json.loads(Path(executed).read_text())
    except (OSError, ValueError):
        return None
    cells = source_cells(nb)
    for number, cell in enumerate(cells, 1):
        pm = cell.get("metadata", {}).get("papermill", {})
        if pm.get("status") == "running" and pm.get("start_time"):
            try:
                started = dt.datetime.fromisoformat(pm["start_time"])
            except ValueError:
                return None
            return number, len(cells), first_line(cell), started
    return None


def _lasted(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    return f"{minutes} min {s:02d} s" if minutes else f"{s} s"


class CellWatch:
    """A :class:`labkit.progress.Heartbeat`'s beat for a notebook run: it says which cell is still running, and
    for how long, once the cell has run :data:`STILL_S` seconds and again every :data:`STILL_S` after.

    Args:
        executed: the executed notebook papermill writes.
        say: where the line goes (default: stderr, above papermill's bar).
        now: the clock (UTC datetimes; tests pass a fake one).
    """

    def __init__(self, executed: str | os.PathLike[str], say: Callable[[str], object] | None = None,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        self.executed, self.now = Path(executed), now
        self.say = say or _above_bar
        self._said: dict[tuple[int, dt.datetime], float] = {}

    def __call__(self, _elapsed_s: float = 0.0) -> None:
        found = running_cell(self.executed)
        if found is None:
            return
        number, cells, first, started = found
        age = (self.now() - started).total_seconds()
        last = self._said.get((number, started))
        if age >= STILL_S and (last is None or age - last >= STILL_S):
            self._said[(number, started)] = age
            self.say(f"labkit report: cell {number} of {cells} still running after {_lasted(age)}: {first}")


def _above_bar(line: str) -> None:
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)
