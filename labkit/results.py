"""Saving and loading result values as versioned JSON, atomically.

Every result class (BenchResult, Comparison, LoadResult, Experiment…) turns itself into a plain dict with a
``kind`` and a ``version`` key; this module only moves such dicts to and from disk. A write goes to a
temporary file in the same folder, is flushed to disk, then renamed over the target, so a crash or a
full disk never leaves a half-written result behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from labkit.errors import ResultsError

__all__ = ["Saveable", "TextRepr", "write_json_atomic", "read_json", "jsonable", "results_dir", "umask_mode", "SavedPath"]


def jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, paths and non-finite floats into plain JSON values."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, Path):
        return str(value)
    return value


def umask_mode(fd: int, mode: int = 0o666) -> None:
    """Give the file open as ``fd`` the mode a plain ``open()`` would have given it: ``mode`` less the process's
    umask. (``tempfile.mkstemp`` makes files readable by their owner only, whatever the umask: a result or a report
    renamed into place from one would be unreadable to the rest of a shared host.)"""
    current = os.umask(0)
    os.umask(current)
    with contextlib.suppress(OSError):  # a file system without modes (some mounts) keeps what it has
        os.fchmod(fd, mode & ~current)


class SavedPath(type(Path())):  # type: ignore[misc]  # PosixPath or WindowsPath: Path itself cannot be subclassed on 3.11
    """The path a result was saved to: a :class:`~pathlib.Path` in every way, shown by a notebook by its short name
    (``saved 20261202-…-memory.json in results/``) — a cell that ends in ``.save()`` puts no absolute path of the
    machine into an executed notebook or a review's page."""

    def short(self) -> str:
        """The name relative to the working folder when the file is below it, else the file's name and its
        folder's name."""
        try:
            return str(self.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return f"{self.name} in {self.parent.name}/"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"saved {self.short()}")


def write_json_atomic(path: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (temp file, fsync, rename) and return the path.

    Raises:
        ResultsError: the folder cannot be created or written, naming it and what to do.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise ResultsError(
            f"cannot write results to {target.parent}: {e.strerror or e}. Choose a writable folder "
            "(pass folder=… or set PERFLAB_RESULTS=/some/writable/dir; on a hub, PERFLAB_HOME=~/perflab)") from e
    try:
        umask_mode(fd)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(jsonable(data), f, indent=1, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise ResultsError(f"writing {target} failed: {e.strerror or e}. Check free space and "
                               "permissions, or choose another folder") from e
        raise
    return SavedPath(target)


def read_json(path: str | os.PathLike[str], kind: str | None = None) -> dict[str, Any]:
    """Read a result file written by :func:`write_json_atomic`, optionally checking its ``kind``.

    Raises:
        ResultsError: the file is missing, not JSON, or holds another kind of result.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ResultsError(f"no result file at {p}: check the path (results are saved under "
                           f"{results_dir()} by default)") from e
    except (OSError, ValueError) as e:
        raise ResultsError(f"{p} is not a readable JSON result ({e}); it may be truncated or not "
                           "written by labkit") from e
    if not isinstance(data, dict):
        raise ResultsError(f"{p} holds JSON but not a labkit result (a {type(data).__name__}, not an object with "
                           "a 'kind'); it was not written by labkit")
    if kind is not None and data.get("kind") != kind:
        raise ResultsError(f"{p} holds a {data.get('kind')!r} result, not a {kind!r}: load it with the "
                           f"matching class")
    return data


def results_dir() -> Path:
    """The default results folder: ``$PERFLAB_RESULTS`` (``~`` expanded), else ``$PERFLAB_HOME/results`` (a
    hub's learner: :mod:`labkit.paths`), else ``results/`` in the current folder."""
    env = os.environ.get("PERFLAB_RESULTS")
    if env:
        return Path(os.path.expanduser(env))
    from labkit.paths import home

    h = home()
    return h / "results" if h is not None else Path("results")


class Saveable:
    """Mixin for frozen result dataclasses: ``to_dict``/``from_dict`` and atomic ``save``/``load``.

    Subclasses set ``KIND`` (and ``VERSION`` when their fields change); tuple fields come back as tuples
    and fields named in ``NESTED`` come back as their own result class.
    """

    KIND: ClassVar[str] = "result"
    VERSION: ClassVar[int] = 1
    NESTED: ClassVar[dict[str, type]] = {}

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict with ``kind`` and ``version`` keys."""
        body: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            body[f.name] = value.to_dict() if isinstance(value, Saveable) else value
        return {"kind": self.KIND, "version": self.VERSION, **jsonable(body)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """Rebuild a result from :meth:`to_dict` output, refusing another kind or a newer version."""
        cls.check_header(data)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name in cls.NESTED and isinstance(value, dict):
                value = cls.NESTED[f.name].from_dict(value)
            elif str(f.type).startswith("tuple") and isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
            kwargs[f.name] = value
        return cls(**kwargs)

    @classmethod
    def check_header(cls, data: dict[str, Any]) -> None:
        """Refuse a dict of another kind, or of a format version newer than this class understands."""
        if data.get("kind") != cls.KIND:
            raise ResultsError(f"this is a {data.get('kind')!r} result, not a {cls.KIND!r}")
        if int(data.get("version", 0)) > cls.VERSION:
            raise ResultsError(f"this {cls.KIND} result has format version {data['version']}, newer than "
                               f"this labkit understands ({cls.VERSION}): upgrade labkit")

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save as JSON (atomically) and return the path."""
        return write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Any:
        """Load a result saved with :meth:`save`.

        Raises:
            ResultsError: naming the file and what is wrong with it (missing, not JSON, another kind, a newer
                format, or fields missing or of the wrong type).
        """
        return cls.from_dict_of(read_json(path, kind=cls.KIND), path)

    @classmethod
    def from_dict_of(cls, data: dict[str, Any], path: str | os.PathLike[str]) -> Any:
        """:meth:`from_dict` for a dict read from *path*: any failure becomes a ResultsError naming the file."""
        try:
            return cls.from_dict(data)
        except ResultsError as e:
            raise ResultsError(f"{path}: {e}") from e
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ResultsError(f"{path} holds a damaged {cls.KIND} result ({type(e).__name__}: {e}): it may "
                               "have been edited by hand or written by another program") from e


class TextRepr:
    """Mixin for results whose notebook view is their text: ``str(result)``, a few lines, shown as ``<pre>``.

    ``print(result)`` and the cell's output then say the same thing; a result with a richer view (a coloured
    verdict, a table) defines its own ``_repr_html_`` instead.
    """

    def _repr_html_(self) -> str:
        from html import escape

        return "<pre>" + escape(str(self)) + "</pre>"
