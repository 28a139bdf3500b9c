"""Where labkit writes: one per-learner folder, so one shared install serves every learner.

On a hub the repository (and its ``datasets/``) belongs to the organiser and is read-only to learners. Every
file labkit *writes* — a dataset it has to build, the build's lock file, caches, experiment records — goes to
the learner's own folder instead, named by one environment variable, :data:`HOME_ENV` (``PERFLAB_HOME``; the
workshop's hub config sets it to ``~/perflab``, the folder that holds the learner's copy of the labs):

* ``$PERFLAB_HOME/results``         experiment records (unless ``PERFLAB_RESULTS`` names another folder);
* ``$PERFLAB_HOME/.labkit/datasets`` a dataset built for this learner and its lock (the shared one is read first);
* ``$PERFLAB_HOME/.labkit/cache``    caches (the offline chart renderer's bundle).

Without ``PERFLAB_HOME`` a checkout its user can write keeps everything as before (``datasets/`` in the
repository, ``results/`` beside the notebook); a repository this user cannot write falls back to a folder under
the user's home (``~/.cache/labkit``). A folder that cannot be written raises a :class:`ResultsError` naming the
folder and the variable to set, never a bare ``PermissionError``.
"""

from __future__ import annotations

import os
from pathlib import Path

from labkit.errors import ResultsError

__all__ = ["HOME_ENV", "home", "user_cache", "repo_root", "can_write", "writable"]

HOME_ENV = "PERFLAB_HOME"


def home() -> Path | None:
    """The learner's own perflab folder from ``$PERFLAB_HOME`` (``~`` expanded, made absolute), or None."""
    value = os.environ.get(HOME_ENV, "").strip()
    return Path(os.path.expanduser(value)).absolute() if value else None


def user_cache() -> Path:
    """labkit's folder under this user's home for what a read-only install cannot hold: ``$PERFLAB_HOME/.labkit``
    when set, else ``$XDG_CACHE_HOME/labkit`` (``~/.cache/labkit``)."""
    h = home()
    if h is not None:
        return h / ".labkit"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "labkit"


def repo_root() -> Path | None:
    """The checkout labkit runs from (the folder with ``pyproject.toml``), or None for an installed package."""
    repo = Path(__file__).resolve().parents[1]
    return repo if (repo / "pyproject.toml").exists() else None


def can_write(folder: Path) -> bool:
    """Whether this user can create files in ``folder`` (or create it: its nearest existing parent is writable)."""
    p = Path(folder).absolute()
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK)


def writable(folder: Path, variable: str, what: str) -> Path:
    """Create ``folder`` if needed and check this user can write in it; return it.

    Args:
        folder: the folder labkit is about to write in.
        variable: the environment variable that chooses it (named in the error, with how to set it).
        what: what labkit writes there, for the message ("the toyshop dataset and its lock file").

    Raises:
        ResultsError: the folder cannot be created or written, naming it, why, and the variable to set.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as e:
        user = _user()
        raise ResultsError(
            f"labkit cannot write {what} in {folder}: {e.strerror or e} (for user {user}). "
            f"Set {variable} to a folder {user} can write (a hub's config sets {HOME_ENV}=~/perflab for every "
            "learner), or ask the organiser to make this folder writable") from e
    return folder


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())
