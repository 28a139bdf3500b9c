"""An executed notebook → one self-contained HTML file that opens offline.

nbconvert's JupyterLab export does the notebook (code, text, tables, pictures, its CSS inlined) through
labkit's template (``templates/perflab``), which leaves out every script the stock template fetches from a
CDN. Widgets are made static first (:mod:`labkit.report.static`: charts become SVG), the summary
(:mod:`labkit.report.summary`) goes on top, and the finished page is checked for anything it would load from
outside itself: if there is any, no report is written and the error says what and where.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from labkit.errors import NotebookError, ResultsError
from labkit.report.baseline import Change, Concluded, concluded_in, diff
from labkit.report.cellwatch import CENSUS_TAG
from labkit.report.params import (
    budget_parameters,
    declared_parameters,
    differences,
    effective,
    typed_parameters,
)
from labkit.report.run import IMPORTED, ReportRun
from labkit.report.static import external_resources, make_static
from labkit.report.summary import top
from labkit.results import read_json, umask_mode

__all__ = ["Rendered", "render", "write_html", "TEMPLATES"]

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class Rendered:
    """A rendered report: the HTML text and what went into it.

    Attributes:
        html: the self-contained page.
        experiments: the run's experiment records, as shown in its table.
        changes: each experiment against the baseline (None without a baseline).
        counts: ``charts`` drawn as SVG, ``progress_bars`` dropped, ``widgets`` shown as notes, ``missing``
            widget views whose state the notebook did not keep.
    """

    html: str
    experiments: tuple[Concluded, ...]
    changes: tuple[Change, ...] | None
    counts: dict[str, int] = field(default_factory=dict)


def _question(nb: Any) -> tuple[str, bool]:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    first = nb.cells[0] if nb.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.strip():
        return markdown2html_mistune(first.source), True
    return ("<p><b>No question stated</b>: start the notebook with a text (markdown) cell that says what this "
            "run is meant to decide.</p>"), False


def _what_would_change(nb: Any) -> str | None:
    """The text of the notebook's "What would change my mind" section (a markdown cell so headed), as HTML."""
    import re

    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.strip().splitlines()
        if lines and re.match(r"#+\s.*what would change", lines[0], re.IGNORECASE):
            body = "\n".join(lines[1:]).strip()
            return markdown2html_mistune(body) if body else None
    return None


def _imported(folder: str | os.PathLike[str] | None) -> dict[str, str] | None:
    """The packages the run's kernel had imported by its end (``imported.json``), or None when not recorded."""
    if folder is None or not (Path(folder) / IMPORTED).is_file():
        return None
    try:
        return dict(read_json(Path(folder) / IMPORTED, kind="imported-packages").get("packages") or {})
    except ResultsError:
        return None


def _run_of(folder: str | os.PathLike[str] | None) -> ReportRun | None:
    try:
        return ReportRun.find(folder) if folder is not None else None
    except ResultsError:  # a baseline made by hand, or by another labkit: its experiments still compare
        return None


def _declared(source: Path) -> dict[str, str]:
    try:
        return declared_parameters(source)
    except Exception:  # the source notebook moved or is unreadable: show what was passed
        return {}


def _differs(run: ReportRun | None, passed: dict[str, Any], declared: dict[str, str], source: Path,
             then: ReportRun | None) -> list[str]:
    """What differs between this run and the baseline's (another notebook, other parameters), in sentences."""
    if then is None:
        return ["the baseline has no report.json: whether it ran the same notebook with the same parameters "
                "cannot be checked"]
    lines = []
    budgets = _budget_names(source)
    if Path(then.notebook).name != source.name:
        lines.append(f"the baseline is a run of {Path(then.notebook).name}, this one of {source.name}")
    moved = differences(effective(passed, declared), effective(then.parameters, then.declared or declared))
    lines += [f"parameter {n}: {a!r} now, {b!r} in the baseline" for n, a, b in moved if n not in budgets]
    return lines


def _budgets_moved(passed: dict[str, Any], declared: dict[str, str], source: Path, then: ReportRun | None) -> str | None:
    """A note naming the time budgets that differ from the baseline's (they change how long, not what, is measured)."""
    if then is None:
        return None
    budgets = _budget_names(source)
    moved = [d for d in differences(effective(passed, declared), effective(then.parameters, then.declared or declared))
             if d[0] in budgets]
    if not moved:
        return None
    said = "; ".join(f"{n}: {a!r} now, {b!r} in the baseline" for n, a, b in moved)
    return f"Time budgets differ from the baseline's ({said}): a budget changes how long a measurement may run, not what it measures."


def _budget_names(source: Path) -> frozenset[str]:
    try:
        return budget_parameters(source)
    except Exception:  # the source notebook moved or is unreadable: no budget is declared then
        return frozenset()


def render(executed: str | os.PathLike[str], *, results: str | os.PathLike[str] | None = None,
           run: ReportRun | None = None, baseline: str | os.PathLike[str] | None = None) -> Rendered:
    """Render an executed notebook (papermill's output, or one saved after Run All) as a report.

    Args:
        executed: the executed ``.ipynb``.
        results: the folder holding the run's saved results (default: the run's folder, if ``run`` is given).
        run: the run's record (parameters, fingerprint at the start, git state); without it, the parameters
            are read from papermill's metadata in the notebook and the fingerprint is taken now.
        baseline: an earlier run's folder to compare with, experiment by experiment.

    Raises:
        NotebookError: the notebook cannot be read, or the page would load something from outside itself.
    """
    import nbformat
    from nbconvert import HTMLExporter

    from labkit.measure.machine import fingerprint
    from labkit.report.run import git_state

    path = Path(executed)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:
        raise NotebookError(f"cannot read the executed notebook {path}: {type(e).__name__}: {e}") from e
    # the notebook that was run: the run's record says, else papermill's metadata (when the file is still there)
    given = Path(str(nb.metadata.get("papermill", {}).get("input_path") or path))
    source = Path(run.notebook) if run is not None else given if given.is_file() else path
    name = source.stem
    nb.cells = [c for c in nb.cells if CENSUS_TAG not in c.metadata.get("tags", ())]  # labkit's, not the author's
    static, counts = make_static(nb)
    question, from_first_cell = _question(static)
    change_mind = _what_would_change(static)
    if from_first_cell:
        static.cells = static.cells[1:]  # it is shown at the top, as the question
    folder = results if results is not None else (run.folder if run is not None else None)
    experiments = concluded_in(folder) if folder is not None else []
    changes = diff(experiments, concluded_in(baseline)) if baseline is not None else None
    replicated = [concluded_in(r) for r in run.replicates if Path(r).is_dir()] if run is not None else []
    passed = run.parameters if run is not None else dict(nb.metadata.get("papermill", {}).get("parameters", {}))
    declared = run.declared if run is not None and run.declared else _declared(source)
    with contextlib.suppress(Exception):  # report.json keeps a tuple as a list: show it as the notebook got it
        passed = typed_parameters(source, passed, declared)
    sources = run.sources if run is not None and run.sources else {k: "passed" for k in passed}
    then = _run_of(baseline)
    differs = _differs(run, passed, declared, source, then) if baseline is not None else []
    if run is not None:
        when = f"run {run.started_at}" + (f", took {run.duration_s:.0f} s" if run.duration_s else "")
        fp, git = run.fingerprint, run.git
    else:
        meta = nb.metadata.get("papermill", {})
        when = f"run {meta.get('start_time', '?')}, took {meta.get('duration') or 0:.0f} s"
        fp, git = fingerprint(), git_state(source)
    imported = _imported(folder)
    notes = []
    budget_note = _budgets_moved(passed, declared, source, then) if baseline is not None else None
    if budget_note:
        notes.append(budget_note)
    if counts.get("missing"):
        notes.append(f"{counts['missing']} widget(s) had no saved state and are shown as text only.")
    summary = top(
        title=f"{name}.ipynb", question_html=question, kicker=f"perflab report · <b>{escape(name)}.ipynb</b> · {escape(when)}",
        experiments=experiments, changes=changes, baseline=str(baseline) if baseline is not None else None,
        baseline_run=then, parameters=passed, declared=declared, sources=sources, differs=differs,
        fingerprint=fp, git=git, notes=notes, change_mind_html=change_mind, imported=imported,
        replicated=replicated)
    static.metadata["title"] = f"{name} — perflab report"
    exporter = HTMLExporter(template_name="perflab", extra_template_basedirs=[str(TEMPLATES)])
    exporter.embed_images = True  # pictures referenced from text go into the page
    body, _ = exporter.from_notebook_node(
        static, resources={"labkit_top": summary, "metadata": {"name": name, "path": str(source.parent)}})
    outside = external_resources(body)
    if outside:
        raise NotebookError(
            f"the report of {name}.ipynb would load {len(outside)} thing(s) from outside the file, e.g. "
            f"{outside[:3]}: show them inline instead (a chart through labkit.charts, an image with "
            "IPython.display.Image(filename=..., embed=True)), or remove them; no report was written")
    return Rendered(body, tuple(experiments), None if changes is None else tuple(changes), counts)


def write_html(path: str | os.PathLike[str], html: str) -> Path:
    """Write the page atomically (a temporary file renamed over the target): never half a report."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise ResultsError(f"cannot write the report to {target}: {e.strerror or e}; choose another --out") from e
    try:
        umask_mode(fd)   # the page is for others to read: not mkstemp's owner-only mode
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(html)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
