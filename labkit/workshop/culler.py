"""How long each lab's cells run, measured here, and the hub's idle culler held against it.

Each notebook's QUICK budget is :data:`labkit.labs.QUICK_BUDGET_S`: a QUICK cell never runs longer than its whole
lab's budget. A full-settings run has no such bound; its cells' times come from runs measured on this machine —
every ``labkit report`` run keeps its executed notebook, in which papermill writes each cell's duration.
``labkit doctor --hub`` compares the longest cell with the hub's idle-culler timeout (:func:`culler_check`).

    labkit report notebooks/06_gc_profiling.ipynb          # once per lab, at the settings the room will use
    longest_cells()   # {("06_gc_profiling.ipynb", False): CellTime(seconds=…, cell=…, run=…), …}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from labkit.labs import QUICK_BUDGET_S
from labkit.workshop.doctor import Check

__all__ = ["SILENT_S", "CellTime", "culler_check", "longest_cells"]


@dataclass(frozen=True)
class CellTime:
    """The longest cell of one measured run of a lab.

    Attributes:
        lab: the notebook's file name.
        quick: whether the run had ``QUICK = True``.
        seconds: how long its longest cell ran.
        cell: that cell's number, counted as in the source notebook.
        first: its first line of code.
        run: the run's folder.
        started: when the run started (ISO, UTC).
    """

    lab: str
    quick: bool
    seconds: float
    cell: int
    first: str
    run: str
    started: str


def _longest(executed: Path) -> tuple[float, int, str] | None:
    from labkit.report.cellwatch import first_line, source_cells

    try:
        nb = json.loads(executed.read_text())
    except (OSError, ValueError):
        return None
    timed = [(float(c["metadata"]["papermill"].get("duration") or 0), n, first_line(c))
             for n, c in enumerate(source_cells(nb), 1) if c.get("metadata", {}).get("papermill")]
    return max(timed, default=None)


def longest_cells(root: str | os.PathLike[str] | None = None) -> dict[tuple[str, bool], CellTime]:
    """The longest cell of the latest run of each lab at each setting (QUICK or not), from the ``labkit report``
    run folders under ``root`` (default: ``reports/`` in :func:`labkit.results.results_dir`).

    Runs of notebooks that are not labs (not in :data:`QUICK_BUDGET_S`) are left out; so are cells a failed run
    never reached (papermill records no duration for them).
    """
    from labkit.errors import ResultsError
    from labkit.report.params import effective
    from labkit.report.run import ReportRun
    from labkit.results import results_dir

    base = Path(root) if root is not None else results_dir() / "reports"
    out: dict[tuple[str, bool], CellTime] = {}
    for record in sorted(base.glob("*/report.json")) if base.is_dir() else ():
        try:
            run = ReportRun.find(record.parent)
        except ResultsError:
            continue
        lab = Path(run.notebook).name if run is not None else ""
        if run is None or lab not in QUICK_BUDGET_S:
            continue
        found = _longest(run.executed)
        if found is None:
            continue
        quick = effective(run.parameters, run.declared).get("QUICK") is True
        seconds, cell, first = found
        key = (lab, quick)
        if key not in out or run.started_at >= out[key].started:
            out[key] = CellTime(lab, quick, round(seconds, 1), cell, first, str(record.parent), run.started_at)
    return out


#: the longest a lab's labkit call runs without printing progress (seconds); labkit's long runs print more often
SILENT_S = 30


def culler_check(timeout: float | None, cells: Mapping[tuple[str, bool], CellTime]) -> Check:
    """Doctor's line on the hub's idle culler: its ``timeout`` (seconds, None when not visible) against each lab's
    QUICK budget and the longest ``cells`` measured here (:func:`longest_cells`), naming the labs whose cells
    outlast it."""
    if timeout is None:
        return Check("culler", "ok", "its timeout is not visible here (the workshop config sets "
                     "PERFLAB_CULL_TIMEOUT); labkit's long runs print progress at least every 30 s")
    if timeout <= 2 * SILENT_S:
        return Check("culler", "warn", f"idle servers are culled after {timeout:g} s, within twice the 30 s between "
                     "progress reports: a slow cell or a paused learner loses the server",
                     "ask for a culler timeout of an hour (jupyterhub-idle-culler --timeout=3600, docs/workshop.md)")
    over = sorted((c for c in cells.values() if c.seconds > timeout), key=lambda c: -c.seconds)
    unknown = [Path(lab).stem for lab, budget in QUICK_BUDGET_S.items() if budget > timeout and (lab, True) not in cells]
    if over or unknown:
        said, fixes = [], []
        if over:
            listed = "; ".join(f"{Path(c.lab).stem} ({'QUICK' if c.quick else 'full settings'}) cell {c.cell}, "
                               f"{c.seconds:,.0f} s: {c.first}" for c in over[:4])
            more = f" and {len(over) - 4} more" if len(over) > 4 else ""
            said.append(f"these labs' cells ran longer when measured here: {listed}{more}. Such a cell keeps its "
                        "server only while it prints: labkit's long runs report progress every 30 s; a silent "
                        "loop or sleep is culled")
            if not all(c.quick for c in over):
                fixes.append("have the room run them with QUICK = True")
        if unknown:
            said.append(f"the QUICK budget of {', '.join(unknown)} ({max(QUICK_BUDGET_S.values()):.0f} s a run) is "
                        "longer and no QUICK run of theirs was measured here: a silent cell of theirs may outlast it")
            fixes.append("run each once with `labkit report notebooks/NN.ipynb --quick` (doctor then compares its "
                         "cells)")
        asked = max(3600, 600 * -(-2 * max((c.seconds for c in over), default=0) // 600))
        fix = (f"ask for a culler timeout above the longest cell (jupyterhub-idle-culler --timeout={asked:.0f}, "
               "docs/workshop.md)")
        return Check("culler", "warn", f"idle servers are culled after {timeout:g} s; " + "; ".join(said),
                     ", or ".join([fix, *fixes]))
    quick_said = ("longer than any lab's whole QUICK run (its budget: at most "
                  f"{max(QUICK_BUDGET_S.values()):.0f} s)" if timeout >= max(QUICK_BUDGET_S.values()) else
                  "longer than every QUICK cell measured here")
    full = sorted((c for (_, quick), c in cells.items() if not quick), key=lambda c: -c.seconds)
    if full:
        quick_said += (f"; at full settings the longest cell measured here ran {full[0].seconds:,.0f} s "
                       f"({Path(full[0].lab).stem} cell {full[0].cell})")
    missing = sum((lab, False) not in cells for lab in QUICK_BUDGET_S if lab != "index.ipynb")  # labs, not the index
    if missing:
        quick_said += (f"; {missing} lab(s) not measured here at full settings (run each once with `labkit report "
                       "notebooks/NN.ipynb` and doctor compares its cells)")
    return Check("culler", "ok", f"idle servers are culled after {timeout:g} s, {quick_said}; labkit's long runs "
                 "report progress at least every 30 s, which counts as activity")
