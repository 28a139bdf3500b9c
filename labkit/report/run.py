"""Running a notebook for a report: parameters checked, papermill with a progress bar, one folder per run.

    run = execute("notebooks/02_nplusone.ipynb", {"QUICK": True})
    run.folder     # results/reports/02_nplusone-20261130-170236/ holds the executed notebook, every result the
                   # run saved (the kernel's PERFLAB_RESULTS points there) and report.json (this record)

A failing cell stops the run with a :class:`~labkit.errors.NotebookError` that names the cell and shows its
error; the run's record says ``failed``. Nothing here renders: :mod:`labkit.report.html` does that.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, NotebookError, ResultsError
from labkit.measure.machine import fingerprint
from labkit.report.cellwatch import CENSUS_TAG, CellWatch
from labkit.report.params import declared_parameters, parse_parameters, typed_parameters, use_tuple_translator
from labkit.results import Saveable, read_json, results_dir, write_json_atomic

__all__ = ["ReportRun", "execute", "parse_parameters", "with_quick", "check_notebook", "check_parameters", "check_kernel",
           "git_state"]

RECORD = "report.json"
#: set for the kernel of a ``labkit report`` run: labkit's progress bars write text to the terminal's stderr
PROGRESS_ENV = "PERFLAB_PROGRESS_TO"
#: the file in a run's folder the kernel writes its bars to while it runs (removed at the end)
PROGRESS_FILE = ".progress.log"
IMPORTED = "imported.json"
_CENSUS = f"""\
def _labkit_imported():  # added by labkit report: the packages this run imported, with versions
    import json, os, sys
    from importlib import metadata
    where = metadata.packages_distributions()
    found = {{}}
    for top in sorted({{name.partition(".")[0] for name in list(sys.modules)}}):
        for dist in where.get(top, ()):
            try:
                found[dist] = metadata.version(dist)
            except Exception:
                pass
    with open(os.path.join(os.environ["PERFLAB_RESULTS"], "{IMPORTED}"), "w") as f:
        json.dump({{"kind": "imported-packages", "version": 1, "packages": found}}, f)
_labkit_imported()
del _labkit_imported
"""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ReportRun(Saveable):
    """One run of a notebook for a report, saved as ``report.json`` in the run's folder.

    Attributes:
        notebook: the source notebook (absolute here; written relative to ``folder`` in ``report.json``).
        folder: the run's folder: the executed notebook, the results it saved, this record.
        parameters: what was passed to the notebook's ``parameters`` cell (typed as its defaults).
        started_at, finished_at: ISO timestamps (UTC).
        status: ``running``, ``executed`` (every cell ran), ``complete`` (the HTML is written) or ``failed``.
        duration_s: how long the notebook ran.
        error: why it failed (the cell and its error), when it did.
        html: the report's path, once written.
        git: the notebook's repository: ``{"repository", "commit", "dirty", "notebook_committed"}``, or None.
        fingerprint: the machine when the run started (:func:`labkit.fingerprint`).
        sources: where each passed parameter came from: ``passed`` (``-p``, or the API) or ``--quick``.
        declared: the notebook's parameters cell when it ran: ``{name: default as written}``; the run used
            those defaults for every parameter not in ``parameters``.
        replicates: the folders of the other runs made with it by ``--repeat`` (same notebook, same parameters,
            each in a fresh kernel), whose ratios the page sets beside this run's.
    """

    KIND = "report-run"

    notebook: str
    folder: str
    parameters: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    status: str = "running"
    finished_at: str | None = None
    duration_s: float | None = None
    error: str | None = None
    html: str | None = None
    git: dict[str, Any] | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    sources: dict[str, str] = field(default_factory=dict)
    declared: dict[str, str] = field(default_factory=dict)
    replicates: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The notebook's name without ``.ipynb``."""
        return Path(self.notebook).stem

    @property
    def executed(self) -> Path:
        """Where the executed notebook is written (inside the run's folder)."""
        return Path(self.folder) / f"{self.name}.ipynb"

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:  # type: ignore[override]
        """Write the record to ``report.json`` in the run's folder (or to ``path``).

        Its paths are written relative to the run's folder (the folder itself as ``.``), so a run folder copied or
        moved elsewhere still finds its notebook and page, and re-renders inside itself (:meth:`find`)."""
        data = self.to_dict()
        data.update(folder=".", notebook=_relative(self.notebook, self.folder),
                    html=_relative(self.html, self.folder) if self.html else None,
                    replicates=[_relative(r, self.folder) for r in self.replicates])
        return write_json_atomic(path or Path(self.folder) / RECORD, data)

    @classmethod
    def find(cls, folder: str | os.PathLike[str]) -> ReportRun | None:
        """The record of the run kept in ``folder``, or None when the folder holds none; its paths are made
        absolute again from where the folder is now."""
        path = Path(folder) / RECORD
        if not path.is_file():
            return None
        run = cls.from_dict(read_json(path, kind=cls.KIND))
        here = Path(folder).resolve()
        return dataclasses.replace(run, folder=str(here), notebook=str((here / run.notebook).resolve()),
                                   html=str((here / run.html).resolve()) if run.html else None,
                                   replicates=tuple(str((here / r).resolve()) for r in run.replicates))

    @property
    def default_page(self) -> Path:
        """Where the run's page goes unless ``--out`` says otherwise: ``<folder>.html`` beside the folder."""
        folder = Path(self.folder)
        return folder.parent / f"{folder.name}.html"


def _relative(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> str:
    """``path`` as seen from ``folder`` (``../x.ipynb``); as given when the two share no root (another drive)."""
    try:
        return os.path.relpath(Path(path).resolve(), Path(folder).resolve())
    except ValueError:
        return str(path)


def with_quick(parameters: dict[str, Any] | None, quick: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """The parameters with ``QUICK=True`` added when ``quick``, and where each came from (``passed``,
    ``--quick``)."""
    params = dict(parameters or {})
    sources = {k: "passed" for k in params}
    if quick:
        if params.get("QUICK", True) is not True:
            raise BadInputError(f"--quick and -p QUICK={params['QUICK']!r} disagree: pass one of them")
        params["QUICK"], sources["QUICK"] = True, "--quick"
    return params, sources


def check_notebook(notebook: str | os.PathLike[str]) -> Path:
    """The notebook's absolute path, after checking it exists and is a readable notebook."""
    import nbformat

    path = Path(notebook).expanduser()
    if path.is_dir():
        raise BadInputError(f"{path} is a folder: pass a notebook file, e.g. {path}/02_nplusone.ipynb")
    if path.suffix != ".ipynb":
        raise BadInputError(f"{path} is not a notebook (.ipynb): pass the notebook to report on")
    if not path.is_file():
        raise BadInputError(f"no notebook at {path}: check the path (relative to {Path.cwd()})")
    try:
        nbformat.read(path, as_version=4)
    except Exception as e:  # nbformat raises a zoo of JSON and schema errors
        raise BadInputError(f"{path} is not a readable notebook ({type(e).__name__}: {e}); "
                            "open it in JupyterLab to repair it") from e
    return path.resolve()


def check_parameters(notebook: Path, params: dict[str, Any], raw: dict[str, str] | None = None,
                     declared: dict[str, str] | None = None) -> dict[str, Any]:
    """``params`` as the types of the notebook's defaults (see :mod:`labkit.report.params`), after refusing a
    parameter its ``parameters`` cell does not declare (a typo would be ignored)."""
    declared = declared_parameters(notebook) if declared is None else declared
    if not params:
        return {}
    if not declared:
        raise BadInputError(f"{notebook.name} has no cell tagged 'parameters', so {sorted(params)} cannot be "
                            "set: tag the cell that holds its knobs 'parameters' (View → Cell metadata)")
    unknown = sorted(set(params) - set(declared))
    if unknown:
        what = "QUICK (from --quick)" if unknown == ["QUICK"] else ", ".join(unknown)
        raise BadInputError(f"{notebook.name} has no parameter {what}; its parameters are "
                            f"{', '.join(declared)}")
    return typed_parameters(notebook, params, declared, raw)


def check_kernel(notebook: Path) -> tuple[str, str]:
    """The kernel to run ``notebook`` with and its language: the one its metadata names, else the default
    Python kernel; refused in one line, saying what to add, when that kernel is not installed."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager

    meta = nbformat.read(notebook, as_version=4).metadata
    spec = meta.get("kernelspec") or {}
    name = spec.get("name") or "python3"
    language = spec.get("language") or (meta.get("language_info") or {}).get("name") or "python"
    installed = sorted(KernelSpecManager().find_kernel_specs())
    if name not in installed:
        asked = f"asks for the kernel {name!r}, which is" if spec.get("name") else \
            f"names no kernel in its metadata, and the default one ({name!r}) is"
        raise BadInputError(
            f"{notebook.name} {asked} not installed here (installed: {', '.join(installed) or 'none'}): "
            f"pick one in JupyterLab (Kernel → Change Kernel…) and save, or add "
            f'"kernelspec": {{"name": "{installed[0] if installed else "python3"}", "language": "python", '
            f'"display_name": "Python 3"}} to its metadata')
    return name, language


def git_state(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The git commit of the repository holding ``path``, whether its tracked files have uncommitted
    changes, and whether ``path`` itself is committed unchanged; None outside a repository."""
    where = Path(path).resolve()

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(where.parent), *args], capture_output=True, text=True, timeout=5)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode != 0:
            return None
        head = git("rev-parse", "--short", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no")
        mine = git("status", "--porcelain", "--untracked-files=all", "--", str(where))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"repository": top.stdout.strip(), "commit": head.stdout.strip() or None,
            "dirty": bool(status.stdout.strip()), "notebook_committed": not mine.stdout.strip()}


def _new_folder(root: Path, name: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1, 100):
        folder = root / (f"{name}-{stamp}" if n == 1 else f"{name}-{stamp}-{n}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
        except OSError as e:
            raise ResultsError(f"cannot create the run's folder {folder}: {e.strerror or e}. Choose a "
                               "writable place (set PERFLAB_RESULTS=/some/dir)") from e
    raise ResultsError(f"too many runs of {name} this second in {root}")


@contextlib.contextmanager
def _kernel_env(folder: Path, progress: bool, notebook: str = "") -> Iterator[None]:
    # the kernel inherits this process's environment: what the notebook saves lands in the run's folder, and
    # (with progress) a long comparison's bar is written to a file this process copies to its terminal (_Tail):
    # never to the kernel's stderr, which ipykernel captures into the cells' outputs; the notebook's name, as
    # Jupyter Server gives it (JPY_SESSION_NAME), so that a record planned in it knows its lab
    log = folder / PROGRESS_FILE
    wanted = {"PERFLAB_RESULTS": str(folder), PROGRESS_ENV: str(log) if progress else None,
              "JPY_SESSION_NAME": notebook or None}
    before = {k: os.environ.get(k) for k in wanted}
    for k, v in wanted.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        with _Tail(log) if progress else contextlib.nullcontext():
            yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        log.unlink(missing_ok=True)


class _Tail:
    """Copies what the kernel writes to ``path`` (its bars and progress lines) to this process's stderr, as it
    grows, until the block ends."""

    def __init__(self, path: Path, every_s: float = 0.25) -> None:
        self.path, self.every_s = path, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._copy, name="labkit.report.progress", daemon=True)

    def _copy(self) -> None:
        offset = 0
        while True:
            stopping = self._stop.wait(self.every_s)
            try:
                with open(self.path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                chunk = b""
            if chunk:
                offset += len(chunk)
                sys.stderr.write(chunk.decode("utf-8", "replace"))
                sys.stderr.flush()
            if stopping:
                return

    def __enter__(self) -> _Tail:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _failed_cell(notebook: Path, error: Any, executed: Path) -> str:
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    number = next((i + 1 for i, c in enumerate(cells) if c.source == error.source), None)
    where = f"cell {number} of {notebook.name}" if number else f"a cell of {notebook.name}"
    first = next((line for line in error.source.splitlines() if line.strip()), "")
    trace = _ANSI.sub("", "\n".join(error.traceback)).strip().splitlines()
    shown = "\n".join(["    " + line for line in trace[-25:]])
    return (f"{where} (In [{error.exec_count}]: {first.strip()[:80]}) raised {error.ename}: {error.evalue}\n"
            f"{shown}\nThe executed notebook, up to that cell, is kept at {executed}; no report was written.")


def _with_census(notebook: Path, folder: Path) -> Path:
    """A copy of the notebook, in the run's folder, with one last cell that lists the packages it imported."""
    import nbformat
    from nbformat.v4 import new_code_cell

    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(new_code_cell(_CENSUS, metadata={"tags": [CENSUS_TAG]}))
    copy = folder / f".{notebook.stem}.input.ipynb"
    nbformat.write(nb, copy)
    return copy


def execute(notebook: str | os.PathLike[str], parameters: dict[str, Any] | None = None, *,
            quick: bool = False, raw: dict[str, str] | None = None,
            root: str | os.PathLike[str] | None = None, progress: bool | None = None,
            start_timeout: float = 60) -> ReportRun:
    """Run ``notebook`` top to bottom with ``parameters`` in a new folder of its own, and return its record.

    Args:
        notebook: the ``.ipynb`` to run; its cells run with the notebook's folder as working directory.
        parameters: values for the notebook's ``parameters`` cell (each must be declared there); each is made
            the type of its default (a tuple parameter takes a list).
        quick: set ``QUICK=True`` (the notebook's quick settings); the record says it came from ``--quick``.
        raw: the command-line text of each parameter (``"5,50"``), so a text parameter keeps what was typed.
        root: where run folders go (default: ``reports/`` under :func:`labkit.results.results_dir`).
        progress: show papermill's per-cell progress bar (:mod:`labkit.progress`: by default inside a notebook),
            and a line on stderr naming a cell still running after 15 s, then about every 20 s (:class:`CellWatch`).
        start_timeout: seconds to wait for the kernel to start.

    Raises:
        BadInputError: no such notebook, a parameter it does not declare or of the wrong type, or its kernel
            is not installed.
        NotebookError: a cell raised (naming the cell, with its error) or the kernel could not run it.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from labkit.progress import Heartbeat, show_progress

    path = check_notebook(notebook)
    declared = declared_parameters(path)
    params, sources = with_quick(parameters, quick)
    params = check_parameters(path, params, raw, declared)
    kernel, language = check_kernel(path)
    folder = _new_folder(Path(root) if root is not None else results_dir() / "reports", path.stem).resolve()
    run = ReportRun(str(path), str(folder), params, _now(), git=git_state(path), fingerprint=fingerprint(),
                    sources=sources, declared=declared)
    run.save()
    t0 = time.perf_counter()

    def finish(status: str, error: str | None = None) -> ReportRun:
        done = dataclasses.replace(run, status=status, error=error, finished_at=_now(),
                                   duration_s=round(time.perf_counter() - t0, 3))
        done.save()
        return done

    use_tuple_translator()
    source = _with_census(path, folder)
    try:
        progress = show_progress(progress)
        watch = Heartbeat(CellWatch(run.executed)) if progress else contextlib.nullcontext()
        with _kernel_env(folder, progress, path.name), watch:
            papermill.execute_notebook(str(source), str(run.executed), parameters=params,
                                       kernel_name=kernel, language=language, cwd=str(path.parent),
                                       progress_bar=progress, log_output=False, start_timeout=start_timeout)
    except PapermillExecutionError as e:
        message = _failed_cell(path, e, run.executed)
        finish("failed", message)
        raise NotebookError(message) from None
    except KeyboardInterrupt:
        finish("failed", "interrupted (Ctrl-C)")
        raise
    except Exception as e:  # the kernel died, did not start, or a cell timed out: say so, keep the record
        message = (f"{path.name} could not be run to the end: {type(e).__name__}: {e}. The executed part is "
                   f"kept at {run.executed}; no report was written.")
        finish("failed", message)
        raise NotebookError(message) from e
    return finish("executed")
