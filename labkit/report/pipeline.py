"""One report, start to finish: run the notebook (:mod:`~labkit.report.run`), render what it produced
(:mod:`~labkit.report.html`), write the page, and record where it went; or render a finished run again
(:func:`rerender`), with another baseline, without running anything."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, BaselineError, NotebookError, ResultsError
from labkit.progress import Heartbeat
from labkit.report.baseline import concluded_in
from labkit.report.cellwatch import STILL_S
from labkit.report.html import Rendered, render, write_html
from labkit.report.params import budget_parameters, declared_parameters, differences, effective
from labkit.report.run import ReportRun, check_kernel, check_notebook, check_parameters, execute, with_quick

__all__ = ["build", "rerender", "check_baseline"]


def _show(value: Any) -> str:
    return "(not set)" if value is None else repr(value)


def check_baseline(folder: str | os.PathLike[str], notebook: str | os.PathLike[str] | None = None,
                   values: dict[str, Any] | None = None, *, declared: dict[str, str] | None = None,
                   compare_anyway: bool = False) -> Path:
    """The baseline folder, after checking it can stand for a run of ``notebook`` with ``values``.

    Args:
        folder: an earlier run's folder.
        notebook: the notebook this run runs (its file name must match the baseline's).
        values: every parameter's value in this run (:func:`labkit.report.params.effective`).
        declared: this notebook's parameters cell, standing in for a baseline that did not record its own.
        compare_anyway: accept another notebook's run, or other parameters (the page then says what differs).

    Raises:
        BaselineError: no such folder, no experiment record in it, a failed or unfinished run, another
            notebook's run, or other parameters (the last two unless ``compare_anyway``).
    """
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise BaselineError(f"--baseline {path}: no such folder. Pass the folder of an earlier run, printed by "
                            "`labkit report` (results/reports/<notebook>-<time>/)")
    try:
        then = ReportRun.find(path)
    except ResultsError as e:
        raise BaselineError(f"--baseline {path}: its report.json cannot be read ({e})") from e
    if then is not None and then.status in ("failed", "running"):
        why = (then.error or "").strip().splitlines()[0] if then.error else "it never finished"
        raise BaselineError(f"--baseline {path} is a {'failed' if then.status == 'failed' else 'unfinished'} run "
                            f"({why[:200]}): its experiments are not a baseline. Pass a run that completed")
    if not concluded_in(path):
        raise BaselineError(f"--baseline {path} holds no experiment record, so there is nothing to compare "
                            "with: pass the folder of an earlier `labkit report` run of a notebook that saves "
                            "its experiments (exp.save())")
    if then is not None and notebook is not None and not compare_anyway:
        mine, theirs = Path(notebook).name, Path(then.notebook).name
        if mine != theirs:
            raise BaselineError(f"--baseline {path} is a run of {theirs}, not of {mine}: its experiments answer "
                                "another question. Pass a run of the same notebook, or --compare-anyway to "
                                "compare them by title all the same")
        if values is not None:
            budgets = _budgets(notebook)
            moved = [d for d in differences(values, effective(then.parameters, then.declared or declared or {}))
                     if d[0] not in budgets]
            if moved:
                listed = "; ".join(f"{n} = {_show(a)} now, {_show(b)} then" for n, a, b in moved)
                raise BaselineError(f"--baseline {path} ran with other parameters ({listed}): its ratios "
                                    "measured something else. Rerun with the same -p values, or pass "
                                    "--compare-anyway (the page then lists what differs)")
    return path.resolve()


def _budgets(notebook: str | os.PathLike[str]) -> frozenset[str]:
    try:
        return budget_parameters(notebook)
    except Exception:  # the source notebook moved since the run: no budget is declared then
        return frozenset()


def _say(say: Callable[[str], None] | None) -> Callable[[str], None]:
    def default_say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return say or default_say


def _rendering(say: Callable[[str], None]) -> Heartbeat:
    """Says every 10 s that the page is still being made, once it has taken 15 s (many charts to draw)."""
    def beat(elapsed: float) -> None:
        if elapsed >= STILL_S:
            say(f"labkit report: still rendering the page ({elapsed:.0f} s: charts are drawn as SVG one by one)")

    return Heartbeat(beat)


def _write(run: ReportRun, baseline: Path | None, out: str | os.PathLike[str] | None,
           say: Callable[[str], None] | None = None, keep: bool = True) -> tuple[ReportRun, Rendered]:
    try:
        with _rendering(_say(say)):
            rendered = render(run.executed, run=run, baseline=baseline)
        target = write_html(Path(out) if out is not None else run.default_page, rendered.html)
    except Exception as e:
        failed = dataclasses.replace(run, status="failed", error=f"rendering failed: {e}")
        failed.save()
        if isinstance(e, NotebookError):
            raise
        raise NotebookError(f"the notebook ran, but its report could not be rendered: {type(e).__name__}: {e}. "
                            f"The executed notebook is kept at {run.executed}") from e
    # the run's page is the one it was built with, or its default page: a re-render --out another file writes that
    # file this time only (the record keeps its page)
    page = str(target.resolve()) if keep else run.html
    run = dataclasses.replace(run, status="complete", html=page, error=None)
    run.save()
    return run, rendered


def _check_out(out: str | os.PathLike[str] | None) -> None:
    if out is not None and Path(out).is_dir():
        raise BadInputError(f"--out {out} is a folder: give the report's file name, e.g. {Path(out) / 'report.html'}")


def build(notebook: str | os.PathLike[str], parameters: dict[str, Any] | None = None, *,
          quick: bool = False, raw: dict[str, str] | None = None,
          out: str | os.PathLike[str] | None = None, baseline: str | os.PathLike[str] | None = None,
          compare_anyway: bool = False, root: str | os.PathLike[str] | None = None, progress: bool | None = None,
          say: Callable[[str], None] | None = None, repeat: int = 1) -> tuple[ReportRun, Rendered]:
    """Run ``notebook`` with ``parameters`` and write its report; return the run's record and the render.

    Args:
        notebook: the ``.ipynb`` to run.
        parameters: values for its ``parameters`` cell, made the types of its defaults.
        quick: set ``QUICK=True`` (the notebook's quick settings), marked as set by ``--quick``.
        raw: the command-line text of each parameter, when it came from there.
        out: where to write the HTML (default: ``<notebook>-<time>.html`` beside the run's folder).
        baseline: an earlier run of the same notebook with the same parameters: each experiment is compared
            with it by title (see :func:`check_baseline`).
        compare_anyway: accept a baseline of another notebook or other parameters; the page says what differs.
        root: where run folders go (default: ``results/reports/``).
        progress: show papermill's progress bar (:mod:`labkit.progress`: by default inside a notebook;
            ``labkit report`` shows it unless ``--no-progress``).
        say: where to print progress lines (default: stderr).
        repeat: run the notebook this many times, each in a fresh kernel and folder of its own; the page (of
            the last run) shows each experiment's ratios across the runs beside its own interval, and says in how
            many runs its verdict held.

    Raises:
        BadInputError: bad notebook, parameter, kernel or output path (checked before anything runs).
        BaselineError: the baseline cannot stand for this run (checked before anything runs).
        NotebookError: a cell failed (named, with its error) or the page could not be made self-contained;
            no HTML is written then, and the run's ``report.json`` says ``failed``.
    """
    say = _say(say)
    _check_out(out)
    path = check_notebook(notebook)
    declared = declared_parameters(path)
    params, _ = with_quick(parameters, quick)
    typed = check_parameters(path, params, raw, declared)   # before anything starts
    check_kernel(path)
    base = (check_baseline(baseline, path, effective(typed, declared), declared=declared,
                           compare_anyway=compare_anyway)
            if baseline is not None else None)
    shown = ", ".join(f"{k}={v!r}" for k, v in typed.items()) or "its own parameters"
    say(f"labkit report: running {path.name} with {shown}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 20:
        raise BadInputError(f"--repeat {repeat!r}: run it 1 to 20 times (3 shows whether a verdict holds across "
                            "fresh kernels)")
    runs = []
    for k in range(repeat):
        if repeat > 1:
            say(f"labkit report: run {k + 1} of {repeat}, in a fresh kernel")
        runs.append(execute(path, parameters, quick=quick, raw=raw, root=root, progress=progress))
    run = runs[-1]
    if repeat > 1:
        run = dataclasses.replace(run, replicates=tuple(r.folder for r in runs[:-1]))
        run.save()
    say(f"labkit report: run folder {run.folder} (ran in {run.duration_s or 0:.0f} s); rendering…")
    return _write(run, base, out, say)


def rerender(folder: str | os.PathLike[str], *, baseline: str | os.PathLike[str] | None = None,
             compare_anyway: bool = False, out: str | os.PathLike[str] | None = None,
             say: Callable[[str], None] | None = None) -> tuple[ReportRun, Rendered]:
    """Write the report of a finished run again, from what its folder kept — nothing is executed.

    Args:
        folder: the run's folder (``results/reports/<notebook>-<time>/``).
        baseline, compare_anyway: as in :func:`build`; the run's own notebook and parameters are checked.
        out: where to write the HTML this time (default: the run's default page, ``<folder>.html`` beside the
            run's folder wherever it is now, replaced atomically); the run's record keeps its page.
        say: where to print progress lines (default: stderr).

    Raises:
        BadInputError: not a run's folder, or a run that did not execute to the end.
        BaselineError: the baseline cannot stand for this run.
    """
    _check_out(out)
    path = Path(folder).expanduser()
    try:
        run = ReportRun.find(path) if path.is_dir() else None
    except ResultsError as e:
        raise BadInputError(f"--render {path}: its report.json cannot be read ({e})") from e
    if run is None:
        raise BadInputError(f"--render {path}: not the folder of a `labkit report` run (no report.json in it); "
                            "pass a folder printed by `labkit report` (results/reports/<notebook>-<time>/)")
    if not run.executed.is_file() or run.status in ("running",) or (run.status == "failed"
                                                                     and not (run.error or "").startswith("rendering")):
        raise BadInputError(f"--render {path}: that run did not execute to the end ({run.status}"
                            f"{': ' + run.error.splitlines()[0] if run.error else ''}), so there is no page to make; "
                            "run the notebook again with `labkit report NOTEBOOK`")
    base = (check_baseline(baseline, run.notebook, effective(run.parameters, run.declared), declared=run.declared,
                           compare_anyway=compare_anyway) if baseline is not None else None)
    # without --out: the run's default page, beside its folder wherever the folder is now (a moved or copied folder
    # writes inside its own place, never to the page an earlier --out named)
    return _write(run, base, out if out is not None else run.default_page, say, keep=out is None)
