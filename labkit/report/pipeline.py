"""One report, start to finish: run the notebook (:mod:`~labkit.report.run`), render what it produced
(:mod:`~labkit.report.html`), write the page, and record where it went."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, NotebookError
from labkit.report.baseline import concluded_in
from labkit.report.html import Rendered, render, write_html
from labkit.report.run import ReportRun, check_notebook, check_parameters, execute

__all__ = ["build", "check_baseline"]


def check_baseline(folder: str | os.PathLike[str]) -> Path:
    """The baseline folder, after checking it holds experiment records to compare with."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise BadInputError(f"--baseline {path}: no such folder. Pass the folder of an earlier run, printed by "
                            "`labkit report` (results/reports/<notebook>-<time>/)")
    if not concluded_in(path):
        raise BadInputError(f"--baseline {path} holds no experiment record, so there is nothing to compare "
                            "with: pass the folder of an earlier `labkit report` run of a notebook that saves "
                            "its experiments (exp.save())")
    return path.resolve()


def build(notebook: str | os.PathLike[str], parameters: dict[str, Any] | None = None, *,
          out: str | os.PathLike[str] | None = None, baseline: str | os.PathLike[str] | None = None,
          root: str | os.PathLike[str] | None = None, progress: bool | None = None,
          say: Callable[[str], None] | None = None) -> tuple[ReportRun, Rendered]:
    """Run ``notebook`` with ``parameters`` and write its report; return the run's record and the render.

    Args:
        notebook: the ``.ipynb`` to run.
        parameters: values for its ``parameters`` cell (``{"QUICK": True}`` for the quick settings).
        out: where to write the HTML (default: ``<notebook>-<time>.html`` beside the run's folder).
        baseline: an earlier run's folder: each experiment is compared with it by title.
        root: where run folders go (default: ``results/reports/``).
        progress: show papermill's progress bar (:mod:`labkit.progress`: by default inside a notebook;
            ``labkit report`` shows it unless ``--no-progress``).
        say: where to print progress lines (default: stderr).

    Raises:
        BadInputError: bad notebook, parameter, baseline or output path (checked before anything runs).
        NotebookError: a cell failed (named, with its error) or the page could not be made self-contained;
            no HTML is written then, and the run's ``report.json`` says ``failed``.
    """
    def default_say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    say = say or default_say
    base = check_baseline(baseline) if baseline is not None else None
    if out is not None and Path(out).is_dir():
        raise BadInputError(f"--out {out} is a folder: give the report's file name, e.g. {Path(out) / 'report.html'}")
    check_parameters(check_notebook(notebook), dict(parameters or {}))   # before anything starts
    shown = ", ".join(f"{k}={v!r}" for k, v in (parameters or {}).items()) or "its own parameters"
    say(f"labkit report: running {Path(notebook).name} with {shown}")
    run = execute(notebook, parameters, root=root, progress=progress)
    say(f"labkit report: run folder {run.folder} (ran in {run.duration_s or 0:.0f} s); rendering…")
    try:
        rendered = render(run.executed, run=run, baseline=base)
        folder = Path(run.folder)
        target = write_html(Path(out) if out is not None else folder.parent / f"{folder.name}.html", rendered.html)
    except Exception as e:
        failed = dataclasses.replace(run, status="failed", error=f"rendering failed: {e}")
        failed.save()
        if isinstance(e, NotebookError):
            raise
        raise NotebookError(f"the notebook ran, but its report could not be rendered: {type(e).__name__}: {e}. "
                            f"The executed notebook is kept at {run.executed}") from e
    run = dataclasses.replace(run, status="complete", html=str(target.resolve()))
    run.save()
    return run, rendered
